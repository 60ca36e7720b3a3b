"""Plans of the services that keep a table tidy: cleaning, archival, rollback."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .plan import optional_int


@dataclass(frozen=True)
class CleanPlan:
    """The files a clean deletes (by folder), why, and the retention it applied."""

    policy: str | None = None
    retain: int | None = None
    retain_seq: int | None = None
    orphan_age_ms: int = 0
    snapshot_seq: int | None = None
    files: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reasons: Mapping[str, str] = field(default_factory=dict)
    index_files: tuple[str, ...] = ()
    staging: tuple[str, ...] = ()  # write ids of dead Spark writes' staging folders

    def paths(self) -> list[str]:
        return [p for ps in self.files.values() for p in ps]

    def to_dict(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "retain": self.retain,
            "retain_seq": self.retain_seq,
            "orphan_age_ms": self.orphan_age_ms,
            "snapshot_seq": self.snapshot_seq,
            "files": {d: list(ps) for d, ps in self.files.items()},
            "reasons": dict(self.reasons),
            "index_files": list(self.index_files),
            "staging": list(self.staging),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CleanPlan:
        return cls(
            raw.get("policy"),
            raw.get("retain"),
            optional_int(raw.get("retain_seq")),
            int(raw.get("orphan_age_ms", 0)),
            optional_int(raw.get("snapshot_seq")),
            {str(d): tuple(ps) for d, ps in (raw.get("files") or {}).items()},
            dict(raw.get("reasons") or {}),
            tuple(raw.get("index_files") or ()),
            tuple(str(w) for w in raw.get("staging") or ()),
        )


@dataclass(frozen=True)
class ArchivalPlan:
    """The prefix of events an archival moves out (``first_seq..through_seq``) and the
    bounds it was chosen under."""

    first_seq: int
    through_seq: int
    instants: int = 0
    events: int = 0
    active_completed: int = 0
    min_active: int = 0
    max_active: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "first_seq": self.first_seq,
            "through_seq": self.through_seq,
            "instants": self.instants,
            "events": self.events,
            "active_completed": self.active_completed,
            "min_active": self.min_active,
            "max_active": self.max_active,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ArchivalPlan:
        return cls(
            int(raw["first_seq"]),
            int(raw["through_seq"]),
            *(int(raw.get(k, 0)) for k in ("instants", "events", "active_completed", "min_active", "max_active")),
        )


@dataclass(frozen=True)
class RollbackPlan:
    """Failed writes to end (``targets``), files of rolled-back instants left behind
    (``leftovers``), marker lists of completed instants to delete, and the staging
    folders (write ids) of dead writes to remove (``staging``)."""

    targets: tuple[int, ...] = ()
    leftovers: tuple[int, ...] = ()
    completed_markers: tuple[int, ...] = ()
    staging: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "targets": list(self.targets),
            "leftovers": list(self.leftovers),
            "completed_markers": list(self.completed_markers),
            "staging": list(self.staging),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RollbackPlan:
        targets, leftovers, completed = (
            tuple(int(i) for i in raw.get(k) or ()) for k in ("targets", "leftovers", "completed_markers")
        )
        return cls(targets, leftovers, completed, tuple(str(w) for w in raw.get("staging") or ()))
