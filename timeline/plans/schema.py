"""The plan of a schema instant: the table configuration it sets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SchemaChangePlan:
    """A ``schema`` instant: ``change`` is ``create``, ``add-columns`` (then ``columns``)
    or ``update`` (``update_schema()``: ``columns`` it names, ``steps`` as text, for the
    history a user reads; the configuration it completes with is what readers use)."""

    change: str | None
    columns: tuple[str, ...] = ()
    steps: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"change": self.change}
        if self.columns:
            out["columns"] = list(self.columns)
        if self.steps:
            out["steps"] = list(self.steps)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SchemaChangePlan:
        change = raw.get("change")
        return cls(
            None if change is None else str(change), tuple(raw.get("columns") or ()), tuple(raw.get("steps") or ())
        )
