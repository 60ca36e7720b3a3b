"""The driver of the standalone-cluster test, run as its own process (the test process
already holds a local SparkContext, and there is one per process): a write, a read and
a compaction on the cluster at argv[1], on the table at argv[2]. Prints one JSON line."""

from __future__ import annotations

import json
import os
import sys

from lakeline.spark import SparkEngine, read, session, write
from lakeline.table import Table


def main(master: str, path: str) -> None:
    spark = session(master, "lakeline-cluster-test", **{"spark.executor.memory": "768m", "spark.cores.max": "2"})
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
    print(
        json.dumps(
            {
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
        ),
        flush=True,
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
