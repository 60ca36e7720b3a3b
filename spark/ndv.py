"""``ndv(spark, path, column)``: lakeline's per-file NDV sketches as a DataFrame Spark merges.

The ``column_stats`` index keeps one Apache DataSketches HLL sketch per live base file
and column (:mod:`lakeline.indexes.hll`), hashed the way Spark's ``hll_sketch_agg``
hashes ints, longs and strings. So Spark SQL merges them with its own functions, per
partition or over the table, without reading a row of data::

    ndv(spark, path, "user_id").agg(F.hll_sketch_estimate(F.hll_union_agg("sketch")))

The sketches are ``lg_k`` 12 (Spark's default ``lgConfigK``), so no
``allowDifferentLgConfigK`` is needed against sketches Spark builds with its default.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import DataFrame, SparkSession

from ..table.table import Table

SCHEMA = "partition string, path string, file_group string, sketch binary"


def ndv(
    spark: SparkSession,
    path: str,
    column: str,
    timeline: str | None = None,
    storage_options: Mapping[str, str] | None = None,
) -> DataFrame:
    """One row per live base file: ``partition``, ``path``, ``file_group`` and ``sketch``
    (binary), from the table's ready ``column_stats`` index (metadata only: the sketches
    are small, and no data file is read). ``timeline`` and ``storage_options`` are as for
    ``Table.open``.

    Raises:
        TableNotFoundError: no table at ``path``.
        IndexNotFoundError: no ready ``column_stats`` index covers ``column``.
    """
    rows = Table.open(path, timeline, storage_options).indexes.sketches(column)
    return spark.createDataFrame(rows.to_pylist(), SCHEMA)
