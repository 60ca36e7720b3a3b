"""The write path: plan, write, commit, and replay on conflict.

Each public write is a loop of attempts. An attempt reads the snapshot, plans against
it (tagging, small files, key checks: typed errors surface here, before anything is
written), begins an instant, runs the plan's per-group tasks through the engine, and
completes with the conflict rules. On a conflict the attempt is rolled back and the
whole operation replayed from a fresh snapshot, up to ``commit.max-retries`` times.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol

import pyarrow as pa

from ..indexes.entries import IndexJob, Precomputed, index_job
from ..indexes.on_commit import after_commit, unhandled_indexes, write_commit_updates
from ..indexes.states import written_indexes
from ..timeline import faults
from ..timeline.commit_metadata import CommitMetadata
from ..timeline.conflicts import KeyCheck
from ..timeline.errors import (
    CommitConflictError,
    CommitOutcomeUnknownError,
    ConcurrentCommitError,
    IndexesBehindError,
    LakelineError,
    SnapshotExpiredError,
)
from ..timeline.file_group import data_file_name, new_file_group_id
from ..timeline.fs_view import FileSystemView
from ..timeline.instant import Action, Instant
from ..timeline.timeline import Timeline
from .commit import Commit
from .files import FileWrite, Written
from .group_tasks import (
    LogTask,
    RewriteTask,
    WriteSettings,
    is_unchanged,
    rel_path,
    write_task,
)
from .key_check import KeyClaims
from .key_check import key_check as check_keys_at_completion
from .plan import WritePlan
from .rollback import rollback_pending_writes

if TYPE_CHECKING:
    from .table import Table

Planner = Callable[[Timeline, FileSystemView], WritePlan]

_log = logging.getLogger(__name__)

#: Completion attempts that may each find a newly created index (then write its entries).
_INDEX_ROUNDS = 20


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the completed instant (None when there was nothing to write),
    counts (inserted, updated, deleted, files_added, bytes_written, ...), and seconds
    per phase of the attempt that landed (``plan_s`` with ``tag_s`` inside it,
    ``write_s``, ``index_s``, ``commit_s``, ``upkeep_s`` of the metadata table after
    the commit, and ``total_s`` over every attempt)."""

    instant: Instant | None
    stats: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


def run_write(table: "Table", operation: str, action: Action, planner: Planner,
              before_commit: Callable[[], None] | None = None) -> WriteResult:
    """Plan and commit one write, replaying it on conflicts.

    ``before_commit`` (a schema change the rows need) runs once, after the first plan
    succeeded and before anything else is written.

    Raises:
        CommitConflictError: conflicts persisted through ``commit.max-retries`` replays.
        Whatever planning raises (typed input errors), before anything is written.
    """
    props = table.config.props
    retries = props.commit_max_retries
    last: LakelineError | None = None
    started = time.perf_counter()
    for _ in range(retries + 1):
        snapshot = table.log.refresh()
        if props.write_concurrency_mode == "single-writer":
            rollback_pending_writes(table.log, table.storage, snapshot)
            snapshot = table.log.refresh()
        view = table.view(snapshot)
        t0 = time.perf_counter()
        try:
            plan = planner(snapshot, view)
        except SnapshotExpiredError as e:
            # A clean removed files of the snapshot while we planned on it (it had left
            # retention): plan again on a fresh one, as after a conflict.
            last = e
            continue
        timings = {"plan_s": time.perf_counter() - t0, "tag_s": plan.timings.get("tag_s", 0.0)}
        if plan.empty:
            timings["total_s"] = time.perf_counter() - started
            return WriteResult(None, dict(plan.stats), timings)
        if before_commit is not None:
            before_commit()
            before_commit = None
        commit = Commit(table, action, operation, snapshot)
        commit.begin()
        try:
            t0 = time.perf_counter()
            metadata, entries = _execute(table, commit.instant_id, plan, snapshot.last_seq)
            t1 = time.perf_counter()
            # Entries for every index building or ready now, behind this instant's markers
            # (the write tasks computed those of the indexes they knew of).
            handled = write_commit_updates(table.storage, table.log.refresh(), commit.instant_id, metadata,
                                           table.config.schema, table.config.record_key, map_fn=table.engine.map,
                                           precomputed=entries)
            t2 = time.perf_counter()
            key_check = check_keys_at_completion(table.storage, table.config.schema,
                                                 KeyClaims.of(plan, table.config.record_key))
            inst = complete_with_indexes(table, commit, metadata, key_check, handled)
            done = time.perf_counter()
            after_committed(f"metadata-table upkeep after instant {inst.id}",
                            lambda: after_commit(table.storage, table.log.timeline, table.view, props))
            end = time.perf_counter()
            timings.update(write_s=t1 - t0, index_s=t2 - t1, commit_s=done - t2, upkeep_s=end - done,
                           total_s=end - started)
            return WriteResult(inst, dict(metadata.stats), timings)
        except (ConcurrentCommitError, SnapshotExpiredError) as e:
            # SnapshotExpiredError: a file the plan rewrites was cleaned meanwhile, so a
            # concurrent commit replaced it: a conflict, replayed like one.
            commit.abort(str(e))
            last = e
        except CommitOutcomeUnknownError:
            raise  # never delete files while the outcome is unknown
        except BaseException as e:
            commit.abort(f"write failed: {e!r}")
            raise
    raise CommitConflictError(f"{operation} gave up after {retries} retries: {last}")


class Completion(Protocol):
    """An instant about to complete: a write's :class:`~.commit.Commit`, or a table
    service that writes data files (compaction) with its own completion check."""

    instant_id: int

    def complete(self, metadata: CommitMetadata, key_check: KeyCheck | None = None,
                 also_check: Callable[[Timeline], None] | None = None) -> Instant: ...


def complete_with_indexes(table: "Table", commit: Completion, metadata: CommitMetadata,
                          key_check: KeyCheck | None, handled: list[tuple[str, int, str | None]]) -> Instant:
    """Complete, first writing entries for every index that is building or ready in the
    timeline the completion lands on.

    The index states are read from the table's timeline at completion, never from the
    writer's configuration: an index whose ``indexing`` instant was requested after this
    writer last looked gets its entries before the ``completed`` event, so the indexer
    never has to wait for writers that were inflight when it scheduled.
    """
    written = list(handled)
    done = {(name, created) for name, created, _ in written}

    def indexes_current(tl: Timeline) -> None:
        if unhandled_indexes(tl, done):
            raise IndexesBehindError("an index started building")

    cfg = table.config
    for _ in range(_INDEX_ROUNDS):
        try:
            inst = commit.complete(metadata, key_check, also_check=indexes_current)
        except IndexesBehindError:
            more = write_commit_updates(table.storage, table.log.refresh(), commit.instant_id, metadata,
                                        cfg.schema, cfg.record_key, skip=done, map_fn=table.engine.map)
            written.extend(more)
            done.update((name, created) for name, created, _ in more)
            continue
        after_committed(f"dropping stale index entries of instant {inst.id}",
                        lambda: _drop_stale_updates(table, written))
        return inst
    raise CommitConflictError(f"instant {commit.instant_id}: indexes kept being created while it completed")


def after_committed(what: str, step: Callable[[], None]) -> None:
    """Run a clean-up step that follows a ``completed`` event: it never fails the write,
    which has landed (a caller told otherwise would retry it and write the rows twice).
    What it leaves behind is redone later (the next commit's upkeep, the cleaner)."""
    try:
        faults.point("commit.cleanup")
        step()
    except Exception as e:  # noqa: BLE001 - anything here is after the commit point
        _log.warning("%s failed after the commit landed (left for later): %r", what, e)


def _drop_stale_updates(table: "Table", written: list[tuple[str, int, str | None]]) -> None:
    """Remove this commit's entries for indexes dropped while it completed: the drop may
    have removed the index's files before these were written, and nobody else would."""
    live = {(d.name, d.instant) for d in written_indexes(table.log.timeline)}
    for name, created, rel in written:
        if rel is not None and (name, created) not in live:
            table.storage.delete(table.storage.path(rel))


def settings(table: "Table", instant: int, indexes: IndexJob | None = None) -> WriteSettings:
    cfg = table.config
    props = cfg.props
    return WriteSettings(
        storage=table.storage,
        instant=instant,
        schema=cfg.schema,
        key=cfg.record_key,
        ordering=cfg.ordering_field,
        compression=props.write_parquet_compression,
        row_group_rows=props.write_row_group_rows,
        indexes=indexes,
    )


def _execute(table: "Table", instant: int, plan: WritePlan,
             snapshot_seq: int) -> tuple[CommitMetadata, Precomputed]:
    """Write the plan's files through the engine; returns the commit metadata and the
    index entries the tasks computed from the rows they wrote, by file path."""
    cfg = table.config
    st = settings(table, instant, index_job(table.log.timeline, cfg.schema, cfg.record_key))
    target = table.config.props.write_target_file_size_bytes
    file_tasks: list[FileWrite] = []
    for nf in plan.new_files:
        per_row = _bytes_per_row(table, nf.partition, nf.rows)
        rows_per_file = max(1, int(target // max(per_row, 1e-9)))
        for start in range(0, nf.rows.num_rows, rows_per_file):
            chunk = nf.rows.slice(start, rows_per_file).cast(st.schema)
            fg = new_file_group_id()
            file_tasks.append(
                FileWrite(st.storage, instant, rel_path(nf.partition, data_file_name(fg, instant, "base")),
                          nf.partition, fg, "base", chunk, st.key, st.compression, st.row_group_rows, nf.inserts,
                          indexes=st.indexes)
            )
    rewrites = [RewriteTask(st, r.slice, r.incoming, r.predicate, r.inserts, r.new_keys_only) for r in plan.rewrites]
    logs = [LogTask(st, lg.partition, lg.slice.file_group, lg.incoming) for lg in plan.logs]
    # One engine call for every file; rewrites first, as they are the longest tasks.
    results = table.engine.map(write_task, [*rewrites, *file_tasks, *logs])
    rw_results, new_results = results[:len(rewrites)], results[len(rewrites):len(rewrites) + len(file_tasks)]
    written: list[Written] = [w for w in new_results if w is not None]
    replaced = {p: list(g) for p, g in plan.replaced.items()}
    rewritten: list[tuple[str, str]] = []
    for r, res in zip(plan.rewrites, rw_results):
        if is_unchanged(res):
            continue
        rewritten.append((r.partition, r.slice.file_group))
        if res is None:
            replaced.setdefault(r.partition, []).append(r.slice.file_group)
        else:
            written.append(res)
    written.extend(w for w in results[len(rewrites) + len(file_tasks):] if w is not None)
    stats = [w.stat for w in written]
    counts = dict(plan.stats)
    counts["files_added"] = len(stats)
    counts["bytes_written"] = sum(s.bytes for s in stats)
    counts["file_groups_replaced"] = sum(len(v) for v in replaced.values())
    return CommitMetadata(
        operation=plan.operation,
        snapshot_seq=snapshot_seq,
        files=tuple(stats),
        replaced={p: tuple(g) for p, g in replaced.items()},
        rewritten=tuple(rewritten),
        replaced_partitions=tuple(plan.replaced_partitions),
        stats=counts,
    ), {w.stat.path: w.entries for w in written}


def _bytes_per_row(table: "Table", partition: str, rows: pa.Table) -> float:
    """On-disk bytes per row: from the partition's base files, else a guess from Arrow."""
    view = table.view(table.log.timeline)
    files = [s.base for s in view.latest_slices(partition) if s.base is not None and s.base.rows]
    if files:
        return sum(f.bytes for f in files) / sum(f.rows for f in files)
    return max(rows.nbytes / max(rows.num_rows, 1) * 0.4, 1.0)
