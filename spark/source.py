"""The ``lakeline`` Spark data source: ``spark.read.format("lakeline")`` and
``df.write.format("lakeline")``.

Options: ``as_of`` (an instant id or an ISO date-time), ``timeline`` (the table's
timeline store, as for ``Table.open``), for writes ``operation``, and for a table on an
object store its storage options (deltalake's keys as they are,
``AWS_ENDPOINT_URL``..., or any key after ``storage.``; :func:`open_table`). Reads plan on
the driver (the snapshot and its slices) and read one Spark partition per file slice
through the tasks of :mod:`.read`; writes stage and commit through
:mod:`.source_writer`. A table that does not exist is created by
``lakeline.spark.create_table``, never by a write.

Spark's filter pushdown for Python data sources is not used (pyspark 4.3 keeps pushed
filters on a reused DataFrame: see :mod:`.filters`); ``lakeline.spark.read(filter=...)``
prunes instead.

Why storage options have a spelling of their own: Spark hands a data source its options as one flat map with
lower-cased keys, next to Spark's and lakeline's own (``path``, ``as_of``,
``operation``...). A storage option is therefore recognised by its name: deltalake's
keys as users already write them (``AWS_ENDPOINT_URL``, ``AWS_SECRET_ACCESS_KEY``,
``GOOGLE_SERVICE_ACCOUNT``, ``AZURE_STORAGE_ACCOUNT_KEY``..., any case), or any other
object-store key after ``storage.`` (``storage.timeout``). Absent keys come from the
environment of the process that opens the store, as for ``Table.open``.

The options live in memory only: in the data source's reader and writer, which Spark
pickles to its Python workers, and in the ``ObjectStore`` the tasks carry.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from datetime import datetime
from functools import partial

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.types import StructType

from ..table.table import Table
from ..timeline.errors import InvalidPropertyError, TableNotFoundError, UnsupportedOperationError
from .read import SliceRows, as_of_value, plan, slice_batches
from .stream_source import ChangesReader, ChangesStreamReader, change_columns, wants_changes
from .types import spark_readable, to_spark_schema

#: Option prefixes of deltalake's storage keys, passed on as they are.
STORE_PREFIXES = ("aws_", "google_", "azure_")
#: The prefix of any other object-store option (``storage.timeout``, ``storage.allow_http``).
STORAGE_PREFIX = "storage."


def storage_options_of(options: Mapping[str, str]) -> dict[str, str]:
    """The storage options among a data source's options. An unknown key under one of
    these prefixes is refused when the table is opened (``StorageConfigError`` naming
    the key, never its value)."""
    out: dict[str, str] = {}
    for key, value in options.items():
        low = str(key).lower()
        if low.startswith(STORAGE_PREFIX):
            out[low[len(STORAGE_PREFIX) :]] = value
        elif low.startswith(STORE_PREFIXES):
            out[low] = value
    return out


def open_table(path: str | None, options: Mapping[str, str]) -> Table:
    """The table at ``path``, with the ``timeline`` and storage options of ``options``.

    Raises:
        TableNotFoundError: no path, or no table there.
        StorageConfigError: a bad storage option.
    """
    if not path:
        raise TableNotFoundError("the lakeline data source needs a path: load(path) / save(path)")
    return Table.open(path, options.get("timeline"), storage_options_of(options))


class LakelineDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "lakeline"

    def _table(self) -> Table:
        return open_table(self.options.get("path"), self.options)

    def schema(self) -> StructType:
        table = self._table()
        if wants_changes(self.options):  # a change read: the table's columns and _op
            return to_spark_schema(spark_readable(change_columns(table, self.options)))
        return to_spark_schema(spark_readable(table.config.schema))

    def reader(self, schema: StructType) -> DataSourceReader:
        if wants_changes(self.options):
            return ChangesReader(self._opener(), self.options)
        return LakelineReader(self._table(), as_of_value(self.options.get("as_of")))

    # -- streams of changes (spark/stream_source.py) --------------------------------------

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Raises: InvalidPropertyError: no ``starting_instant`` (the stream's columns
        and first offset depend on it)."""
        if not wants_changes(self.options):
            raise InvalidPropertyError(
                "a lakeline stream reads changes: set option starting_instant (an instant id, earliest or latest)"
            )
        return ChangesStreamReader(self._opener(), self.options)

    def _opener(self) -> partial[Table]:
        """Opens the table where it is called (a reader is pickled to executors: a table
        handle is not, its path and options are)."""
        return partial(open_table, self.options.get("path"), dict(self.options))

    # -- writes (spark/source_writer.py) --------------------------------------------------

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .source_writer import LakelineWriter

        return LakelineWriter(self.options.get("path"), self.options, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Raises: UnsupportedOperationError: complete mode (a stream inserts, upserts or
        deletes), or no query name to write exactly once by."""
        from .source_writer import LakelineStreamWriter

        if overwrite:
            raise UnsupportedOperationError("a lakeline stream appends (outputMode append/update), never overwrites")
        return LakelineStreamWriter(self.options.get("path"), self.options)


class SlicePartition(InputPartition):
    """One file slice of the snapshot read."""

    def __init__(self, task: SliceRows) -> None:
        super().__init__(task.slice.file_group if task.slice is not None else None)
        self.task = task


class LakelineReader(DataSourceReader):
    """Reads a snapshot planned when the query is planned (on the driver)."""

    def __init__(self, table: Table, as_of: int | datetime | None) -> None:
        self.tasks, _ = plan(table, None, None, as_of)

    def partitions(self) -> list[InputPartition]:
        return [SlicePartition(t) for t in self.tasks]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlicePartition)
        yield from slice_batches(partition.task)
