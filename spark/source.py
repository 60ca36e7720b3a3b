"""The ``lakeline`` Spark data source: ``spark.read.format("lakeline")``,
``df.write.format("lakeline")`` and their streams (``spark.readStream`` of the table's
changes, ``df.writeStream`` into it).

Options: ``as_of`` (an instant id or an ISO date-time) or Delta's ``versionAsOf`` (an
instant id) and ``timestampAsOf`` (a date-time), ``timeline`` (the table's timeline
store, as for ``Table.open``), for writes ``operation`` and ``mergeSchema`` (Delta's:
new columns of the DataFrame are added to the table), and for a table on an object
store its storage options (deltalake's keys as they are, ``AWS_ENDPOINT_URL``..., or any
key after ``storage.``; :func:`open_table`). Any other option is refused with
``InvalidOptionError`` (:func:`check_options`), as is ``CREATE TABLE ... USING lakeline``
(:func:`refuse_catalog_table`; a temporary view ``USING lakeline`` carries its path and
works; its options, ``operation`` included, reach its ``INSERT``s, and reads ignore the
write options). Reads plan on the driver and read the file slices through the tasks of
:mod:`.read`; each query reads the newest snapshot at its start, also through a reused
DataFrame or a view (:mod:`.source_reader`, which says why the tasks check it); writes
stage and commit through :mod:`.source_writer`. A table that does not exist is created
by ``lakeline.spark.create_table``, never by a write.

Spark's filter pushdown for Python data sources is not used (pyspark 4.3 keeps what a
pushdown planned on the relation, for later queries and the other scans of one query:
see :mod:`.filters`); ``lakeline.spark.read(filter=...)`` prunes instead.

Why storage options have a spelling of their own: Spark hands a data source its options as one flat map with
lower-cased keys, next to Spark's and lakeline's own (``path``, ``as_of``,
``operation``...). A storage option is therefore recognised by its name: deltalake's
keys as users already write them (``AWS_ENDPOINT_URL``, ``AWS_SECRET_ACCESS_KEY``,
``GOOGLE_SERVICE_ACCOUNT``, ``AZURE_STORAGE_ACCOUNT_KEY``..., any case), or any other
object-store key after ``storage.`` (``storage.timeout``). Absent keys come from the
environment of the process that opens the store, as for ``Table.open``.

The options live in memory only: in the data source's reader and writer, which Spark
pickles to its Python workers, and in the ``ObjectStore`` the tasks carry.

**Changes**, when ``starting_instant`` is given (a stream needs it): offsets are
completed instant ids (``{"instant": id}``). A micro-batch from offset ``a`` to ``b``
holds what the data instants completed after ``a`` up to and including ``b`` changed
(``Table.changes(a, b)``: the table's columns and ``_op``, one row per changed key; with
the option ``images=true`` every change of every instant, ``update_before`` and
``update_after`` rows and ``_instant``). Ranges follow completion order, not instant ids
(an instant requested earlier may complete later), so consecutive batches never skip or
repeat an instant. The timeline merges archived events back in, so a stream reads across
archival; a start whose files the cleaner removed is ``SnapshotExpiredError``, as for
any read of a snapshot out of retention.

Their options: ``starting_instant`` (an instant id, ``earliest`` (the table's first
completed instant: every change since its creation) or ``latest`` (changes from the
query's start on)). A stream without it has the table's columns, as a batch read (Spark
asks for the columns at ``load()``, for streams and batch reads alike): its first
micro-batch is the table as it is, the next ones the rows each instant inserted or
updated; an instant that deleted rows stops it with ``UnsupportedOperationError``
(deletes need ``_op``: give a start), as Delta's stream stops at a change it cannot
carry. Option forms are checked at ``load()``. Further options: ``max_instants_per_batch``
(a bound on data instants per micro-batch; Spark's own ``ReadMaxFiles`` limit counts
instants here, and a trigger that reads everything available ignores it, as Spark
requires); ``images``; ``consumer`` (a stream's name for its bookmark: set at its start
and moved to each micro-batch's end once Spark committed it, so cleaning and archival
keep every snapshot the stream has yet to read, ``t.services.bookmark``); and the
table's options as for batch reads (``timeline``, storage
options). The same options make ``spark.read`` return the changes since the start as one
batch.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from ..table.table import Table
from ..timeline.errors import InvalidOptionError, TableNotFoundError, UnsupportedOperationError
from .read import SNAPSHOT_OPTIONS, snapshot_option
from .source_changes import (
    CHANGE_OPTIONS,
    START,
    STREAM_OPTIONS,
    ChangesReader,
    ChangesStreamReader,
    change_columns,
    check_stream_options,
    wants_changes,
)
from .source_reader import LakelineReader
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
        raise TableNotFoundError(
            "the lakeline data source needs a path: load(path) / save(path). A table of Spark's catalog "
            "(CREATE TABLE ... USING lakeline) reaches it with none, as Spark passes Python data sources no "
            f"catalog location: {SQL_INSTEAD}"
        )
    if path.startswith("file:") and not path.startswith("file://"):
        path = path[len("file:") :]  # Hadoop's spelling of a local path (file:/data/t)
    return Table.open(path, options.get("timeline"), storage_options_of(options))


# -- options: each use takes its own, anything else is refused ---------------------------

#: What to write instead of a table in Spark's catalog.
SQL_INSTEAD = (
    "for SQL use a temporary view, CREATE TEMPORARY VIEW name USING lakeline OPTIONS (path '<table>') "
    "(SELECT, INSERT INTO and INSERT OVERWRITE then work on it); create the table with "
    "lakeline.spark.create_table(path, df) and use spark.read.format('lakeline').load(path) / "
    "df.write.format('lakeline').save(path)"
)
#: Options of every use: Spark's ``path`` and the table's timeline store (storage options
#: are recognised by their names: :func:`storage_options_of`).
TABLE_OPTIONS = ("path", "timeline")
#: Options of ``df.write``; a stream write adds ``checkpointlocation`` (Spark's) and
#: ``txn_app_id`` (:mod:`.source_writer`).
WRITE_OPTIONS = ("operation", "mergeSchema")
STREAM_WRITE_OPTIONS = ("checkpointlocation", "txn_app_id")
#: Options of a batch read (a snapshot, or the changes since a start) and of a stream.
READ_OPTIONS = TABLE_OPTIONS + SNAPSHOT_OPTIONS + CHANGE_OPTIONS
STREAM_READ_OPTIONS = TABLE_OPTIONS + STREAM_OPTIONS


def check_options(options: Mapping[str, str], known: tuple[str, ...], use: str) -> None:
    """Refuse an option ``use`` does not take, before anything is read or written: Spark
    passes every option through, so a misspelt ``versionAsOf`` or a read option on a
    write would otherwise be ignored without a word. Names only, never values (a value
    may be a secret).

    Raises:
        InvalidOptionError: naming the option and the ones ``use`` takes.
    """
    names = {k.lower() for k in known}
    for key in options:
        low = str(key).lower()
        if low in names or low.startswith(STORE_PREFIXES) or low.startswith(STORAGE_PREFIX):
            continue
        raise InvalidOptionError(
            f"option {str(key)!r:.60} does not apply to a lakeline {use}; it takes {', '.join(dict.fromkeys(known))}, "
            f"and a store's storage options (AWS_*, GOOGLE_*, AZURE_*, {STORAGE_PREFIX}<key>)"
        )


def refuse_catalog_table(options: Mapping[str, str]) -> None:
    """``CREATE TABLE ... USING lakeline`` asks the data source for the schema with the
    catalog's own keys (``provider``, ``location``, ``owner``). Refused there: Spark's
    session catalog would record the table, but hand every later read and write of it no
    path (pyspark 4.3), so it could be neither read nor written.

    Raises:
        UnsupportedOperationError: naming what to use instead.
    """
    if "provider" in {str(k).lower() for k in options}:
        raise UnsupportedOperationError(f"CREATE TABLE ... USING lakeline is not supported: {SQL_INSTEAD}")


class LakelineDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "lakeline"

    def _table(self) -> Table:
        return open_table(self.options.get("path"), self.options)

    def schema(self) -> StructType:
        """Spark asks for it at ``load()``, for a batch read, a stream and a temporary
        view alike (which carries its write options to its ``INSERT``s: they are taken
        here and ignored by reads), so every read option is checked here, before any query.

        Raises: UnsupportedOperationError: CREATE TABLE; InvalidOptionError: an
        option no read takes, or a stream option's value of the wrong kind."""
        refuse_catalog_table(self.options)
        check_options(self.options, READ_OPTIONS + STREAM_READ_OPTIONS + WRITE_OPTIONS, "read")
        snapshot_option(self.options)
        check_stream_options(self.options)
        table = self._table()
        if wants_changes(self.options):  # a change read: the table's columns and _op
            return to_spark_schema(spark_readable(change_columns(table, self.options)))
        return to_spark_schema(spark_readable(table.config.schema))

    def reader(self, schema: StructType) -> DataSourceReader:
        """Raises: InvalidOptionError: an option a batch read does not take, a snapshot
        asked for twice, or with a start of changes."""
        check_options(self.options, READ_OPTIONS + WRITE_OPTIONS, "read")
        as_of = snapshot_option(self.options)
        if wants_changes(self.options):
            if as_of is not None:
                raise InvalidOptionError(
                    f"{START} reads changes, {'/'.join(SNAPSHOT_OPTIONS)} a snapshot: give one of them"
                )
            return ChangesReader(self._opener(), self.options)
        return LakelineReader(self._opener(), as_of)

    # -- streams of changes (spark/source_changes.py) --------------------------------------

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Raises: InvalidOptionError: an option a stream does not take."""
        check_options(self.options, STREAM_READ_OPTIONS + WRITE_OPTIONS, "stream read")
        return ChangesStreamReader(self._opener(), self.options)

    def _opener(self) -> partial[Table]:
        """Opens the table where it is called (a reader is pickled to executors: a table
        handle is not, its path and options are)."""
        return partial(open_table, self.options.get("path"), dict(self.options))

    # -- writes (spark/source_writer.py) --------------------------------------------------

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .source_writer import LakelineWriter

        check_options(self.options, TABLE_OPTIONS + WRITE_OPTIONS, "write")
        return LakelineWriter(self.options.get("path"), self.options, overwrite, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Raises: UnsupportedOperationError: complete mode (a stream inserts, upserts or
        deletes), or no query name to write exactly once by."""
        from .source_writer import LakelineStreamWriter

        check_options(self.options, TABLE_OPTIONS + WRITE_OPTIONS + STREAM_WRITE_OPTIONS, "stream write")
        if overwrite:
            raise UnsupportedOperationError("a lakeline stream appends (outputMode append/update), never overwrites")
        return LakelineStreamWriter(self.options.get("path"), self.options, schema)
