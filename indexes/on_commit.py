"""What a commit does to the indexes: entries for the files it wrote, and the upkeep after.

Before its ``completed`` event, every write (and every service that writes data files)
writes, behind its own markers, the entries of its new files for every index that is
building or ready in the timeline it completes on (:func:`write_commit_updates`); the
completion re-checks that no index appeared meanwhile (:func:`unhandled_indexes`).

After the commit landed, two chores keep reads of the metadata table cheap as a table
ages, and both ride on commits so no service has to be running for them
(:func:`after_commit_upkeep`): saving a checkpoint of the file-system view into the ``files``
index every ``metadata.files.checkpoint-commits`` data commits, and folding the deltas of
a ready index into a new base once it holds more than ``metadata.compact.max-deltas`` of
them (a record index's into a new generation, bucket by bucket: :func:`fold_record_index`).
The commit is already durable when this runs, so upkeep never raises: a failure is
logged and the next commit tries again. Building indexes are not folded: their builder
may still write catch-up deltas for instants completed before a fold (see
:meth:`MetadataTable.compact`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

import pyarrow as pa

from ..config import TableProperties
from ..timeline.commit_metadata import CommitMetadata
from ..timeline.diagnostics import faults
from ..timeline.errors import InvalidIndexError, LakelineError
from ..timeline.storage.filesystem import Storage
from ..timeline.table_config import TableConfig
from ..timeline.timeline import Timeline
from ..timeline.view.fs_view import FileSystemView
from .entries import (
    EntriesTask,
    IndexTarget,
    MapFn,
    Precomputed,
    entries_schema,
    entries_task,
    resolve,
    serial_map,
    write_delta,
)
from .files_index import checkpoint_due, write_checkpoint
from .metadata_table import MetadataTable
from .record_index import generation as record_generation
from .record_index.rows import PARTIAL_META, partial_of
from .record_index.store import folder_of, newest_generation
from .states import IndexDef, IndexKind, readable_indexes, written_indexes

log = logging.getLogger(__name__)


def after_commit_upkeep(
    storage: Storage,
    timeline: Timeline,
    view_of: Callable[[Timeline], FileSystemView],
    props: TableProperties,
    known_checkpoint: int = -1,
    rewrote_rows: int = 0,
) -> list[str]:
    """Checkpoint the view and fold index deltas where due; returns what was written.

    Args:
        storage: the table's storage.
        timeline: the timeline right after the commit (its view is what is saved).
        view_of: builds (or returns a cached) view of a snapshot.
        props: the table's properties.
        known_checkpoint: the newest checkpoint the caller knows of (its view's
            :attr:`~lakeline.timeline.view.fs_view.FileSystemView.known_checkpoint`),
            which spares listing the checkpoints when none can be due.
        rewrote_rows: rows a table service's commit rewrote (compaction, clustering):
            their record-index delta names every one of them again, and when that is
            a large share of the index (:func:`_fold_now`), it is folded now rather than
            after ``metadata.compact.max-deltas`` commits.
    """
    written: list[str] = []
    try:
        faults.point("metadata.upkeep")
        if checkpoint_due(storage, timeline, props.metadata_files_checkpoint_commits, known_checkpoint):
            written.append(write_checkpoint(storage, view_of(timeline)))
        mt = MetadataTable(storage)
        limit = props.metadata_compact_max_deltas
        for idx in readable_indexes(timeline):
            if mt.delta_count(idx.partition) <= limit and not _fold_now(storage, timeline, idx, rewrote_rows):
                continue
            if idx.kind == IndexKind.RECORD_INDEX:
                written.extend(fold_record_index(storage, timeline, view_of(timeline), idx))
            elif (rel := mt.compact(idx.partition, timeline)) is not None:
                written.append(rel)
    except (OSError, pa.ArrowException, LakelineError) as e:
        log.warning("metadata-table upkeep after event %s failed (the commit stands): %r", timeline.last_seq, e)
    return written


#: A service's rewrite smaller than this never folds a record index early: small deltas
#: cost lookups little, and a fold rewrites the whole index.
_FOLD_MIN_ROWS = 50_000


def _fold_now(storage: Storage, timeline: Timeline, idx: IndexDef, rewrote_rows: int) -> bool:
    """Whether a service's rewrite of ``rewrote_rows`` rows makes a record index's deltas
    worth folding at once: when it is at least half the generation's entries.

    Why: a compaction's delta names every row of the groups it rewrote, and with random
    keys a batch of upserts touches every group, so a compaction rewrites nearly the
    whole table. Every lookup then decodes each such delta whole (its keys are spread
    over all of it) on top of the generation: in a CDC stream with a compacting runner
    several piled up between two count-based folds (two full-size deltas at one look),
    and a 1,250-key lookup took 0.52 CPU-s against 0.20 right after a fold
    (docs/performance.md, "CDC ingest"). The fold runs in the service's process, off the
    write path."""
    if idx.kind != IndexKind.RECORD_INDEX or rewrote_rows < _FOLD_MIN_ROWS:
        return False
    config = TableConfig.from_timeline(timeline)
    if config is None:
        return False
    try:
        target = resolve(idx, config.schema, config.record_key)
    except InvalidIndexError:
        return False
    gen = newest_generation(storage, target.partition)
    return gen is not None and 2 * rewrote_rows >= gen.rows


def fold_record_index(
    storage: Storage, timeline: Timeline, view: FileSystemView, idx: IndexDef, map_fn: MapFn = serial_map
) -> list[str]:
    """Fold a record index's deltas into a new generation of the live files of ``view``
    (the snapshot ``timeline``), bucket range by bucket range; returns its folder, or
    nothing when there was nothing to fold or the index no longer resolves."""
    config = TableConfig.from_timeline(timeline)
    if config is None:
        return []
    try:
        target = resolve(idx, config.schema, config.record_key)
    except InvalidIndexError:
        return []
    gen = record_generation.fold(storage, timeline, [f.path for f in view.files()], target, config.schema, map_fn)
    return [] if gen is None else [folder_of(target.partition, gen.seq, gen.token)]


#: Schema metadata of a write task's record-index entries that it already wrote as the
#: commit's delta (:func:`write_beside`): the delta's path relative to the table.
WRITTEN_META = "lakeline.delta"


def write_beside(
    storage: Storage, instant: int, entries: Mapping[IndexTarget, pa.Table]
) -> dict[IndexTarget, pa.Table]:
    """Write the record-index entries of the only data file a commit writes as the
    commit's deltas, from the write task beside the file's own write; returns
    ``entries`` with each one written marked (:data:`WRITTEN_META`).

    Why: an insert's delta (a 500k-row file's: 22 MB, 25 ms) is then written on the
    other core while the data file is encoded, instead of after it on the commit's path,
    and an index costs an insert of sequential keys almost nothing. Only for a commit of
    one file, whose entries are the whole delta; a partial rewrite's (copy-on-write
    changes) are left to the commit. :func:`write_commit_updates` takes such a delta as
    written, or deletes it when its index is gone by then."""
    out = dict(entries)
    for target, rows in entries.items():
        if target.kind == IndexKind.RECORD_INDEX and partial_of(rows) is None:
            rel = write_delta(storage, target, instant, rows)
            out[target] = rows.replace_schema_metadata({WRITTEN_META: rel})
    return out


def written_delta(entries: pa.Table) -> str | None:
    """The delta :func:`write_beside` wrote ``entries`` as, if it did."""
    value = (entries.schema.metadata or {}).get(WRITTEN_META.encode())
    return value.decode() if value is not None else None


def write_commit_updates(
    storage: Storage,
    timeline: Timeline,
    instant: int,
    metadata: CommitMetadata,
    schema: pa.Schema,
    record_key: Sequence[str],
    skip: Collection[tuple[str, int]] = (),
    map_fn: MapFn = serial_map,
    precomputed: Precomputed | None = None,
) -> list[tuple[str, int, str | None]]:
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
    todo = [(f, tuple(dict.fromkeys(t for _, t in targets if t not in have.get(f.path, {})))) for f in metadata.files]
    todo = [(f, ts) for f, ts in todo if ts]
    computed = map_fn(entries_task, [EntriesTask(ts, storage, schema, f.path, f.partition) for f, ts in todo])
    per_file: dict[str, dict[IndexTarget, pa.Table]] = {f.path: dict(have.get(f.path, {})) for f in metadata.files}
    for (f, ts), entries in zip(todo, computed):
        per_file[f.path].update(zip(ts, entries))
    used = set()
    for idx, target in targets:
        parts = [per_file[f.path][target] for f in metadata.files]
        if len(parts) == 1 and (rel := written_delta(parts[0])) is not None:
            used.add(rel)
            done.append((idx.name, idx.instant, rel))  # written beside its file
            continue
        # A copy-on-write rewrite's record entries are its changes only, chained onto
        # the base it rewrote: the delta says which (rows.PARTIAL_META).
        partial = {f.path: p for f, part in zip(metadata.files, parts) if (p := partial_of(part)) is not None}
        parts = [p.replace_schema_metadata(None) for p in parts]  # a delta written beside too
        rows = pa.concat_tables(parts) if parts else entries_schema(target.kind, schema, target.columns).empty_table()
        if partial:
            rows = rows.replace_schema_metadata({PARTIAL_META: json.dumps(partial)})
        done.append((idx.name, idx.instant, write_delta(storage, target, instant, rows)))
    for entries in have.values():
        for rows in entries.values():
            if (rel := written_delta(rows)) is not None and rel not in used:
                storage.delete(storage.path(rel))  # its index was dropped or handled meanwhile
    return done


def unhandled_indexes(timeline: Timeline, handled: Collection[tuple[str, int]]) -> list[IndexDef]:
    """Indexes building or ready in ``timeline`` that a writer has not written entries
    for: a writer checks this against the timeline it completes on, so an index
    created after the writer read the index states still gets its entries."""
    return [d for d in written_indexes(timeline) if (d.name, d.instant) not in handled]
