"""The ``lakeline`` Spark data source (``spark.read.format("lakeline")``,
``df.write.format("lakeline")``). Placeholder: reads and writes land in later commits."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource


class LakelineDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "lakeline"
