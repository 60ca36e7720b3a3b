"""The write side of the ``lakeline`` data source: ``df.write.format("lakeline")``.

Spark's Python data source API runs ``write`` in each task and ``commit`` once, in a
Python worker on the driver's machine that has no SparkSession. So the tasks only
*stage* their rows (Parquet files under ``.lakeline/staging/<write id>/``, one per task
attempt), and ``commit`` makes one lakeline write of the staged files named by the
successful attempts' messages, through the local write path: the same planning,
conflict rules, key check, index entries and replays as ``Table.upsert`` and friends.
Staged files of failed or speculative attempts are never named by a message, so they
are never read; the staging folder goes away after the commit. Which folder that is the
messages say: a stream's ``commit`` runs on a writer Spark makes anew for it, not on the
one its tasks staged with (:meth:`LakelineWriter._folders_of`).

``abort`` only removes the staging folder. Spark may call it after ``commit`` raised
late (the lakeline commit had already landed): removing staged input can never undo a
commit, so a landed write stays landed.

While the tasks stage, the folder has no owner file (the tasks run in other processes
than ``commit``, and nothing beats for the write): a folder left by a killed
application goes when rollback or cleaning finds its newest file older than
``clean.orphan-age-ms``. ``commit`` owns it (an owner file it beats) while it runs, so
a commit killed midway leaves a folder removed once that beat is stale
(:mod:`lakeline.timeline.storage.staging_folders`).

**Changes in one stream.** Rows of an ``upsert`` that carry an ``_op`` column (as CDC
feeds and lakeline's own change stream do: ``insert``, ``update``, ``update_after``,
``update_before``, ``delete``) are applied as changes: a key whose rows hold a
``delete`` is deleted, and only its rows that arrived after its last delete are upserted;
``update_before`` rows are dropped. When no key is both deleted and upserted (after that
rule) such a batch is one lakeline write (:func:`lakeline.table.write.changes.write_changes`:
one tag of both sets of keys, ``txn`` = (app, batch id)). Otherwise (a key deleted and
re-inserted in one batch, whose order one write cannot keep, or deletes without the
partition columns of a partitioned table) it lands as two, its deletes first (``txn`` =
(``<app>#deletes``, batch id)) and then its upserts (``txn`` = (app, batch id)): each
lands exactly once, and a batch Spark runs again after landing only the first lands the
second; between the two commits a reader sees the batch's deletes without its upserts.

For large DataFrames prefer :func:`lakeline.spark.write`, whose executors write the
table's files themselves; here the commit reads the staged rows in one process.
"""

from __future__ import annotations

import posixpath
import re
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from ..table.schema.update import added_since
from ..table.table import Table
from ..table.write.changes import can_combine, write_changes
from ..timeline.commit_metadata import Operation
from ..timeline.errors import InvalidOptionError, LakelineError, SchemaMismatchError, UnsupportedOperationError
from ..timeline.field_ids import with_valid_nulls
from ..timeline.storage.data_reads import PARQUET_READ, PARQUET_WRITE
from ..timeline.storage.event_log.pointer import read_pointer
from ..timeline.storage.filesystem import Storage
from ..timeline.storage.staging_folders import OwnerBeat, folder_of
from .source import open_table
from .types import check_columns

#: Operations of the ``operation`` option (``mode("overwrite")`` means overwrite).
APPEND_OPERATIONS = (Operation.INSERT, Operation.UPSERT, Operation.DELETE)
#: The change column of CDC rows an ``upsert`` applies as changes, and its values that
#: delete a key or carry no new version of it.
CHANGE_COLUMN, DELETE_CHANGE, BEFORE_IMAGE = "_op", "delete", "update_before"
#: Suffix of the ``txn`` application of a change batch's deletes.
DELETES_APP_SUFFIX = "#deletes"
#: A write id (``uuid4().hex``), the name of a staging folder.
_WRITE_ID = re.compile(r"[0-9a-f]{32}")
#: The option that adds a DataFrame's new columns to the table (Delta's name).
MERGE_SCHEMA = "mergeSchema"


@dataclass(frozen=True)
class Staged(WriterCommitMessage):
    """One task attempt's staged rows (``path`` relative to the table; None: no rows)."""

    path: str | None
    rows: int


def merge_schema_of(options: Mapping[str, str]) -> bool | None:
    """The ``mergeSchema`` option (Delta's: a DataFrame's new columns are added to the
    table): ``true`` or ``false``, any case; None when not given (the table's
    ``write.schema-evolution`` decides).

    Raises:
        InvalidOptionError: any other value.
    """
    raw = next((v for k, v in options.items() if str(k).lower() == MERGE_SCHEMA.lower()), None)
    if raw is None:
        return None
    text = str(raw).strip().lower()
    if text not in ("true", "false"):
        raise InvalidOptionError(f"option {MERGE_SCHEMA} is true or false, not {str(raw)!r:.40}")
    return text == "true"


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
    """Stages each task's rows, then commits them as one lakeline write.

    Made when Spark asks for the writer, on the driver, before any task: ``schema`` (the
    DataFrame's) is checked against the table there, and ``mergeSchema``'s new columns
    are added then (:func:`~.types.check_columns`). ``planned_on`` is the schema the
    rows were checked against: columns a schema instant adds before the commit read
    null in them (:func:`~lakeline.table.schema.update.added_since`)."""

    def __init__(
        self, path: str | None, options: Mapping[str, str], overwrite: bool, schema: StructType | None = None
    ) -> None:
        self.path = path
        # In memory only: this writer is pickled to the tasks and to ``commit``'s worker.
        self.options = dict(options)
        self.operation = write_operation(options, overwrite)
        merge = merge_schema_of(options)
        table = kept_table(path, self.options)  # fails here, on the driver, for a path that is not a table
        cfg = table.config if schema is None else check_columns(table, schema, self.operation, merge)
        self.planned_on: pa.Schema = cfg.schema
        self.storage: Storage = table.storage
        self.staging = folder_of(uuid.uuid4().hex)
        self.beat_ms = table.config.props.heartbeat_interval_ms

    def write(self, iterator: Iterator[pa.RecordBatch]) -> Staged:
        return _stage(self.storage, self.staging, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._commit(messages, None)

    def _commit(self, messages: list[WriterCommitMessage | None], txn: tuple[str, int] | None) -> None:
        folders = self._folders_of(messages)
        # The commit owns the folder the tasks staged in while it runs: a cleaner must not
        # judge it by age alone, and a commit killed midway leaves a beat that goes stale.
        owner = OwnerBeat(self.storage, posixpath.basename(folders[0]), self.beat_ms)
        try:
            owner.start()
            staged = [m.path for m in messages if isinstance(m, Staged) and m.path is not None]
            tables = [
                pq.read_table(self.storage.path(rel), filesystem=self.storage.fs, **PARQUET_READ) for rel in staged
            ]
            t = kept_table(self.path, self.options)
            if tables:
                try:
                    rows = pa.concat_tables(tables, promote_options="permissive")
                except pa.ArrowInvalid as e:
                    raise SchemaMismatchError(f"the staged rows do not share one schema: {e}") from None
            else:
                rows = _empty(t, self.operation)
            if self.operation != Operation.DELETE:
                rows = added_since(rows, self.planned_on, t.config.schema)
            if self.operation == Operation.UPSERT and CHANGE_COLUMN in rows.column_names:
                keys = [*t.config.record_key, *(c for c in t.config.partition_by if c in rows.column_names)]
                deletes, rows = split_changes(rows, keys)
                if deletes.num_rows and can_combine(t, rows, deletes):
                    write_changes(t, rows, deletes, txn)  # one tag of both, one commit
                    return
                if deletes.num_rows:
                    t.delete(deletes, txn=None if txn is None else (txn[0] + DELETES_APP_SUFFIX, txn[1]))
            if self.operation == Operation.DELETE:
                rows = _without_filled_partitions(rows, t.config.partition_by)
            getattr(t, self.operation)(rows, txn=txn)
        finally:
            owner.stop()  # before removing: a late beat must find nothing to rewrite
            self._remove_staging(folders)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._remove_staging(self._folders_of(messages))

    def _folders_of(self, messages: Sequence[WriterCommitMessage | None]) -> list[str]:
        """The staging folders the tasks of ``messages`` staged in (relative to the table);
        this writer's own when no message names one.

        Why not only :attr:`staging`: a batch write's ``commit`` runs on the writer the
        tasks were planned with (pickled), but a stream's runs on a writer Spark makes
        anew for each commit (``streamWriter`` in ``python_streaming_sink_runner``), whose
        own folder no task ever wrote: removing only that one left every micro-batch's
        staged input behind. The messages name where the tasks staged; only a name of a
        staging folder (:func:`~lakeline.timeline.storage.staging_folders.folder_of` of a
        write id) is ever taken from them."""
        named = {
            posixpath.dirname(m.path)
            for m in messages
            if isinstance(m, Staged) and m.path is not None and _is_staging_folder(posixpath.dirname(m.path))
        }
        return sorted(named) or [self.staging]

    def _remove_staging(self, folders: Sequence[str]) -> None:
        for folder in folders:
            self.storage.delete_dir(self.storage.path(folder))


class LakelineStreamWriter(LakelineWriter, DataSourceStreamArrowWriter):
    """``df.writeStream.format("lakeline")``: each micro-batch staged like a batch write
    and committed as one lakeline write with ``txn=(query, batch id)``, so a batch Spark
    commits again after a crash (a driver killed between the lakeline commit and its own
    checkpoint) lands nothing the second time. The query is named by its checkpoint
    location (the option Spark passes; its query id is stable across restarts exactly as
    the location is), or by ``txn_app_id``."""

    def __init__(self, path: str | None, options: Mapping[str, str], schema: StructType | None = None) -> None:
        super().__init__(path, options, overwrite=False, schema=schema)
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
        super().abort(messages)


def _stage(storage: Storage, staging: str, iterator: Iterator[pa.RecordBatch]) -> Staged:
    """Stage one task attempt's rows as a Parquet file under ``staging``."""
    batches = [b for b in iterator if b.num_rows]
    if not batches:
        return Staged(None, 0)
    # Spark puts nulls in a null struct's non-nullable fields, which Parquet refuses:
    # they are no values, so they become ones a cast accepts (``write()`` conforms alike).
    rows = with_valid_nulls(pa.Table.from_batches(batches), batches[0].schema)
    rel = posixpath.join(staging, f"{uuid.uuid4().hex}.parquet")
    target = storage.path(rel)
    storage.mkdirs(posixpath.dirname(target))
    with storage.fs.open_output_stream(target) as sink:
        pq.write_table(rows, sink, compression="zstd", **PARQUET_WRITE)
    return Staged(rel, rows.num_rows)


def _is_staging_folder(folder: str) -> bool:
    """Whether ``folder`` (relative to the table) is a write's staging folder, the only
    kind of folder a commit removes on a message's word."""
    write_id = posixpath.basename(folder)
    return _WRITE_ID.fullmatch(write_id) is not None and folder_of(write_id) == folder


def split_changes(rows: pa.Table, keys: Sequence[str]) -> tuple[pa.Table, pa.Table]:
    """CDC rows (with :data:`CHANGE_COLUMN`) as (the keys to delete, the rows to upsert
    after them, in arrival order): a key with a ``delete`` is deleted, and of its rows
    only those after its last delete are upserted (a re-insert), so the two writes in
    that order leave what the rows did one after another, under every merge engine."""
    ops = pc.fill_null(rows.column(CHANGE_COLUMN).cast(pa.string()), "upsert")
    rows = rows.drop_columns([CHANGE_COLUMN])
    keep = pc.not_equal(ops, BEFORE_IMAGE)
    is_delete = pc.equal(ops, DELETE_CHANGE)
    if not pc.any(is_delete).as_py():
        return rows.select(list(keys)).slice(0, 0), rows.filter(keep)
    pos = "__lakeline_change_pos"  # in memory only, under the reserved prefix
    numbered = rows.select(list(keys)).append_column(pos, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    last = numbered.filter(is_delete).group_by(list(keys), use_threads=False).aggregate([(pos, "max")])
    after = numbered.join(last, list(keys), join_type="left outer", use_threads=False)
    later = pc.or_kleene(
        pc.is_null(after.column(f"{pos}_max")), pc.greater(after.column(pos), after.column(f"{pos}_max"))
    )
    wanted = after.column(pos).filter(later)
    mask = np.zeros(rows.num_rows, dtype=bool)
    mask[wanted.to_numpy()] = True
    upserts = rows.filter(pc.and_(pa.array(mask), pc.and_(keep, pc.invert(is_delete))))
    return last.select(list(keys)), upserts


def _without_filled_partitions(keys: pa.Table, partition_by: Sequence[str]) -> pa.Table:
    """A delete's keys without the partition columns that hold only nulls: Spark fills
    a column an ``INSERT INTO view (id) ...`` leaves out with nulls, which would narrow
    the search to the null partition and delete nothing, silently. Without them the
    delete searches every partition (a null partition value is then found there too)."""
    filled = [c for c in partition_by if c in keys.column_names and keys.column(c).null_count == keys.num_rows]
    return keys.drop_columns(filled) if filled and keys.num_rows else keys


def _empty(t: Table, operation: str) -> pa.Table:
    cfg = t.config
    if operation == Operation.DELETE:
        return pa.schema([cfg.schema.field(k) for k in cfg.record_key]).empty_table()
    return cfg.schema.empty_table()


#: Handles :func:`kept_table` keeps in this process, by path and options.
_KEPT: dict[tuple[str | None, tuple[tuple[str, str], ...]], Table] = {}


def kept_table(path: str | None, options: Mapping[str, str]) -> Table:
    """:func:`open_table`'s handle, kept for the life of this process and read again
    where it stopped on each use.

    Why: Spark runs a stream's commits in one Python worker that it reuses from batch to
    batch, and a fresh handle reads the whole active timeline and loads the file-system
    view from a checkpoint each time: both grow with the table's history (0.4 and
    0.6 s a batch after 1,000 CDC batches), while a kept handle reads only the events
    appended since, and extends its last view from memory. Every use of a handle reads
    the log before it plans, so a kept one sees what other writers did. A table created
    anew at the same path (another ``table_uuid`` in its pointer, one small read) is
    opened anew: the kept log would otherwise append to the new one's.
    """
    key = (path, tuple(sorted((k, str(v)) for k, v in options.items())))
    table = _KEPT.get(key)
    if table is not None:
        try:
            same = read_pointer(table.storage).get("table_uuid") == table.config.table_uuid
        except (OSError, LakelineError):
            same = False
        if same:
            table.log.refresh()  # the events appended since its last use, no more
            return table
    table = _KEPT[key] = open_table(path, options)
    return table
