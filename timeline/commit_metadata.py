"""What a completed write says it did: the metadata of its ``completed`` event.

Every data-writing instant records the files it added (with row counts, sizes and the
key range), the file groups it retired, and its footprint for conflict checks. The
file-system view of any snapshot is a replay of these records in completion order, so
they are the table's source of truth; the metadata table indexes them for speed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class WriteStat:
    """One file added by an instant."""

    path: str  # relative to the table's base path
    partition: str  # relative partition folder, "" when unpartitioned
    file_group: str
    kind: str  # "base" or "log"
    rows: int
    bytes: int
    deletes: int = 0  # log files: how many of the rows are delete records
    key_min: Any = None  # single-column keys only; None when unknown
    key_max: Any = None
    inserts: bool = False  # holds keys that were new to the table when written

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WriteStat:
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})


@dataclass(frozen=True)
class CommitMetadata:
    """The metadata of a completed data-writing instant.

    Attributes:
        operation: insert, upsert, delete, delete_where, overwrite, compact, cluster.
        snapshot_seq: the log position the writer read its snapshot at.
        files: the files it added.
        replaced: ``partition -> [file group]`` retired entirely by this instant.
        rewritten: file groups whose new base supersedes the old one (copy-on-write).
        replaced_partitions: partitions an overwrite replaced.
        stats: counts (inserted, updated, deleted, files_added, bytes_written, ...).
    """

    operation: str
    snapshot_seq: int
    files: tuple[WriteStat, ...] = ()
    replaced: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rewritten: tuple[tuple[str, str], ...] = ()
    replaced_partitions: tuple[str, ...] = ()
    stats: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "snapshot_seq": self.snapshot_seq,
            "files": [f.to_dict() for f in self.files],
            "replaced": {p: list(g) for p, g in self.replaced.items()},
            "rewritten": [list(x) for x in self.rewritten],
            "replaced_partitions": list(self.replaced_partitions),
            "stats": dict(self.stats),
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CommitMetadata:
        return cls(
            operation=raw.get("operation", ""),
            snapshot_seq=int(raw.get("snapshot_seq", -1)),
            files=tuple(WriteStat.from_dict(f) for f in raw.get("files", ())),
            replaced={p: tuple(g) for p, g in (raw.get("replaced") or {}).items()},
            rewritten=tuple((p, g) for p, g in raw.get("rewritten", ())),
            replaced_partitions=tuple(raw.get("replaced_partitions", ())),
            stats=dict(raw.get("stats") or {}),
        )

    # -- footprint for conflict checks ----------------------------------------------

    def groups_written(self) -> set[tuple[str, str]]:
        """(partition, file group) of every file added."""
        return {(f.partition, f.file_group) for f in self.files}

    def groups_replaced(self) -> set[tuple[str, str]]:
        return {(p, g) for p, groups in self.replaced.items() for g in groups}

    def partitions_written(self) -> set[str]:
        return {f.partition for f in self.files} | set(self.replaced) | set(self.replaced_partitions)
