"""Writes of Spark DataFrames: insert, upsert, delete (a DataFrame of keys) and overwrite.

A DataFrame write is the local write distributed, not a second implementation: the
same planners (:mod:`lakeline.table.operations`), file tasks
(:mod:`lakeline.table.group_tasks`) and attempt loop with its commit protocol
(:func:`lakeline.table.writer.run_attempts`) run, only their data parts move to
executors. Three stages:

1. **prepare** (once per write): the rows are hash-partitioned by record identity
   (partition columns and record key), so every copy of a key meets in one task, and
   each task checks, conforms and deduplicates its rows with the local code
   (``prepare_rows``/``prepare_keys``). The result is checkpointed: every attempt
   replays from this same input, even when the DataFrame's source is not repeatable,
   and bad input fails here with the local engine's typed error before anything is
   written.
2. **plan** (per attempt, before the instant begins): each task runs the local planner
   on its rows against the attempt's snapshot (tagging reads only the candidate files'
   keys) and emits, per file group it touches, that group's incoming rows as an Arrow
   IPC payload, plus its key claims and stats. Persisted, so a planning error
   (``DuplicateKeyError``) is raised before anything is written, too.
3. **write** (after ``begin``): the payloads are grouped by file group
   (``applyInArrow``), so each group is written by exactly one task, which runs the
   local file task (a rewrite, a log, a new file) and returns only the file's metadata
   and index entries.

The driver holds the heartbeat, reconciles the instant's markers against the files the
results name (a failed or speculative task attempt's file is deleted; no snapshot would
ever have read it), and completes through the one commit protocol. The key claims,
which the key check needs only when a concurrent commit landed, stay on the executors
until then. Copy-on-write writes from Spark start new file groups for new keys instead
of filling small files (two tasks could fill the same one); clustering packs them.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ..indexes.entries import Precomputed, index_job
from ..table.commit import CompletionRule, write_rule
from ..table.context import TableContext
from ..table.engine import LocalEngine
from ..table.files import Written
from ..table.group_tasks import LogTask, RewriteTask, WriteSettings, write_task
from ..table.key_check import KeyClaims, key_check
from ..table.operations import plan_delete, plan_insert, plan_overwrite, plan_upsert
from ..table.plan import WritePlan
from ..table.records import prepare_keys, prepare_rows
from ..table.table import Table
from ..table.writer import (
    WriteResult,
    commit_metadata,
    entries_of,
    new_file_chunks,
    new_file_task,
    run_attempts,
)
from ..timeline.commit_metadata import CommitMetadata
from ..timeline.conflicts import KeyCheck
from ..timeline.errors import SchemaMismatchError, UnsupportedOperationError
from ..timeline.file_group import FileSlice, new_file_group_id
from ..timeline.instant import Action
from ..timeline.markers import reconcile_markers
from ..timeline.table_config import TableConfig
from .errors import reraise_typed

OPERATIONS = ("insert", "upsert", "delete", "overwrite")
#: Rows per payload of the prepare stage (an Arrow binary value stays far below 2 GiB).
_PAYLOAD_ROWS = 250_000
_PLANNED = "kind string, fg string, part string, flags int, payload binary"
_GROUP_KINDS = ("rewrite", "log", "new")
_INSERTS, _NEW_KEYS_ONLY = 1, 2


def write(df: DataFrame, path: str, operation: str = "upsert", timeline: str | None = None,
          hooks: Any = None) -> WriteResult:
    """Write ``df`` into the lakeline table at ``path``: executors tag, route and write the
    rows; the driver commits once, with the local write's conflict rules, key check,
    index entries and replays.

    Args:
        operation: "insert", "upsert", "delete" (``df`` holds the record-key columns,
            and optionally the partition columns) or "overwrite" (the partitions present
            in ``df``; all of an unpartitioned table).
        timeline: the table's timeline store, as for ``Table.open``.

    Raises:
        UnsupportedOperationError: an unknown operation, or upsert/delete on a table
            without a record key.
        SchemaMismatchError, NullKeyError, DuplicateKeyError: bad input; nothing is written.
        CommitConflictError: concurrent commits kept conflicting.
    """
    if operation not in OPERATIONS:
        raise UnsupportedOperationError(f"unknown operation {operation!r}; one of {', '.join(OPERATIONS)}")
    if hooks is not None:
        raise UnsupportedOperationError("hooks on Spark writes are not available yet")
    table = Table.open(path, timeline)
    cfg = table.config
    if operation in ("upsert", "delete") and not cfg.has_key:
        raise UnsupportedOperationError(f"{operation} needs a record key; the table at {path} has none")
    _check_columns(df, cfg, operation)
    spark = df.sparkSession
    spark.sparkContext.setJobDescription(f"lakeline {operation} into {path}")
    try:
        prepared = _prepare(df, cfg, operation)
        planner = _Planner(spark, prepared, operation)
        action = Action.REPLACE_COMMIT if operation == "overwrite" else cfg.write_action
        try:
            return run_attempts(table.context, operation, action, planner, _write_planned, _rule)
        finally:
            planner.release()
    finally:
        spark.sparkContext.setJobDescription(None)  # type: ignore[arg-type]


def _check_columns(df: DataFrame, cfg: TableConfig, operation: str) -> None:
    """Column names checked on the driver, from the DataFrame's schema alone (types and
    values are checked by the prepare stage, with the local rules)."""
    names = set(df.columns)
    if operation == "delete":
        missing = [k for k in cfg.record_key if k not in names]
        if missing:
            raise SchemaMismatchError(f"delete needs the record-key columns {missing}")
        return
    unknown = sorted(names - set(cfg.schema.names))
    if unknown:
        raise SchemaMismatchError(f"columns {unknown} are not in the table's schema (Spark writes do not add "
                                  "columns: evolve the schema with the local API first)")


# -- 1. prepare ---------------------------------------------------------------------------


def _prepare(df: DataFrame, cfg: TableConfig, operation: str) -> DataFrame:
    """The checked, deduplicated rows as checkpointed IPC payloads, partitioned so that
    every copy of a record meets in one task."""
    identity = [c for c in dict.fromkeys(cfg.partition_by + cfg.record_key) if c in df.columns]
    n = max(2 * df.sparkSession.sparkContext.defaultParallelism, 1)
    shuffled = df.repartition(n, *identity) if identity else df.repartition(n)

    def prepare(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        chunks = list(batches)
        if not chunks or sum(b.num_rows for b in chunks) == 0:
            return
        rows = pa.Table.from_batches(chunks)
        if operation == "delete":
            rows = prepare_keys(rows, cfg)
        else:
            rows, _ = prepare_rows(rows, cfg)
        for start in range(0, rows.num_rows, _PAYLOAD_ROWS):
            yield pa.RecordBatch.from_pydict({"payload": [_ipc(rows.slice(start, _PAYLOAD_ROWS))]})

    try:
        return shuffled.mapInArrow(prepare, "payload binary").localCheckpoint(eager=True)
    except Exception as e:  # noqa: BLE001 - an executor's typed error is re-raised as itself
        reraise_typed(e)
        raise


# -- 2. plan --------------------------------------------------------------------------------


@dataclass
class SparkPlan:
    """One attempt's plan: its per-group payloads persisted on the executors."""

    operation: str
    planned: DataFrame
    groups: int
    replaced: dict[str, list[str]] = field(default_factory=dict)
    replaced_partitions: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    chunks: list[NewChunk] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.groups or self.replaced)

    def claims(self, key: tuple[str, ...]) -> KeyClaims:
        """The attempt's key claims, collected from the tasks that planned it."""
        rows = self.planned.filter(F.col("kind") == "claims").select("payload").collect()
        return merge_claims(key, [pickle.loads(r.payload) for r in rows])


class _Planner:
    """Plans each attempt on the executors (stage 2) from the prepared rows."""

    def __init__(self, spark: SparkSession, prepared: DataFrame, operation: str) -> None:
        self.spark = spark
        self.prepared = prepared
        self.operation = operation
        self._plans: list[SparkPlan] = []

    def __call__(self, ctx: TableContext) -> SparkPlan:
        for old in self._plans:  # an earlier attempt's payloads are not needed any more
            old.planned.unpersist()
        plan_group = _plan_task(_executor_context(ctx), self.operation)
        planned = self.prepared.mapInArrow(plan_group, _PLANNED).persist()
        try:
            summaries = [pickle.loads(r.payload)
                         for r in planned.filter(F.col("kind") == "plan").select("payload").collect()]
        except Exception as e:  # noqa: BLE001
            planned.unpersist()
            reraise_typed(e)
            raise
        # The plan of no rows: an overwrite of an unpartitioned table replaces everything
        # even when every task's input was empty.
        baseline = _local_plan(ctx, self.operation, _empty_input(ctx.config, self.operation))
        plan = SparkPlan(self.operation, planned, 0)
        for s in [_summary(baseline, 0), *summaries]:
            plan.groups += s["groups"]
            for p, gs in s["replaced"].items():
                plan.replaced[p] = sorted(set(plan.replaced.get(p, [])) | set(gs))
            plan.replaced_partitions = sorted(set(plan.replaced_partitions) | set(s["replaced_partitions"]))
            for k, v in s["stats"].items():
                if k != "file_groups_replaced":
                    plan.stats[k] = plan.stats.get(k, 0) + v
            for k, v in s["timings"].items():
                plan.timings[k] = max(plan.timings.get(k, 0.0), v)
            plan.chunks.extend(s["chunks"])
        if self.operation == "overwrite" and plan.replaced:
            plan.stats["file_groups_replaced"] = sum(len(g) for g in plan.replaced.values())
        self._plans.append(plan)
        return plan

    def release(self) -> None:
        for plan in self._plans:
            plan.planned.unpersist()


def _executor_context(ctx: TableContext) -> TableContext:
    """The attempt's context as the planning tasks get it: a small local engine inside
    each executor, and no small-file filling (two tasks could fill the same file)."""
    cfg = ctx.config
    props = {**cfg.properties, "write.small-file-limit-bytes": 0}
    return replace(ctx, engine=LocalEngine(1), config=replace(cfg, properties=props))


def _local_plan(ctx: TableContext, operation: str, rows: pa.Table) -> WritePlan:
    if operation == "insert":
        return plan_insert(ctx, rows)
    if operation == "upsert":
        return plan_upsert(ctx, rows)
    if operation == "delete":
        return plan_delete(ctx, rows)
    return plan_overwrite(ctx, rows, None)


def _empty_input(cfg: TableConfig, operation: str) -> pa.Table:
    schema = cfg.schema
    if operation == "delete":
        schema = pa.schema([schema.field(k) for k in cfg.record_key])
    return schema.empty_table()


def _summary(plan: WritePlan, groups: int, chunks: list[NewChunk] | None = None) -> dict[str, Any]:
    return {"groups": groups, "replaced": plan.replaced, "replaced_partitions": plan.replaced_partitions,
            "stats": plan.stats, "timings": plan.timings, "chunks": chunks or []}


@dataclass(frozen=True)
class NewChunk:
    """Rows of one planning task that start a new file group, and how many rows the
    partition's files hold at the target size."""

    id: str
    partition: str
    rows: int
    rows_per_file: int


def pack_chunks(chunks: list[NewChunk]) -> dict[str, str]:
    """Which new file group each chunk's rows go to: the chunks of a partition packed
    first-fit, largest first, into files of about the target size (so a small write
    spread over many tasks still writes one file per partition). A chunk keeps its own
    id when it starts a file; the map holds only the chunks that join another's."""
    by_partition: dict[str, list[NewChunk]] = {}
    for c in chunks:
        by_partition.setdefault(c.partition, []).append(c)
    joined: dict[str, str] = {}
    for part in by_partition.values():
        capacity = min(c.rows_per_file for c in part)
        bins: list[tuple[str, int]] = []  # (file group, rows in it)
        for c in sorted(part, key=lambda c: -c.rows):
            for i, (group, used) in enumerate(bins):
                if used + c.rows <= capacity:
                    bins[i] = (group, used + c.rows)
                    joined[c.id] = group
                    break
            else:
                bins.append((c.id, c.rows))
    return joined


def _plan_task(ctx: TableContext, operation: str) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def plan_rows(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        payloads = [p for b in batches for p in b.column("payload").to_pylist()]
        if not payloads:
            return
        rows = pa.concat_tables([_from_ipc(p) for p in payloads])
        plan = _local_plan(ctx, operation, rows)
        out: list[tuple[str, str | None, str | None, int, bytes]] = []
        for r in plan.rewrites:
            assert r.incoming is not None and r.predicate is None  # no predicates on these writes
            flags = (_INSERTS if r.inserts else 0) | (_NEW_KEYS_ONLY if r.new_keys_only else 0)
            out.append(("rewrite", r.slice.file_group, r.partition, flags, _ipc(r.incoming)))
        for lg in plan.logs:
            out.append(("log", lg.slice.file_group, lg.partition, 0, _ipc(lg.incoming)))
        chunks: list[NewChunk] = []
        for nf in plan.new_files:
            for chunk, per_file in new_file_chunks(ctx, nf):
                chunks.append(NewChunk(new_file_group_id(), nf.partition, chunk.num_rows, per_file))
                out.append(("new", chunks[-1].id, nf.partition, _INSERTS if nf.inserts else 0, _ipc(chunk)))
        out.append(("claims", None, None, 0, pickle.dumps(KeyClaims.of(plan, ctx.config.record_key))))
        out.append(("plan", None, None, 0, pickle.dumps(_summary(plan, len(out) - 1, chunks))))
        for row in out:
            yield pa.RecordBatch.from_pylist([dict(zip(("kind", "fg", "part", "flags", "payload"), row))],
                                             schema=_PLANNED_SCHEMA)

    return plan_rows


_PLANNED_SCHEMA = pa.schema([("kind", pa.string()), ("fg", pa.string()), ("part", pa.string()),
                             ("flags", pa.int32()), ("payload", pa.binary())])


def merge_claims(key: tuple[str, ...], parts: list[KeyClaims]) -> KeyClaims:
    """One attempt's claims from its planning tasks' claims."""

    def concat(name: str) -> pa.Table | None:
        tables = [getattr(c, name) for c in parts if getattr(c, name) is not None]
        return pa.concat_tables(tables, promote_options="permissive") if tables else None

    return KeyClaims(key=key, inserted=concat("inserted"), log_upserted=concat("log_upserted"),
                     deleted=concat("deleted"), deleted_in_group=concat("deleted_in_group"),
                     updated=concat("updated"))


# -- 3. write -------------------------------------------------------------------------------


def _write_planned(ctx: TableContext, instant: int, plan: SparkPlan) -> tuple[CommitMetadata, Precomputed]:
    """Stage 3: each file group written by one task; only metadata comes back."""
    cfg = ctx.config
    st = WriteSettings.of(ctx.storage, cfg, instant, index_job(ctx.log.timeline, cfg.schema, cfg.record_key))
    slices = {(s.partition, s.file_group): s for s in ctx.view.latest_slices()}
    task = _write_task(st, slices)
    groups = plan.planned.filter(F.col("kind").isin(*_GROUP_KINDS))
    joined = pack_chunks(plan.chunks)
    if joined:
        spark = plan.planned.sparkSession
        packing = spark.createDataFrame(list(joined.items()), "fg string, into string")
        groups = groups.join(F.broadcast(packing), "fg", "left").withColumn("fg", F.coalesce("into", "fg"))
    try:
        results = [pickle.loads(r.result) for r in groups.groupBy("fg").applyInArrow(task, "result binary").collect()]
    except Exception as e:  # noqa: BLE001
        reraise_typed(e)
        raise
    written: list[Written] = []
    rewritten: list[tuple[tuple[str, str], Written | None]] = []
    for kind, partition, group, outcome in results:
        if kind == "rewrite":
            rewritten.append(((partition, group), outcome))
        elif outcome is not None:
            written.append(outcome)
    metadata = commit_metadata(ctx, plan.operation, plan.stats, written, rewritten, plan.replaced,
                               plan.replaced_partitions)
    reconcile_markers(ctx.storage, instant, {f.path for f in metadata.files})
    return metadata, entries_of(written, rewritten)


def _write_task(st: WriteSettings, slices: dict[tuple[str, str], FileSlice]) -> Callable[[pa.Table], pa.Table]:
    def write_group(rows: pa.Table) -> pa.Table:
        kind = rows.column("kind")[0].as_py()
        group = rows.column("fg")[0].as_py()
        partition = rows.column("part")[0].as_py()
        flags = [f.as_py() for f in rows.column("flags")]
        incoming = pa.concat_tables([_from_ipc(p.as_py()) for p in rows.column("payload")],
                                    promote_options="permissive")
        if kind == "new":
            outcome = write_task(new_file_task(st, partition, group, incoming, bool(flags[0] & _INSERTS)))
        elif kind == "log":
            outcome = write_task(LogTask(st, partition, group, incoming))
        else:
            outcome = write_task(RewriteTask(st, slices[(partition, group)], incoming, None,
                                             any(f & _INSERTS for f in flags),
                                             all(f & _NEW_KEYS_ONLY for f in flags)))
        return pa.table({"result": [pickle.dumps((kind, partition, group, outcome))]})

    return write_group


def _rule(ctx: TableContext, instant: int, plan: SparkPlan, metadata: CommitMetadata) -> CompletionRule:
    """The local completion rule, with a key check that collects the attempt's claims
    from the executors only if a concurrent commit needs them."""
    cfg = ctx.config
    loaded: list[KeyCheck | None] = []

    def lazy(ours: CommitMetadata, theirs: CommitMetadata) -> bool:
        if not loaded:
            loaded.append(key_check(ctx.storage, cfg.schema, plan.claims(cfg.record_key)))
        check = loaded[0]
        return check is not None and check(ours, theirs)

    return write_rule(ctx, instant, plan.operation, metadata, lazy)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
