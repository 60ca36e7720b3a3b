"""Building an index in bulk, catching it up with commits, and validating it.

The async indexer (:mod:`lakeline.services.indexing.indexer`) builds an index from the live
files of a snapshot (:func:`build`, one engine task per file), then catches up with the
commits that completed meanwhile and did not write entries for it (:func:`catch_up`).
``validate`` recomputes the entries of every live file with the same function a writer
uses (:func:`~.entries.entries_task`, one engine task per file) and compares them with what the metadata table holds.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..timeline.commit_metadata import CommitMetadata, file_paths
from ..timeline.diagnostics import faults
from ..timeline.errors import IndexBuildError, SnapshotExpiredError
from ..timeline.storage.data_reads import DAMAGED, unreadable
from ..timeline.storage.filesystem import Storage
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import DataFile
from ..timeline.view.fs_view import FileSystemView
from .entries import EntriesTask, IndexTarget, MapFn, entries_for, entries_schema, entries_task, serial_map, write_delta
from .metadata_table import INSTANT, MetadataTable
from .states import IndexKind


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
    (:func:`gone_but_live`).

    Raises:
        IndexBuildError: Arrow cannot compute the file's entries (a value the index
            cannot represent): the build is rolled back with a typed error.
    """
    try:
        return build_task(task)
    except FileNotFoundError:
        return task.entries.path
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise IndexBuildError(
            f"index {task.entries.targets[0].name!r}: entries of {task.entries.path} cannot be computed: {e}"
        ) from e


def validate_task(task: BuildTask) -> pa.Table:
    """:func:`build_task` for :func:`validate`: a live file that cannot be read is a
    typed error naming it (a damaged file is not an index that disagrees).

    Raises:
        CorruptFileError: the file is damaged or unreadable.
        SnapshotExpiredError: the file is missing.
    """
    path = task.entries.path
    try:
        return build_task(task)
    except FileNotFoundError as e:
        raise SnapshotExpiredError(f"data file {path} of the snapshot being validated is missing") from e
    except DAMAGED as e:
        # The entries hash what they read: blame the file only when it does not read whole.
        damaged = unreadable(task.entries.storage, path)
        if damaged is None:
            raise
        raise damaged from e


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
    return [BuildTask(EntriesTask((target,), storage, schema, f.path, partition), f.instant) for f, partition in files]


def built(target: IndexTarget, parts: Sequence[pa.Table], schema: pa.Schema | None = None) -> pa.Table:
    """The results of a build's tasks as one table (an empty one for no files)."""
    if not parts:
        return (
            entries_schema(target.kind, schema, target.columns)
            .empty_table()
            .append_column(INSTANT, pa.array([], pa.int64()))
        )
    return pa.concat_tables(parts)


def build(storage: Storage, view: FileSystemView, target: IndexTarget, schema: pa.Schema) -> pa.Table:
    """Entries of every live data file of a snapshot, with ``_instant`` per entry."""
    return built(target, [build_task(t) for t in build_tasks(storage, view, target, schema)])


#: Times a catch-up re-reads the timeline because a file it indexes was deleted under it.
_CATCH_UP_ROUNDS = 5


def _live_entries(
    target: IndexTarget,
    storage: Storage,
    schema: pa.Schema,
    files: list[tuple[str, str]],
    refresh: Callable[[], Timeline] | None,
) -> pa.Table:
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


def catch_up(
    storage: Storage,
    timeline: Timeline,
    after_seq: int,
    target: IndexTarget,
    schema: pa.Schema,
    refresh: Callable[[], Timeline] | None = None,
) -> int:
    """Index the data files of data instants completed after ``after_seq`` that did not
    write entries themselves (they completed before they saw the index building).
    Returns how many instants were indexed.

    ``refresh`` reads the newest timeline: a file deleted meanwhile (replaced, then
    cleaned) is left out once it is no longer live (:func:`_live_entries`).

    Raises:
        IndexBuildError: a live file cannot be read.
    """
    mt = MetadataTable(storage)
    # One listing for all: every instant completed in ``timeline`` wrote its entries
    # before it completed, so they are all listed now. A listing per instant cost a
    # build beside two busy writers a listing of hundreds of deltas for each of hundreds
    # of instants, every round, and it fell behind them for good.
    written = mt.deltas(target.partition)
    n = 0
    for inst in timeline.completed_after(after_seq):
        if not inst.action.writes_data or inst.id in written:
            continue
        md = CommitMetadata.from_dict(inst.metadata)
        added = [(f.path, f.partition) for f in md.files]
        faults.point("indexing.catch_up_instant")
        rows = _live_entries(target, storage, schema, added, refresh)
        write_delta(storage, target, inst.id, rows, marker=False)
        n += 1
    return n


def missing_updates(storage: Storage, timeline: Timeline, after_seq: int, partition: str) -> list[int]:
    """Data instants completed after ``after_seq`` with data files but no entries in
    the index partition ``partition``."""
    written = MetadataTable(storage).deltas(partition)  # one listing (:func:`catch_up`)
    out = []
    for inst in timeline.completed_after(after_seq):
        if not inst.action.writes_data or inst.id in written:
            continue
        if file_paths(inst.metadata):  # shape checked: a damaged record is CorruptEventError
            out.append(inst.id)
    return out


def _comparable(kind: str, row: dict[str, Any]) -> dict[str, Any]:
    # Every stored field must equal its recomputation: bloom filters and HLL sketches
    # are deterministic functions of the values (no random seeds), so byte-identical.
    return {k: v for k, v in row.items() if k != INSTANT}


def validate(
    storage: Storage,
    view: FileSystemView,
    snapshot: Timeline,
    target: IndexTarget,
    schema: pa.Schema,
    map_fn: MapFn = serial_map,
    untrusted: frozenset[str] = frozenset(),
) -> tuple[int, list[dict[str, Any]]]:
    """Recompute ``target`` from the live data files (one ``map_fn`` task per file: an
    engine's ``map``, serial by default) and compare with the metadata table.

    Column statistics under the names ``untrusted`` (the table's ``moved_names``) are
    not compared: entries are keyed by the name a column had when they were written
    (pruning asks them by the field id they record, or not at all without one:
    :func:`lakeline.indexes.column_stats.by_present_names`), and a name that a rename
    moved away and back finds, in a file written before, entries the build could not
    know under it (issue 29: a column renamed ``s`` -> ``label``, indexed, renamed
    back). An entry written before entries recorded field ids is compared without them.
    Entries name a column as the file holds it (:func:`.entries.in_rows`), so a bloom
    filter's or a column's entries of a file written before a rename compare as written.

    Returns (files checked, mismatches); a mismatch names the index, the file, and
    what differs (``missing`` entry, or the entry ``stored`` vs ``expected``).

    Raises:
        CorruptFileError, SnapshotExpiredError: a live data file is damaged / missing
            (:func:`validate_task`).
    """
    stored = MetadataTable(storage).read(target.partition, snapshot)
    key_cols = ["path", "column"] if target.kind == IndexKind.COLUMN_STATS else ["path"]
    have: dict[tuple[Any, ...], dict[str, Any]] = {}
    if stored is not None:
        for r in stored.to_pylist():
            have[tuple(r[c] for c in key_cols)] = _comparable(target.kind, r)
    mismatches: list[dict[str, Any]] = []
    tasks = build_tasks(storage, view, target, schema)
    results = map_fn(validate_task, tasks)
    for task, rows in zip(tasks, results):
        path = task.entries.path
        for e in rows.drop_columns([INSTANT]).to_pylist():
            if target.kind == IndexKind.COLUMN_STATS and e["column"] in untrusted:
                continue
            k = tuple(e[c] for c in key_cols)
            got = have.get(k)
            recorded = (
                ("field_id", "field_type") if target.kind == IndexKind.COLUMN_STATS else ("field_ids", "field_types")
            )
            if target.kind != IndexKind.RECORD_INDEX and got is not None and got.get(recorded[0]) is None:
                # Written before entries recorded field ids (2026-11-27): right as it is.
                got = {**got, **{c: e[c] for c in recorded}}
            if got is None:
                mismatches.append({"index": target.name, "path": path, "key": list(k), "problem": "missing"})
            elif got != _comparable(target.kind, e):
                diff = sorted(c for c in e if got.get(c) != e[c])
                mismatches.append(
                    {"index": target.name, "path": path, "key": list(k), "problem": "differs", "fields": diff}
                )
    return len(tasks), mismatches
