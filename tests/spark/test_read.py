"""``lakeline.spark.read`` and ``spark.read.format("lakeline")``: the rows of the local
read, for random filters and as_of, on cow and mor (logs merged on executors),
partitioned or not; pruning planned on the driver really skips slices; typed errors
before any Spark job; Delta's ``versionAsOf`` and ``timestampAsOf`` read the snapshot
they name, and an option the data source does not know is refused, not ignored."""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.spark import read
from lakeline.table import Table
from lakeline.timeline.errors import InstantNotFoundError, InvalidOptionError, TableNotFoundError, UnknownColumnError

from tests.table.model import Pred, random_pred

SCHEMA = pa.schema(
    [("id", pa.int64()), ("ts", pa.int64()), ("v", pa.int64()), ("s", pa.string()), ("day", pa.string())]
)
DAYS = ["d0", "d1", "d2"]
COLS = ["id", "ts", "v", "s", "day"]


def sql(p: Pred) -> str:
    def lit(x: Any) -> str:
        return f"'{x}'" if isinstance(x, str) else str(x)

    if p.kind == "cmp":
        return f"{p.col} {'=' if p.op == '==' else p.op} {lit(p.value)}"
    if p.kind == "isin":
        return f"{p.col} IN ({', '.join(lit(v) for v in p.values)})"
    if p.kind == "isnull":
        return f"{p.col} IS NULL"
    if p.kind == "not":
        return f"NOT ({sql(p.args[0])})"
    return f"({sql(p.args[0])}) {p.kind.upper()} ({sql(p.args[1])})"


def rows_of(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[c] for c in df.columns) for r in df.collect()), key=repr)


def build(tmp: Path, table_type: str, partitioned: bool) -> tuple[Table, list[int]]:
    t = Table.create(
        str(tmp / f"{table_type}{partitioned}"),
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"] if partitioned else None,
        table_type=table_type,
    )
    rng = random.Random(7)
    instants = []
    for ts in range(4):
        ids = sorted(rng.sample(range(60), 25))
        t.upsert(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "ts": pa.array([ts] * 25, pa.int64()),
                    "v": pa.array([rng.randint(-1, 100) if rng.random() > 0.1 else None for _ in ids], pa.int64()),
                    "s": [rng.choice(["a", "b", "c", None]) for _ in ids],
                    "day": [DAYS[i % 3] for i in ids],
                }
            )
        )
        instants.append(t.timeline.completed()[-1].id)
        if ts == 1:
            t.indexes.create("column_stats", columns=["id", "v"])
            t.indexes.create("bloom_filters", columns=["id"])
        if ts == 2:
            t.delete(pa.table({"id": pa.array(list(range(0, 60, 7)), pa.int64())}))
    return Table.open(t.path), instants


@pytest.mark.parametrize("table_type,partitioned", [("mor", True), ("cow", False)])
def test_read_equals_the_local_read_for_random_filters_and_as_of(
    spark: Any, tmp_path: Path, table_type: str, partitioned: bool
) -> None:
    t, instants = build(tmp_path, table_type, partitioned)
    full = spark.createDataFrame(t.to_arrow().to_pandas(), schema="id long, ts long, v long, s string, day string")
    assert rows_of(read(spark, t.path)) == rows_of(full)
    rng = random.Random(table_type)
    for _ in range(4):
        text = sql(random_pred(rng, DAYS))
        got = read(spark, t.path, filter=text)
        assert rows_of(got) == rows_of(full.filter(text)), text
    # Time travel by id, by datetime, and a projection.
    old = instants[1]
    then = spark.createDataFrame(
        t.to_arrow(as_of=old).to_pandas(), schema="id long, ts long, v long, s string, day string"
    )
    assert rows_of(read(spark, t.path, as_of=old)) == rows_of(then)
    assert rows_of(read(spark, t.path, as_of=str(old), columns=["id", "s"])) == rows_of(then.select("id", "s"))
    moment = datetime.now(UTC)
    time.sleep(0.01)
    t.upsert(
        pa.table(
            {
                "id": pa.array([500], pa.int64()),
                "ts": pa.array([9], pa.int64()),
                "v": pa.array([1], pa.int64()),
                "s": ["z"],
                "day": ["d0"],
            }
        )
    )
    assert rows_of(read(spark, t.path, as_of=moment)) == rows_of(full)
    assert read(spark, t.path).count() == full.count() + 1


def test_pruning_skips_slices_and_the_data_source_reads_the_same(spark: Any, tmp_path: Path) -> None:
    t, _ = build(tmp_path, "mor", True)
    every = read(spark, t.path)
    pruned = read(spark, t.path, filter="day = 'd1' and id = 4")
    assert pruned.rdd.getNumPartitions() < every.rdd.getNumPartitions()
    planned = t.scan(filter=(pc.field("day") == "d1") & (pc.field("id") == 4))
    assert pruned.rdd.getNumPartitions() == len(planned.slices)
    assert rows_of(pruned) == rows_of(every.filter("day = 'd1' and id = 4"))
    from pyspark.sql import functions as F

    assert rows_of(read(spark, t.path, filter=F.col("id") > 30)) == rows_of(every.filter("id > 30"))
    source = spark.read.format("lakeline").load(t.path)
    assert rows_of(source) == rows_of(every)
    # One slot per slice, at least MIN_SLOTS (a later query's newer snapshot is spread over them).
    from lakeline.spark.source_reader import MIN_SLOTS

    assert source.rdd.getNumPartitions() == max(every.rdd.getNumPartitions(), MIN_SLOTS)
    old = t.timeline.completed()[1].id  # [0] created the table: a snapshot of the schema alone is refused
    assert rows_of(spark.read.format("lakeline").option("as_of", str(old)).load(t.path)) == rows_of(
        read(spark, t.path, as_of=old)
    )


def test_pyspark_filter_pushdown_bug_is_avoided(spark: Any, tmp_path: Path) -> None:
    """The pyspark 4.3 bug that keeps lakeline from enabling filter pushdown: a reused
    DataFrame must count all rows after a filtered count."""
    t, _ = build(tmp_path, "cow", True)
    df = spark.read.format("lakeline").load(t.path)
    n = df.count()
    assert df.filter("id > 30").count() < n
    assert df.count() == n
    df2 = read(spark, t.path)
    assert df2.filter("id > 30").count() < n and df2.count() == n


def test_typed_errors_before_any_job(spark: Any, tmp_path: Path) -> None:
    t, _ = build(tmp_path, "cow", False)
    with pytest.raises(UnknownColumnError):
        read(spark, t.path, columns=["id", "nope"])
    with pytest.raises(InstantNotFoundError):
        read(spark, t.path, as_of=999_999)
    with pytest.raises(TableNotFoundError):
        read(spark, str(tmp_path / "nothing"))


def test_delta_time_travel_options_read_the_snapshot_they_name(spark: Any, tmp_path: Path) -> None:
    """``versionAsOf`` (an instant id) and ``timestampAsOf`` (a date-time), in any case
    (Spark lower-cases option names), read what the local read of that snapshot reads;
    they were ignored, and a read "as of" returned today's rows."""
    t, instants = build(tmp_path, "mor", True)
    now = rows_of(read(spark, t.path))
    for old in instants[:2]:
        then = rows_of(read(spark, t.path, as_of=old))
        assert then != now
        for name in ("versionAsOf", "VERSIONASOF"):
            assert rows_of(spark.read.format("lakeline").option(name, old).load(t.path)) == then
        done = next(i for i in t.timeline.completed() if i.id == old).completed_us or 0
        at = datetime.fromtimestamp(done / 1e6, UTC)
        for text in (at.isoformat(), at.replace(tzinfo=None).isoformat(sep=" ")):  # no offset: UTC
            assert rows_of(spark.read.format("lakeline").option("timestampAsOf", text).load(t.path)) == then
    with pytest.raises(InstantNotFoundError):  # before the table's first commit
        spark.read.format("lakeline").option("timestampAsOf", "2001-01-01").load(t.path).collect()


def test_unknown_or_conflicting_read_options_are_typed_errors(spark: Any, tmp_path: Path) -> None:
    t, instants = build(tmp_path, "cow", False)
    for name in ("versionOf", "asOf"):  # misspelt: refused (write options, mergeSchema too, are taken for views)
        with pytest.raises(InvalidOptionError) as e:
            spark.read.format("lakeline").option(name, "1").load(t.path).collect()
        assert name.lower() in str(e.value) and "versionasof" in str(e.value) and "AWS_*" in str(e.value)
    # A stream-only option on a batch read (a write option is taken: a view carries it to its INSERTs).
    for name in ("max_instants_per_batch",):
        with pytest.raises(InvalidOptionError, match=name):
            spark.read.format("lakeline").option(name, "1").load(t.path).collect()
    bad = [
        {"versionAsOf": "2026-01-01"},
        {"versionAsOf": "-3"},
        {"timestampAsOf": "yesterday"},
        {"versionAsOf": str(instants[0]), "as_of": str(instants[1])},
        {"versionAsOf": str(instants[0]), "starting_instant": "earliest"},
    ]
    for options in bad:
        with pytest.raises(InvalidOptionError):
            spark.read.format("lakeline").options(**options).load(t.path).collect()
    with pytest.raises(InvalidOptionError, match="maxfilespertrigger"):
        spark.readStream.format("lakeline").option("starting_instant", "earliest").option(
            "maxFilesPerTrigger", "1"
        ).load(t.path)
    # Storage options pass under their own names, in any case (an unknown one is the
    # store's StorageConfigError, tests/spark/test_object_store.py).
    assert spark.read.format("lakeline").option("storage.timeout", "30s").load(t.path).count() == t.to_arrow().num_rows


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_spark_reads_struct_fields_by_id_after_a_nested_rename(spark: Any, tmp_path: Path, table_type: str) -> None:
    """Issue 29: a struct field renamed (and a sibling dropped and added again under its
    name) reads under its new name from files written before, in Spark as locally: by
    field id, not Arrow's by-name struct cast (which read the renamed field null)."""
    inner = pa.struct([("a", pa.int64()), ("b", pa.string())])
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", inner)])
    t = Table.create(str(tmp_path / "t"), schema, record_key="id", table_type=table_type)
    t.insert(pa.Table.from_pylist([{"id": i, "s": {"a": i * 10, "b": f"b{i}"}} for i in range(4)], schema=schema))
    t.upsert(pa.Table.from_pylist([{"id": 1, "s": {"a": 99, "b": "up"}}], schema=schema))  # mor: a log
    with t.update_schema() as u:
        u.rename_column("s.a", "alpha")
        u.delete_column("s.b")
        u.add_column("s.b", pa.string())
    want = [(i, (99 if i == 1 else i * 10, None)) for i in range(4)]
    for df in (read(spark, t.path), spark.read.format("lakeline").load(t.path)):
        assert df.schema["s"].dataType.fieldNames() == ["alpha", "b"]
        assert sorted((r["id"], (r["s"]["alpha"], r["s"]["b"])) for r in df.collect()) == want
    assert [r["id"] for r in read(spark, t.path).where("s.alpha = 20").collect()] == [2]
