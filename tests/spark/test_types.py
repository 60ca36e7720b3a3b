"""The Spark <-> Arrow type mapping and ``create_table`` from a Spark schema."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.spark import create_table, read, write
from lakeline.spark.types import to_arrow_schema, to_spark_schema
from lakeline.table import Table
from lakeline.timeline.errors import SchemaMismatchError, TableExistsError
from pyspark.sql.types import (
    ArrayType,
    DayTimeIntervalType,
    DecimalType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

SPARK = StructType(
    [
        StructField("id", LongType(), False),
        StructField("price", DecimalType(12, 3)),
        StructField("at", TimestampType()),
        StructField("local", TimestampNTZType()),
        StructField("tags", ArrayType(StringType())),
        StructField("attrs", MapType(StringType(), LongType())),
        StructField("nested", StructType([StructField("a", LongType()), StructField("b", StringType())])),
        StructField("day", StringType()),
    ]
)


def test_mapping_round_trips_and_names_what_it_refuses() -> None:
    arrow = to_arrow_schema(SPARK)
    assert arrow.field("price").type == pa.decimal128(12, 3)
    assert arrow.field("at").type == pa.timestamp("us", tz="UTC")
    assert arrow.field("local").type == pa.timestamp("us")
    assert arrow.field("tags").type.value_type == pa.string()
    assert not arrow.field("id").nullable
    assert to_spark_schema(arrow) == SPARK
    with pytest.raises(SchemaMismatchError, match="'u'"):
        to_spark_schema(pa.schema([("u", pa.uint64())]))
    with pytest.raises(SchemaMismatchError, match="'span'"):
        to_arrow_schema(StructType([StructField("span", DayTimeIntervalType())]))


def test_create_table_write_and_read_back_every_type(spark: Any, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    t = create_table(path, SPARK, record_key="id", partition_by=["day"], table_type="mor")
    assert t.schema == to_arrow_schema(SPARK)
    with pytest.raises(TableExistsError):
        create_table(path, SPARK, record_key="id")
    at = dt.datetime(2026, 11, 24, 10, 30, 0, 123456, tzinfo=dt.UTC)
    local = dt.datetime(2026, 11, 24, 10, 30, 0, 654321)
    rows = [
        (1, Decimal("12.345"), at, local, ["x", "y"], {"k": 1}, (7, "s"), "d1"),
        (2, None, None, None, None, None, None, "d2"),
    ]
    df = spark.createDataFrame(rows, SPARK)
    write(df, path, "upsert")
    back = read(spark, path).orderBy("id").collect()
    assert back[0].price == Decimal("12.345") and back[0].at == at.replace(tzinfo=None) and back[0].local == local
    assert back[0].tags == ["x", "y"] and back[0].attrs == {"k": 1} and back[0].nested.b == "s"
    assert back[1].price is None and back[1].tags is None
    local_rows = Table.open(path).to_arrow().sort_by("id").to_pylist()
    assert local_rows[0]["at"] == at and local_rows[0]["local"] == local
    # A DataFrame's schema works as well; a column Spark cannot store is refused, named.
    create_table(str(tmp_path / "from_df"), df, record_key="id")
    with pytest.raises(SchemaMismatchError, match="'span'"):
        create_table(
            str(tmp_path / "bad"),
            StructType([StructField("id", LongType()), StructField("span", DayTimeIntervalType())]),
        )
