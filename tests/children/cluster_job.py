"""The driver of the standalone-cluster tests, run as its own process (the test process
already holds a local SparkContext, and there is one per process): a write, a read and
a compaction on the cluster at argv[1], on the table at argv[2]; then, with argv[3], the
refusals of ``refusal_driver.py`` on the table at argv[3], in the same application (its
start, the driver's and executors' JVMs and their Python workers, is most of a cluster
test's time, so both tests of ``tests/spark/test_cluster.py`` share one). Each part's
failure is reported as its traceback, so the other part's test still sees its own
outcome. Prints one JSON line: {"job": ..., "refusals": ...}.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import Any

from lakeline.spark import SparkEngine, read, session, write
from lakeline.table import Table

from tests.children.refusal_driver import refusals  # the checkout is on PYTHONPATH: tests.helpers.child_env


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


def guarded(part: Any, *args: Any) -> dict[str, Any]:
    """``part(*args)``'s result, or {"failed": its traceback}."""
    try:
        result: dict[str, Any] = part(*args)
        return result
    except Exception:  # noqa: BLE001 - reported to the test that owns the part
        return {"failed": traceback.format_exc()[-4000:]}


def main(master: str, path: str, refusal_path: str | None = None) -> None:
    spark = session(master, "lakeline-cluster-test", **{"spark.executor.memory": "768m", "spark.cores.max": "2"})
    out = {"job": guarded(job, spark, path)}
    if refusal_path is not None:
        out["refusals"] = guarded(refusals, spark, refusal_path)
    print(json.dumps(out), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
