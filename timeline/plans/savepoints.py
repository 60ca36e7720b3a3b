"""Plans of savepoints: pinning a snapshot, and releasing the pin."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .plan import OP_CREATE, OP_RELEASE


@dataclass(frozen=True)
class SavepointCreatePlan:
    """Pin the snapshot as of instant ``instant``, whose completion is event ``seq``."""

    instant: int
    seq: int

    op = OP_CREATE

    def to_dict(self) -> dict[str, Any]:
        return {"op": OP_CREATE, "instant": self.instant, "seq": self.seq}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SavepointCreatePlan:
        return cls(int(raw["instant"]), int(raw["seq"]))


@dataclass(frozen=True)
class SavepointReleasePlan:
    """End savepoint ``savepoint`` (its instant id)."""

    savepoint: int

    op = OP_RELEASE

    def to_dict(self) -> dict[str, Any]:
        return {"op": OP_RELEASE, "savepoint": self.savepoint}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SavepointReleasePlan:
        return cls(int(raw["savepoint"]))


SavepointPlan = SavepointCreatePlan | SavepointReleasePlan


def savepoint_plan(raw: Mapping[str, Any]) -> SavepointPlan | None:
    """The plan of a ``savepoint`` instant; None for an ``op`` this version does not know."""
    op = raw.get("op")
    if op == OP_CREATE:
        return SavepointCreatePlan.from_dict(raw)
    if op == OP_RELEASE:
        return SavepointReleasePlan.from_dict(raw)
    return None
