"""Reads of a table's changes through the ``lakeline`` data source: ``spark.read`` with a
``starting_instant`` (the changes since it, as one batch) and ``spark.readStream`` (one
micro-batch per range of completed instants; without a start, the table as it is first).

Offsets are completed instant ids, so consecutive micro-batches never skip or repeat an
instant; the options are described in :mod:`.source` and docs/spark.md.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles

from ..table.table import Table
from ..timeline.errors import InvalidOptionError, UnsupportedOperationError
from .read import SliceRows, plan, slice_batches

START = "starting_instant"
MAX_INSTANTS = "max_instants_per_batch"
IMAGES = "images"
CONSUMER = "consumer"
#: The options of a batch read of changes, and of a stream (beside the table's own).
CHANGE_OPTIONS = (START, IMAGES)
STREAM_OPTIONS = (START, IMAGES, MAX_INSTANTS, CONSUMER)


def wants_changes(options: Mapping[str, str]) -> bool:
    """Whether a read asks for changes (it names a start) rather than a snapshot."""
    return options.get(START) is not None


def change_columns(table: Table, options: Mapping[str, str]) -> pa.Schema:
    """The columns a change read returns: the table's, ``_op`` and, with images, ``_instant``."""
    schema = table.config.schema.append(pa.field("_op", pa.string()))
    return schema.append(pa.field("_instant", pa.int64())) if _images(options) else schema


def _images(options: Mapping[str, str]) -> bool:
    return str(options.get(IMAGES, "false")).lower() == "true"


def check_stream_options(options: Mapping[str, str]) -> None:
    """The forms of a change read's options, checked at ``load()`` (:meth:`LakelineDataSource.schema`),
    before a stream starts: a stream's own reader is made at its start, where an error
    reaches the user as a Java stack trace of a failed query.

    Raises:
        InvalidOptionError: ``starting_instant`` neither an id nor earliest/latest,
            ``max_instants_per_batch`` not a whole number of at least 1, ``images``
            not true/false.
    """
    text = str(options.get(START, "0")).strip().lower()
    if text not in ("earliest", "latest") and not text.isdigit():
        raise InvalidOptionError(f"{START} must be an instant id, earliest or latest, not {text!r:.40}")
    raw = str(options.get(MAX_INSTANTS, "1")).strip()
    if not raw.isdigit() or int(raw) < 1:
        raise InvalidOptionError(f"{MAX_INSTANTS} must be a whole number of at least 1, not {raw!r:.40}")
    if str(options.get(IMAGES, "false")).strip().lower() not in ("true", "false"):
        raise InvalidOptionError(f"{IMAGES} is true or false")


def start_instant(table: Table, options: Mapping[str, str]) -> int:
    """The completed instant a change read starts after.

    Raises:
        InvalidOptionError: ``starting_instant`` is neither an id nor earliest/latest.
    """
    check_stream_options(options)
    text = str(options.get(START, "")).strip().lower()
    completed = table.timeline.completed()
    if text == "earliest":
        return completed[0].id
    if text == "latest":
        return completed[-1].id
    return int(text)


#: The offset of a stream without a start before its first micro-batch: that batch
#: reads the table as it is (:class:`SnapshotSlice`), the next ones its changes.
BEFORE_SNAPSHOT = -1


class SnapshotSlice(InputPartition):
    """A file slice of the snapshot a stream without a start reads first."""

    def __init__(self, task: SliceRows) -> None:
        super().__init__(task.slice.file_group if task.slice is not None else None)
        self.task = task


class ChangesPartition(InputPartition):
    """The changes of the instants completed after ``start`` up to ``end``."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__(f"{start}-{end}")
        self.start, self.end = start, end


def _read(open_table: Any, options: Mapping[str, str], partition: InputPartition) -> Iterator[pa.RecordBatch]:
    if isinstance(partition, SnapshotSlice):  # a stream without a start: the table as it is
        yield from slice_batches(partition.task)
        return
    assert isinstance(partition, ChangesPartition)
    rows = open_table().changes(partition.start, partition.end, images=_images(options))
    if not wants_changes(options):  # the table's columns: new row images, and no deletes
        ops = rows.column("_op")
        if pc.any(pc.equal(ops, "delete")).as_py():
            raise UnsupportedOperationError(
                f"instants {partition.start}..{partition.end} deleted rows, which a stream without {START} "
                f"(the table's columns, no _op) cannot carry: start it with {START} (latest, or an instant id) "
                "to read changes with their _op"
            )
        rows = rows.drop_columns([c for c in ("_op", "_instant") if c in rows.column_names])
    yield from rows.to_batches()


class ChangesReader(DataSourceReader):
    """``spark.read`` with a start: the changes since it, up to the newest instant now."""

    def __init__(self, open_table: Any, options: Mapping[str, str]) -> None:
        table = open_table()
        self.open_table, self.options = open_table, dict(options)
        self.start, self.end = start_instant(table, options), table.timeline.completed()[-1].id

    def partitions(self) -> list[InputPartition]:
        return [] if self.start == self.end else [ChangesPartition(self.start, self.end)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.open_table, self.options, partition)


class ChangesStreamReader(DataSourceStreamReader):
    """Micro-batches of completed instants, planned on the driver, read on executors."""

    def __init__(self, open_table: Any, options: Mapping[str, str]) -> None:
        check_stream_options(options)
        self.open_table, self.options = open_table, dict(options)
        raw = options.get(MAX_INSTANTS)
        self.max_instants = int(raw) if raw is not None else None

    def initialOffset(self) -> dict[str, int]:
        table = self.open_table()
        if not wants_changes(self.options):  # no start: the table as it is, then its changes
            self._bookmark(table, table.timeline.completed()[-1].id)
            return {"instant": BEFORE_SNAPSHOT}
        start = start_instant(table, self.options)
        self._bookmark(table, start)
        return {"instant": start}

    def _bookmark(self, table: Table, instant: int) -> None:
        """Pin what the stream has yet to read (option ``consumer``): from ``instant`` on."""
        consumer = self.options.get(CONSUMER)
        if consumer is not None and instant != BEFORE_SNAPSHOT:
            table.services.bookmark(consumer, instant)

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_instants) if self.max_instants else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        tl = self.open_table().timeline
        if start["instant"] == BEFORE_SNAPSHOT:  # the first batch: the newest snapshot, whole
            return {"instant": tl.completed()[-1].id}
        after = tl.as_of_instant(start["instant"]).last_seq
        pending = [i for i in tl.completed_after(after) if i.action.writes_data]
        if isinstance(limit, ReadMaxFiles):
            pending = pending[: limit.max_files]
        return {"instant": pending[-1].id} if pending else dict(start)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        if start["instant"] == end["instant"]:
            return []
        if start["instant"] == BEFORE_SNAPSHOT:
            tasks, _ = plan(self.open_table(), None, None, end["instant"])
            return [SnapshotSlice(t) for t in tasks]
        return [ChangesPartition(start["instant"], end["instant"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.open_table, self.options, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Spark processed everything up to ``end``: the consumer's bookmark moves there
        (without a ``consumer``, nothing to do: offsets are the timeline's own instants)."""
        if self.options.get(CONSUMER) is not None:
            self._bookmark(self.open_table(), end["instant"])
