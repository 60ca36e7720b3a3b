"""Plans of the services that rewrite file groups: compaction and clustering."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .plan import optional_int


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
        return {
            "partition": self.partition,
            "file_group": self.file_group,
            "base_instant": self.base_instant,
            "base": self.base,
            "logs": list(self.logs),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CompactionGroup:
        base = raw.get("base")
        return cls(
            str(raw.get("partition", "")),
            str(raw.get("file_group", "")),
            optional_int(raw.get("base_instant")),
            None if base is None else str(base),
            tuple(str(p) for p in raw.get("logs") or ()),
        )


@dataclass(frozen=True)
class CompactionPlan:
    """The slices a compaction folds, as of the snapshot it planned at."""

    trigger: str | None
    snapshot_seq: int | None
    groups: tuple[CompactionGroup, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "trigger": self.trigger,
            "snapshot_seq": self.snapshot_seq,
            "groups": [g.to_dict() for g in self.groups],
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CompactionPlan:
        trigger = raw.get("trigger")
        return cls(
            None if trigger is None else str(trigger),
            optional_int(raw.get("snapshot_seq")),
            tuple(CompactionGroup.from_dict(g) for g in raw.get("groups") or ()),
        )


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
        return {
            "partition": self.partition,
            "file_group": self.file_group,
            "cluster": self.cluster,
            "bytes": self.bytes,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ClusteringGroup:
        return cls(
            str(raw.get("partition", "")),
            str(raw.get("file_group", "")),
            int(raw.get("cluster", 0)),
            int(raw.get("bytes", 0)),
        )


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
        return {
            "scope": self.scope,
            "snapshot_seq": self.snapshot_seq,
            "sort_by": list(self.sort_by),
            "strategy": self.strategy,
            "target_bytes": self.target_bytes,
            "clusters": self.clusters,
            "groups": [g.to_dict() for g in self.groups],
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ClusteringPlan:
        return cls(
            str(raw.get("scope", "")),
            optional_int(raw.get("snapshot_seq")),
            tuple(raw["sort_by"]),
            str(raw["strategy"]),
            int(raw["target_bytes"]),
            int(raw.get("clusters", 0)),
            tuple(ClusteringGroup.from_dict(g) for g in raw.get("groups") or ()),
        )


#: A plan that names file groups to rewrite.
RewritePlan = CompactionPlan | ClusteringPlan
