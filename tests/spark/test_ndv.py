"""The acceptance test of NDV sketches Spark can merge: Spark's estimate of the union of
lakeline's per-file sketches equals Spark's own ``hll_sketch_estimate(hll_sketch_agg(col))``
over the same rows, for int, bigint and string columns, on a table of many files and on
a small one (coupon mode: exact counts)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.spark import ndv
from lakeline.table import Table
from lakeline.timeline.errors import IndexNotFoundError
from pyspark.sql import functions as F

SCHEMA = pa.schema(
    [("id", pa.int64()), ("n", pa.int32()), ("big", pa.int64()), ("s", pa.string()), ("day", pa.string())]
)


def table(tmp: Path, rows: int, batches: int) -> Table:
    t = Table.create(
        str(tmp / f"t{rows}"),
        SCHEMA,
        record_key="id",
        partition_by=["day"],
        properties={"write.small-file-limit-bytes": 0},
    )  # a file per batch and partition
    t.indexes.create("column_stats", columns=["n", "big", "s"])
    per = rows // batches
    for b in range(batches):
        ids = list(range(b * per, (b + 1) * per))
        t.insert(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "n": pa.array([i % 7919 for i in ids], pa.int32()),
                    "big": pa.array([i * 1_000_003 % 50_021 for i in ids], pa.int64()),
                    "s": [f"user-{i % 3001}" if i % 11 else "" for i in ids],
                    "day": [f"d{i % 4}" for i in ids],
                }
            )
        )
    return Table.open(t.path)


@pytest.mark.parametrize("rows,batches", [(60_000, 6), (120, 3)])
def test_spark_merges_lakeline_sketches_to_its_own_estimate(
    spark: Any, tmp_path: Path, rows: int, batches: int
) -> None:
    t = table(tmp_path, rows, batches)
    data = spark.createDataFrame(t.to_arrow().to_pandas()).repartition(4)
    assert len(t.view(t.timeline).latest_slices()) > 4
    for column in ("n", "big", "s"):
        sketches = ndv(spark, t.path, column)
        assert sketches.count() == len(t.view(t.timeline).latest_slices())
        merged = sketches.selectExpr("hll_sketch_estimate(hll_union_agg(sketch)) AS e").first().e
        own = data.selectExpr(f"hll_sketch_estimate(hll_sketch_agg({column})) AS e").first().e
        assert merged == own, f"{column}: Spark's union of lakeline's sketches {merged}, its own sketch {own}"
        per_day = {
            r.partition: r.e
            for r in sketches.groupBy("partition")
            .agg(F.hll_sketch_estimate(F.hll_union_agg("sketch")).alias("e"))
            .collect()
        }
        assert set(per_day) == {f"day=d{i}" for i in range(4)}
    with pytest.raises(IndexNotFoundError):
        ndv(spark, t.path, "id")
