"""Write plans: what one write attempt will do to which file groups.

Planning reads the snapshot (tagging, small-file selection) but writes nothing, so a
planning error (duplicate key, unknown column) leaves the table untouched. The plan is
then executed by the engine as independent per-file-group tasks (:mod:`.group_tasks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.commit_metadata import Operation
from ...timeline.view.file_group import FileSlice

#: Column of ``WritePlan.new_keys`` naming each key's partition folder.
PARTITION = "__lakeline_partition"  # in memory only, under the reserved prefix


@dataclass(frozen=True)
class NewFiles:
    """Rows that start new file groups in a partition (split by target size)."""

    partition: str
    rows: pa.Table
    inserts: bool = True


@dataclass(frozen=True)
class Rewrite:
    """Copy-on-write: a group's base is merged with ``incoming`` (rows with ``_op``),
    or filtered by ``predicate`` (append-only delete_where), into a new base."""

    partition: str
    slice: FileSlice
    incoming: pa.Table | None = None
    predicate: pc.Expression | None = None
    inserts: bool = False
    new_keys_only: bool = False  # every incoming key is new to the group: append, no merge
    #: An append-only update: apply these (column, expression) pairs to the rows
    #: ``predicate`` matches instead of deleting them (:mod:`.assign`).
    assign: tuple[tuple[str, pc.Expression], ...] | None = None


@dataclass(frozen=True)
class LogAppend:
    """Merge-on-read: ``incoming`` (rows with ``_op``) become a log on a group;
    ``inserts``: some of them are keys new to the table (a small group filled)."""

    partition: str
    slice: FileSlice
    incoming: pa.Table
    inserts: bool = False


@dataclass
class WritePlan:
    """Everything one attempt writes, plus what it retires."""

    operation: Operation
    new_files: list[NewFiles] = field(default_factory=list)
    rewrites: list[Rewrite] = field(default_factory=list)
    logs: list[LogAppend] = field(default_factory=list)
    replaced: dict[str, list[str]] = field(default_factory=dict)
    replaced_partitions: list[str] = field(default_factory=list)
    new_keys: pa.Table | None = None  # keys this attempt inserts (for the key check)
    #: Every key a delete names, found or not, with :data:`PARTITION` (null: in every
    #: partition): a concurrent re-insert of one of them is a conflict (the key check).
    deleted_keys: pa.Table | None = None
    #: ``delete_where``'s predicate: rows a concurrent commit wrote that match it conflict.
    delete_predicate: pc.Expression | None = None
    #: Keys an update read and rewrote, with :data:`PARTITION`: any concurrent version of
    #: one of them, an upsert or a delete, is a conflict (the key check).
    updated_keys: pa.Table | None = None
    stats: dict[str, int] = field(default_factory=dict)
    #: Seconds spent in planning phases (``tag_s``: locating keys), for ``WriteResult.timings``.
    timings: dict[str, float] = field(default_factory=dict)
    #: Record-key bloom filters of the planned snapshot by base path (read on first tag).
    key_blooms: dict[str, Any] | None = None
    #: The record index as the planned snapshot sees it (a ``RecordIndexReader``), once
    #: looked for (``index_opened``); None when there is none to use.
    record_index: Any | None = None
    index_opened: bool = False

    @property
    def empty(self) -> bool:
        return not (self.new_files or self.rewrites or self.logs or self.replaced)
