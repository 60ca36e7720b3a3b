"""Tables created from DataFrames as Spark users build them (issue 46 item 1).

Spark marks most computed columns non-nullable: ``lit``, ``concat``, ``F.struct``
(and its fields), ``F.array`` (``containsNull=false``), ``create_map``
(``valueContainsNull=false``), ``collect_list``, ``timestamp_seconds``. A table
created from such a DataFrame kept that, and afterwards every key delete failed
(copy-on-write "Casting field 'ts' with null values to non-nullable", merge-on-read
"nulls in input cannot be viewed as non-nullable"), through ``write(..., "delete")``
and the data source alike. Now ``create_table`` makes the non-key columns nullable,
nested fields too, and a table that keeps Spark's nullability (``keep_not_null``)
takes the same writes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lakeline.spark import create_table, read, write
from lakeline.table import Table
from lakeline.timeline.errors import InvalidOptionError, SchemaMismatchError

from tests.spark.dataframes.nullability_cluster import check_cluster_part, cluster_part, nullability, spark_built_frame


def test_the_frames_are_as_spark_builds_them(spark: Any) -> None:
    """The premise: Spark declares these columns and their nested fields non-nullable."""
    schema = spark_built_frame(spark, 0, 3).schema
    assert [f.name for f in schema.fields if f.nullable] == ["note", "maybe"]
    assert schema["maybe"].dataType["x"].nullable is False
    assert schema["point"].dataType["label"].nullable is False
    assert schema["tags"].dataType.containsNull is False
    assert schema["props"].dataType.valueContainsNull is False
    assert schema["events"].dataType.containsNull is False


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_created_nullable_then_every_write_through_write_and_the_source(
    spark: Any, tmp_path: Path, table_type: str
) -> None:
    out = cluster_part(spark, str(tmp_path / table_type), {}, table_type)
    check_cluster_part(out)
    assert out["table_type"] == table_type


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_keep_not_null_keeps_it_everywhere_and_still_deletes(spark: Any, tmp_path: Path, table_type: str) -> None:
    from pyspark.sql import functions as F

    path = str(tmp_path / table_type)
    df = spark_built_frame(spark, 0, 6)
    with pytest.raises(InvalidOptionError):
        create_table(path, df, record_key="id", keep_not_null="false")  # type: ignore[arg-type]
    t = create_table(path, df, record_key="id", ordering_field="ts", table_type=table_type, keep_not_null=True)
    assert [f.name for f in t.schema if f.nullable] == ["note", "maybe"]
    assert nullability(t.schema.field("maybe").type) == [False]
    assert not any(nullability(t.schema.field("point").type))
    assert nullability(t.schema.field("tags").type) == nullability(t.schema.field("events").type) == [False]
    assert nullability(t.schema.field("props").type) == [False]
    write(df, path, "insert")
    write(spark_built_frame(spark, 4, 8, version=1), path, "upsert")
    write(spark.range(1).select(F.col("id")), path, "delete")
    spark.range(2, 3).select("id").write.format("lakeline").option("operation", "delete").mode("append").save(path)
    back = read(spark, path).orderBy("id").collect()
    assert [r.id for r in back] == [1, 3, 4, 5, 6, 7]
    assert [r.name for r in back] == ["n1v0", "n3v0", "n4v1", "n5v1", "n6v1", "n7v1"]
    assert back[-1].point.label == "p1" and back[-1].tags == ["t", "7"] and back[-1].props == {"k": 8}
    assert [r.maybe.x if r.maybe else None for r in back] == [None, 3, None, None, 6, None]
    source = spark.read.format("lakeline").load(path).orderBy("id").collect()
    assert [r.asDict(recursive=True) for r in source] == [r.asDict(recursive=True) for r in back]
    # A null where the table keeps not null is refused, typed, before anything is written.
    local = Table.open(path)
    rows = local.to_arrow().slice(0, 1)
    with pytest.raises(SchemaMismatchError, match="'name'"):
        local.upsert(rows.set_column(rows.schema.get_field_index("name"), "name", [[None]]))
    assert local.to_arrow().num_rows == 6
