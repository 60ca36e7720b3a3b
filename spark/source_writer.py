"""The write side of the ``lakeline`` data source: ``df.write.format("lakeline")``.

Spark's Python data source API runs ``write`` in each task and ``commit`` once, in a
Python worker on the driver's machine that has no SparkSession. So the tasks only
*stage* their rows (Parquet files under ``.lakeline/staging/<write id>/``, one per task
attempt), and ``commit`` makes one lakeline write of the staged files named by the
successful attempts' messages, through the local write path: the same planning,
conflict rules, key check, index entries and replays as ``Table.upsert`` and friends.
Staged files of failed or speculative attempts are never named by a message, so they
are never read; the staging folder goes away after the commit.

``abort`` only removes the staging folder. Spark may call it after ``commit`` raised
late (the lakeline commit had already landed): removing staged input can never undo a
commit, so a landed write stays landed.

While the tasks stage, the folder has no owner file (the tasks run in other processes
than ``commit``, and nothing beats for the write): a folder left by a killed
application goes when rollback or cleaning finds its newest file older than
``clean.orphan-age-ms``. ``commit`` owns it (an owner file it beats) while it runs, so
a commit killed midway leaves a folder removed once that beat is stale
(:mod:`lakeline.timeline.storage.staging_folders`).

For large DataFrames prefer :func:`lakeline.spark.write`, whose executors write the
table's files themselves; here the commit reads the staged rows in one process.
"""

from __future__ import annotations

import posixpath
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from ..table.table import Table
from ..timeline.commit_metadata import Operation
from ..timeline.errors import SchemaMismatchError, UnsupportedOperationError
from ..timeline.storage.filesystem import Storage
from ..timeline.storage.staging_folders import OwnerBeat, folder_of
from .source import open_table

#: Operations of the ``operation`` option (``mode("overwrite")`` means overwrite).
APPEND_OPERATIONS = (Operation.INSERT, Operation.UPSERT, Operation.DELETE)


@dataclass(frozen=True)
class Staged(WriterCommitMessage):
    """One task attempt's staged rows (``path`` relative to the table; None: no rows)."""

    path: str | None
    rows: int


def write_operation(options: Mapping[str, str], overwrite: bool) -> Operation:
    """The lakeline operation of a DataFrame write.

    Raises:
        UnsupportedOperationError: an unknown ``operation`` option, or one given with
            overwrite mode.
    """
    op = options.get("operation")
    if overwrite:
        if op not in (None, Operation.OVERWRITE):
            raise UnsupportedOperationError(
                f"mode('overwrite') overwrites; the operation option {op!r} goes with mode('append')"
            )
        return Operation.OVERWRITE
    op = op or Operation.INSERT
    if op not in APPEND_OPERATIONS:
        raise UnsupportedOperationError(
            f"unknown operation {op!r}; one of {', '.join(APPEND_OPERATIONS)} (or mode('overwrite'))"
        )
    return Operation(op)


class LakelineWriter(DataSourceArrowWriter):
    """Stages each task's rows, then commits them as one lakeline write."""

    def __init__(self, path: str | None, options: Mapping[str, str], overwrite: bool) -> None:
        self.path = path
        # In memory only: this writer is pickled to the tasks and to ``commit``'s worker.
        self.options = dict(options)
        self.operation = write_operation(options, overwrite)
        table = open_table(path, self.options)  # fails here, on the driver, for a path that is not a table
        self.storage: Storage = table.storage
        self.staging = folder_of(uuid.uuid4().hex)
        self.beat_ms = table.config.props.heartbeat_interval_ms

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        return _stage(self.storage, self.staging, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._commit(messages, None)

    def _commit(self, messages: list[WriterCommitMessage | None], txn: tuple[str, int] | None) -> None:
        owner = OwnerBeat(self.storage, posixpath.basename(self.staging), self.beat_ms)
        try:
            owner.start()
            staged = [m.path for m in messages if isinstance(m, Staged) and m.path is not None]
            tables = [pq.read_table(self.storage.path(rel), filesystem=self.storage.fs) for rel in staged]
            t = open_table(self.path, self.options)
            if tables:
                try:
                    rows = pa.concat_tables(tables, promote_options="permissive")
                except pa.ArrowInvalid as e:
                    raise SchemaMismatchError(f"the staged rows do not share one schema: {e}") from None
            else:
                rows = _empty(t, self.operation)
            getattr(t, self.operation)(rows, txn=txn)
        finally:
            owner.stop()  # before removing: a late beat must find nothing to rewrite
            self._remove_staging()

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._remove_staging()

    def _remove_staging(self) -> None:
        self.storage.delete_dir(self.storage.path(self.staging))


class LakelineStreamWriter(LakelineWriter, DataSourceStreamArrowWriter):
    """``df.writeStream.format("lakeline")``: each micro-batch staged like a batch write
    and committed as one lakeline write with ``txn=(query, batch id)``, so a batch Spark
    commits again after a crash (a driver killed between the lakeline commit and its own
    checkpoint) lands nothing the second time. The query is named by its checkpoint
    location (the option Spark passes; its query id is stable across restarts exactly as
    the location is), or by ``txn_app_id``."""

    def __init__(self, path: str | None, options: Mapping[str, str]) -> None:
        super().__init__(path, options, overwrite=False)
        app = options.get("txn_app_id") or options.get("checkpointlocation")
        if not app:
            raise UnsupportedOperationError(
                "a lakeline stream writes exactly once by its query's name: set option checkpointLocation "
                "(or txn_app_id)"
            )
        self.app_id = f"spark-stream:{str(app).rstrip('/')}"

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        self._commit(messages, (self.app_id, batchId))

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # type: ignore[override]
        self._remove_staging()


def _stage(storage: Storage, staging: str, iterator: Iterator[pa.RecordBatch]) -> Staged:
    """Stage one task attempt's rows as a Parquet file under ``staging``."""
    batches = [b for b in iterator if b.num_rows]
    if not batches:
        return Staged(None, 0)
    rows = pa.Table.from_batches(batches)
    rel = posixpath.join(staging, f"{uuid.uuid4().hex}.parquet")
    target = storage.path(rel)
    storage.mkdirs(posixpath.dirname(target))
    with storage.fs.open_output_stream(target) as sink:
        pq.write_table(rows, sink, compression="zstd")
    return Staged(rel, rows.num_rows)


def _empty(t: Table, operation: str) -> pa.Table:
    cfg = t.config
    if operation == Operation.DELETE:
        return pa.schema([cfg.schema.field(k) for k in cfg.record_key]).empty_table()
    return cfg.schema.empty_table()
