"""What a completed write says it did: the metadata of its ``completed`` event.

Every data-writing instant records the files it added (with row counts, sizes and the
key range), the file groups it retired, and its footprint for conflict checks. The
file-system view of any snapshot is a replay of these records in completion order, so
they are the table's source of truth; the metadata table indexes them for speed.

Because everything replays them, :meth:`CommitMetadata.from_dict` checks their shape and
refuses a damaged record with :class:`CorruptEventError` (issue 25, audit C4d:
``"files": "notalist"`` was a ``TypeError`` on open and a traceback in cleaning); code
that reads the raw record instead (cleaning lists only paths) goes through
:func:`file_paths`, which checks the same.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import CorruptEventError
from .txn import Txn
from .view.file_group import FileKind

#: Fields of a file record (``WriteStat``) and the JSON types each may hold; the first
#: six are required. A key range is any JSON scalar (or null).
_TEXT = (str,)
_COUNT = (int,)
_FILE_FIELDS: dict[str, tuple[type, ...]] = {
    "path": _TEXT,
    "partition": _TEXT,
    "file_group": _TEXT,
    "kind": _TEXT,
    "rows": _COUNT,
    "bytes": _COUNT,
    "deletes": _COUNT,
    "key_min": (int, float, str, bool, type(None)),
    "key_max": (int, float, str, bool, type(None)),
    "inserts": (bool,),
}
_REQUIRED = ("path", "partition", "file_group", "kind", "rows", "bytes")


class Operation(enum.StrEnum):
    """What a data-writing instant did: the ``operation`` of its requested event
    (:class:`~.plans.WriteRequest`) and of its :class:`CommitMetadata`. The value is
    what they store."""

    INSERT = "insert"
    UPSERT = "upsert"
    DELETE = "delete"
    DELETE_WHERE = "delete_where"
    OVERWRITE = "overwrite"
    UPDATE = "update"
    MERGE = "merge"  # Table.merge: Delta's clauses, joined on the record key
    COMPACT = "compact"  # the compaction service
    CLUSTER = "cluster"  # the clustering service


@dataclass(frozen=True)
class WriteStat:
    """One file added by an instant."""

    path: str  # relative to the table's base path
    partition: str  # relative partition folder, "" when unpartitioned
    file_group: str
    kind: FileKind
    rows: int
    bytes: int
    deletes: int = 0  # log files: how many of the rows are delete records
    key_min: Any = None  # single-column keys only; None when unknown
    key_max: Any = None
    inserts: bool = False  # holds keys that were new to the table when written

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "kind": str(self.kind)}  # the plain value, as stored

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WriteStat:
        """One file record of a commit's metadata.

        Raises:
            CorruptEventError: not an object with the fields of a file record.
        """
        _check_file(raw)
        try:
            kind = FileKind(raw["kind"])
        except ValueError:
            raise CorruptEventError(
                f"commit metadata: file kind {raw['kind']!r:.60} is not one of {', '.join(FileKind)}"
            ) from None
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw and k != "kind"}, kind=kind)


@dataclass(frozen=True)
class CommitMetadata:
    """The metadata of a completed data-writing instant.

    Attributes:
        operation: an :class:`Operation`'s value (insert, upsert, ..., compact, cluster);
            a record read back holds the text it stored.
        snapshot_seq: the log position the writer read its snapshot at.
        files: the files it added.
        replaced: ``partition -> [file group]`` retired entirely by this instant.
        rewritten: file groups whose new base supersedes the old one (copy-on-write).
        replaced_partitions: partitions an overwrite replaced.
        stats: counts (inserted, updated, deleted, files_added, bytes_written, ...).
        txn: the ``(app_id, version)`` the write carried (:mod:`.txn`), or None.
    """

    operation: str
    snapshot_seq: int
    files: tuple[WriteStat, ...] = ()
    replaced: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rewritten: tuple[tuple[str, str], ...] = ()
    replaced_partitions: tuple[str, ...] = ()
    stats: Mapping[str, int] = field(default_factory=dict)
    txn: Txn | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {
            "operation": str(self.operation),
            "snapshot_seq": self.snapshot_seq,
            "files": [f.to_dict() for f in self.files],
            "replaced": {p: list(g) for p, g in self.replaced.items()},
            "rewritten": [list(x) for x in self.rewritten],
            "replaced_partitions": list(self.replaced_partitions),
            "stats": dict(self.stats),
        }
        if self.txn is not None:  # absent otherwise: older records and plain writes alike
            out["txn"] = self.txn.to_dict()
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> CommitMetadata:
        """The metadata a completed data instant recorded (:meth:`to_dict`).

        Raises:
            CorruptEventError: the record is not of that shape (``files`` not a list of
                file records, ``replaced`` not partitions to lists of groups, ...).
        """
        if not isinstance(raw, Mapping):
            raise CorruptEventError(f"commit metadata is a {type(raw).__name__}, not an object")
        seq = raw.get("snapshot_seq", -1)
        operation = raw.get("operation", "")
        replaced = raw.get("replaced") or {}
        rewritten = raw.get("rewritten", ())
        partitions = raw.get("replaced_partitions", ())
        stats = raw.get("stats") or {}
        if isinstance(seq, bool) or not isinstance(seq, int) or not isinstance(operation, str):
            raise CorruptEventError(f"commit metadata: snapshot_seq {seq!r} or operation {operation!r} is malformed")
        if not isinstance(replaced, Mapping) or not all(_texts(g) for g in replaced.values()):
            raise CorruptEventError(f"commit metadata: replaced is not partitions to file groups: {replaced!r:.80}")
        if not isinstance(rewritten, list | tuple) or not all(_texts(x) and len(x) == 2 for x in rewritten):
            raise CorruptEventError(f"commit metadata: rewritten is not (partition, group) pairs: {rewritten!r:.80}")
        if not _texts(partitions) or not isinstance(stats, Mapping):
            raise CorruptEventError("commit metadata: replaced_partitions is not a list of text, or stats no object")
        return cls(
            operation=operation,
            snapshot_seq=seq,
            files=tuple(WriteStat.from_dict(f) for f in _file_records(raw)),
            replaced={p: tuple(g) for p, g in replaced.items()},
            rewritten=tuple((p, g) for p, g in rewritten),
            replaced_partitions=tuple(partitions),
            stats=dict(stats),
            txn=Txn.from_dict(raw["txn"]) if raw.get("txn") is not None else None,
        )

    # -- footprint for conflict checks ----------------------------------------------

    def groups_written(self) -> set[tuple[str, str]]:
        """(partition, file group) of every file added."""
        return {(f.partition, f.file_group) for f in self.files}

    def groups_replaced(self) -> set[tuple[str, str]]:
        return {(p, g) for p, groups in self.replaced.items() for g in groups}

    def partitions_written(self) -> set[str]:
        return {f.partition for f in self.files} | set(self.replaced) | set(self.replaced_partitions)


def file_paths(raw: Mapping[str, Any]) -> list[str]:
    """The paths of the files a completed data instant's metadata lists, its shape
    checked as by :meth:`CommitMetadata.from_dict` (for readers that need only paths).

    Raises:
        CorruptEventError: ``files`` is not a list of file records.
    """
    if not isinstance(raw, Mapping):
        raise CorruptEventError(f"commit metadata is a {type(raw).__name__}, not an object")
    out = []
    for f in _file_records(raw):
        _check_file(f)
        out.append(f["path"])
    return out


def _file_records(raw: Mapping[str, Any]) -> list[Any] | tuple[Any, ...]:
    files = raw.get("files", ())
    if not isinstance(files, list | tuple):
        raise CorruptEventError(f"commit metadata: files is a {type(files).__name__}, not a list of file records")
    return files


def _check_file(raw: object) -> None:
    if not isinstance(raw, Mapping):
        raise CorruptEventError(f"commit metadata: a file record is a {type(raw).__name__}, not an object")
    missing = [k for k in _REQUIRED if k not in raw]
    if missing:
        raise CorruptEventError(f"commit metadata: a file record lacks {missing}")
    for k, types in _FILE_FIELDS.items():
        if k in raw:
            v = raw[k]
            if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
                raise CorruptEventError(f"commit metadata: file field {k} is {v!r:.60}, not a {types[0].__name__}")


def _texts(value: object) -> bool:
    """Whether ``value`` is a list (or tuple) of text."""
    return isinstance(value, list | tuple) and all(isinstance(x, str) for x in value)
