"""The write path: plan, begin, write, validate, complete, and replay on conflict.

Each public write is a loop of attempts, and :func:`run_write` reads as one: an attempt
takes a fresh :class:`~.context.TableContext` (one snapshot), **plans** against it
(tagging, small files, key checks: typed errors surface here, before anything is
written), **begins** an instant, **writes** the plan's files through the engine
(:func:`write_files`) and their index entries, runs the hooks' **validators** on the
table before and after it (:mod:`.hooks`; a refusal rolls the attempt back), and
**completes** through the commit protocol (:mod:`.commit`) under its completion rule
(the conflict rules and the key check). On a conflict the attempt is rolled back and
the whole operation replayed from a fresh snapshot, up to ``commit.max-retries`` times.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

import pyarrow as pa

from ...indexes.entries import Precomputed, index_job
from ...timeline.commit_metadata import CommitMetadata
from ...timeline.conflicts import Conflict, ConflictKind
from ...timeline.errors import (
    AttemptConflictError,
    CommitConflictError,
    CommitOutcomeUnknownError,
    LakelineError,
    SnapshotExpiredError,
)
from ...timeline.instant import Action, Instant
from ...timeline.storage.staging_folders import Rules
from ...timeline.table_config import TableConfig
from ...timeline.timeline import Timeline
from ...timeline.txn import Txn, committed_version, landed
from ...timeline.view.file_group import FileKind, data_file_name, new_file_group_id
from ..context import TableContext
from ..files import FileWrite, Written
from ..hooks import Validator, run_validators, validation_context
from ..rollback import rollback_pending_writes
from .commit import Commit, CompletionRule, write_rule
from .group_tasks import LogTask, RewriteTask, WriteSettings, is_unchanged, rel_path, write_task
from .key_check import KeyClaims
from .key_check import key_check as check_keys_at_completion
from .plan import NewFiles, WritePlan


class Planned(Protocol):
    """What a planner returns and :func:`run_write` carries from plan to commit: a
    :class:`~.plan.WritePlan` for the local engine, the Spark writer's staged plan for
    DataFrames (``lakeline.spark``)."""

    @property
    def empty(self) -> bool: ...

    @property
    def stats(self) -> dict[str, int]: ...

    @property
    def timings(self) -> dict[str, float]: ...


P = TypeVar("P", bound=Planned)
#: Writes an attempt's files: the commit metadata and the index entries computed.
FileWriter = Callable[[TableContext, int, P], tuple[CommitMetadata, Precomputed]]
#: The completion rule of an attempt: the conflict rules and its key check.
RuleOf = Callable[[TableContext, int, P, CommitMetadata], CompletionRule]


@dataclass(frozen=True)
class WriteResult:
    """What a write did: the completed instant (None when there was nothing to write),
    counts (inserted, updated, deleted, files_added, bytes_written, ...), and seconds
    per phase of the attempt that landed (``plan_s`` with ``tag_s`` inside it,
    ``write_s``, ``index_s``, ``validate_s`` of the hooks' validators, ``commit_s``,
    ``upkeep_s`` of the metadata table after the commit, and ``total_s`` over every
    attempt), and ``hook_errors``: ``(hook name, error text)`` of every callback and
    inline service that failed after the commit landed (:mod:`.hooks`)."""

    instant: Instant | None
    stats: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    hook_errors: list[tuple[str, str]] = field(default_factory=list)


class PhaseTimer:
    """Seconds per phase of a write attempt, kept apart from the steps they time."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[f"{name}_s"] = self.seconds.get(f"{name}_s", 0.0) + time.perf_counter() - t0


def run_write(
    open_context: Callable[[], TableContext],
    operation: str,
    action: Action,
    planner: Callable[[TableContext], WritePlan],
    before_commit: Callable[[], TableConfig] | None = None,
    validators: Sequence[Validator] = (),
    txn: Txn | None = None,
) -> WriteResult:
    """Plan and commit one write on the table's engine, replaying it on conflicts
    (:func:`run_attempts` with :func:`write_files` and :func:`completion_rule`)."""
    return run_attempts(
        open_context, operation, action, planner, write_files, completion_rule, before_commit, validators, txn
    )


def run_attempts(
    open_context: Callable[[], TableContext],
    operation: str,
    action: Action,
    planner: Callable[[TableContext], P],
    write: FileWriter[P],
    rule: RuleOf[P],
    before_commit: Callable[[], TableConfig] | None = None,
    validators: Sequence[Validator] = (),
    txn: Txn | None = None,
) -> WriteResult:
    """Plan and commit one write, replaying it on conflicts.

    ``open_context`` reads the timeline and returns a context of its newest snapshot;
    ``write`` writes a plan's files and ``rule`` gives its completion rule (the Spark
    writer passes its own: executors write its files; it goes through the same attempts,
    commit protocol and replays). ``before_commit`` (a schema change the rows need) runs
    once, after the first plan succeeded and before anything else is written, and
    returns the new configuration. ``validators`` (the hooks', :mod:`.hooks`) run on
    every attempt once its files are written, before it completes. ``txn``: the
    application version the write carries (:mod:`lakeline.timeline.txn`); an attempt
    whose snapshot shows it committed lands nothing (``stats["txn_skipped"]``), and the
    completion refuses it when one that landed meanwhile did (the replay then skips).

    Raises:
        CommitConflictError: conflicts persisted through ``commit.max-retries`` replays.
        ValidationError: a validator refused; the attempt was rolled back.
        Whatever planning raises (typed input errors), before anything is written.
    """
    started = time.perf_counter()
    ctx = open_context()
    retries = ctx.config.props.commit_max_retries
    last: LakelineError | None = None
    for attempt in range(retries + 1):
        if attempt:
            ctx = open_context()  # replay on a fresh snapshot
        if ctx.config.props.write_concurrency_mode == "single-writer":
            rollback_pending_writes(ctx.log, ctx.storage, ctx.snapshot, Rules.of(ctx.config.props))
            ctx = open_context()
        if txn is not None and landed(ctx.snapshot, txn):
            return WriteResult(None, {"txn_skipped": 1}, {"total_s": time.perf_counter() - started})
        phases = PhaseTimer()
        try:  # plan (tag)
            with phases("plan"):
                plan = planner(ctx)
        except SnapshotExpiredError as e:
            # A clean removed files of the snapshot while we planned on it (it had left
            # retention): plan again on a fresh one, as after a conflict.
            last = e
            continue
        timings = {**phases.seconds, "tag_s": plan.timings.get("tag_s", 0.0)}
        if plan.empty:
            return WriteResult(None, dict(plan.stats), {**timings, "total_s": time.perf_counter() - started})
        if before_commit is not None:
            ctx = ctx.with_config(before_commit())
            before_commit = None
        commit = Commit.begin(ctx, action, operation)
        try:
            with phases("write"):
                metadata, entries = write(ctx, commit.instant_id, plan)
                metadata = replace(metadata, txn=txn)
            with phases("index"):
                commit.write_index_updates(metadata, entries)
            if validators:
                with phases("validate"):
                    run_validators(validators, validation_context(ctx, action, commit.instant_id, operation, metadata))
            with phases("commit"):
                completion = with_txn_check(rule(ctx, commit.instant_id, plan, metadata), ctx, metadata)
                inst = commit.complete(metadata, completion)
        except (AttemptConflictError, SnapshotExpiredError) as e:
            # SnapshotExpiredError: a file the plan rewrites was cleaned meanwhile, so a
            # concurrent commit replaced it: a conflict, replayed like one.
            commit.abort(str(e))
            last = e
            continue
        except CommitOutcomeUnknownError:
            raise  # never delete files while the outcome is unknown
        except BaseException as e:
            commit.abort(f"write failed: {e!r}")
            raise
        with phases("upkeep"):
            commit.after_commit_upkeep()
        timings.update(phases.seconds, total_s=time.perf_counter() - started)
        return WriteResult(inst, dict(metadata.stats), timings)
    raise CommitConflictError(f"{operation} gave up after {retries} retries: {last}")


def with_txn_check(rule: CompletionRule, ctx: TableContext, metadata: CommitMetadata) -> CompletionRule:
    """``rule``, and then that no instant completed after the snapshot committed the
    write's ``txn`` version or a later one of its application (a conflict: the replay
    finds it committed and lands nothing)."""
    txn = metadata.txn
    if txn is None:
        return rule

    def checked(tl: Timeline) -> None:
        rule(tl)
        done = committed_version(tl, txn.app_id, after=ctx.snapshot.last_seq)
        if done is not None and done[0] >= txn.version:
            inst = tl.get(done[1])
            raise AttemptConflictError(
                f"{txn.app_id!r} version {txn.version}: already committed",
                Conflict(ConflictKind.SAME_TXN, inst.id, inst.action),
            )

    return checked


def completion_rule(ctx: TableContext, instant: int, plan: WritePlan, metadata: CommitMetadata) -> CompletionRule:
    """What the write must still pass when it completes, on the log it completes on: the
    conflict rules against every commit that landed since its snapshot, with the key
    check for the keys this plan inserts, upserts and deletes."""
    key_check = check_keys_at_completion(ctx.storage, ctx.config.schema, KeyClaims.of(plan, ctx.config.record_key))
    return write_rule(ctx, instant, plan.operation, metadata, key_check)


def write_files(ctx: TableContext, instant: int, plan: WritePlan) -> tuple[CommitMetadata, Precomputed]:
    """Write the plan's files through the engine; returns the commit metadata and the
    index entries the tasks computed from the rows they wrote, by file path."""
    cfg = ctx.config
    st = WriteSettings.of(ctx.storage, cfg, instant, index_job(ctx.log.timeline, cfg.schema, cfg.record_key))
    written, rewritten = write_plan_files(ctx, st, plan, sole_delta=True)
    metadata = commit_metadata(
        ctx, plan.operation, plan.stats, written, rewritten, plan.replaced, plan.replaced_partitions
    )
    return metadata, entries_of(written, rewritten)


def write_plan_files(
    ctx: TableContext, st: WriteSettings, plan: WritePlan, sole_delta: bool = False
) -> tuple[list[Written], Rewritten]:
    """Run the file tasks of ``plan`` on ``ctx.engine`` with the settings ``st``: the
    new files and logs written, and each rewrite's outcome (a Spark planning task calls
    this too, with the settings the driver sends once the instant began).

    ``sole_delta``: ``plan`` is the whole commit's, so when it writes one new file, that
    file's task writes the commit's record-index delta too (:attr:`FileWrite.sole`). Not
    for a Spark planning task: its plan is one of many, and the driver keeps only the
    files its commit names (a delta written beside would be removed as a stray)."""
    file_tasks = [
        new_file_task(st, nf.partition, new_file_group_id(), chunk, nf.inserts)
        for nf in plan.new_files
        for chunk, _ in new_file_chunks(ctx, nf)
    ]
    rewrites = [
        RewriteTask(st, r.slice, r.incoming, r.predicate, r.inserts, r.new_keys_only, r.assign) for r in plan.rewrites
    ]
    logs = [
        LogTask(
            st,
            lg.partition,
            lg.slice.file_group,
            lg.incoming,
            lg.slice.base.path if lg.slice.base else None,
            lg.inserts,
        )
        for lg in plan.logs
    ]
    if sole_delta and len(file_tasks) == 1 and not rewrites and not logs:
        file_tasks = [replace(file_tasks[0], sole=True)]  # its task writes the commit's delta too
    # One engine call for every file; rewrites first, as they are the longest tasks.
    tasks: list[FileWrite | RewriteTask | LogTask] = [*rewrites, *file_tasks, *logs]
    results = ctx.engine.map(write_task, tasks)
    rewritten = [((r.partition, r.slice.file_group), res) for r, res in zip(plan.rewrites, results)]
    return [w for w in results[len(rewrites) :] if w is not None], rewritten


def new_file_chunks(ctx: TableContext, nf: NewFiles) -> Iterator[tuple[pa.Table, int]]:
    """``nf``'s rows in chunks of about ``write.target-file-size-bytes`` on disk, one new
    file group each, with the number of rows a file of that size holds.

    Rows that make fewer files than the engine has workers are cut into up to one file
    per worker, none under ``write.parallel-file-min-bytes``: Parquet encodes a file on
    one thread, so one file per append would leave the other cores idle (an append of
    5M rows, 81 MiB: 0.36 s as one file, two files at once 0.28 s)."""
    props = ctx.config.props
    per_row = max(_bytes_per_row(ctx, nf.partition, nf.rows), 1e-9)
    rows_per_file = max(1, int(props.write_target_file_size_bytes // per_row))
    n = nf.rows.num_rows
    chunk = rows_per_file
    workers = getattr(ctx.engine, "parallelism", 1)
    if props.write_parallel_file_min_bytes and -(-n // rows_per_file) < workers:
        files = min(workers, int(n * per_row // props.write_parallel_file_min_bytes))
        if files > 1:
            chunk = -(-n // files)
    for start in range(0, n, chunk):
        yield nf.rows.slice(start, chunk), rows_per_file


def new_file_task(st: WriteSettings, partition: str, file_group: str, rows: pa.Table, inserts: bool) -> FileWrite:
    """The task writing ``rows`` as the first base file of a new group."""
    name = data_file_name(file_group, st.instant, FileKind.BASE, st.tag)
    return FileWrite(
        st.storage,
        st.instant,
        rel_path(partition, name),
        partition,
        file_group,
        FileKind.BASE,
        rows.cast(st.schema),
        st.key,
        st.compression,
        st.row_group_rows,
        inserts,
        indexes=st.indexes,
        min_saving=st.min_saving,
    )


#: A rewrite's outcome by (partition, file group): the new base, None when no row
#: survived (the group is retired), or the "unchanged" marker of :mod:`.group_tasks`.
Rewritten = list[tuple[tuple[str, str], Written | None]]


def commit_metadata(
    ctx: TableContext,
    operation: str,
    plan_stats: dict[str, int],
    written: list[Written],
    rewritten: Rewritten,
    replaced: dict[str, list[str]],
    replaced_partitions: list[str],
) -> CommitMetadata:
    """The commit metadata of an attempt's files: new files and logs (``written``), the
    outcomes of its rewrites, and the groups and partitions it replaces wholesale."""
    files = [w.stat for w in written]
    groups = {p: list(g) for p, g in replaced.items()}
    changed: list[tuple[str, str]] = []
    for (partition, group), res in rewritten:
        if is_unchanged(res):
            continue
        changed.append((partition, group))
        if res is None:
            groups.setdefault(partition, []).append(group)
        else:
            files.append(res.stat)
    counts = dict(plan_stats)
    counts["files_added"] = len(files)
    counts["bytes_written"] = sum(s.bytes for s in files)
    counts["file_groups_replaced"] = sum(len(v) for v in groups.values())
    return CommitMetadata(
        operation=operation,
        snapshot_seq=ctx.snapshot.last_seq,
        files=tuple(files),
        replaced={p: tuple(g) for p, g in groups.items()},
        rewritten=tuple(changed),
        replaced_partitions=tuple(replaced_partitions),
        stats=counts,
    )


def entries_of(written: list[Written], rewritten: Rewritten) -> Precomputed:
    """The index entries the file tasks computed, by file path."""
    out = {w.stat.path: w.entries for w in written}
    out.update((w.stat.path, w.entries) for _, w in rewritten if w is not None and not is_unchanged(w))
    return out


def _bytes_per_row(ctx: TableContext, partition: str, rows: pa.Table) -> float:
    """On-disk bytes per row: from the partition's base files, else a guess from Arrow."""
    files = [s.base for s in ctx.view.latest_slices(partition) if s.base is not None and s.base.rows]
    if files:
        return sum(f.bytes for f in files) / sum(f.rows for f in files)
    return max(rows.nbytes / max(rows.num_rows, 1) * 0.4, 1.0)
