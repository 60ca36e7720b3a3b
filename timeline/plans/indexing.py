"""Plans of index builds and drops (``indexing`` instants)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .plan import OP_CREATE, OP_DROP, optional_int


@dataclass(frozen=True)
class IndexCreatePlan:
    """An ``indexing`` instant that creates index ``index`` (empty ``columns``: the default).

    ``field_ids``: the field ids of ``columns`` when the index was created (empty in
    plans written before 2026-11-27, or on a table without ids): the index covers those
    columns under whatever names they have later (issue 29: valid across renames).
    ``automatic``: the table built it by itself (a record index, once its keys showed
    random: :mod:`lakeline.indexes.record_index.auto`), not a user."""

    index: str
    kind: str
    columns: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)
    field_ids: tuple[int, ...] = ()
    automatic: bool = False

    op = OP_CREATE

    def to_dict(self) -> dict[str, Any]:
        return {
            "op": OP_CREATE,
            "index": self.index,
            "kind": self.kind,
            "columns": list(self.columns),
            "options": dict(self.options),
            **({"field_ids": list(self.field_ids)} if self.field_ids else {}),
            **({"automatic": True} if self.automatic else {}),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> IndexCreatePlan:
        return cls(
            str(raw["index"]),
            str(raw.get("kind")),
            tuple(raw.get("columns") or ()),
            dict(raw.get("options") or {}),
            tuple(int(i) for i in raw.get("field_ids") or ()),
            raw.get("automatic") is True,
        )


@dataclass(frozen=True)
class IndexDropPlan:
    """An ``indexing`` instant that drops index ``index``; ``created`` names the definition
    it drops (None in plans written before drops named it)."""

    index: str
    created: int | None = None

    op = OP_DROP

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": OP_DROP, "index": self.index}
        if self.created is not None:
            out["created"] = self.created
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> IndexDropPlan:
        return cls(str(raw["index"]), optional_int(raw.get("created")))


IndexPlan = IndexCreatePlan | IndexDropPlan


def index_plan(raw: Mapping[str, Any]) -> IndexPlan | None:
    """The plan of an ``indexing`` instant; None for an ``op`` this version does not know
    (or a plan that names no index)."""
    if not isinstance(raw.get("index"), str):
        return None
    op = raw.get("op")
    if op == OP_CREATE:
        return IndexCreatePlan.from_dict(raw)
    if op == OP_DROP:
        return IndexDropPlan.from_dict(raw)
    return None
