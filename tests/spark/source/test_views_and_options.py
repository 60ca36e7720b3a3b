"""The ``lakeline`` data source as Spark users write it (issue 46 items 3-5, read side):
a temporary view (from a DataFrame, or ``CREATE TEMPORARY VIEW ... USING lakeline``)
and a reused DataFrame read the newest snapshot at each query, and a view carries
``operation`` to its ``INSERT``s; a stream without ``starting_instant`` reads the table
as it is and then its changes, and a bad stream option is refused at ``load()``;
``versionAsOf`` of an absent id names the nearest ids, of the schema-only instant is
refused; and why Spark's filter pushdown stays off under pyspark 4.3."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import InstantNotFoundError, InvalidOptionError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def _table(path: str, n: int = 10) -> Table:
    t = Table.create(path, SCHEMA, record_key="id")
    t.insert(pa.table({"id": pa.array(range(n), pa.int64()), "v": ["a"] * n}))
    return t


def _count(spark: Any, view: str) -> int:
    return int(spark.sql(f"SELECT count(*) AS n FROM {view}").collect()[0].n)


def test_views_and_a_reused_dataframe_read_the_newest_snapshot(spark: Any, tmp_path: Path) -> None:
    """Failed before: after INSERT INTO through the view, SELECT through it returned the
    rows of its first query (10 while the table held 11, then 12)."""
    path = str(tmp_path / "t")
    t = _table(path)
    df = spark.read.format("lakeline").load(path)
    df.createOrReplaceTempView("lakeline_fresh_df")
    spark.sql(f"CREATE TEMPORARY VIEW lakeline_fresh_sql USING lakeline OPTIONS (path '{path}')")
    pinned = t.timeline.completed()[-1].id
    spark.sql(
        f"CREATE TEMPORARY VIEW lakeline_fresh_pinned USING lakeline OPTIONS (path '{path}', versionAsOf '{pinned}')"
    )
    try:
        assert _count(spark, "lakeline_fresh_df") == _count(spark, "lakeline_fresh_sql") == 10
        spark.sql("INSERT INTO lakeline_fresh_sql VALUES (10, 'b')")
        assert _count(spark, "lakeline_fresh_df") == _count(spark, "lakeline_fresh_sql") == 11
        spark.sql("INSERT INTO lakeline_fresh_df VALUES (11, 'b')")
        t.insert(pa.table({"id": pa.array([12], pa.int64()), "v": ["c"]}))  # another writer
        assert _count(spark, "lakeline_fresh_df") == _count(spark, "lakeline_fresh_sql") == 13
        assert df.count() == 13 and df.filter("id > 9").count() == 3 and df.count() == 13
        assert _count(spark, "lakeline_fresh_pinned") == 10  # a view naming its snapshot keeps it
        # A view carries its operation to its INSERTs.
        spark.sql(f"CREATE TEMPORARY VIEW lakeline_fresh_up USING lakeline OPTIONS (path '{path}', operation 'upsert')")
        spark.sql("INSERT INTO lakeline_fresh_up VALUES (1, 'up'), (20, 'new')")
        rows = {r["id"]: r["v"] for r in Table.open(path).to_arrow().to_pylist()}
        assert rows[1] == "up" and rows[20] == "new" and len(rows) == 14
        assert spark.sql("SELECT v FROM lakeline_fresh_sql WHERE id = 1").collect()[0].v == "up"
        spark.sql(
            f"CREATE TEMPORARY VIEW lakeline_fresh_del USING lakeline OPTIONS (path '{path}', operation 'delete')"
        )
        spark.sql("INSERT INTO lakeline_fresh_del SELECT id, v FROM lakeline_fresh_sql WHERE id >= 10")
        assert _count(spark, "lakeline_fresh_df") == 10
    finally:
        for v in ("df", "sql", "pinned", "up", "del"):
            spark.sql(f"DROP VIEW IF EXISTS lakeline_fresh_{v}")


def test_pyspark_keeps_pushed_read_plans_on_the_relation(spark: Any) -> None:
    """The recorded reason filter pushdown stays off, proven on the installed pyspark: a
    reader that prunes by its pushed filters (as lakeline would) gives a later unfiltered
    query on the same DataFrame, and the other scan of a union, the rows of another
    query's filter, because Spark keeps the pushdown's plan on the relation."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, GreaterThan, InputPartition

    class Reader(DataSourceReader):
        def __init__(self) -> None:
            self.low = -1

        def pushFilters(self, filters: list[Any]) -> Any:
            for f in filters:
                if isinstance(f, GreaterThan):
                    self.low = max(self.low, int(f.value))
                yield f  # Spark filters again: the pushdown only prunes

        def partitions(self) -> list[InputPartition]:
            return [InputPartition(p) for p in range(4) if p * 10 + 9 > self.low]

        def read(self, partition: InputPartition) -> Any:
            return ((partition.value * 10 + i,) for i in range(10))

    class Pruning(DataSource):
        @classmethod
        def name(cls) -> str:
            return "lakeline_pushdown_probe"

        def schema(self) -> str:
            return "id int"

        def reader(self, schema: Any) -> DataSourceReader:
            return Reader()

    spark.dataSource.register(Pruning)
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = spark.read.format("lakeline_pushdown_probe").load()
        assert df.count() == 40 and df.filter("id > 25").count() == 14
        later = df.count()
        both = df.filter("id < 5").union(df.filter("id > 35")).count()
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")
    # If pyspark ever plans each scan alone, these fail: then lakeline can push filters.
    assert later == 20, "a later unfiltered query reads the slices another query's filter pruned"
    assert both == 4, "one scan of a union reads with the other scan's pruning"


def test_stream_without_a_start_and_bad_stream_options(spark: Any, tmp_path: Path) -> None:
    """Failed before: no start was refused at the query's start (a Java stack trace);
    now the first micro-batch is the table as it is, then its changes. A bad option is
    refused at load()."""
    path = str(tmp_path / "s")
    t = _table(path, 5)
    for bad in ({"starting_instant": "yesterday"}, {"max_instants_per_batch": "0"}, {"versionOf": "1"}):
        with pytest.raises(InvalidOptionError):
            spark.readStream.format("lakeline").options(**bad).load(path)
    stream = spark.readStream.format("lakeline").load(path)
    assert stream.columns == ["id", "v"]
    q = stream.writeStream.format("memory").queryName("lakeline_nostart").start()
    try:
        q.processAllAvailable()
        assert sorted(r.id for r in spark.sql("SELECT id FROM lakeline_nostart").collect()) == list(range(5))
        t.upsert(pa.table({"id": pa.array([2, 7], pa.int64()), "v": ["x", "y"]}))
        q.processAllAvailable()
        got = sorted((r.id, r.v) for r in spark.sql("SELECT id, v FROM lakeline_nostart").collect())
        assert got == [(0, "a"), (1, "a"), (2, "a"), (2, "x"), (3, "a"), (4, "a"), (7, "y")]
        t.delete(pa.table({"id": pa.array([0], pa.int64())}))
        deadline = time.time() + 60
        while q.isActive and time.time() < deadline:
            time.sleep(0.2)  # the stream stops at the delete it cannot carry
        assert not q.isActive and "starting_instant" in str(q.exception())
    finally:
        q.stop()


def test_version_as_of_names_the_ids_there_are(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "v")
    t = _table(path, 3)
    t.insert(pa.table({"id": pa.array([9], pa.int64()), "v": ["z"]}))
    ids = [i.id for i in t.timeline.completed()]
    absent = next(i for i in range(ids[-1]) if i not in ids)
    with pytest.raises(InstantNotFoundError) as e:
        spark.read.format("lakeline").option("versionAsOf", absent).load(path).collect()
    below = max(i for i in ids if i < absent)
    above = min(i for i in ids if i > absent)
    assert f"{below} and {above}" in str(e.value) and "lakeline timeline show" in str(e.value)
    with pytest.raises(InvalidOptionError, match="schema"):  # instant 0: the schema alone
        spark.read.format("lakeline").option("versionAsOf", ids[0]).load(path).collect()
    assert spark.read.format("lakeline").option("versionAsOf", ids[1]).load(path).count() == 3


def test_a_delete_view_with_a_column_list_deletes_on_a_partitioned_table(spark: Any, tmp_path: Path) -> None:
    """``INSERT INTO v (id) ...`` into a delete view: Spark fills the partition column
    it leaves out with nulls, which searched the null partition only and deleted
    nothing, silently; the keys are now searched in every partition."""
    path = str(tmp_path / "parted")
    schema = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.string())])
    t = Table.create(path, schema, record_key="id", partition_by=["day"])
    t.insert(pa.table({"id": [1, 2, 3, 4], "day": ["a", "b", "a", "b"], "v": ["x"] * 4}))
    spark.sql(f"CREATE TEMPORARY VIEW lakeline_del_cols USING lakeline OPTIONS (path '{path}', operation 'delete')")
    try:
        spark.sql("INSERT INTO lakeline_del_cols (id) VALUES (1), (4)")
    finally:
        spark.catalog.dropTempView("lakeline_del_cols")
    assert sorted(Table.open(path).to_arrow().column("id").to_pylist()) == [2, 3]
