"""The executor side of a Spark write: its planning and writing tasks.

Tasks read their rows from the write's staging folder (:mod:`.staging`, where stage 1
copied the input) and return only small descriptions to the driver. A planning task
checks, conforms and deduplicates its share of the rows, then plans them with the
local planner against the attempt's snapshot; what happens next depends on how many
planning tasks the write has:

- **fused** (:func:`plan_and_write`, one task: up to 8M rows): the task publishes its
  plan's facts, waits for the driver to begin the instant and publish the write
  settings, and writes its plan's files with a thread per core, as the local write
  does. The rows never leave the task: no second copy through staging, no second job.
  A planning error (bad input, a duplicate key) reaches the driver before it begins
  the instant, so nothing is written.
- **staged** (:func:`plan_part` then :func:`write_group`, several tasks): each touched
  file group's rows go to staging, and one task per file group writes them after
  ``begin``, all parts of a group together (tasks share buckets by key, so two of
  them may touch one group). Tasks never wait for the driver, so any number of them
  can run in waves.

Both publish the key claims to staging; the driver reads them only when a concurrent
commit makes the key check need them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import pyarrow as pa

from ..table.context import TableContext
from ..table.files import Written
from ..table.schema.update import added_since
from ..table.write.group_tasks import LogTask, RewriteTask, WriteSettings, write_task
from ..table.write.key_check import KeyClaims
from ..table.write.merge_plan import plan_merge
from ..table.write.merger import MergeSpec, prepare_source
from ..table.write.operations import plan_delete, plan_insert, plan_overwrite, plan_upsert
from ..table.write.plan import WritePlan
from ..table.write.records import prepare_keys, prepare_rows
from ..table.write.writer import Rewritten, new_file_chunks, new_file_task, write_plan_files
from ..timeline.commit_metadata import Operation
from ..timeline.errors import DriverGoneError
from ..timeline.view.file_group import FileSlice, new_file_group_id
from .staging import Staging, staged_rows

# -- 2. plan -----------------------------------------------------------------------------------

INSERTS, NEW_KEYS_ONLY = 1, 2


@dataclass(frozen=True)
class GroupPart:
    """One planning task's incoming rows for one file group (``kind``: "rewrite" or
    "log" of an existing group, "new" for a group it starts)."""

    kind: str
    file_group: str
    partition: str
    flags: int
    path: str
    rows: int
    rows_per_file: int = 0  # "new": rows a file of the target size holds


@dataclass(frozen=True)
class PlanPart:
    """What one planning task returns: its groups, where its key claims are, and the
    plan's own facts (replaced groups, stats, timings)."""

    groups: tuple[GroupPart, ...]
    claims: str | None
    replaced: dict[str, list[str]] = field(default_factory=dict)
    replaced_partitions: tuple[str, ...] = ()
    stats: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    # A fused task: whether it waits for ``go`` to write (its plan is not empty), then
    # its files: what it wrote, and its rewrites' outcomes.
    waits: bool = False
    written: tuple[Written, ...] = ()
    rewritten: Rewritten = field(default_factory=list)

    @classmethod
    def of(cls, plan: WritePlan, groups: tuple[GroupPart, ...] = (), claims: str | None = None) -> PlanPart:
        return cls(
            groups, claims, dict(plan.replaced), tuple(plan.replaced_partitions), dict(plan.stats), dict(plan.timings)
        )


@dataclass(frozen=True)
class PlanTask:
    ctx: TableContext
    operation: str
    staging: Staging
    attempt: str  # staging kind of this attempt's files
    inputs: tuple[str, ...]  # the staged input files, in input order
    task: int  # this task's number, of ``tasks``: it plans the buckets equal to it modulo ``tasks``
    tasks: int
    planned_on: pa.Schema  # the schema the driver checked the input against
    staged_as: pa.Schema | None = None  # the staged Parquet files' schema; None: IPC files
    merge: MergeSpec | None = None  # a MERGE's clauses (the rows are its source)


def local_plan(ctx: TableContext, operation: str, rows: pa.Table, merge: MergeSpec | None = None) -> WritePlan:
    if operation == Operation.MERGE and merge is not None:
        return plan_merge(ctx, rows, merge)
    if operation == Operation.INSERT:
        return plan_insert(ctx, rows)
    if operation == Operation.UPSERT:
        return plan_upsert(ctx, rows)
    if operation == Operation.DELETE:
        return plan_delete(ctx, rows)
    return plan_overwrite(ctx, rows, None)


def prepared(task: PlanTask, rows: pa.Table) -> pa.Table:
    """Rows checked, conformed and deduplicated by the local rules, for the attempt's
    schema: a replay after a concurrent schema instant (conflict ``schema-changed``)
    conforms them to the new one, columns added since as nulls (:func:`~lakeline.table.schema.update.added_since`),
    and an old column name or a narrowing is ``SchemaMismatchError`` before anything is
    written. Never adds a column: the driver did that (``merge_schema``) before staging."""
    cfg = task.ctx.config
    if task.operation == Operation.DELETE:
        return prepare_keys(rows, cfg)
    if task.operation == Operation.MERGE:
        return prepare_source(rows, cfg)  # a source keeps its own columns: MERGE's conditions read them
    return prepare_rows(added_since(rows, task.planned_on, cfg.schema), cfg, evolve=False)[0]


def plan_and_write(task: PlanTask) -> PlanPart:
    """Plan a share of the buckets, then write that plan's files once the driver has
    begun the instant (the fused path; see the module docstring).

    The task publishes ``planned-<task>`` (its plan's facts) and waits for ``go`` (the
    write settings, or None when the driver will not write: the attempt failed before
    ``begin``). A task whose plan is empty returns at once. A
    retried task attempt plans again and, finding ``go`` published, writes at once;
    the files of the attempt whose result Spark drops are removed by the driver's
    marker reconciliation."""
    started = time.perf_counter()
    with _wide_arrow_pool(), ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        ctx, staging = task.ctx, task.staging
        rows = prepared(task, staged_rows(staging, task.inputs, task.task, task.tasks, pool, task.staged_as))
        plan = local_plan(ctx, task.operation, rows, task.merge)
        claims = _put_claims(staging, task.attempt, KeyClaims.of(plan, ctx.config.record_key))
    facts = replace(PlanPart.of(plan, (), claims), waits=not plan.empty)
    staging.publish(f"{task.attempt}/planned-{task.task}", facts)
    if plan.empty:
        return facts
    settings = _wait_for_go(staging, task.attempt)
    if settings is None:
        return facts
    with _wide_arrow_pool():
        written, rewritten = write_plan_files(ctx, settings, plan)
    plan.timings["plan_task_s"] = time.perf_counter() - started
    return replace(facts, written=tuple(written), rewritten=rewritten, timings=dict(plan.timings))


#: Seconds a fused planning task waits for its driver to begin the instant.
_GO_TIMEOUT_S = 600.0


def _wait_for_go(staging: Staging, attempt: str) -> WriteSettings | None:
    deadline = time.monotonic() + _GO_TIMEOUT_S
    delay = 0.002
    while True:
        found, settings = staging.peek(f"{attempt}/go")
        if found:
            return settings
        if time.monotonic() > deadline:
            raise DriverGoneError(f"no word from the driver {_GO_TIMEOUT_S:.0f} s after planning {attempt}")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


@contextmanager
def _wide_arrow_pool() -> Iterator[None]:
    """pyspark starts Python workers with ``OMP_NUM_THREADS`` of one task's cores, which
    also caps pyarrow's thread pool; a planning task is one of few (one per 8M rows)
    and reads, joins and sorts millions of keys, so it widens the pool to the machine
    while it runs."""
    threads = pa.cpu_count()
    pa.set_cpu_count(max(threads, os.cpu_count() or 1))
    try:
        yield
    finally:
        pa.set_cpu_count(threads)


def plan_part(task: PlanTask) -> PlanPart:
    """The staged path's planning: plan a share of the buckets; each touched group's
    rows go to staging, for :func:`write_group`."""
    with _wide_arrow_pool():
        return _plan_part(task, time.perf_counter())


def _plan_part(task: PlanTask, started: float) -> PlanPart:
    ctx, staging = task.ctx, task.staging
    # The task has the machine's cores (one of few tasks): staged files are read and
    # written on a thread each, since IPC compression and file I/O release the GIL.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        rows = prepared(task, staged_rows(staging, task.inputs, task.task, task.tasks, pool, task.staged_as))
        plan = local_plan(ctx, task.operation, rows, task.merge)
        claims = pool.submit(_put_claims, staging, task.attempt, KeyClaims.of(plan, ctx.config.record_key))
        pending: list[tuple[GroupPart, pa.Table]] = []  # each part and its rows, staged below
        for r in plan.rewrites:
            assert r.incoming is not None and r.predicate is None  # no predicates on these writes
            flags = (INSERTS if r.inserts else 0) | (NEW_KEYS_ONLY if r.new_keys_only else 0)
            pending.append(
                (GroupPart("rewrite", r.slice.file_group, r.partition, flags, "", r.incoming.num_rows), r.incoming)
            )
        for lg in plan.logs:
            flags = INSERTS if lg.inserts else 0  # a small group filled with new keys
            pending.append(
                (GroupPart("log", lg.slice.file_group, lg.partition, flags, "", lg.incoming.num_rows), lg.incoming)
            )
        for nf in plan.new_files:
            for chunk, per_file in new_file_chunks(ctx, nf):
                pending.append(
                    (
                        GroupPart(
                            "new",
                            new_file_group_id(),
                            nf.partition,
                            INSERTS if nf.inserts else 0,
                            "",
                            chunk.num_rows,
                            per_file,
                        ),
                        chunk,
                    )
                )
        paths = pool.map(lambda p: staging.put_table(task.attempt, p[1]), pending)
        groups = tuple(replace(part, path=path) for (part, _), path in zip(pending, paths))
        claims_path = claims.result()
    plan.timings["plan_task_s"] = time.perf_counter() - started  # the longest task's, in the result
    return PlanPart.of(plan, groups, claims_path)


# -- 3. write ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupWrite:
    """Write one file group from the parts the planning tasks staged for it."""

    settings: WriteSettings
    staging: Staging
    slice: FileSlice | None  # the group's latest slice ("rewrite")
    parts: tuple[GroupPart, ...]
    file_group: str  # a new group's id may be another part's: new chunks are packed


def write_group(task: GroupWrite) -> tuple[str, str, str, Written | None]:
    """Stage 3: (kind, partition, file group, what the file task returned)."""
    st, first = task.settings, task.parts[0]
    incoming = pa.concat_tables([task.staging.table(p.path) for p in task.parts], promote_options="permissive")
    outcome: Written | None
    if first.kind == "new":
        outcome = write_task(new_file_task(st, first.partition, task.file_group, incoming, bool(first.flags & INSERTS)))
    elif first.kind == "log":
        base = task.slice.base.path if task.slice is not None and task.slice.base is not None else None
        inserts = any(p.flags & INSERTS for p in task.parts)
        outcome = write_task(LogTask(st, first.partition, task.file_group, incoming, base, inserts))
    else:
        assert task.slice is not None
        outcome = write_task(
            RewriteTask(
                st,
                task.slice,
                incoming,
                None,
                any(p.flags & INSERTS for p in task.parts),
                all(p.flags & NEW_KEYS_ONLY for p in task.parts),
            )
        )
    return first.kind, first.partition, task.file_group, outcome


def group_writes(
    settings: WriteSettings, staging: Staging, slices: dict[tuple[str, str], FileSlice], parts: list[GroupPart]
) -> list[GroupWrite]:
    """One task per file group: an existing group's parts together; new chunks of a
    partition packed first-fit, largest first, into files of about the target size (so
    a small write spread over many tasks still writes one file per partition)."""
    existing: dict[tuple[str, str], list[GroupPart]] = {}
    new: dict[str, list[GroupPart]] = {}
    for p in parts:
        if p.kind == "new":
            new.setdefault(p.partition, []).append(p)
        else:
            existing.setdefault((p.partition, p.file_group), []).append(p)
    out = [GroupWrite(settings, staging, slices.get(k), tuple(ps), k[1]) for k, ps in existing.items()]
    for chunks in new.values():
        capacity = min(c.rows_per_file for c in chunks)
        bins: list[list[GroupPart]] = []
        for c in sorted(chunks, key=lambda c: -c.rows):
            home = next((b for b in bins if sum(x.rows for x in b) + c.rows <= capacity), None)
            if home is None:
                bins.append([c])
            else:
                home.append(c)
        out.extend(GroupWrite(settings, staging, None, tuple(b), b[0].file_group) for b in bins)
    # The longest tasks first, so the last wave is short.
    return sorted(out, key=lambda g: -sum(p.rows for p in g.parts))


#: The key tables of :class:`KeyClaims` a Spark write stages (no predicate: Spark writes
#: have none).
_CLAIM_TABLES = ("inserted", "log_upserted", "deleted", "deleted_in_group", "updated")


def _put_claims(staging: Staging, kind: str, claims: KeyClaims) -> str:
    """Stage ``claims``: each key table as IPC (a pickled slice would carry its
    parent's whole buffers), and the index of them; the index's path."""
    tables = {name: staging.put_table(kind, t) for name in _CLAIM_TABLES if (t := getattr(claims, name)) is not None}
    return staging.put_table(
        kind,
        pa.table(
            {"name": list(tables), "path": list(tables.values())},
            schema=pa.schema([("name", pa.string()), ("path", pa.string())]),
        ),
    )


def claims_of(staging: Staging, key: tuple[str, ...], paths: list[str]) -> KeyClaims:
    """One attempt's key claims from its planning tasks' claims."""
    parts = [dict(zip(*staging.table(p).to_pydict().values())) for p in paths]

    def concat(name: str) -> pa.Table | None:
        tables = [staging.table(c[name]) for c in parts if name in c]
        return pa.concat_tables(tables, promote_options="permissive") if tables else None

    return KeyClaims(key=key, **{name: concat(name) for name in _CLAIM_TABLES})
