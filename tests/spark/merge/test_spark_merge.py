"""``lakeline.spark.merge``: the MERGE builder over a Spark DataFrame, executors doing
the work, lands what ``Table.merge`` of the same rows lands (the local MERGE is itself
checked against a model of Delta's semantics: tests/table/merge), on copy-on-write and
merge-on-read, with a by-source clause (one planning task) and without; bad sources are
lakeline's typed errors with nothing written."""

from __future__ import annotations

import importlib
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.spark import merge
from lakeline.table import Table
from lakeline.timeline.errors import DuplicateKeyError, InvalidMergeError
from pyspark.sql import functions as F

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("n", pa.int64())])


def _table(path: str, table_type: str) -> Table:
    t = Table.create(path, SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type=table_type)
    ids = list(range(0, 400, 2))
    t.insert(pa.table({"id": ids, "ts": [5] * len(ids), "day": [f"d{i % 3}" for i in ids], "n": ids}))
    return t


def _clauses(m: Any, by_source: bool) -> Any:
    m = (
        m.when_matched_delete(pc.field("source.n") < 20)
        .when_matched_update(
            set={"n": pc.field("source.n") + pc.field("target.n")}, condition=pc.field("target.n") < 300
        )
        .when_matched_update()
        .when_not_matched_insert(pc.field("source.n") > 100)
    )
    return m.when_not_matched_by_source_delete(pc.field("target.n") > 350) if by_source else m


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_spark_merge_lands_what_the_local_merge_lands(
    spark: Any, tmp_path: Any, table_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several planning tasks (60 source rows each), which may touch one file group
    each; a by-source clause makes it one task, which must see every source key."""
    spark_write = importlib.import_module("lakeline.spark.write")  # the module: the package's write is the function
    monkeypatch.setattr(spark_write, "_ROWS_PER_PLAN_TASK", 60)
    # A source as Spark builds it: computed, non-nullable columns, in no key order.
    df = (
        spark.range(0, 500, 3)
        .select(
            F.col("id"),
            F.lit(1).cast("long").alias("ts"),  # smaller than the target's: Delta's update still wins
            F.concat(F.lit("d"), (F.col("id") % 3).cast("string")).alias("day"),
            (F.col("id") * 7 % 200).alias("n"),
        )
        .orderBy(F.rand(7))
    )
    source = pa.Table.from_pandas(df.toPandas(), preserve_index=False)
    for by_source in (False, True):
        here, there = str(tmp_path / f"{by_source}-spark"), str(tmp_path / f"{by_source}-local")
        _table(here, table_type)
        local = _table(there, table_type)
        got = _clauses(merge(df, here), by_source).execute()
        want = _clauses(local.merge(source), by_source).execute()
        for k in ("rows_updated", "rows_inserted", "rows_deleted"):
            assert got.stats[k] == want.stats[k], (k, got.stats, want.stats)
        assert want.stats["rows_updated"] and want.stats["rows_inserted"] and want.stats["rows_deleted"]
        rows = Table.open(here).to_arrow().sort_by("id")
        assert rows.equals(Table.open(there).to_arrow().sort_by("id"))
        assert Table.open(here).timeline.completed()[-1].action == Table.open(there).timeline.completed()[-1].action


def test_spark_merge_refusals_write_nothing(spark: Any, tmp_path: Any) -> None:
    path = str(tmp_path / "t")
    t = _table(path, "mor")
    before = t.timeline.last_seq
    dupes = spark.createDataFrame([(1, 1, "d1", 1), (1, 2, "d1", 2)], "id long, ts long, day string, n long")
    with pytest.raises(DuplicateKeyError):
        merge(dupes, path).when_matched_update().execute()
    ok = spark.createDataFrame([(1, 1, "d1", 1)], "id long, ts long, day string, n long")
    with pytest.raises(InvalidMergeError):
        merge(ok, path).when_matched_delete().when_matched_update(condition=pc.field("source.n") > 0)
    assert Table.open(path).timeline.last_seq == before
