"""What an instant plans to do: the payload of its ``requested`` event, typed.

Every action writes its plan as a JSON object (``Instant.plan`` stays that mapping: it is
the public contract and what is on disk). The classes here are the one place that knows
each plan's keys: the code that makes a plan builds one of them and writes ``to_dict()``,
the code that reads one calls ``from_dict()`` (or :func:`plan_of`). ``from_dict`` reads
every plan an older lakeline wrote (keys that were optional stay optional, with the same
defaults) and ``from_dict(d).to_dict() == d`` for every plan written now.

The table-service framework stamps the name of the service that made a plan under
:data:`SERVICE` (several services may share an action: clustering and overwrite are both
``replacecommit``); the plan classes leave that key to it (:func:`service_of`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from .instant import Action

#: The key under which the service framework names the service that scheduled a plan.
SERVICE = "service"

#: ``op`` of an ``indexing`` or ``savepoint`` plan.
OP_CREATE = "create"
OP_DROP = "drop"
OP_RELEASE = "release"


class Plan(Protocol):
    """A typed plan: what a table service's ``plan()`` returns and the framework writes."""

    def to_dict(self) -> dict[str, Any]: ...


def service_of(raw: Mapping[str, Any], default: str | None = None) -> str | None:
    """The service that scheduled a plan (``default`` for plans no service made)."""
    name = raw.get(SERVICE, default)
    return None if name is None else str(name)


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


# -- writes ----------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteRequest:
    """The requested event of a write (``commit``, ``deltacommit``, overwrite's
    ``replacecommit``): the operation and the snapshot position the writer read.
    ``writer`` marks an instant a live writer keeps a heartbeat for."""

    operation: str
    snapshot_seq: int | None = None
    writer: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"operation": str(self.operation), "snapshot_seq": self.snapshot_seq, "writer": self.writer}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WriteRequest:
        seq = raw.get("snapshot_seq")
        return cls(str(raw.get("operation", "")), seq if isinstance(seq, int) else None, bool(raw.get("writer")))


# -- compaction and clustering ---------------------------------------------------------


@dataclass(frozen=True)
class CompactionGroup:
    """One file slice a compaction folds: its base (None: logs only) and logs."""

    partition: str
    file_group: str
    base_instant: int | None = None
    base: str | None = None
    logs: tuple[str, ...] = ()

    def paths(self) -> list[str]:
        return ([self.base] if self.base is not None else []) + list(self.logs)

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "file_group": self.file_group, "base_instant": self.base_instant,
                "base": self.base, "logs": list(self.logs)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CompactionGroup:
        base = raw.get("base")
        return cls(str(raw.get("partition", "")), str(raw.get("file_group", "")), _opt_int(raw.get("base_instant")),
                   None if base is None else str(base), tuple(str(p) for p in raw.get("logs") or ()))


@dataclass(frozen=True)
class CompactionPlan:
    """The slices a compaction folds, as of the snapshot it planned at."""

    trigger: str | None
    snapshot_seq: int | None
    groups: tuple[CompactionGroup, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"trigger": self.trigger, "snapshot_seq": self.snapshot_seq,
                "groups": [g.to_dict() for g in self.groups]}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CompactionPlan:
        trigger = raw.get("trigger")
        return cls(None if trigger is None else str(trigger), _opt_int(raw.get("snapshot_seq")),
                   tuple(CompactionGroup.from_dict(g) for g in raw.get("groups") or ()))


@dataclass(frozen=True)
class ClusteringGroup:
    """One file group a clustering rewrites, and the cluster (output job) it joins."""

    partition: str
    file_group: str
    cluster: int = 0
    bytes: int = 0

    def paths(self) -> list[str]:
        return []

    def to_dict(self) -> dict[str, Any]:
        return {"partition": self.partition, "file_group": self.file_group, "cluster": self.cluster,
                "bytes": self.bytes}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ClusteringGroup:
        return cls(str(raw.get("partition", "")), str(raw.get("file_group", "")), int(raw.get("cluster", 0)),
                   int(raw.get("bytes", 0)))


@dataclass(frozen=True)
class ClusteringPlan:
    """The file groups a clustering rewrites, how it sorts them and the file size it cuts at."""

    scope: str
    snapshot_seq: int | None
    sort_by: tuple[str, ...]
    strategy: str
    target_bytes: int
    clusters: int = 0
    groups: tuple[ClusteringGroup, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"scope": self.scope, "snapshot_seq": self.snapshot_seq, "sort_by": list(self.sort_by),
                "strategy": self.strategy, "target_bytes": self.target_bytes, "clusters": self.clusters,
                "groups": [g.to_dict() for g in self.groups]}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ClusteringPlan:
        return cls(str(raw.get("scope", "")), _opt_int(raw.get("snapshot_seq")), tuple(raw["sort_by"]),
                   str(raw["strategy"]), int(raw["target_bytes"]), int(raw.get("clusters", 0)),
                   tuple(ClusteringGroup.from_dict(g) for g in raw.get("groups") or ()))


#: A plan that names file groups to rewrite.
RewritePlan = CompactionPlan | ClusteringPlan


# -- cleaning, archival, rollback ------------------------------------------------------


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
        return {"policy": self.policy, "retain": self.retain, "retain_seq": self.retain_seq,
                "orphan_age_ms": self.orphan_age_ms, "snapshot_seq": self.snapshot_seq,
                "files": {d: list(ps) for d, ps in self.files.items()}, "reasons": dict(self.reasons),
                "index_files": list(self.index_files), "staging": list(self.staging)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CleanPlan:
        return cls(raw.get("policy"), raw.get("retain"),
                   _opt_int(raw.get("retain_seq")), int(raw.get("orphan_age_ms", 0)),
                   _opt_int(raw.get("snapshot_seq")),
                   {str(d): tuple(ps) for d, ps in (raw.get("files") or {}).items()},
                   dict(raw.get("reasons") or {}), tuple(raw.get("index_files") or ()),
                   tuple(str(w) for w in raw.get("staging") or ()))


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
        return {"first_seq": self.first_seq, "through_seq": self.through_seq, "instants": self.instants,
                "events": self.events, "active_completed": self.active_completed,
                "min_active": self.min_active, "max_active": self.max_active}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ArchivalPlan:
        return cls(int(raw["first_seq"]), int(raw["through_seq"]),
                   *(int(raw.get(k, 0)) for k in ("instants", "events", "active_completed", "min_active",
                                                   "max_active")))


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
        return {"targets": list(self.targets), "leftovers": list(self.leftovers),
                "completed_markers": list(self.completed_markers), "staging": list(self.staging)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> RollbackPlan:
        targets, leftovers, completed = (tuple(int(i) for i in raw.get(k) or ())
                                         for k in ("targets", "leftovers", "completed_markers"))
        return cls(targets, leftovers, completed, tuple(str(w) for w in raw.get("staging") or ()))


# -- indexing, savepoints, schema --------------------------------------------------------


@dataclass(frozen=True)
class IndexCreatePlan:
    """An ``indexing`` instant that creates index ``index`` (empty ``columns``: the default)."""

    index: str
    kind: str
    columns: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    op = OP_CREATE

    def to_dict(self) -> dict[str, Any]:
        return {"op": OP_CREATE, "index": self.index, "kind": self.kind, "columns": list(self.columns),
                "options": dict(self.options)}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> IndexCreatePlan:
        return cls(str(raw["index"]), str(raw.get("kind")), tuple(raw.get("columns") or ()),
                   dict(raw.get("options") or {}))


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
        return cls(str(raw["index"]), _opt_int(raw.get("created")))


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


# -- any instant -----------------------------------------------------------------------


def plan_of(action: Action, raw: Mapping[str, Any]) -> Plan | None:
    """The typed plan of an instant of ``action`` with plan ``raw`` (None: an op this
    version does not know)."""
    if action in (Action.COMMIT, Action.DELTA_COMMIT):
        return WriteRequest.from_dict(raw)
    if action is Action.REPLACE_COMMIT:
        return ClusteringPlan.from_dict(raw) if service_of(raw) == "clustering" else WriteRequest.from_dict(raw)
    if action is Action.CLUSTERING:
        return ClusteringPlan.from_dict(raw)
    if action is Action.COMPACTION:
        return CompactionPlan.from_dict(raw)
    if action is Action.CLEAN:
        return CleanPlan.from_dict(raw)
    if action is Action.ARCHIVE:
        return ArchivalPlan.from_dict(raw)
    if action is Action.ROLLBACK:
        return RollbackPlan.from_dict(raw)
    if action is Action.INDEXING:
        return index_plan(raw)
    if action is Action.SAVEPOINT:
        return savepoint_plan(raw)
    return SchemaChangePlan.from_dict(raw)
