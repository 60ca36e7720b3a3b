"""Writes of Spark DataFrames: insert, upsert, delete (a DataFrame of keys) and overwrite.

A DataFrame write is the local write distributed, not a second implementation: the
same planners (:mod:`lakeline.table.write.operations`), file tasks
(:mod:`lakeline.table.write.group_tasks`) and attempt loop with its commit protocol
(:func:`lakeline.table.write.writer.run_attempts`) run; only their data parts move to
executors (:mod:`.write_tasks`):

Before anything runs, the driver checks the DataFrame's columns against the table and,
with ``merge_schema``, adds its new ones (:func:`.types.check_columns`).

1. **stage** (once per write, :func:`.staging.stage_input`): executors copy the
   DataFrame's rows into the write's staging folder, each with a bucket from a hash of
   its record identity (partition columns and record key), so every copy of a key meets
   in one planning task, and every attempt replays from this same input even when the
   source is not repeatable (a bare scan of local Parquet files: the files, linked).
2. **plan** (per attempt, before the instant begins): one task per 8M rows (its share
   of the buckets) checks, conforms and deduplicates its rows with the local rules, runs the local
   planner against the attempt's snapshot and stages each touched file group's rows.
   Bad input (``SchemaMismatchError``, ``NullKeyError``) and planning errors
   (``DuplicateKeyError``) are raised here, before anything is written.
3. **write** (after ``begin``): one task per file group runs the local file task and
   returns only the file's metadata and index entries.

The driver holds the heartbeat, reconciles the instant's markers against the files the
results name (a failed or speculative task attempt's file is deleted; no snapshot would
ever have read it), and completes through the one commit protocol. The key claims are
read from staging only when a concurrent commit makes the key check need them. The
staging folder is removed when the write ends, whatever the outcome; while it runs the
driver beats the folder's owner file (naming each attempt's instant once it begins), so
if the driver dies, rollback or cleaning removes the folder once that beat and the
instants' heartbeats are stale (:mod:`lakeline.timeline.storage.staging_folders`).

Writes from Spark start new file groups for new keys instead of filling small ones
(copy-on-write: two tasks could fill the same file; merge-on-read fills through logs
only on the local path, the streaming sink's); clustering packs them. The planning
tasks still carry a log's ``inserts`` flag, so filling could be turned on here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from ..indexes.entries import Precomputed, index_job
from ..table.context import TableContext
from ..table.engine import LocalEngine
from ..table.files import Written
from ..table.hooks import Hooks, after_commit_hooks, effective_hooks
from ..table.table import Table
from ..table.write.commit import CompletionRule, write_rule
from ..table.write.group_tasks import WriteSettings
from ..table.write.key_check import key_check
from ..table.write.merger import BY_SOURCE, MergeSpec
from ..table.write.update import EVERY_ROW
from ..table.write.writer import Rewritten, WriteResult, commit_metadata, entries_of, run_attempts
from ..timeline.commit_metadata import CommitMetadata, Operation
from ..timeline.conflicts import KeyCheck
from ..timeline.diagnostics import faults
from ..timeline.errors import UnsupportedOperationError
from ..timeline.instant import Action
from ..timeline.markers import reconcile_markers
from ..timeline.storage.staging_folders import OwnerBeat
from ..timeline.table_config import TableConfig
from ..timeline.txn import Txn, landed
from .engine import SparkEngine
from .fused_job import FusedJob
from .staging import Staging, stage_input
from .types import check_columns
from .write_tasks import GroupPart, PlanPart, PlanTask, claims_of, group_writes, local_plan, plan_part, write_group

OPERATIONS = (Operation.INSERT, Operation.UPSERT, Operation.DELETE, Operation.OVERWRITE)
#: Rows a planning task takes at most: bounds a task's memory. Up to that one task plans
#: with a thread per core (tagging reads the candidate files' keys once, as the local
#: engine does); beyond, each further task reads the candidate files again, and every
#: staged file for its share of the buckets, since buckets are by key hash, not by file
#: (a bucket per key range is the next step).
_ROWS_PER_PLAN_TASK = 8_000_000


def write(
    df: DataFrame,
    path: str,
    operation: str = Operation.UPSERT,
    timeline: str | None = None,
    hooks: Hooks | None = None,
    storage_options: Mapping[str, str] | None = None,
    txn: tuple[str, int] | None = None,
    merge_schema: bool | None = None,
) -> WriteResult:
    """Write ``df`` into the lakeline table at ``path``: executors tag, route and write the
    rows; the driver commits once, with the local write's conflict rules, key check,
    index entries and replays.

    Args:
        operation: "insert", "upsert", "delete" (``df`` holds the record-key columns,
            and optionally the partition columns) or "overwrite" (the partitions present
            in ``df``; all of an unpartitioned table).
        timeline: the table's timeline store, as for ``Table.open``.
        storage_options: an object store's options (deltalake's keys, as for
            ``Table.open``); they travel to the executors in memory, inside the tasks.
        hooks: validators (run on the driver before the commit, like a local write's;
            the SQL ones of :mod:`.validators` run their queries on this session),
            callbacks and inline services (on this application's executors) after it.
        txn: ``(app_id, version)`` as for ``Table.insert``; checked before any stage runs.
        merge_schema: Delta's ``mergeSchema``: ``df``'s columns the table lacks are added
            (nullable, at the end, one schema instant) on the driver before any row is
            staged; None: as the table's ``write.schema-evolution`` says. No type is
            widened (``update_column`` does that).

    Raises:
        UnsupportedOperationError: an unknown operation, or upsert/delete on a table
            without a record key.
        SchemaMismatchError, NullKeyError, DuplicateKeyError: bad input; nothing is written.
        CommitConflictError: concurrent commits kept conflicting.
        ValidationError: a validator refused the write; nothing of it is visible.
    """
    if operation not in OPERATIONS:
        raise UnsupportedOperationError(f"unknown operation {operation!r}; one of {', '.join(OPERATIONS)}")
    operation = Operation(operation)
    version = Txn.of(txn)
    table = Table.open(path, timeline, storage_options)
    if version is not None and landed(table.log.timeline, version):
        return WriteResult(None, {"txn_skipped": 1})
    cfg = table.config
    if operation in (Operation.UPSERT, Operation.DELETE) and not cfg.has_key:
        raise UnsupportedOperationError(f"{operation} needs a record key; the table at {path} has none")
    cfg = check_columns(table, df.schema, operation, merge_schema, changes=False)
    return write_frame(df, table, cfg, operation, hooks, version)


def write_frame(
    df: DataFrame,
    table: Table,
    cfg: TableConfig,
    operation: Operation,
    hooks: Hooks | None,
    version: Txn | None,
    merge: MergeSpec | None = None,
) -> WriteResult:
    """Stage, plan and write ``df`` into ``table`` (checked by the caller: ``write``,
    or ``lakeline.spark.merge`` with the MERGE's clauses in ``merge``) as of ``cfg``."""
    path = table.path
    joined = effective_hooks(hooks, cfg.props, cfg.schema)
    spark = df.sparkSession
    spark.sparkContext.setJobDescription(f"lakeline {operation} into {path}")
    staging = Staging.new(table.storage)
    # The owner file goes in first: a folder is never without it while the write runs.
    owner = OwnerBeat(table.storage, staging.write_id, cfg.props.heartbeat_interval_ms)
    planner: _Planner | None = None
    try:
        owner.start()
        # A MERGE's source rows meet by key alone: two rows of one key are refused
        # (DuplicateKeyError) only when one planning task sees both.
        ident = cfg.record_key if operation == Operation.MERGE else cfg.partition_by + cfg.record_key
        identity = [c for c in dict.fromkeys(ident) if c in df.columns]
        inputs, staged_as = stage_input(df, staging, identity, _ROWS_PER_PLAN_TASK)
        faults.point("spark.after_stage")  # staged, no instant yet: a crash leaves only the folder
        planner = _Planner(spark, staging, operation, inputs, cfg.schema, staged_as, merge)
        action = Action.REPLACE_COMMIT if operation == Operation.OVERWRITE else cfg.write_action
        result = run_attempts(
            table.context,
            operation,
            action,
            planner,
            _Writer(spark, owner),
            _rule,
            validators=joined.validators,
            txn=version,
        )
    finally:
        if planner is not None:
            planner.release()
        owner.stop()  # before removing: a late beat must find nothing to rewrite
        staging.remove()
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]
    # Inline services run on the write's engine: this application's executors.
    table.engine = SparkEngine(spark)
    return after_commit_hooks(table, result, joined)


# -- 2. plan (1. stage: .staging.stage_input) ------------------------------------------------


@dataclass
class SparkPlan:
    """One attempt's plan: the parts its planning tasks staged, and their facts."""

    operation: str
    staging: Staging
    parts: list[GroupPart] = field(default_factory=list)
    claims: list[str] = field(default_factory=list)
    replaced: dict[str, list[str]] = field(default_factory=dict)
    replaced_partitions: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    job: FusedJob | None = None  # the fused path's planning tasks, waiting for ``go``
    #: Rule 4's predicate of the key check (a MERGE's by-source clause reads every row).
    predicate: pc.Expression | None = None
    waiting: int = 0  # of those, the tasks with files to write

    @property
    def empty(self) -> bool:
        return not (self.parts or self.replaced or self.waiting)

    def add(self, part: PlanPart) -> None:
        self.parts.extend(part.groups)
        self.waiting += part.waits
        if part.claims is not None:
            self.claims.append(part.claims)
        for p, gs in part.replaced.items():
            self.replaced[p] = sorted(set(self.replaced.get(p, [])) | set(gs))
        self.replaced_partitions = sorted(set(self.replaced_partitions) | set(part.replaced_partitions))
        for k, v in part.stats.items():
            if k != "file_groups_replaced":
                self.stats[k] = self.stats.get(k, 0) + v
        for k, s in part.timings.items():
            self.timings[k] = max(self.timings.get(k, 0.0), s)


class _Planner:
    """Plans each attempt on the executors (stage 2) from the staged input."""

    def __init__(
        self,
        spark: SparkSession,
        staging: Staging,
        operation: str,
        inputs: list[tuple[str, int]],
        schema: pa.Schema,
        staged_as: pa.Schema | None,  # the staged Parquet files' schema (None: IPC files)
        merge: MergeSpec | None = None,
    ) -> None:
        self.spark, self.staging, self.operation, self.merge = spark, staging, operation, merge
        self.planned_on, self.staged_as = schema, staged_as  # planned_on: what the driver checked the input against
        total = sum(rows for _, rows in inputs)
        self.inputs = tuple(path for path, _ in inputs)
        # No input, no planning task: the plan of no rows below still runs.
        self.tasks = max(-(-total // _ROWS_PER_PLAN_TASK), 1) if self.inputs else 0
        self.by_source = merge is not None and bool(merge.of(BY_SOURCE))
        if self.by_source and self.tasks:
            # A by-source clause acts on the target rows no source key matches: one
            # task must see every source key (its memory bounds such a MERGE).
            self.tasks = 1
        # Fused: one planning task, which writes its own plan's files. Not with more:
        # buckets are by key, not by file group, so two tasks could each rewrite the
        # same group from its old base, and their tasks would have to wait for each
        # other (through the driver's ``go``), holding a task slot each.
        self.fused = self.tasks == 1
        self.attempts = 0
        self.job: FusedJob | None = None

    def release(self) -> None:
        """End the last attempt's fused tasks if they still wait (no ``go`` came: the
        attempt failed, or its plan was refused or empty)."""
        if self.job is not None:
            self.job.release()
            self.job = None

    def __call__(self, ctx: TableContext) -> SparkPlan:
        self.release()
        if self.attempts:  # an earlier attempt's staged rows are not needed any more
            self.staging.remove(f"attempt-{self.attempts - 1}")
        attempt = f"attempt-{self.attempts}"
        self.attempts += 1
        t0 = time.perf_counter()
        remote = _executor_context(ctx)
        tasks = [
            PlanTask(
                remote,
                self.operation,
                self.staging,
                attempt,
                self.inputs,
                i,
                self.tasks,
                self.planned_on,
                self.staged_as,
                self.merge,
            )
            for i in range(self.tasks)
        ]
        if self.fused:
            self.job = FusedJob(self.spark, self.staging, attempt, tasks)
            parts = self.job.planned()
        else:
            parts = SparkEngine(self.spark).map(plan_part, tasks)
        plan = SparkPlan(self.operation, self.staging, job=self.job, predicate=EVERY_ROW if self.by_source else None)
        # The plan of no rows: an overwrite of an unpartitioned table replaces everything
        # even when every task's input was empty; a MERGE's by-source clauses act on every
        # row when there is no source row (and only then: a task applied them otherwise).
        if self.operation != Operation.MERGE or not self.tasks:
            no_rows = local_plan(ctx, self.operation, _no_rows(ctx.config, self.operation), self.merge)
            parts = [PlanPart.of(no_rows), *parts]
        for part in parts:
            plan.add(part)
        if self.operation == Operation.OVERWRITE and plan.replaced:
            plan.stats["file_groups_replaced"] = sum(len(g) for g in plan.replaced.values())
        plan.timings["plan_tasks_s"] = time.perf_counter() - t0
        return plan


def _no_rows(cfg: TableConfig, operation: str) -> pa.Table:
    schema = cfg.schema
    if operation in (Operation.DELETE, Operation.MERGE):
        schema = pa.schema([schema.field(k) for k in cfg.record_key])
    return schema.empty_table()


def _executor_context(ctx: TableContext) -> TableContext:
    """The attempt's context as the planning tasks get it: a local engine with a thread
    per core inside the executor (it reads candidate files for tagging), and no
    small-file filling (two tasks could fill the same file)."""
    cfg = ctx.config
    props = {**cfg.properties, "write.small-file-limit-bytes": 0}
    return replace(ctx, engine=LocalEngine(None), config=replace(cfg, properties=props))


# -- 3. write -----------------------------------------------------------------------------


class _Writer:
    """Stage 3: each file group written by one task; only metadata comes back."""

    def __init__(self, spark: SparkSession, owner: OwnerBeat) -> None:
        self.spark, self.owner = spark, owner

    def __call__(self, ctx: TableContext, instant: int, plan: SparkPlan) -> tuple[CommitMetadata, Precomputed]:
        self.owner.begun(instant)  # before any file of it: its rollback finds the folder
        cfg = ctx.config
        st = WriteSettings.of(ctx.storage, cfg, instant, index_job(ctx.log.timeline, cfg.schema, cfg.record_key))
        written: list[Written] = []
        rewritten: Rewritten = []
        if plan.job is not None:
            for part in plan.job.go(st):
                written.extend(part.written)
                rewritten.extend(part.rewritten)
                for k, v in part.timings.items():
                    plan.timings[k] = max(plan.timings.get(k, 0.0), v)
        slices = {(s.partition, s.file_group): s for s in ctx.view.latest_slices()}
        results = SparkEngine(self.spark).map(write_group, group_writes(st, plan.staging, slices, plan.parts))
        for kind, partition, group, outcome in results:
            if kind == "rewrite":
                rewritten.append(((partition, group), outcome))
            elif outcome is not None:
                written.append(outcome)
        metadata = commit_metadata(
            ctx, plan.operation, plan.stats, written, rewritten, plan.replaced, plan.replaced_partitions
        )
        reconcile_markers(ctx.storage, instant, {f.path for f in metadata.files})
        return metadata, entries_of(written, rewritten)


def _rule(ctx: TableContext, instant: int, plan: SparkPlan, metadata: CommitMetadata) -> CompletionRule:
    """The local completion rule, with a key check that reads the attempt's claims from
    staging only if a concurrent commit needs them."""
    cfg = ctx.config
    loaded: list[KeyCheck | None] = []

    def lazy(ours: CommitMetadata, theirs: CommitMetadata) -> bool:
        if not loaded:
            claims = claims_of(plan.staging, cfg.record_key, plan.claims)
            if plan.predicate is not None:
                claims = replace(claims, predicate=plan.predicate)
            loaded.append(key_check(ctx.storage, cfg.schema, claims))
        check = loaded[0]
        return check is not None and check(ours, theirs)

    return write_rule(ctx, instant, plan.operation, metadata, lazy)
