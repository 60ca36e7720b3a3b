"""The batch reader of the ``lakeline`` data source: every query reads the snapshot of
its own start, also through a reused DataFrame or a temporary view.

Why the snapshot is not simply planned in ``partitions()``: pyspark 4.3's JVM side keeps
what a Python data source's reader planned (its partitions and its pickled ``read``) on
the relation's provider object (``PythonDataSourceV2.readInfo``) and plans again only
when a query pushes filters. A DataFrame from ``load()``, and a temporary view over one
(``createOrReplaceTempView``, ``CREATE TEMPORARY VIEW ... USING lakeline``), keep that
relation for their life, so every later query read the slices planned by the first:
after an ``INSERT INTO`` through a view, ``SELECT`` through it still returned the rows of
the view's first query. Nothing runs on the driver per query to plan again, so the
tasks check instead.

How: ``partitions()`` returns the planned slices spread over at least
:data:`MIN_SLOTS` slots (a view made on a small table keeps some parallelism as the
table grows). Each task learns when its query started from Spark's query id, a UUIDv7
(the local property ``spark.sql.execution.query.id``, milliseconds since the epoch in
its first 48 bits), and takes the snapshot of the last instant completed by then
(``Timeline.as_of_time``): every task of one query computes the same instant, so the
query reads one snapshot; a later query, started after a commit, reads that commit.
When that instant is the planned one (the common case: a query planned just now) the
task reads its planned slices; otherwise it plans that snapshot itself (the same plan
in every task, one slot's share each). A task started within :data:`SETTLE_S` of its
query's start waits out the rest first, so a commit stamped before the start but still
being published is seen by every task or by none (writers' and the driver's clocks are
assumed to agree within that much). Without a UUIDv7 query id (another Spark) the
planned snapshot is read, as before. A read ``as_of``/``versionAsOf``/``timestampAsOf``
reads the snapshot it names, always.

The same per-relation cache is why Spark's filter pushdown is not used: see
:mod:`.filters`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from ..table.table import Table
from ..timeline.errors import InstantNotFoundError
from .read import SliceRows, check_snapshot, plan, slice_batches

#: Slots of a read planned now: a later query's snapshot is spread over at least these.
MIN_SLOTS = 4
#: How long after its query's start a task waits before it looks at the timeline.
SETTLE_S = 0.25
#: Spark's id of the query a task runs for (a UUIDv7 in pyspark 4.x).
QUERY_ID = "spark.sql.execution.query.id"


class SlotPartition(InputPartition):
    """Slot ``slot`` of ``slots``: its share of the slices of the snapshot read."""

    def __init__(self, slot: int, slots: int) -> None:
        super().__init__(slot)
        self.slot, self.slots = slot, slots


class LakelineReader(DataSourceReader):
    """Reads a snapshot: the one named (``as_of``), or the newest at each query's start."""

    def __init__(self, open_table: Callable[[], Table], as_of: int | datetime | None) -> None:
        table = open_table()
        check_snapshot(table, as_of)
        self.open_table, self.as_of = open_table, as_of
        self.tasks, _ = plan(table, None, None, as_of)
        completed = table.timeline.completed()
        self.planned = completed[-1].id if completed else None

    def partitions(self) -> list[InputPartition]:
        n = len(self.tasks) if self.as_of is not None else max(len(self.tasks), MIN_SLOTS)
        return [SlotPartition(i, n) for i in range(n)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlotPartition)
        for task in self._tasks()[partition.slot :: partition.slots]:
            yield from slice_batches(task)

    def _tasks(self) -> list[SliceRows]:
        """The slice tasks of the snapshot this task's query reads."""
        if self.as_of is not None:
            return self.tasks
        started = query_start()
        if started is None:
            return self.tasks
        wait = started.timestamp() + SETTLE_S - time.time()
        if wait > 0:
            time.sleep(wait)
        table = self.open_table()
        try:
            instant = table.timeline.as_of_time(started).completed()[-1].id
        except InstantNotFoundError:  # the table is younger than the query: read what was planned
            return self.tasks
        if instant == self.planned:
            return self.tasks
        return plan(table, None, None, instant)[0]


def query_start() -> datetime | None:
    """When the query this Spark task runs for started (its UUIDv7 id's time), or None
    outside a task or when the id is not a UUIDv7."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    text = ctx.getLocalProperty(QUERY_ID) if ctx is not None else None
    try:
        qid = uuid.UUID(str(text))
    except ValueError:
        return None
    if qid.version != 7:
        return None
    return datetime.fromtimestamp((qid.int >> 80) / 1000, UTC)
