"""The ``lakeline`` Spark data source (``spark.read.format("lakeline")``,
``df.write.format("lakeline")``). Placeholder for the read side."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceWriter
from pyspark.sql.types import StructType


class LakelineDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "lakeline"

    # -- writes (spark/source_writer.py) --------------------------------------------------

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .source_writer import LakelineWriter

        return LakelineWriter(self.options["path"], self.options, overwrite)
