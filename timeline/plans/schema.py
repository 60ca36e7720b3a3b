"""The plan of a schema instant: the table configuration it sets."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SchemaChangePlan:
    """A ``schema`` instant: ``change`` is ``create`` or ``add-columns`` (then ``columns``)."""

    change: str | None
    columns: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"change": self.change}
        if self.columns:
            out["columns"] = list(self.columns)
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SchemaChangePlan:
        change = raw.get("change")
        return cls(None if change is None else str(change), tuple(raw.get("columns") or ()))
