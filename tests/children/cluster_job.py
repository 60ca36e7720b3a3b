"""The ``job`` part of the run's cluster application (tests/spark/cluster.py,
``run_cluster_app``, whose driver is ``s3_cluster_job.py``): a write, a read and a
compaction on the cluster, on a table on local disk, for
``tests/spark/test_cluster.py``.
"""

from __future__ import annotations

import os
from typing import Any

from lakeline.spark import SparkEngine, read, write
from lakeline.table import Table


def job(spark: Any, path: str) -> dict[str, Any]:
    day = "concat('d', cast(id % 3 as string)) as day"
    rows = spark.range(0, 20_000).selectExpr("id", "cast(1 as long) as ts", day, "concat('v', cast(id as string)) as v")
    first = write(rows, path, "insert")
    updates = spark.range(0, 20_000, 2).selectExpr("id", "cast(2 as long) as ts", day, "'updated' as v")
    second = write(updates, path, "upsert")
    t = Table.open(path)
    t.engine = SparkEngine(spark)
    compacted = t.services.compact()
    df = read(spark, path, filter="v = 'updated'")
    executors = set(spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.getpid()).collect())
    return {
        "inserted": first.stats.get("inserted"),
        "updated": second.stats.get("updated"),
        "compacted": compacted.stats.get("file_groups_compacted"),
        "updated_rows": df.count(),
        "total": read(spark, path).count(),
        "partitions": df.rdd.getNumPartitions(),
        "executor_pids": len(executors),
        "driver_pid": os.getpid(),
        "master": spark.sparkContext.master,
    }
