"""Reads into Spark: ``read(spark, path, filter=, columns=, as_of=)``.

The driver plans the read exactly as the local ``Scan`` does (the snapshot now or as of
an instant id or a time, and pruning by partitions, record-key ranges, column stats and
bloom filters from the filter), then Spark reads **one partition per file slice**: each
task reads its slice's base file, or merges the base with its logs with lakeline's own
merge (``read_slice``), and hands Spark Arrow batches. Rows never pass through the
driver. Spark applies the filter to the rows itself: pruning (:mod:`.filters`) only
skips slices that cannot match.

The ``lakeline`` data source (:mod:`.source`) reads through the same slice tasks.

On an object store each task opens the store itself from the ``ObjectStore`` its slice
carries; the slices travel without it and it travels in the Spark function, so the
storage options stay out of every file PySpark writes (:mod:`.shipping`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession

from ..table.files import FileRead, read_snapshot_file, with_columns_of
from ..table.merge_engine import DEFAULT_ENGINE, MergeEngine
from ..table.read.scan import SliceRead, read_slice
from ..table.table import Table
from ..table.write.records import check_columns
from ..timeline.errors import (
    InstantNotFoundError,
    InvalidFilterError,
    InvalidOptionError,
    SnapshotExpiredError,
    UnknownColumnError,
)
from ..timeline.storage.filesystem import Storage
from ..timeline.view.file_group import FileSlice
from .filters import to_arrow_filter
from .shipping import Shipped
from .types import spark_readable, to_spark_schema


@dataclass(frozen=True)
class SliceRows:
    """Read one file slice for Spark: the base alone, or merged with its logs."""

    storage: Storage
    slice: FileSlice | None  # None: an empty read (a snapshot without files)
    schema: pa.Schema  # the table's
    key: tuple[str, ...]
    ordering: str | None
    columns: tuple[str, ...]  # what Spark gets, in this order
    out: pa.Schema  # ``columns`` in the types Spark reads
    engine: MergeEngine = DEFAULT_ENGINE  # how a key's versions fold (``merge.engine``)


def slice_batches(task: SliceRows) -> Iterator[pa.RecordBatch]:
    """The slice's live rows as Spark-ready batches.

    Raises:
        SnapshotExpiredError: a file of the snapshot was cleaned meanwhile.
    """
    s = task.slice
    if s is None:
        return
    try:
        if s.logs:
            rows = read_slice(SliceRead(task.storage, s, task.schema, task.key, task.ordering, engine=task.engine))
        elif s.base is not None:
            rows = with_columns_of(
                read_snapshot_file(
                    FileRead(task.storage, s.base.path, task.columns, schema=task.schema, size=s.base.bytes)
                ),
                pa.schema([task.schema.field(c) for c in task.columns]),
            )
        else:
            return
    except FileNotFoundError as e:
        raise SnapshotExpiredError(f"a file of the snapshot being read was cleaned meanwhile: {e}") from e
    yield from rows.select(list(task.columns)).cast(task.out).to_batches(max_chunksize=65_536)


def as_of_value(text: str | None) -> int | datetime | None:
    """An ``as_of`` option: an instant id, or an ISO time (``2026-11-24T10:00:00+00:00``)."""
    if text is None or text == "":
        return None
    text = str(text).strip()
    if text.isdigit():
        return int(text)
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise InvalidFilterError(f"as_of must be an instant id or an ISO date-time, not {text!r}") from None


#: The data source's options that choose a snapshot: lakeline's ``as_of`` and Delta's
#: names (Spark lower-cases option names: ``versionAsOf`` arrives as ``versionasof``).
SNAPSHOT_OPTIONS = ("as_of", "versionasof", "timestampasof")


def snapshot_option(options: Mapping[str, str]) -> int | datetime | None:
    """The snapshot a data-source read asks for: ``versionAsOf`` (an instant id, as
    Delta's users write a version), ``timestampAsOf`` (an ISO date or date-time; without
    an offset it is UTC, the time zone of lakeline's sessions, since Spark hands a Python
    data source no session time zone) or ``as_of`` (either). None: the newest.

    Raises:
        InvalidOptionError: more than one of them, or a value of the wrong kind.
        InvalidFilterError: a malformed ``as_of`` (as for ``read(as_of=...)``).
    """
    given = {k: str(options[k]).strip() for k in SNAPSHOT_OPTIONS if options.get(k) not in (None, "")}
    if len(given) > 1:
        raise InvalidOptionError(f"options {sorted(given)} each choose the snapshot to read: give one")
    if "versionasof" in given:
        text = given["versionasof"]
        if not text.isdigit():
            raise InvalidOptionError(f"versionAsOf must be an instant id (a whole number), not {text!r:.40}")
        return int(text)
    if "timestampasof" in given:
        text = given["timestampasof"]
        try:
            when = datetime.fromisoformat(text)
        except ValueError:
            raise InvalidOptionError(
                f"timestampAsOf must be an ISO date or date-time (2026-11-24 10:00:00+00:00), not {text!r:.40}"
            ) from None
        return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
    return as_of_value(given.get("as_of"))


#: How a user lists the instants a read may name.
LIST_INSTANTS = "`lakeline timeline show PATH` or Table.open(path).timeline.completed()"


def check_snapshot(table: Table, as_of: int | datetime | None) -> None:
    """Refuse, before anything is planned, a snapshot a read cannot mean.

    Raises:
        InstantNotFoundError: ``as_of`` is an id that is no completed instant (naming
            the completed ids nearest to it, as ids are not consecutive: 0, 3, 6...,
            and how to list them), or a time before the table's first commit.
        InvalidOptionError: the snapshot holds no data instant yet (instant 0 creates
            the table with its schema and no rows: a Delta user's ``versionAsOf=0`` is
            the first write, and lakeline's would silently read an empty table).
    """
    if as_of is None:
        return
    tl = table.timeline
    completed = tl.completed()
    if isinstance(as_of, int):
        ids = sorted(i.id for i in completed)
        if as_of not in ids:
            below = [i for i in ids if i < as_of][-1:]
            above = [i for i in ids if i > as_of][:1]
            near = " and ".join(str(i) for i in below + above) or "none"
            raise InstantNotFoundError(
                f"instant {as_of} is not a completed instant of the table at {table.path} (instant ids are not "
                f"consecutive); the nearest completed: {near}; list them with {LIST_INSTANTS}"
            )
        upto = tl.as_of_instant(as_of).completed()
    else:
        upto = tl.as_of_time(as_of).completed()
    if not any(i.action.writes_data for i in upto):
        first = next((i.id for i in completed if i.action.writes_data), None)
        then = f"its first data instant is {first}" if first is not None else "no instant has written data yet"
        raise InvalidOptionError(
            f"the snapshot as of {as_of} holds only the table's schema (instant {upto[-1].id} created it, no row "
            f"was written by then): {then}; list the instants with {LIST_INSTANTS}"
        )


def plan(
    table: Table, filter: pc.Expression | None, columns: list[str] | None, as_of: int | datetime | None
) -> tuple[list[SliceRows], pa.Schema]:
    """The slice tasks of a read and the Arrow schema Spark gets (planned on the driver).

    Raises:
        UnknownColumnError: ``columns`` names a column the table does not have.
        InstantNotFoundError, SnapshotExpiredError: a bad ``as_of``.
    """
    cfg = table.config
    wanted = tuple(check_columns(cfg, columns) or cfg.schema.names)
    try:
        scan = table.scan(filter=filter, as_of=as_of)
    except (InvalidFilterError, UnknownColumnError, pa.ArrowException):
        scan = table.scan(as_of=as_of)  # a translation Arrow rejects: prune nothing, Spark filters
    out = spark_readable(pa.schema([cfg.schema.field(c) for c in wanted]))
    slices: list[FileSlice | None] = list(scan.slices) or [None]
    return [
        SliceRows(table.storage, s, cfg.schema, cfg.record_key, cfg.ordering_field, wanted, out, MergeEngine.of(cfg))
        for s in _largest_first(slices)
    ], out


def _largest_first(slices: list[FileSlice | None]) -> list[FileSlice | None]:
    return sorted(slices, key=lambda s: -(s.bytes if s is not None else 0))


def read(
    spark: SparkSession,
    path: str,
    filter: Any = None,
    columns: list[str] | None = None,
    as_of: int | datetime | str | None = None,
    timeline: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """The table at ``path`` (now, or as of an instant id or a datetime) as a DataFrame,
    one Spark partition per file slice.

    Args:
        filter: a Spark SQL string (``"day = '2026-01-01' and id > 5"``) or a ``Column``;
            slices that cannot match are not read, and Spark filters the rows.
        columns: the columns to return (all by default).
        timeline: the table's timeline store, as for ``Table.open``.
        storage_options: an object store's options (deltalake's keys, as for
            ``Table.open``); the executors get them in memory, with their tasks.

    Raises:
        TableNotFoundError, UnknownColumnError, InstantNotFoundError,
        SnapshotExpiredError: before any Spark job runs.
        InvalidOptionError: ``as_of`` names a snapshot of the schema alone
            (:func:`check_snapshot`).
    """
    table = Table.open(path, timeline, storage_options)
    snapshot_as_of = as_of_value(as_of) if isinstance(as_of, str) else as_of
    check_columns(table.config, columns)
    check_snapshot(table, snapshot_as_of)
    # With a filter, its columns must be read too: project after Spark filtered.
    read_columns = columns if filter is None else None
    tasks, out = plan(table, to_arrow_filter(filter, table.config.schema), read_columns, snapshot_as_of)
    shipped = Shipped(spark.sparkContext, tasks)

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        slices: list[SliceRows] = shipped.value()
        for batch in batches:
            for i in batch.column(0).to_pylist():
                yield from slice_batches(slices[i])

    df = spark.range(0, len(tasks), 1, numPartitions=len(tasks)).mapInArrow(run, to_spark_schema(out))
    if filter is not None:
        df = df.filter(filter)
        if columns is not None:
            df = df.select(*columns)
    return df
