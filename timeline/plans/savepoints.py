"""Plans of savepoints: pinning a snapshot, and releasing the pin."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .plan import OP_CREATE, OP_RELEASE


@dataclass(frozen=True)
class SavepointCreatePlan:
    """Pin the snapshot as of instant ``instant``, whose completion is event ``seq``.

    With a ``consumer`` it is that change-feed consumer's *bookmark*: it pins every
    snapshot from ``seq`` on, not that one alone, so ``changes(instant, images=True)``
    (which reads the snapshot before and after each instant of the range) stays
    readable however often the cleaner runs (``lakeline.services.savepoints``)."""

    instant: int
    seq: int
    consumer: str | None = None

    op = OP_CREATE

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"op": OP_CREATE, "instant": self.instant, "seq": self.seq}
        if self.consumer is not None:
            out["consumer"] = self.consumer
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> SavepointCreatePlan:
        consumer = raw.get("consumer")
        return cls(int(raw["instant"]), int(raw["seq"]), None if consumer is None else str(consumer))


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
