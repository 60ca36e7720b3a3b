"""MERGE's part of the standalone-cluster run on S3 (issue 46, item 2): a table at
``uri`` takes a Spark MERGE of a computed DataFrame (updates, deletes, inserts, and a
by-source delete), executors doing the work with the store reached through the options
alone; the outcome is checked against the clauses' meaning computed here in Python.

:func:`cluster_part` runs in the driver and returns JSON-able facts;
:func:`check_cluster_part` asserts them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from lakeline.spark import merge
from lakeline.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("n", pa.int64())])
TARGET = range(0, 3000, 2)  # even ids, n = id
SOURCE = range(0, 4500, 3)  # multiples of 3, n = 1


def cluster_part(spark: Any, uri: str, options: dict[str, str]) -> dict[str, Any]:
    from pyspark.sql import functions as F

    t = Table.create(uri, SCHEMA, record_key="id", partition_by=["day"], table_type="mor", storage_options=options)
    ids = list(TARGET)
    t.insert(pa.table({"id": ids, "day": [f"d{i % 3}" for i in ids], "n": ids}, schema=SCHEMA))
    df = spark.range(SOURCE.start, SOURCE.stop, SOURCE.step).select(
        "id", F.concat(F.lit("d"), (F.col("id") % 3).cast("string")).alias("day"), F.lit(1).cast("long").alias("n")
    )
    r = (
        merge(df, uri, storage_options=options)
        .when_matched_delete(pc.field("target.n") < 600)
        .when_matched_update(set={"n": pc.field("target.n") + pc.field("source.n")})
        .when_not_matched_insert()
        .when_not_matched_by_source_delete(pc.field("target.n") > 2900)
        .execute()
    )
    rows = Table.open(uri, storage_options=options).to_arrow()
    return {"stats": dict(r.stats), "rows": rows.num_rows, "sum": pc.sum(rows.column("n")).as_py()}


def check_cluster_part(out: dict[str, Any]) -> None:
    target, source = {i: i for i in TARGET}, set(SOURCE)
    updated = deleted = inserted = 0
    for k in source:
        if k in target:
            if target[k] < 600:
                del target[k]
                deleted += 1
            else:
                target[k] += 1
                updated += 1
        else:
            target[k] = 1
            inserted += 1
    for k in [k for k in target if k not in source and target[k] > 2900]:
        del target[k]
        deleted += 1
    want = {"rows_updated": updated, "rows_inserted": inserted, "rows_deleted": deleted}
    assert {k: out["stats"][k] for k in want} == want, out
    assert (out["rows"], out["sum"]) == (len(target), sum(target.values())), out
