"""What merge-on-read logs changed in one file slice, read through their positions.

The change feed (:mod:`.changes`) compares each touched file group before and after the
instants of a range. When those instants only appended logs to a slice whose logs all
point into its base (position deletes, :mod:`.slice_read`), that comparison needs no
full read of the slice: only the keys the new logs carry can differ, and the version
each of those keys had is where the positions already point. A log row's ``_base_pos``
is the row its key had in the base when the writer tagged it, and a key whose live
version was in an earlier log was touched there first, so that log's row points at the
base row (or the key is new). So the rows both sides need are:

- the new logs' rows, and the earlier logs' rows of the same keys;
- the base rows any of those rows point at, decoded from the row groups holding them.

Both sides then fold exactly as a read of the slice would (:func:`merge_at_positions`,
the table's merge engine), restricted to those keys. A feed of many instants on one
base decodes each of its row groups once: its tasks share a :class:`SharedReads`,
since random keys spread every instant's positions over all of them. A slice the range gave a new base
(a copy-on-write rewrite, compaction, clustering), a group the range created, or logs
written before positions (or on an older base) return None: the caller reads those
slices whole, which gives the same rows (keys no new log carries are equal on both
sides and are no change either way).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...indexes.hashing import row_hashes
from ...timeline.storage.filesystem import Storage
from ...timeline.view.file_group import DataFile, FileSlice
from ..files import FileRead, read_snapshot_file, with_columns_of
from ..merge import merge_at_positions
from ..merge_engine import DEFAULT_ENGINE, MergeEngine
from ..write.records import BASE_POS, OP, SEQ, points_into
from .row_groups import layout, read_groups

#: The most bytes of decoded files and row groups one feed keeps for its later instants.
SHARED_BYTES = 512 * 1024 * 1024


class SharedReads:
    """Files and row groups decoded for one feed, kept for its later instants (up to
    :data:`SHARED_BYTES`, oldest dropped first). Files are immutable, so a kept read is
    exact. One object per feed, handed to its tasks: it lives as long as the feed, and
    threads of one process share it; a task pickled to another process or a Spark
    executor gets an empty one of its own (nothing of it is sent)."""

    def __init__(self) -> None:
        self._reads: OrderedDict[tuple[str, int, tuple[str, ...]], pa.Table] = OrderedDict()
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, object]:
        return {}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__init__()  # type: ignore[misc]

    def read(self, task: LogChange, file: DataFile, names: tuple[str, ...], group: int | None) -> pa.Table:
        """The ``names`` columns of ``file`` (of its row group ``group`` only, when given),
        as ``task.schema`` names and types them."""
        path = file.path
        where = (task.storage.path(path), -1 if group is None else group, names)
        with self._lock:
            got = self._reads.get(where)
        if got is not None:
            return got
        if group is None:
            got = read_snapshot_file(
                FileRead(task.storage, path, names, threads=False, schema=task.schema, size=file.bytes)
            )
        else:
            got = read_groups(task.storage, path, names, task.schema, [group], threads=False, size=file.bytes)
        with self._lock:
            self._reads[where] = got
            while len(self._reads) > 1 and sum(t.nbytes for t in self._reads.values()) > SHARED_BYTES:
                self._reads.popitem(last=False)
        return got


@dataclass(frozen=True)
class LogChange:
    """One file group's slice before (``old``) and after (``new``) some instants."""

    storage: Storage
    old: FileSlice
    new: FileSlice
    schema: pa.Schema
    key: tuple[str, ...]
    ordering: str | None
    engine: MergeEngine = DEFAULT_ENGINE
    # Reads shared with the feed's other tasks (a fresh one: nothing shared).
    shared: SharedReads = field(default_factory=SharedReads, compare=False, repr=False)


@dataclass(frozen=True)
class KeyVersions:
    """The live rows, before and after, of the keys the new logs carry (``schema``'s
    columns); and what was decoded of the base (its row groups, and how many)."""

    before: pa.Table
    after: pa.Table
    base_groups: int = 0
    base_groups_read: int = 0


def added_logs(old: FileSlice, new: FileSlice) -> tuple[DataFile, ...] | None:
    """The logs ``new`` holds on top of ``old``'s files, or None when ``new`` is no
    such extension (another base, a log gone)."""
    if old.base is None or new.base is None or old.base.path != new.base.path:
        return None
    before = {f.path for f in old.logs}
    if not before <= {f.path for f in new.logs}:
        return None
    added = tuple(f for f in new.logs if f.path not in before)
    return added or None


def log_change(task: LogChange) -> KeyVersions | None:
    """The versions, before and after, of the keys the logs ``task.new`` added carry,
    or None when positions cannot tell them (the caller then reads the slices whole)."""
    added = added_logs(task.old, task.new)
    base = task.new.base
    if added is None or base is None:
        return None
    names = tuple(task.schema.names)
    log_schema = task.schema.append(pa.field(OP, pa.string())).append(pa.field(BASE_POS, pa.int64()))
    logs = []
    for f in task.new.logs:  # the slice's fold order
        rows = task.shared.read(task, f, (*names, OP, SEQ, BASE_POS), None)
        if not points_into(rows, base.path):
            return None
        logs.append((f.path, with_columns_of(rows.sort_by(SEQ).drop_columns([SEQ]), log_schema)))
    new_paths = {f.path for f in added}
    carried = pa.concat_tables([rows for path, rows in logs if path in new_paths])
    wanted = _hashes(carried, task.key)
    # Every version of those keys, in fold order; other keys' rows stay out.
    versions = [(path, rows.filter(pc.is_in(_hashes(rows, task.key), value_set=wanted))) for path, rows in logs]
    after_rows = pa.concat_tables([rows for _, rows in versions])
    earlier = [rows for path, rows in versions if path not in new_paths]
    before_rows = pa.concat_tables(earlier) if earlier else log_schema.empty_table()
    positions = np.unique(after_rows.column(BASE_POS).drop_null().to_numpy()).astype(np.int64)
    lay = layout(task.storage, base.path, task.schema, None, base.bytes)
    if len(positions) and (positions[0] < 0 or positions[-1] >= lay.rows):
        return None  # a log pointing past its base: the whole read reports it
    groups = np.unique(np.searchsorted(lay.starts, positions, side="right") - 1)
    parts = [task.shared.read(task, base, names, int(g)) for g in groups]
    read = pa.concat_tables(parts) if parts else pa.schema([task.schema.field(n) for n in names]).empty_table()
    hit = read.take(pa.array(_within(positions, lay.starts, groups)))
    fold = lambda changes: merge_at_positions(  # noqa: E731
        hit, _renumbered(changes, positions), task.key, task.ordering, list(names), engine=task.engine
    ).cast(task.schema)
    return KeyVersions(fold(before_rows), fold(after_rows), len(lay.starts) - 1, len(groups))


def _hashes(rows: pa.Table, key: tuple[str, ...]) -> pa.Array:
    """One hash per row of its key. Two keys sharing a hash only bring an unchanged key
    into both sides, which the caller's comparison finds equal."""
    return pa.array(row_hashes([rows.column(k) for k in key]))


def _within(positions: np.ndarray, starts: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Each base position as a row number of ``groups``' rows read one after another."""
    sizes = starts[groups + 1] - starts[groups]
    offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    group = np.searchsorted(starts, positions, side="right") - 1
    return positions - starts[group] + offsets[np.searchsorted(groups, group)]


def _renumbered(changes: pa.Table, positions: np.ndarray) -> pa.Table:
    """``changes`` with ``_base_pos`` counting into the rows at ``positions`` (sorted,
    unique, holding every position the changes name) instead of into the whole base."""
    pos = changes.column(BASE_POS)
    valid = pc.is_valid(pos).to_numpy(zero_copy_only=False)
    local = np.searchsorted(positions, pos.fill_null(0).to_numpy())
    column = pa.array(local.astype(np.int64), mask=~valid)
    return changes.set_column(changes.schema.get_field_index(BASE_POS), BASE_POS, column)
