"""Tagging: which file group holds each incoming key.

Upserts and deletes must land in the file group that already holds a key, so two
versions of a key never live in two groups. Candidates are the latest slices of the
key's partition, pruned by the key range their files (base and logs) recorded at write
time, then by the base file's bloom filter when a ready ``bloom_filters`` index covers
the record key and the slice has no logs (probed with the keys inside its range only);
the survivors' key columns are read (base plus logs, folded, so deleted keys do not
count) and joined with the incoming keys. Record identity is (partition, key), as in
Hudi's default non-global index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...indexes.bloom import FileBloom, key_hashes
from ...indexes.hashing import min_max_values
from ...timeline.storage.filesystem import Storage
from ...timeline.view.file_group import FileSlice
from ..engine import Engine
from ..files import FileRead, read_snapshot_file
from ..merge import fold, with_order
from .records import BASE_POS, OP, OP_UPSERT, constant, points_into

# In memory only, under the reserved prefix (table_config.INTERNAL_PREFIX): never a user column.
FG = "__lakeline_fg"
ROW = "__lakeline_row"


@dataclass(frozen=True)
class SliceKeys:
    """Find which of ``probe``'s keys (record-key columns and :data:`ROW`, the row number
    in the tag call) are alive in one slice; ``mask`` limits the probe to the keys that
    may be there (its key range, its bloom filter), ``index`` numbers the slice."""

    storage: Storage
    slice: FileSlice
    key: tuple[str, ...]
    index: int = 0
    probe: pa.Table | None = None
    mask: np.ndarray | None = None
    positions: bool = False  # also find each probed key's row in the base file


def _with_slice(t: pa.Table, index: int) -> pa.Table:
    # An int32 slice number, not the 32-character group id: this column comes back
    # from every slice.
    return t.append_column(FG, pa.array(np.full(t.num_rows, index, dtype=np.int32)))


def slice_live_keys(task: SliceKeys) -> pa.Table:
    """The keys alive in a slice (base plus logs: by position when the logs hold base
    positions, else folded); with a probe, only the probe's :data:`ROW` numbers found
    there, with the slice's number in :data:`FG`."""
    s = task.slice
    base: pa.Table | None = None
    if s.base is not None:
        base = read_snapshot_file(FileRead(task.storage, s.base.path, task.key, size=s.base.bytes))
        if task.positions:
            # Each base row's position: a live key whose version is the base's row is
            # tagged with it, for the log's position deletes (a log's rows carry nulls).
            base = base.append_column(BASE_POS, pa.array(np.arange(base.num_rows, dtype=np.int64)))
    logs = [
        read_snapshot_file(FileRead(task.storage, log.path, task.key + (OP, BASE_POS), size=log.bytes))
        for log in s.logs
    ]
    if base is not None and not logs:
        live = base
    elif s.base is not None and base is not None and all(points_into(lg, s.base.path) for lg in logs):
        live = _live_by_position(base, logs, task.key)
    else:
        # Logs from before positions, or written on an older base: fold every version.
        parts, start = [], 0
        if base is not None:
            parts.append(with_order(base.append_column(OP, constant(OP_UPSERT, base.num_rows)), start))
            start += base.num_rows
        for lg in logs:
            parts.append(with_order(lg.drop_columns([c for c in (BASE_POS,) if c in lg.column_names]), start))
            start += lg.num_rows
        live = fold(pa.concat_tables(parts, promote_options="permissive"), task.key, None)
    if task.probe is None:
        return _with_slice(live, task.index)
    probe = task.probe if task.mask is None else task.probe.filter(task.mask)
    # The slice's keys on the left: Arrow builds its hash table on the right side, the
    # (smaller) incoming keys that may be in this slice. Joining per slice, inside the
    # engine's tasks, spreads the work over the cores.
    joined = live.join(probe, list(task.key), join_type="inner", use_threads=False)
    if BASE_POS not in joined.column_names:  # no positions asked for, or a slice of logs alone
        joined = joined.append_column(BASE_POS, pa.nulls(joined.num_rows, pa.int64()))
    return _with_slice(joined.select([ROW, BASE_POS]), task.index)


def _live_by_position(base: pa.Table, logs: list[pa.Table], key: tuple[str, ...]) -> pa.Table:
    """The live keys of a slice whose logs all point into its base: the base rows no log
    touches (a log carries every key it touches with the key's base row, see
    :func:`lakeline.table.read.scan.read_slice`), and the keys live after folding the logs
    alone. Only the logs' rows go through the fold, not the whole base."""
    touched = np.zeros(base.num_rows, dtype=bool)
    for lg in logs:
        pos = lg.column(BASE_POS).drop_null().to_numpy()
        touched[pos] = True
    untouched = base.filter(pa.array(~touched))
    start, parts = 0, []
    for lg in logs:
        parts.append(with_order(lg.select(list(key) + [OP]), start))
        start += lg.num_rows
    in_logs = fold(pa.concat_tables(parts), key, None)
    if BASE_POS in untouched.column_names:  # a key whose live version is in a log has no base row
        in_logs = in_logs.append_column(BASE_POS, pa.nulls(in_logs.num_rows, pa.int64()))
    return pa.concat_tables([untouched, in_logs.cast(untouched.schema)])


def beyond_every_range(slices: list[FileSlice], keys: pa.Table, key: tuple[str, ...]) -> bool:
    """Whether the range of ``keys`` misses the key range of every slice (as a batch of
    sequential keys newer than any in the table does): then no key is in the table,
    whatever an index would say, and none need be looked up. Only the batch's min and
    max are compared: a batch that overlaps one range gets False, and its keys are
    looked up."""
    if len(key) != 1 or keys.num_rows == 0:
        return False
    kmin, kmax = min_max_values(keys.column(key[0]))
    for s in slices:
        bounds = s.key_bounds()
        if bounds is None:
            return False
        try:
            if not (bounds[1] < kmin or bounds[0] > kmax):
                return False
        except TypeError:
            return False
    return True


def candidate_slices(
    slices: list[FileSlice], keys: pa.Table, key: tuple[str, ...]
) -> list[tuple[FileSlice, np.ndarray | None]]:
    """Slices whose key range may hold one of ``keys``, each with the mask of the keys
    inside its range (None: every key may be there).

    The range is the slice's whole range, logs included (:meth:`FileSlice.key_bounds`):
    a compaction may write a base without a key that a log completing later revives, so
    the base's own range alone would prune a slice that holds the key (issue 11).
    """
    if len(key) != 1 or keys.num_rows == 0:
        return [(s, None) for s in slices]
    col = keys.column(key[0])
    kmin, kmax = min_max_values(col)
    out: list[tuple[FileSlice, np.ndarray | None]] = []
    for s in slices:
        bounds = s.key_bounds()
        if bounds is None:
            out.append((s, None))
            continue
        lo_b, hi_b = bounds
        try:
            if hi_b < kmin or lo_b > kmax:
                continue  # the whole batch lies outside this slice's range
            lo = pc.greater_equal(col, pa.scalar(lo_b, col.type))
            hi = pc.less_equal(col, pa.scalar(hi_b, col.type))
        except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            out.append((s, None))
            continue
        inside = pc.and_(lo, hi).to_numpy(zero_copy_only=False)
        if inside.any():
            out.append((s, inside))
    return out


def bloom_survivors(
    cands: list[tuple[FileSlice, np.ndarray | None]],
    keys: pa.Table,
    key: tuple[str, ...],
    blooms: Mapping[str, FileBloom],
) -> list[tuple[FileSlice, np.ndarray | None]]:
    """The candidates whose base file's bloom filter may hold one of their keys, each
    with its mask narrowed to the keys the filter may hold.

    Only slices without logs are probed: a log may carry a key its base never had (a
    key revived after a delete), and the filter covers the base alone. A slice without
    a filter entry is kept as it is.
    """
    hashes: np.ndarray | None = None
    out: list[tuple[FileSlice, np.ndarray | None]] = []
    for s, inside in cands:
        fb = blooms.get(s.base.path) if s.base is not None and not s.logs else None
        if fb is None:
            out.append((s, inside))
            continue
        if hashes is None:  # hashed once, for every file probed
            hashes = key_hashes(keys, key)
        if inside is None:
            mask = fb.might_contain(hashes)
        else:
            mask = inside.copy()
            mask[inside] = fb.might_contain(hashes[inside])
        if mask.any():
            out.append((s, mask))
    return out


def tag(
    storage: Storage,
    engine: Engine,
    slices: list[FileSlice],
    keys: pa.Table,
    key: tuple[str, ...],
    blooms: Mapping[str, FileBloom] | None = None,
    positions: bool = False,
) -> tuple[pa.Array, pa.Array]:
    """For each row of ``keys`` (record-key columns), the file group holding it or null,
    and, with ``positions``, the key's row in that group's base file when its live
    version is that row (null when it is in a log, or not in the table; always null
    without ``positions``).

    Candidates are pruned by key range, then by ``blooms`` (record-key bloom filters of
    base files, by path), and the keys of what remains are read and joined exactly,
    each slice with only the incoming keys that survived its range and filter.
    """
    if keys.num_rows == 0:
        return pa.array([], pa.string()), pa.array([], pa.int64())
    ranged = candidate_slices(slices, keys, key)
    cands = bloom_survivors(ranged, keys, key, blooms) if blooms else ranged
    if not cands:
        return pa.nulls(keys.num_rows, pa.string()), pa.nulls(keys.num_rows, pa.int64())
    probe = keys.select(list(key)).append_column(ROW, pa.array(np.arange(keys.num_rows, dtype=np.int64)))
    found = engine.map(
        slice_live_keys, [SliceKeys(storage, s, key, i, probe, mask, positions) for i, (s, mask) in enumerate(cands)]
    )
    slot = np.full(keys.num_rows, -1, dtype=np.int32)
    position = np.full(keys.num_rows, -1, dtype=np.int64)
    for part in found:
        rows = part.column(ROW).to_numpy()
        slot[rows] = part.column(FG).to_numpy()
        position[rows] = part.column(BASE_POS).fill_null(-1).to_numpy()
    names = pa.array([s.file_group for s, _ in cands], pa.string())
    indices = pa.array(slot, mask=slot < 0)
    return (pa.DictionaryArray.from_arrays(indices, names).cast(pa.string()), pa.array(position, mask=position < 0))
