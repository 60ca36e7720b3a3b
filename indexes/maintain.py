"""Keeping indexes up to date: entries of a file, a commit's updates, a build, validate.

Everything an index holds is a pure function of a base file's content and the
index's definition (kind, columns, options), computed by :func:`file_entries`. So a
writer's updates, a bulk build and ``validate`` all call the same function, and
``validate`` is simply "recompute and compare".

Every data file is indexed, base and log alike. A slice's live rows are a subset of
its base rows and the upsert records of its logs (an upsert carries the whole row, a
delete only removes), so a reader may skip a merge-on-read slice when the entries of
its base and of every log rule the filter out; a file without entries keeps its slice.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..timeline import faults
from ..timeline.commit_metadata import CommitMetadata
from ..timeline.errors import IndexBuildError, InvalidIndexError
from ..timeline.file_group import DataFile
from ..timeline.fs_view import FileSystemView
from ..timeline.storage import Storage
from ..timeline.timeline import Timeline
from .bloom import BLOOM_SCHEMA, DEFAULT_FPP, FileBloom
from .column_stats import STATS_SCHEMA, file_stats
from .hashing import ColumnHashes
from .lifecycle import IndexDef, partition_of, written_indexes
from .metadata_table import INSTANT, MetadataTable


@dataclass(frozen=True)
class IndexTarget:
    """What an index covers, resolved against the table's schema and key."""

    name: str
    kind: str
    columns: tuple[str, ...]
    fpp: float
    #: The metadata-table partition of the definition (``<name>@<created>``).
    partition: str = ""


def resolve(idx: IndexDef, schema: pa.Schema, record_key: Sequence[str]) -> IndexTarget:
    """The columns an index covers: its own, or the default of its kind.

    Raises:
        InvalidIndexError: a column is not in the schema, or a bloom filter has no
            columns on a table without a record key.
    """
    cols = tuple(idx.columns)
    if not cols:
        cols = tuple(record_key) if idx.kind == "bloom_filters" else tuple(schema.names)
    if not cols:
        raise InvalidIndexError(f"index {idx.name!r}: a bloom filter on an append-only table needs columns")
    missing = [c for c in cols if c not in schema.names]
    if missing:
        raise InvalidIndexError(f"index {idx.name!r}: unknown columns {missing}")
    return IndexTarget(idx.name, idx.kind, cols, float(idx.options.get("fpp", DEFAULT_FPP)),
                       partition_of(idx.name, idx.instant))


def read_base(storage: Storage, rel_path: str, columns: Sequence[str]) -> pa.Table:
    """The indexed columns of one data file (columns it predates are left out)."""
    path = storage.path(rel_path)
    with storage.fs.open_input_file(path) as f:
        pf = pq.ParquetFile(f)
        present = [c for c in columns if c in pf.schema_arrow.names]
        return pf.read(columns=present)


def files_entries(targets: Sequence[IndexTarget], storage: Storage, schema: pa.Schema, rel_path: str,
                  partition: str) -> list[pa.Table]:
    """The entries of one data file (base or log) for each of ``targets``, from one read
    of the file, hashing each column once for all of them."""
    columns = list(dict.fromkeys(c for t in targets for c in t.columns))
    return rows_entries(targets, read_base(storage, rel_path, columns), schema, rel_path, partition)


def rows_entries(targets: Sequence[IndexTarget], rows: pa.Table, schema: pa.Schema, rel_path: str,
                 partition: str, hashes: ColumnHashes | None = None) -> list[pa.Table]:
    """The entries of the data file ``rel_path`` whose content is ``rows`` (all of it, or
    at least the columns of ``targets`` it has), for each of ``targets``; ``hashes`` of
    ``rows`` may be shared with the caller."""
    hashes = hashes if hashes is not None else ColumnHashes(rows)
    out: dict[int, pa.Table] = {}
    # Bloom filters first: they need a column's hashes in memory, which its NDV sketch
    # then reuses (alone, a sketch hashes in one pass without keeping them).
    order = sorted(range(len(targets)), key=lambda i: targets[i].kind == "column_stats")
    for i in order:
        target = targets[i]
        if target.kind == "column_stats":
            out[i] = file_stats(rel_path, partition, rows, target.columns, hashes=hashes)
        elif any(c not in rows.column_names for c in target.columns):
            out[i] = BLOOM_SCHEMA.empty_table()  # the file predates a bloomed column: no entry
        else:
            fb = FileBloom.build(rows, target.columns, target.fpp, schema, hashes)
            out[i] = pa.Table.from_pylist([fb.to_row(rel_path, partition)], schema=BLOOM_SCHEMA)
    return [out[i] for i in range(len(targets))]


def file_entries(target: IndexTarget, storage: Storage, schema: pa.Schema, rel_path: str,
                 partition: str) -> pa.Table:
    """The entries of one data file (base or log) for one index."""
    return files_entries([target], storage, schema, rel_path, partition)[0]


def _schema_of(kind: str) -> pa.Schema:
    return STATS_SCHEMA if kind == "column_stats" else BLOOM_SCHEMA


#: ``map(fn, items)``: how a batch of per-file entry computations runs. The table's
#: engine fits (its ``map``); the default runs them here, one after the other.
MapFn = Callable[[Callable[[Any], Any], Sequence[Any]], list[Any]]


def serial_map(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    return [fn(x) for x in items]


@dataclass(frozen=True)
class EntriesTask:
    """Compute the entries of one data file for some indexes (a picklable engine task)."""

    targets: tuple[IndexTarget, ...]
    storage: Storage
    schema: pa.Schema
    path: str
    partition: str


@dataclass(frozen=True)
class IndexJob:
    """The indexes a write task computes entries for from the rows it just wrote, so
    the writer need not read its files back (:func:`write_commit_updates` takes them)."""

    targets: tuple[IndexTarget, ...]
    schema: pa.Schema

    def entries(self, rows: pa.Table, rel_path: str, partition: str,
                hashes: ColumnHashes | None = None) -> dict[IndexTarget, pa.Table]:
        return dict(zip(self.targets, rows_entries(self.targets, rows, self.schema, rel_path, partition, hashes)))


def index_job(timeline: Timeline, schema: pa.Schema, record_key: Sequence[str]) -> IndexJob | None:
    """The job of every index building or ready in ``timeline`` that resolves (None when
    there is none)."""
    targets = []
    for idx in written_indexes(timeline):
        try:
            targets.append(resolve(idx, schema, record_key))
        except InvalidIndexError:
            continue
    return IndexJob(tuple(dict.fromkeys(targets)), schema) if targets else None


#: Entries a write task computed, by data file path and index target.
Precomputed = Mapping[str, Mapping[IndexTarget, pa.Table]]


def entries_task(task: EntriesTask) -> list[pa.Table]:
    return files_entries(task.targets, task.storage, task.schema, task.path, task.partition)


def entries_for(target: IndexTarget, storage: Storage, schema: pa.Schema,
                files: Iterable[tuple[str, str]], map_fn: MapFn = serial_map) -> pa.Table:
    """Entries of many (path, partition) data files, concatenated."""
    parts = map_fn(entries_task, [EntriesTask((target,), storage, schema, p, part) for p, part in files])
    return pa.concat_tables([p[0] for p in parts]) if parts else _schema_of(target.kind).empty_table()


def write_commit_updates(storage: Storage, timeline: Timeline, instant: int, metadata: CommitMetadata,
                         schema: pa.Schema, record_key: Sequence[str],
                         skip: Collection[tuple[str, int]] = (),
                         map_fn: MapFn = serial_map,
                         precomputed: Precomputed | None = None) -> list[tuple[str, int, str | None]]:
    """Write, behind ``instant``'s markers, the entries of the data files it added for
    every index that is building or ready in ``timeline`` (read right before the
    completion) and not in ``skip``; entries in ``precomputed`` (computed by the write
    tasks from the rows they wrote) are taken as they are, the others are computed
    from the files. Returns ``(name, create instant, delta path or
    None)`` of every index handled, so the writer can tell at completion whether one
    appeared since, and remove its delta of one that was dropped meanwhile.

    An index whose columns no longer resolve (a dropped column) is handled by writing
    nothing: its builder, not the writer, owns that problem, and a writer must never
    fail for it.
    """
    done: list[tuple[str, int, str | None]] = []
    targets: list[tuple[IndexDef, IndexTarget]] = []
    for idx in written_indexes(timeline):
        if (idx.name, idx.instant) in skip:
            continue
        try:
            targets.append((idx, resolve(idx, schema, record_key)))
        except InvalidIndexError:
            done.append((idx.name, idx.instant, None))
    # One task per file for every index its write task did not cover (one read, each
    # column hashed once), and the files in parallel through the engine.
    have = precomputed or {}
    todo = [(f, tuple(dict.fromkeys(t for _, t in targets if t not in have.get(f.path, {}))))
            for f in metadata.files]
    todo = [(f, ts) for f, ts in todo if ts]
    computed = map_fn(entries_task, [EntriesTask(ts, storage, schema, f.path, f.partition) for f, ts in todo])
    per_file: dict[str, dict[IndexTarget, pa.Table]] = {f.path: dict(have.get(f.path, {})) for f in metadata.files}
    for (f, ts), entries in zip(todo, computed):
        per_file[f.path].update(zip(ts, entries))
    mt = MetadataTable(storage)
    for idx, target in targets:
        parts = [per_file[f.path][target] for f in metadata.files]
        rows = pa.concat_tables(parts) if parts else _schema_of(target.kind).empty_table()
        done.append((idx.name, idx.instant, mt.write_updates(idx.partition, instant, rows)))
    return done


def unhandled_indexes(timeline: Timeline, handled: Collection[tuple[str, int]]) -> list[IndexDef]:
    """Indexes building or ready in ``timeline`` that a writer has not written entries
    for: a writer checks this against the timeline it completes on, so an index
    created after the writer read the index states still gets its entries."""
    return [d for d in written_indexes(timeline) if (d.name, d.instant) not in handled]


def live_files(view: FileSystemView) -> list[tuple[DataFile, str]]:
    """Every live data file of a view (bases and logs of the latest slices), with its
    partition: what an index holds entries for."""
    return [(f, s.partition) for s in view.latest_slices() for f in s.files]


@dataclass(frozen=True)
class BuildTask:
    """The entries of one live data file for a build, tagged with the instant that wrote
    it (a picklable engine task)."""

    entries: EntriesTask
    instant: int


def build_task(task: BuildTask) -> pa.Table:
    rows = entries_task(task.entries)[0]
    return rows.append_column(INSTANT, pa.array([task.instant] * rows.num_rows, pa.int64()))


def try_build_task(task: BuildTask) -> pa.Table | str:
    """:func:`build_task`, or the file's path when it no longer exists (replaced after
    the build's base and cleaned since): the caller decides whether that is sound
    (:func:`gone_but_live`)."""
    try:
        return build_task(task)
    except FileNotFoundError:
        return task.entries.path


def gone_but_live(gone: Collection[str], newest: Timeline) -> list[str]:
    """Of the data files a build or catch-up found missing, those still live in the
    ``newest`` timeline (their entries cannot be left out). A file that is no longer live
    needs no entry: readers and ``validate`` only ever ask about live files, and a file
    never becomes live again."""
    if not gone:
        return []
    live = {f.path for f, _ in live_files(FileSystemView(newest))}
    return sorted(p for p in gone if p in live)


def build_tasks(storage: Storage, view: FileSystemView, target: IndexTarget, schema: pa.Schema) -> list[BuildTask]:
    """One :class:`BuildTask` per live data file of ``view``, largest file first: an
    engine's workers then finish together (a large base left for last would keep one
    worker busy while the others idle)."""
    files = sorted(live_files(view), key=lambda fp: -fp[0].bytes)
    return [BuildTask(EntriesTask((target,), storage, schema, f.path, partition), f.instant)
            for f, partition in files]


def built(target: IndexTarget, parts: Sequence[pa.Table]) -> pa.Table:
    """The results of a build's tasks as one table (an empty one for no files)."""
    if not parts:
        return _schema_of(target.kind).empty_table().append_column(INSTANT, pa.array([], pa.int64()))
    return pa.concat_tables(parts)


def build(storage: Storage, view: FileSystemView, target: IndexTarget, schema: pa.Schema) -> pa.Table:
    """Entries of every live data file of a snapshot, with ``_instant`` per entry."""
    return built(target, [build_task(t) for t in build_tasks(storage, view, target, schema)])


#: Times a catch-up re-reads the timeline because a file it indexes was deleted under it.
_CATCH_UP_ROUNDS = 5


def _live_entries(target: IndexTarget, storage: Storage, schema: pa.Schema, files: list[tuple[str, str]],
                  refresh: Callable[[], Timeline] | None) -> pa.Table:
    """Entries of ``files`` (path, partition), leaving out files that are no longer live.

    A concurrent instant's file can be deleted while it is being indexed: replaced by
    a compaction, clustering or overwrite and then removed by a clean. A file that is not
    live in the newest snapshot needs no entry (readers and ``validate`` only ask about
    live files), so on a missing file the timeline is read again and only the files
    still live are indexed.

    Raises:
        IndexBuildError: a file that is still live cannot be read (or the files kept
            vanishing): the build gives up cleanly instead of leaving an entry out.
    """
    todo = list(files)
    for _ in range(_CATCH_UP_ROUNDS):
        try:
            return entries_for(target, storage, schema, todo)
        except FileNotFoundError as e:
            if refresh is None:
                raise IndexBuildError(f"index {target.name!r}: a data file vanished while indexed: {e}") from e
            live = set(gone_but_live([p for p, _ in todo], refresh()))
            still = [(p, part) for p, part in todo if p in live]
            if len(still) == len(todo):
                raise IndexBuildError(f"index {target.name!r}: a live data file cannot be read: {e}") from e
            todo = still
    raise IndexBuildError(f"index {target.name!r}: data files kept vanishing while indexed")


def catch_up(storage: Storage, timeline: Timeline, after_seq: int, target: IndexTarget,
             schema: pa.Schema, refresh: Callable[[], Timeline] | None = None) -> int:
    """Index the data files of data instants completed after ``after_seq`` that did not
    write entries themselves (they completed before they saw the index building).
    Returns how many instants were indexed.

    ``refresh`` reads the newest timeline: a file deleted meanwhile (replaced, then
    cleaned) is left out once it is no longer live (:func:`_live_entries`).

    Raises:
        IndexBuildError: a live file cannot be read.
    """
    mt = MetadataTable(storage)
    n = 0
    for inst in timeline.completed_after(after_seq):
        if not inst.action_kind.writes_data or mt.has_updates(target.partition, inst.id):
            continue
        md = CommitMetadata.from_dict(inst.metadata)
        added = [(f.path, f.partition) for f in md.files]
        faults.point("indexing.catch_up_instant")
        rows = _live_entries(target, storage, schema, added, refresh)
        mt.write_updates(target.partition, inst.id, rows, marker=False)
        n += 1
    return n


def missing_updates(storage: Storage, timeline: Timeline, after_seq: int, partition: str) -> list[int]:
    """Data instants completed after ``after_seq`` with data files but no entries in
    the index partition ``partition``."""
    mt = MetadataTable(storage)
    out = []
    for inst in timeline.completed_after(after_seq):
        if not inst.action_kind.writes_data or mt.has_updates(partition, inst.id):
            continue
        if inst.metadata.get("files"):
            out.append(inst.id)
    return out


def _comparable(kind: str, row: dict[str, Any]) -> dict[str, Any]:
    # Every stored field must equal its recomputation: bloom filters and HLL sketches
    # are deterministic functions of the values (no random seeds), so byte-identical.
    return {k: v for k, v in row.items() if k != INSTANT}


def validate(storage: Storage, view: FileSystemView, snapshot: Timeline, target: IndexTarget,
             schema: pa.Schema) -> tuple[int, list[dict[str, Any]]]:
    """Recompute ``target`` from the live data files and compare with the metadata table.

    Returns (files checked, mismatches); a mismatch names the index, the file, and
    what differs (``missing`` entry, or the entry ``stored`` vs ``expected``).
    """
    stored = MetadataTable(storage).read(target.partition, snapshot)
    key_cols = ["path", "column"] if target.kind == "column_stats" else ["path"]
    have: dict[tuple[Any, ...], dict[str, Any]] = {}
    if stored is not None:
        for r in stored.to_pylist():
            have[tuple(r[c] for c in key_cols)] = _comparable(target.kind, r)
    mismatches: list[dict[str, Any]] = []
    checked = 0
    for f, partition in live_files(view):
        checked += 1
        expected = file_entries(target, storage, schema, f.path, partition).to_pylist()
        for e in expected:
            k = tuple(e[c] for c in key_cols)
            got = have.get(k)
            if got is None:
                mismatches.append({"index": target.name, "path": f.path, "key": list(k), "problem": "missing"})
            elif got != _comparable(target.kind, e):
                diff = sorted(c for c in e if got.get(c) != e[c])
                mismatches.append({"index": target.name, "path": f.path, "key": list(k),
                                   "problem": "differs", "fields": diff})
    return checked, mismatches
