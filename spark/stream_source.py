"""The table's changes as a Spark stream: ``spark.readStream.format("lakeline")``.

Offsets are completed instant ids (``{"instant": id}``). A micro-batch from offset ``a``
to ``b`` holds what the data instants completed after ``a`` up to and including ``b``
changed (``Table.changes(a, b)``: the table's columns and ``_op``, one row per changed
key; with the option ``images=true`` every change of every instant, ``update_before``
and ``update_after`` rows and ``_instant``). Ranges follow completion order, not instant
ids (an instant requested earlier may complete later), so consecutive batches never
skip or repeat an instant. The timeline merges archived events back in, so a stream
reads across archival; a start whose files the cleaner removed is
``SnapshotExpiredError``, as for any read of a snapshot out of retention.

Options: ``starting_instant`` (required, as the stream's columns depend on it: an
instant id, ``earliest`` (the table's first completed instant: every change since its
creation) or ``latest`` (changes from the query's start on)); ``max_instants_per_batch``
(a bound on data instants per micro-batch; Spark's own ``ReadMaxFiles`` limit counts
instants here, and a trigger that reads everything available ignores it, as Spark
requires); ``images``; and the table's options as for batch reads (``timeline``, storage
options). The same options make ``spark.read`` return the changes since the start as one
batch.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles

from ..table.table import Table
from ..timeline.errors import InvalidPropertyError

START = "starting_instant"
MAX_INSTANTS = "max_instants_per_batch"
IMAGES = "images"


def wants_changes(options: Mapping[str, str]) -> bool:
    """Whether a read asks for changes (it names a start) rather than a snapshot."""
    return options.get(START) is not None


def change_columns(table: Table, options: Mapping[str, str]) -> pa.Schema:
    """The columns a change read returns: the table's, ``_op`` and, with images, ``_instant``."""
    schema = table.config.schema.append(pa.field("_op", pa.string()))
    return schema.append(pa.field("_instant", pa.int64())) if _images(options) else schema


def _images(options: Mapping[str, str]) -> bool:
    return str(options.get(IMAGES, "false")).lower() == "true"


def start_instant(table: Table, options: Mapping[str, str]) -> int:
    """The completed instant a change read starts after.

    Raises:
        InvalidPropertyError: ``starting_instant`` is neither an id nor earliest/latest.
    """
    text = str(options.get(START, "")).strip().lower()
    completed = table.timeline.completed()
    if text == "earliest":
        return completed[0].id
    if text == "latest":
        return completed[-1].id
    try:
        return int(text)
    except ValueError:
        raise InvalidPropertyError(f"{START} must be an instant id, earliest or latest, not {text!r:.40}") from None


class ChangesPartition(InputPartition):
    """The changes of the instants completed after ``start`` up to ``end``."""

    def __init__(self, start: int, end: int) -> None:
        super().__init__(f"{start}-{end}")
        self.start, self.end = start, end


def _read(open_table: Any, options: Mapping[str, str], partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, ChangesPartition)
    rows = open_table().changes(partition.start, partition.end, images=_images(options))
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
        self.open_table, self.options = open_table, dict(options)
        raw = options.get(MAX_INSTANTS)
        try:
            self.max_instants = int(raw) if raw is not None else None
        except ValueError:
            raise InvalidPropertyError(f"{MAX_INSTANTS} must be a whole number, not {raw!r:.40}") from None
        if self.max_instants is not None and self.max_instants < 1:
            raise InvalidPropertyError(f"{MAX_INSTANTS} must be at least 1")

    def initialOffset(self) -> dict[str, int]:
        return {"instant": start_instant(self.open_table(), self.options)}

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadMaxFiles(self.max_instants) if self.max_instants else ReadAllAvailable()

    def latestOffset(self, start: dict[str, int], limit: ReadLimit) -> dict[str, int]:
        tl = self.open_table().timeline
        after = tl.as_of_instant(start["instant"]).last_seq
        pending = [i for i in tl.completed_after(after) if i.action.writes_data]
        if isinstance(limit, ReadMaxFiles):
            pending = pending[: limit.max_files]
        return {"instant": pending[-1].id} if pending else dict(start)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        if start["instant"] == end["instant"]:
            return []
        return [ChangesPartition(start["instant"], end["instant"])]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        yield from _read(self.open_table, self.options, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to release: the offsets are instants of the table's own timeline."""


__all__ = ["ChangesReader", "ChangesStreamReader", "change_columns", "wants_changes"]
