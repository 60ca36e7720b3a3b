"""Issue 46 item 1 on any Spark (``local[2]`` in tests/spark/dataframes, the standalone
cluster on SeaweedFS through the lead's cluster application): a table created from a
DataFrame built as Spark users build them takes inserts, upserts and key deletes through
``lakeline.spark.write`` and the data source, and reads back what a model says.

:func:`spark_built_frame` is such a DataFrame: Spark declares every column but ``note`` and ``maybe``
non-nullable, and the fields nested in them too (``lit``, ``concat``, ``F.struct``,
``F.array``, ``create_map``, ``collect_list``, ``timestamp_seconds``).
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from lakeline.spark import create_table, read, write
from lakeline.table import Table


def spark_built_frame(spark: Any, start: int, end: int, version: int = 0, null_structs: bool = True) -> Any:
    """Rows ``start`` to ``end`` (ids), their values naming ``version``: ``name``
    ``n<id>v<version>``, ``ts`` ``timestamp_seconds(id + version)``, ``point``
    ``{x: id, label: p<version>}``, ``tags`` ``["t", "<id>"]``, ``props``
    ``{"k": id + version}``, ``events`` ``["e<id>"]`` (a ``collect_list``), ``note``
    (nullable) ``"even"`` or null, ``maybe`` (nullable, its field not) ``{x: id}`` for ids
    divisible by 3, else null (``{x: id}`` for every id without ``null_structs``)."""
    from pyspark.sql import functions as F

    ids = spark.range(start, end)
    id_text = F.col("id").cast("string")
    events = (
        ids.select("id", F.concat(F.lit("e"), id_text).alias("e"))
        .groupBy("id")
        .agg(F.collect_list("e").alias("events"))
    )
    rows = ids.select(
        "id",
        F.concat(F.lit("n"), id_text, F.lit(f"v{version}")).alias("name"),
        F.timestamp_seconds(F.col("id") + F.lit(version)).alias("ts"),
        F.struct(F.col("id").alias("x"), F.lit(f"p{version}").alias("label")).alias("point"),
        F.array(F.lit("t"), id_text).alias("tags"),
        F.create_map(F.lit("k"), F.col("id") + F.lit(version)).alias("props"),
        F.when(F.col("id") % 2 == 0, F.lit("even")).alias("note"),
        # A nullable struct of non-nullable fields: Spark sends a null in them under each null.
        F.when(F.col("id") % 3 == 0 if null_structs else F.lit(True), F.struct(F.col("id").alias("x"))).alias("maybe"),
    )
    return rows.join(events, "id")


def nullability(t: pa.DataType) -> list[bool]:
    """The nullability of every field nested in ``t``, depth first (a map's values, not
    its keys: those are never nullable)."""
    if pa.types.is_struct(t):
        kids = [t.field(i) for i in range(t.num_fields)]
    elif pa.types.is_map(t):
        kids = [t.item_field]
    elif pa.types.is_list(t):
        kids = [t.value_field]
    else:
        kids = []
    out: list[bool] = []
    for f in kids:
        out += [f.nullable, *nullability(f.type)]
    return out


def cluster_part(spark: Any, uri: str, options: dict[str, str], table_type: str = "mor") -> dict:
    """At ``uri``: ``create_table`` from :func:`spark_built_frame` (the default rule:
    non-key columns nullable), insert ids 0-39, upsert 30-49 (version 1), delete 0-9
    through ``write`` and 10-14 through the data source, upsert 45-54 (version 2)
    through the data source; and at ``uri + "-keep"`` the
    same frame with ``keep_not_null=True``, insert 0-19 and delete 0-4 through
    ``write``. Returns counts and a sample for :func:`check_cluster_part`."""
    from pyspark.sql import functions as F

    opts = dict(options)
    t = create_table(
        uri, spark_built_frame(spark, 0, 1), "id", "ts", table_type=table_type, storage_options=opts or None
    )
    write(spark_built_frame(spark, 0, 40), uri, "insert", storage_options=opts)
    write(spark_built_frame(spark, 30, 50, version=1), uri, "upsert", storage_options=opts)
    deleted = write(spark.range(0, 10).select("id"), uri, "delete", storage_options=opts).stats.get("deleted")
    writer = spark.range(10, 15).select("id").write.format("lakeline").option("operation", "delete")
    writer.options(**opts).mode("append").save(uri)
    # With null structs: Spark puts a null in ``maybe.x`` under a null ``maybe``, which
    # Parquet refused when the data source staged the batch as it came.
    frame = spark_built_frame(spark, 45, 55, version=2)
    upserts = frame.write.format("lakeline").option("operation", "upsert")
    upserts.options(**opts).mode("append").save(uri)
    back = read(spark, uri, storage_options=opts)
    source = spark.read.format("lakeline").options(**opts).load(uri)
    last = back.filter(F.col("id") == 54).collect()[0].asDict(recursive=True)

    keep = uri.rstrip("/") + "-keep"
    kept = create_table(
        keep,
        spark_built_frame(spark, 0, 1),
        "id",
        "ts",
        table_type=table_type,
        storage_options=opts or None,
        keep_not_null=True,
    )
    write(spark_built_frame(spark, 0, 20), keep, "insert", storage_options=opts)
    kept_deleted = write(spark.range(0, 5).select("id"), keep, "delete", storage_options=opts).stats.get("deleted")
    return {
        "schema": {f.name: [f.nullable, *nullability(f.type)] for f in Table.open(uri, storage_options=opts).schema},
        "table_type": str(t.config.table_type.value),
        "deleted_by_write": deleted,
        "rows": back.count(),
        "source_rows": source.count(),
        "deleted_present": back.filter(F.col("id") < 15).count(),
        "version_1_rows": back.filter(F.col("name").endswith("v1")).count(),
        "last": {k: (str(v) if k == "ts" else v) for k, v in last.items()},
        "maybe_rows": back.filter(F.col("maybe.x") == F.col("id")).count(),
        "kept_not_null": [f.name for f in kept.schema if not f.nullable],
        "kept_deleted": kept_deleted,
        "kept_rows": read(spark, keep, storage_options=opts).count(),
    }


def check_cluster_part(out: dict) -> None:
    assert out["deleted_by_write"] == 10, out
    assert out["rows"] == out["source_rows"] == 40, out  # ids 15-54
    assert out["deleted_present"] == 0, out
    assert out["version_1_rows"] == 15, out  # ids 30-44
    last = out["last"]
    assert last["name"] == "n54v2" and last["point"] == {"x": 54, "label": "p2"}, last
    assert last["tags"] == ["t", "54"] and last["props"] == {"k": 56} and last["events"] == ["e54"], last
    assert last["maybe"] == {"x": 54} and out["maybe_rows"] == 14, out  # 15, 18, ..., 54
    assert out["schema"]["id"] == [False], out["schema"]
    assert all(all(v) for name, v in out["schema"].items() if name != "id"), out["schema"]
    assert set(out["kept_not_null"]) == {"id", "name", "ts", "point", "tags", "props", "events"}, out
    assert out["kept_deleted"] == 5 and out["kept_rows"] == 15, out
