"""A SparkSession ready for lakeline, and the registration of its data source.

Defaults are chosen for the machines lakeline's users test on and for correctness of the
Arrow paths lakeline relies on: executors run the driver's Python (the task functions
and their pickled arguments must meet the same lakeline and pyarrow), everything binds
to loopback unless the caller says otherwise, the UI is off, shuffles are small (a
write's stages are sized by lakeline, not by ``spark.sql.shuffle.partitions``), and
the session time zone is UTC, so timestamps cross the Spark <-> Arrow boundary
unshifted.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from pyspark.sql import SparkSession

#: Settings every lakeline session starts from; ``session(**conf)`` overrides them.
DEFAULTS: dict[str, str] = {
    "spark.pyspark.python": sys.executable,
    "spark.pyspark.driver.python": sys.executable,
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "100000",
    "spark.python.worker.reuse": "true",
    "spark.driver.memory": "2g",
}


def session(master: str = "local[2]", app_name: str = "lakeline", **conf: Any) -> SparkSession:
    """A SparkSession (new, or the active one reconfigured where Spark allows it) with
    lakeline's defaults, ``conf`` on top (``session(**{"spark.executor.memory": "4g"})``),
    and the ``lakeline`` data source registered."""
    # The JVM reads these when it starts; Python workers inherit them.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**DEFAULTS, **{k: str(v) for k, v in conf.items()}}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark: SparkSession) -> None:
    """Register the ``lakeline`` data source on ``spark`` (idempotent), and make pyspark
    raise the lakeline errors its reads and writes meet as themselves
    (:func:`lakeline.spark.errors.install`), not inside an ``AnalysisException``."""
    from .errors import install
    from .source import LakelineDataSource

    install()
    spark.dataSource.register(LakelineDataSource)
