"""The staging folder of a Spark write, and stage 1: the user's rows copied into it.

Stage 1 (:func:`stage_input`) takes one of two routes:

- a DataFrame that is a bare scan of local Parquet files (``spark.read.parquet(p)``,
  perhaps ``.select`` of some columns; up to one planning task's rows) is staged as those files themselves, hard-linked
  into the folder, and the planning task reads them with pyarrow: no row is decoded by
  Spark or crosses from the JVM into Python;
- any other DataFrame crosses once: ``mapInArrow`` tasks write its rows as Arrow IPC
  files, each row with its bucket (:func:`split_input`). Spark's own Parquet writer
  (``df.write`` into the folder, then pyarrow) was measured as the alternative: Spark's
  Parquet encoding cost as much CPU as the JVM's Arrow conversion or more, and Python's
  side of the crossing is small (docs/performance.md, "Where a Spark upsert's time
  goes"); the JVM may also hold no credentials for a table on an object store.

A Spark write keeps what moves between its stages on the table's own storage
(``.lakeline/staging/<write id>/``), not in Spark: no shuffle, no cache, and the driver
never holds rows. Every attempt of the write replays from the staged input, even when
the DataFrame's source is not repeatable. Storage every executor can reach is what a
lakeline table needs anyway, since executors write its data files. On an object store
the folder is objects under that prefix like the rest of the table: nothing in it is
renamed (a put appears whole), and removing it deletes the objects under it.

The driver owns the folder while the write runs (an owner file it keeps beating, see
:mod:`lakeline.timeline.storage.staging_folders`) and removes it when the write ends. A driver
killed mid-write cannot: rollback and cleaning remove the folder once its owner has
stopped beating and no instant it names is alive.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame

from ..indexes.bloom import key_hashes
from ..timeline.storage.data_reads import PARQUET_READ
from ..timeline.storage.filesystem import Storage
from ..timeline.storage.staging_folders import folder_of
from .errors import reraise_typed
from .shipping import pack, unpack
from .types import to_arrow_schema


@dataclass(frozen=True)
class Staging:
    """The staging folder of one Spark write, on the table's storage."""

    storage: Storage
    folder: str  # relative to the table

    @classmethod
    def new(cls, storage: Storage) -> Staging:
        return cls(storage, folder_of(uuid.uuid4().hex))

    @property
    def write_id(self) -> str:
        """The write's id: the folder's name, and the owner file's ``write``."""
        return posixpath.basename(self.folder)

    def put_table(self, kind: str, table: pa.Table) -> str:
        """Store ``table`` as an Arrow IPC file under a fresh name; its relative path."""
        with self.table_writer(kind, table.schema) as out:
            out.writer.write_table(table)
        return out.rel

    def table_writer(self, kind: str, schema: pa.Schema) -> TableFile:
        """A new IPC file to write batches into (a context manager: closing it ends the file)."""
        rel = posixpath.join(self.folder, kind, uuid.uuid4().hex)
        path = self.storage.path(rel)
        self.storage.mkdirs(posixpath.dirname(path))
        sink = self.storage.fs.open_output_stream(path)
        return TableFile(rel, sink, pa.ipc.new_stream(sink, schema, options=self._options()))

    def table(self, rel: str) -> pa.Table:
        """A table :meth:`put_table` stored. A local file is memory-mapped: its rows are
        read from the page cache where they are, not copied."""
        path = self.storage.path(rel)
        if self.storage.is_local:
            return pa.ipc.open_stream(pa.memory_map(path)).read_all()
        with self.storage.fs.open_input_stream(path) as f:
            return pa.ipc.open_stream(f).read_all()

    def parquet(self, rel: str, schema: pa.Schema) -> pa.Table:
        """A staged Parquet file (a scanned source file), its columns of ``schema`` in
        ``schema``'s types: the Arrow types ``mapInArrow`` would have given them. Spark
        writes timestamps as INT96 by default (UTC instants), which pyarrow reads as
        nanoseconds, out of range before 1677; read as microseconds, Spark's own unit."""
        with self.storage.fs.open_input_file(self.storage.path(rel)) as f:
            rows = pq.read_table(f, columns=schema.names, coerce_int96_timestamp_unit="us", **PARQUET_READ)
        return rows.select(schema.names).cast(schema)

    def _options(self) -> pa.ipc.IpcWriteOptions:
        # Staged tables live for seconds and are read once or twice. On a local disk
        # they stay in the page cache, where LZ4 cost more CPU than it saved (a 5M-row
        # planning task spent 1 s reading its input back, 0.4 s writing its claims);
        # across a network, bytes are what cost.
        return pa.ipc.IpcWriteOptions(compression=None if self.storage.is_local else "lz4")

    def publish(self, name: str, value: Any) -> None:
        """Store ``value`` (pickled) under ``name`` in the folder, for a reader that
        polls for it with :meth:`peek`: the name appears only once the whole value is
        there (written aside and renamed on a local disk, one put on an object store),
        so a reader never sees half of it.

        The table's ``ObjectStore`` in ``value`` (write settings hold the storage) is
        pickled as a reference, never with its options: the secret key stays off the
        store, and :meth:`peek` puts the reader's own store back.

        Raises:
            ValueError: ``value`` holds another store than the table's.
        """
        blob, stores = pack(value)
        if any(s != self.storage.objects for s in stores):
            raise ValueError("a published value may hold no object store but the table's own")
        path = self.storage.path(posixpath.join(self.folder, name))
        self.storage.mkdirs(posixpath.dirname(path))
        self.storage.replace_bytes(path, blob)

    def peek(self, name: str) -> tuple[bool, Any]:
        """(True, the value) once :meth:`publish` stored ``name``; (False, None) before."""
        path = self.storage.path(posixpath.join(self.folder, name))
        if not self.storage.exists(path):
            return False, None
        stores = () if self.storage.objects is None else (self.storage.objects,)
        return True, unpack(self.storage.read_bytes(path), stores)

    def remove(self, kind: str | None = None) -> None:
        self.storage.delete_dir(self.storage.path(self.folder if kind is None else posixpath.join(self.folder, kind)))


@dataclass(frozen=True)
class TableFile:
    """An IPC file being written into staging; :attr:`rel` is where it is."""

    rel: str
    sink: pa.NativeFile
    writer: pa.ipc.RecordBatchStreamWriter

    def __enter__(self) -> TableFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.writer.close()
        self.sink.close()


# -- 1. split ----------------------------------------------------------------------------------

STAGED_SCHEMA = "path string, rows long"
#: The staged input's bucket column: a hash of the record identity modulo
#: :data:`BUCKETS`; planning task ``i`` of ``n`` takes the rows whose bucket is ``i`` modulo ``n``.
BUCKET = "__lakeline_bucket"  # under the reserved prefix: never a user column
BUCKETS = 4096


def stage_input(
    df: DataFrame, staging: Staging, identity: list[str], one_task_rows: int
) -> tuple[list[tuple[str, int]], pa.Schema | None]:
    """Stage 1: ``df``'s rows in the staging folder; (path, rows) of each file in input
    order, and the Arrow schema to read them as: Parquet files for one planning task
    (``df`` is a bare scan of at most ``one_task_rows`` rows, see :func:`_scanned_files`),
    else None: IPC files with a bucket per row, written by :func:`split_input`."""
    try:
        files = _scanned_files(df, one_task_rows) if staging.storage.is_local else None
        if files is not None:
            return _link_files(staging, files), to_arrow_schema(df.schema)
        rows = df.mapInArrow(split_input(staging, identity), STAGED_SCHEMA).collect()
    except Exception as e:  # noqa: BLE001
        reraise_typed(e)
        raise
    return [(r.path, r.rows) for r in rows], None


def _scanned_files(df: DataFrame, one_task_rows: int) -> list[tuple[str, int]] | None:
    """The local Parquet files ``df`` is a bare scan of (``spark.read.parquet(paths)``,
    perhaps some of its columns chosen by name: no filter, no computed column, no
    partition columns, no read option), with their rows,
    when pyarrow reads every one of them as Spark would (:func:`_rows_as`) and they hold
    at most ``one_task_rows`` rows; None otherwise.

    Those rows are what the DataFrame holds, so the planning task reads the files itself
    and no row is decoded by Spark or crosses from the JVM into Python: that costs
    0.6-0.8x the local engine's whole upsert (docs/performance.md, "Where a Spark
    upsert's time goes"). Only one planning task: its rows need no bucket."""
    jdf = getattr(df, "_jdf", None)  # None on Spark Connect: no plan to look at
    plan = None if jdf is None else jdf.queryExecution().optimizedPlan()
    if plan is not None and plan.nodeName() == "Project":  # columns chosen by name: read only those
        chosen = plan.projectList()
        if any(chosen.apply(i).getClass().getSimpleName() != "AttributeReference" for i in range(chosen.size())):
            return None
        plan = plan.child()
    if plan is None or plan.nodeName() != "LogicalRelation" or plan.isStreaming():
        return None
    rel = plan.relation()
    if not (
        rel.getClass().getSimpleName() == "HadoopFsRelation"
        and rel.fileFormat().getClass().getSimpleName() == "ParquetFileFormat"
        and rel.partitionSchema().length() == 0
        and not rel.bucketSpec().isDefined()
        and set(str(rel.options().keySet().mkString("\0")).lower().split("\0")) <= {"path", "paths"}
    ):
        return None
    urls = [urlparse(u) for u in rel.inputFiles()]
    # Many small files: the driver would read every footer, one after the other.
    if len(urls) > _MAX_SCANNED_FILES or any(u.scheme != "file" for u in urls):
        return None
    target, files, total = to_arrow_schema(df.schema), [], 0
    for path in sorted(unquote(u.path) for u in urls):
        rows = _rows_as(path, target)
        if rows is None or (total := total + rows) > one_task_rows:
            return None
        if rows:
            files.append((path, rows))
    return files


def _rows_as(path: str, target: pa.Schema) -> int | None:
    """The rows of the Parquet file at ``path`` if pyarrow reads its columns as Spark does
    for ``target`` (the scan's schema): the same names and types, or types
    :meth:`Staging.parquet` casts without changing a value (dictionary-encoded strings,
    timestamp units, Spark's INT96 instants); None when they may differ (a file Spark
    would rebase from the legacy calendar, a column Spark converts, a name in other case)."""
    meta = pq.read_metadata(path)
    if any(k.startswith(b"org.apache.spark.legacy") for k in meta.metadata or {}):
        return None
    int96 = {c.path for c in (meta.schema.column(i) for i in range(meta.num_columns)) if c.physical_type == "INT96"}
    have = meta.schema.to_arrow_schema()
    for f in target:
        if f.name not in have.names:
            return None
        t = have.field(f.name).type
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_timestamp(t) and pa.types.is_timestamp(f.type):
            if (t.tz is None) != (f.type.tz is None) and not (f.name in int96 and f.type.tz is not None):
                return None
        elif t != f.type:
            return None
    return meta.num_rows


def _link_files(staging: Staging, files: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The scanned files in the staging folder: hard links (the same disk: no bytes
    copied), else copies. Every attempt replays from them even if the source folder is
    rewritten meanwhile, since Parquet writers never change a file in place."""
    folder = staging.storage.path(staging.folder, "input")
    staging.storage.mkdirs(folder)
    staged = []
    for i, (path, rows) in enumerate(files):
        rel = posixpath.join(staging.folder, "input", f"{i:06d}-{posixpath.basename(path)}")
        try:
            os.link(path, staging.storage.path(rel))
        except OSError:  # another disk, or no hard links there
            shutil.copyfile(path, staging.storage.path(rel))
        staged.append((rel, rows))
    return staged


def split_input(
    staging: Staging, identity: list[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of stage 1: the input as IPC files, each row with its
    bucket, so every copy of a record goes to one planning task.

    Rows stay in input order (no sort by bucket): a planning task that takes every
    bucket, the common case, reads the files as they are, and a sorted input stays
    sorted. A task writes a file every :data:`_FLUSH_ROWS` rows, so its memory is
    bounded."""

    def split(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        out: TableFile | None = None
        held = 0

        def flush() -> pa.RecordBatch:
            assert out is not None
            out.close()
            return pa.RecordBatch.from_pydict({"path": [out.rel], "rows": pa.array([held], pa.int64())})

        for i, batch in enumerate(batches):
            if not batch.num_rows:
                continue
            if identity:
                bucket = key_hashes(pa.Table.from_batches([batch]), identity) % np.uint64(BUCKETS)
            else:  # nothing to keep together: spread the batches
                bucket = np.full(batch.num_rows, (i + uuid.uuid4().int) % BUCKETS)
            batch = batch.append_column(BUCKET, pa.array(bucket.astype(np.int16)))
            if out is None:
                out = staging.table_writer("input", batch.schema)
            out.writer.write_batch(batch)
            held += batch.num_rows
            if held >= _FLUSH_ROWS:
                yield flush()
                out, held = None, 0
        if out is not None:
            yield flush()

    return split


def staged_rows(
    staging: Staging, paths: tuple[str, ...], task: int, tasks: int, pool: Executor, schema: pa.Schema | None = None
) -> pa.Table:
    """Planning task ``task`` of ``tasks``: its rows of the staged input, in input order.
    ``schema``: the staged Parquet files' (:func:`stage_input`: one task's, no bucket);
    None: IPC files."""

    def share(path: str) -> pa.Table:
        if schema is not None:
            return staging.parquet(path, schema)
        rows = staging.table(path)
        if tasks > 1:
            bucket = rows.column(BUCKET).to_numpy()
            rows = rows.filter(pa.array(bucket % tasks == task))
        return rows.drop_columns([BUCKET])

    return pa.concat_tables(pool.map(share, paths))


#: Files a bare scan may have to be staged as its files.
_MAX_SCANNED_FILES = 1024
#: Rows a stage-1 task writes per staged file.
_FLUSH_ROWS = 1_000_000
