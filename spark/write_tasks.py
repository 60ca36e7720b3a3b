"""The executor side of a Spark write: the three task kinds and the staging they share.

Each task reads what it needs from, and leaves what it produces in, the write's staging
folder on the table's own storage (``.lakeline/staging/<write id>/``), and returns only a
small description to the driver: Spark moves no rows between the stages (no shuffle, no
cache), and the driver never holds them. Storage every executor can reach is what a
lakeline table needs anyway, since executors write its data files.

1. :func:`split_input` (``mapInArrow`` over the user's DataFrame): the input batches,
   each row with a bucket (a hash of its record identity), written as Arrow IPC files.
2. :func:`plan_part` (one task per share of the buckets, per attempt): the rows are
   checked, conformed and deduplicated, then planned by the local planner against the
   attempt's snapshot; each file group's incoming rows go to an IPC file, the key
   claims to IPC files the driver reads only if a concurrent commit needs them.
3. :func:`write_group` (one task per file group): the local file task (a rewrite, a
   log, a new file) over that group's incoming rows.
"""

from __future__ import annotations

import os
import pickle
import posixpath
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
import pyarrow as pa

from ..indexes.bloom import key_hashes
from ..table.context import TableContext
from ..table.files import Written
from ..table.group_tasks import LogTask, RewriteTask, WriteSettings, write_task
from ..table.key_check import KeyClaims
from ..table.operations import plan_delete, plan_insert, plan_overwrite, plan_upsert
from ..table.plan import WritePlan
from ..table.records import prepare_keys, prepare_rows
from ..table.writer import new_file_chunks, new_file_task
from ..timeline.file_group import FileSlice, new_file_group_id
from ..timeline.storage import META_DIR, Storage
from ..timeline.table_config import TableConfig


@dataclass(frozen=True)
class Staging:
    """The staging folder of one Spark write, on the table's storage."""

    storage: Storage
    folder: str  # relative to the table

    @classmethod
    def new(cls, storage: Storage) -> Staging:
        return cls(storage, posixpath.join(META_DIR, "staging", uuid.uuid4().hex))

    def put(self, kind: str, data: bytes) -> str:
        """Store ``data`` under a fresh name; returns its relative path."""
        rel = posixpath.join(self.folder, kind, uuid.uuid4().hex)
        self.storage.write_bytes(self.storage.path(rel), data)
        return rel

    def get(self, rel: str) -> bytes:
        return self.storage.read_bytes(self.storage.path(rel))

    def remove(self, kind: str | None = None) -> None:
        self.storage.delete_dir(self.storage.path(self.folder if kind is None else posixpath.join(self.folder, kind)))


def _ipc_options() -> pa.ipc.IpcWriteOptions:
    # A function, not a module constant: stage 1's closure is pickled by value with the
    # globals it names, and IpcWriteOptions does not pickle.
    return pa.ipc.IpcWriteOptions(compression="lz4")


def to_ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=_ipc_options()) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


# -- 1. split ----------------------------------------------------------------------------------

STAGED_SCHEMA = "path string, rows long"
#: The staged input's bucket column: a hash of the record identity modulo
#: :data:`BUCKETS`; planning task ``i`` of ``n`` takes the rows whose bucket is ``i`` modulo ``n``.
BUCKET = "_bucket"
BUCKETS = 4096


def split_input(staging: Staging, identity: list[str]
                ) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of stage 1: the input as IPC files, each row with its
    bucket, so every copy of a record goes to one planning task.

    Rows stay in input order (no sort by bucket): a planning task that takes every
    bucket, the common case, reads the files as they are, and a sorted input stays
    sorted. A task writes a file every :data:`_FLUSH_ROWS` rows, so its memory is
    bounded."""

    def split(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        sink: pa.BufferOutputStream | None = None
        writer: pa.ipc.RecordBatchStreamWriter | None = None
        held = 0

        def flush() -> pa.RecordBatch:
            assert sink is not None and writer is not None
            writer.close()
            path = staging.put("input", sink.getvalue().to_pybytes())
            return pa.RecordBatch.from_pydict({"path": [path], "rows": pa.array([held], pa.int64())})

        for i, batch in enumerate(batches):
            if not batch.num_rows:
                continue
            if identity:
                bucket = key_hashes(pa.Table.from_batches([batch]), identity) % np.uint64(BUCKETS)
            else:  # nothing to keep together: spread the batches
                bucket = np.full(batch.num_rows, (i + uuid.uuid4().int) % BUCKETS)
            batch = batch.append_column(BUCKET, pa.array(bucket.astype(np.int16)))
            if writer is None:
                sink = pa.BufferOutputStream()
                writer = pa.ipc.new_stream(sink, batch.schema, options=_ipc_options())
            writer.write_batch(batch)
            held += batch.num_rows
            if held >= _FLUSH_ROWS:
                yield flush()
                sink, writer, held = None, None, 0
        if writer is not None:
            yield flush()

    return split


def staged_rows(staging: Staging, paths: tuple[str, ...], task: int, tasks: int, pool: Executor) -> pa.Table:
    """Planning task ``task`` of ``tasks``: its rows of the staged input, in input order."""

    def share(path: str) -> pa.Table:
        rows = from_ipc(staging.get(path))
        if tasks > 1:
            bucket = rows.column(BUCKET).to_numpy()
            rows = rows.filter(pa.array(bucket % tasks == task))
        return rows.drop_columns([BUCKET])

    return pa.concat_tables(pool.map(share, paths))


#: Rows a stage-1 task writes per staged file.
_FLUSH_ROWS = 1_000_000


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

    @classmethod
    def of(cls, plan: WritePlan, groups: tuple[GroupPart, ...] = (), claims: str | None = None) -> PlanPart:
        return cls(groups, claims, dict(plan.replaced), tuple(plan.replaced_partitions), dict(plan.stats),
                   dict(plan.timings))


@dataclass(frozen=True)
class PlanTask:
    ctx: TableContext
    operation: str
    staging: Staging
    attempt: str  # staging kind of this attempt's files
    inputs: tuple[str, ...]  # the staged input files, in input order
    task: int  # this task's number, of ``tasks``: it plans the buckets equal to it modulo ``tasks``
    tasks: int


def local_plan(ctx: TableContext, operation: str, rows: pa.Table) -> WritePlan:
    if operation == "insert":
        return plan_insert(ctx, rows)
    if operation == "upsert":
        return plan_upsert(ctx, rows)
    if operation == "delete":
        return plan_delete(ctx, rows)
    return plan_overwrite(ctx, rows, None)


def prepared(cfg: TableConfig, operation: str, rows: pa.Table) -> pa.Table:
    """Rows checked, conformed and deduplicated by the local rules."""
    if operation == "delete":
        return prepare_keys(rows, cfg)
    return prepare_rows(rows, cfg)[0]


def plan_part(task: PlanTask) -> PlanPart:
    """Stage 2: plan a share of the buckets; each touched group's rows go to staging.

    pyspark starts Python workers with ``OMP_NUM_THREADS`` of one task's cores, which
    also caps pyarrow's thread pool; a planning task is one of few (one per 8M rows)
    and reads, joins and sorts millions of keys, so it widens the pool to the machine
    while it runs."""
    started = time.perf_counter()
    threads = pa.cpu_count()
    pa.set_cpu_count(max(threads, os.cpu_count() or 1))
    try:
        return _plan_part(task, started)
    finally:
        pa.set_cpu_count(threads)


def _plan_part(task: PlanTask, started: float) -> PlanPart:
    ctx, staging = task.ctx, task.staging
    # The task has the machine's cores (one of few tasks): staged files are read and
    # written on a thread each, since IPC compression and file I/O release the GIL.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        rows = prepared(ctx.config, task.operation, staged_rows(staging, task.inputs, task.task, task.tasks, pool))
        plan = local_plan(ctx, task.operation, rows)
        claims = pool.submit(lambda: staging.put(task.attempt,
                                                 _claims_bytes(KeyClaims.of(plan, ctx.config.record_key))))
        pending: list[tuple[GroupPart, pa.Table]] = []  # each part and its rows, staged below
        for r in plan.rewrites:
            assert r.incoming is not None and r.predicate is None  # no predicates on these writes
            flags = (INSERTS if r.inserts else 0) | (NEW_KEYS_ONLY if r.new_keys_only else 0)
            pending.append((GroupPart("rewrite", r.slice.file_group, r.partition, flags, "", r.incoming.num_rows),
                            r.incoming))
        for lg in plan.logs:
            pending.append((GroupPart("log", lg.slice.file_group, lg.partition, 0, "", lg.incoming.num_rows),
                            lg.incoming))
        for nf in plan.new_files:
            for chunk, per_file in new_file_chunks(ctx, nf):
                pending.append((GroupPart("new", new_file_group_id(), nf.partition, INSERTS if nf.inserts else 0, "",
                                          chunk.num_rows, per_file), chunk))
        paths = pool.map(lambda p: staging.put(task.attempt, to_ipc(p[1])), pending)
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
    incoming = pa.concat_tables([from_ipc(task.staging.get(p.path)) for p in task.parts],
                                promote_options="permissive")
    outcome: Written | None
    if first.kind == "new":
        outcome = write_task(new_file_task(st, first.partition, task.file_group, incoming, bool(first.flags & INSERTS)))
    elif first.kind == "log":
        outcome = write_task(LogTask(st, first.partition, task.file_group, incoming))
    else:
        assert task.slice is not None
        outcome = write_task(RewriteTask(st, task.slice, incoming, None, any(p.flags & INSERTS for p in task.parts),
                                         all(p.flags & NEW_KEYS_ONLY for p in task.parts)))
    return first.kind, first.partition, task.file_group, outcome


def group_writes(settings: WriteSettings, staging: Staging, slices: dict[tuple[str, str], FileSlice],
                 parts: list[GroupPart]) -> list[GroupWrite]:
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


def _claims_bytes(claims: KeyClaims) -> bytes:
    # Each table as IPC, not the pickled tables: a pickled slice carries its parent's
    # whole buffers (5M claimed keys pickled to 0.5 GB in 1 s; as IPC 41 MB in 0.15 s).
    return pickle.dumps({name: to_ipc(t) for name in _CLAIM_TABLES if (t := getattr(claims, name)) is not None})


def claims_of(staging: Staging, key: tuple[str, ...], paths: list[str]) -> KeyClaims:
    """One attempt's key claims from its planning tasks' claims."""
    parts: list[dict[str, bytes]] = [pickle.loads(staging.get(p)) for p in paths]

    def concat(name: str) -> pa.Table | None:
        tables = [from_ipc(c[name]) for c in parts if name in c]
        return pa.concat_tables(tables, promote_options="permissive") if tables else None

    return KeyClaims(key=key, **{name: concat(name) for name in _CLAIM_TABLES})
