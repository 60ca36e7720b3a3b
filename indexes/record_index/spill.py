"""Building a record-index generation in bounded memory: file by file, then bucket by bucket.

Hudi's record index ran out of memory building at scale (apache/hudi#14077, #19670):
it gathered every key of the table at once. Here no step holds more than one slice of
one data file or one range of buckets:

1. *Spill*, one engine task per live data file: read the record key (and a log's
   ``_op``) a batch of rows at a time, turn each batch into entries sorted by bucket
   (:func:`.rows.record_entries`) and append them to the file's spill file, in small row
   groups whose statistics name the buckets they hold.
2. *Buckets*, one engine task per range of buckets holding about :data:`RANGE_ROWS`
   entries: read that range from every spill file (the row groups of other buckets are
   skipped by their statistics), sort by key and write one file per bucket.

A table of up to :data:`IN_MEMORY_BYTES` of data files (the one a table that just
showed random keys builds its index over, :mod:`.auto`) skips the spill: every entry is
held at once and written bucket by bucket (:func:`write_in_memory`).

The spill folder is this attempt's own (``spill_<token>``) and is removed when the
generation is written; a build killed half-way leaves it and an unpublished generation
folder, which the next attempt removes before it starts (:func:`.store.remove_unnamed`).
``validate`` spills the same way and compares range by range (:mod:`.check`); a fold of
deltas into a new generation runs the second step over the old generation and the
deltas (:mod:`.fold`).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ...timeline.errors import IndexBuildError
from ...timeline.storage.data_reads import PARQUET_READ, reading
from ...timeline.storage.filesystem import Storage
from ..entries import IndexTarget, MapFn
from ..integrity import Seal
from .delta_hashes import DELTA_HASHES
from .live_entries import live_entries, live_mask
from .rows import BUCKET, HASH, OP, bucket_hash_order, entry_schema, record_entries
from .store import (
    BUCKET_ROW_GROUP_ROWS,
    MAPPED_SUFFIX,
    SPILL_PREFIX,
    bucket_path,
    bucket_range,
    entry_parquet,
    mapped_entries,
    ranges,
    read_entries,
    spill_folder,
    write_entries,
)

#: Rows of a data file turned into entries at a time.
BATCH_ROWS = 262_144
#: Entries one bucket-range task holds in memory (about 60 bytes each for 32-character
#: keys, twice while sorting).
RANGE_ROWS = 500_000
#: Data files up to which a build holds every entry in memory at once instead of
#: spilling (:func:`write_in_memory`): about 1M rows of a 32-character key and a few
#: columns, 60 MB of entries.
IN_MEMORY_BYTES = 48 << 20


@dataclass(frozen=True)
class SpillTask:
    """The entries of one data file into its spill file (a picklable engine task)."""

    target: IndexTarget
    storage: Storage
    schema: pa.Schema
    path: str
    out: str


def spill_task(task: SpillTask) -> int | str:
    """Spill one data file's entries; returns how many, or the data file's path when it
    no longer exists (the caller decides whether that is sound).

    Raises:
        IndexBuildError: the key cannot be hashed or cast (a value the index cannot hold).
    """
    storage, key = task.storage, task.target.columns
    entries = entry_schema(task.schema, key)
    try:
        with reading(task.path), storage.fs.open_input_file(storage.path(task.path)) as f:
            pf = pq.ParquetFile(f, **PARQUET_READ)  # page CRCs: never hash a flipped key
            cols = [c for c in (*key, OP) if c in pf.schema_arrow.names]
            out = storage.path(task.out)
            storage.mkdirs(posixpath.dirname(out))
            n = 0
            options = entry_parquet(storage)
            with storage.fs.open_output_stream(out) as sink, pq.ParquetWriter(sink, entries, **options) as w:
                for batch in pf.iter_batches(batch_size=BATCH_ROWS, columns=cols):
                    rows = pa.Table.from_batches([batch])
                    part = record_entries(rows, task.path, key, task.schema, task.target.buckets, offset=n)
                    w.write_table(part, row_group_size=BUCKET_ROW_GROUP_ROWS)
                    n += rows.num_rows
            pa.default_memory_pool().release_unused()  # a long build keeps its peak, not its sum
            return n
    except FileNotFoundError:
        return task.path
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise IndexBuildError(f"index {task.target.name!r}: entries of {task.path} cannot be computed: {e}") from e


@dataclass(frozen=True)
class RangeTask:
    """Write the bucket files of buckets ``[lo, hi)`` from ``sources`` (spill files,
    bucket files, deltas: absolute paths), keeping only entries of ``live`` files when
    given (a picklable engine task)."""

    storage: Storage
    sources: tuple[str, ...]
    lo: int
    hi: int
    folder: str
    key: tuple[str, ...]
    schema: pa.Schema
    live: pa.Array | None = None
    #: ``(rewrite, base it rewrote)`` of partial rewrites (with ``live``: their chains
    #: are resolved, :func:`.live_entries.live_entries`).
    partial: tuple[tuple[str, str], ...] = ()
    #: ``(bucket file, its seal)`` of the sources that are a generation's bucket files
    #: (a delta's seal is in its name, :mod:`..integrity`).
    seals: tuple[tuple[str, Seal], ...] = ()


def range_rows(task: RangeTask, sort: bool = True) -> pa.Table:
    """The entries of the task's range, sorted by bucket, then hash (a point lookup's
    row group is found by the statistics of the hash); ``sort=False``: as read."""
    parts = [_range_part(task, p) for p in task.sources]
    schema = entry_schema(task.schema, task.key)
    rows = pa.concat_tables([p.cast(schema) for p in parts]) if parts else schema.empty_table()
    partial = dict(task.partial)
    kept = None  # the rows to keep, when only files' liveness decides (no chain to resolve)
    if task.live is not None and any(p in partial for p in task.live.to_pylist()):
        rows = live_entries(rows, task.live, partial)
    elif task.live is not None:
        kept = np.flatnonzero(live_mask(rows, task.live))
    if not sort:
        return rows if kept is None else rows.take(pa.array(kept))
    # Not by key: equal hashes are too rare to order, and a string sort costs seconds.
    # By hash, then a stable radix sort of the 16-bit buckets: a generation's entries
    # come in runs already sorted by hash, which the first sort merges; the live rows
    # are taken once, sorted (a fold of 3.6M entries: 0.69 s as a filter, then Arrow's
    # two-key sort and take; 0.3 s this way).
    order = bucket_hash_order(rows.column(BUCKET).to_numpy(), rows.column(HASH).to_numpy(), kept)
    return rows.take(pa.array(order))


def _range_part(task: RangeTask, path: str) -> pa.Table:
    """The entries of the task's range in one source: a mapped bucket file of the range
    (sorted by bucket, so its first and last entries bound it) as it is, without a copy;
    any other file read through the range's filter."""
    seal = dict(task.seals).get(path)
    if path.endswith(MAPPED_SUFFIX) and task.storage.is_local:
        rows = mapped_entries(task.storage, path, seal)
        buckets = rows.column(BUCKET)
        if rows.num_rows == 0 or (task.lo <= buckets[0].as_py() and buckets[-1].as_py() < task.hi):
            return rows
    return read_entries(task.storage, path, bucket_range(task.lo, task.hi), seal=seal)


def by_bucket(rows: pa.Table) -> list[tuple[int, pa.Table]]:
    """The runs of one bucket each of entries sorted by bucket."""
    if rows.num_rows == 0:
        return []
    b = rows.column(BUCKET).to_numpy()
    starts = np.flatnonzero(np.r_[True, b[1:] != b[:-1]])
    ends = np.r_[starts[1:], len(b)]
    return [(int(b[s]), rows.slice(int(s), int(e - s))) for s, e in zip(starts, ends)]


#: What a step wrote: bucket -> (its entries, the seal of its file).
Written = dict[int, tuple[int, Seal]]


def range_task(task: RangeTask) -> Written:
    """Write the range's bucket files; returns the entries and seal of each."""
    return range_task_rows(task.storage, task.folder, range_rows(task))


def range_task_rows(storage: Storage, folder: str, sorted_rows: pa.Table) -> Written:
    """Write the bucket files of entries sorted by bucket, then hash, into ``folder``;
    returns the entries and seal of each bucket written."""
    written: Written = {}
    for bucket, rows in by_bucket(sorted_rows):
        seal = write_entries(storage, bucket_path(folder, bucket, storage.is_local), rows.combine_chunks())
        written[bucket] = (rows.num_rows, seal)
    pa.default_memory_pool().release_unused()
    return written


@dataclass(frozen=True)
class Spilled:
    """What the spill step left: the spill files (absolute paths), the entries in them,
    and the data files that had vanished."""

    folder: str
    files: tuple[str, ...]
    rows: int
    gone: tuple[str, ...]


def spill(
    storage: Storage,
    files: Sequence[tuple[str, int]],
    target: IndexTarget,
    schema: pa.Schema,
    token: str,
    map_fn: MapFn,
    prefix: str = SPILL_PREFIX,
) -> Spilled:
    """Step 1 for ``files`` (data file path, bytes): one spill file each, largest first
    (an engine's workers then finish together), in the folder ``<prefix><token>``."""
    folder = spill_folder(target.partition, token, prefix)
    ordered = sorted(files, key=lambda f: -f[1])
    tasks = [
        SpillTask(target, storage, schema, path, posixpath.join(folder, f"{i:06d}.parquet"))
        for i, (path, _) in enumerate(ordered)
    ]
    results = map_fn(spill_task, tasks)
    kept = [(t, r) for t, r in zip(tasks, results) if not isinstance(r, str)]
    return Spilled(
        folder,
        tuple(storage.path(t.out) for t, _ in kept),
        sum(int(r) for _, r in kept),
        tuple(r for r in results if isinstance(r, str)),
    )


def write_buckets(
    storage: Storage,
    sources: Sequence[str],
    rows: int,
    target: IndexTarget,
    schema: pa.Schema,
    folder: str,
    map_fn: MapFn,
    live: pa.Array | None = None,
    bucket_files: Mapping[int, str] | None = None,
    partial: Mapping[str, str] | None = None,
    seals: Mapping[str, Seal] | None = None,
) -> Written:
    """Step 2: every bucket file of a generation in ``folder`` from ``sources`` (and the
    ``bucket_files`` of an older generation, each read only by the task of its bucket,
    checked against its seal in ``seals``) holding about ``rows`` entries, keeping with
    ``live`` the keys live files hold (``partial``: the partial rewrites among the
    sources); returns the entries and seal per bucket written."""
    own = bucket_files or {}
    sealed = seals or {}
    tasks = [
        RangeTask(
            storage,
            tuple(sources) + tuple(p for b, p in sorted(own.items()) if lo <= b < hi),
            lo,
            hi,
            folder,
            target.columns,
            schema,
            live,
            tuple(sorted((partial or {}).items())),
            tuple((p, sealed[p]) for b, p in sorted(own.items()) if lo <= b < hi and p in sealed),
        )
        for lo, hi in ranges(target.buckets, rows, RANGE_ROWS)
    ]
    written: Written = {}
    for part in map_fn(range_task, tasks):
        written.update(part)
    return written


def entries_task(task: SpillTask) -> pa.Table | str:
    """One data file's entries in memory, unsorted (:func:`spill_task`'s answer for a
    small build); the data file's path when it no longer exists."""
    try:
        with reading(task.path), task.storage.fs.open_input_file(task.storage.path(task.path)) as f:
            pf = pq.ParquetFile(f, **PARQUET_READ)  # page CRCs: never hash a flipped key
            rows = pf.read(columns=[c for c in (*task.target.columns, OP) if c in pf.schema_arrow.names])
        return record_entries(rows, task.path, task.target.columns, task.schema, task.target.buckets, sort=False)
    except FileNotFoundError:
        return task.path
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise IndexBuildError(f"index {task.target.name!r}: entries of {task.path} cannot be computed: {e}") from e


def write_in_memory(
    storage: Storage,
    files: Sequence[tuple[str, int]],
    target: IndexTarget,
    schema: pa.Schema,
    folder: str,
    map_fn: MapFn,
) -> tuple[Written, Spilled]:
    """Both steps at once for a small table (up to :data:`IN_MEMORY_BYTES` of data
    files): every file's entries in memory, sorted by bucket and hash, one file per
    bucket. A table that just outgrew ``index.record-index.auto-rows`` (500k keys)
    builds in 0.14 s (median of 15), where writing and reading a spill took 0.22-0.31 s."""
    tasks = [SpillTask(target, storage, schema, path, "") for path, _ in files]
    results = map_fn(entries_task, tasks)
    parts = [r for r in results if not isinstance(r, str)]
    rows = pa.concat_tables(parts) if parts else entry_schema(schema, target.columns).empty_table()
    buckets, hashes = rows.column(BUCKET).to_numpy(), rows.column(HASH).to_numpy()

    def write_half(rows_of_half: np.ndarray) -> Written:
        order = rows_of_half[bucket_hash_order(buckets[rows_of_half], hashes[rows_of_half])]
        return range_task_rows(storage, folder, rows.take(pa.array(order)))

    # The lower and the upper half of the buckets on two threads: numpy's sort, Arrow's
    # gather and the file writes release the GIL (500k keys: 0.19 -> 0.14 s in all).
    lower = buckets < target.buckets // 2
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = {
            b: n
            for half in pool.map(write_half, (np.flatnonzero(lower), np.flatnonzero(~lower)))
            for b, n in half.items()
        }
    # This process's next lookups then read none of the bucket files (keyed by the
    # generation's folder, as :meth:`.lookup.RecordIndexReader.entries` asks).
    if rows.num_rows <= DELTA_HASHES.max_entries // 4:
        DELTA_HASHES.keep(storage.path(folder), lambda: hashes)
    return counts, Spilled("", (), rows.num_rows, tuple(r for r in results if isinstance(r, str)))


def remove_spill(storage: Storage, spilled: Spilled) -> None:
    storage.delete_dir(storage.path(spilled.folder))
