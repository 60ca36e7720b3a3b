"""The driver of the standalone-cluster test on S3, run as its own process (the test
process already holds a local SparkContext, and there is one per process): an insert
and an upsert through ``lakeline.spark.write``, a compaction on ``SparkEngine``, a read
with a filter and a data-source read, all on the table at an ``s3://`` location.

Then each part of ``parts`` (name -> {"call": "module:function", "args": [...]}, run as
``function(spark, *args)``: issue 46's parts on S3, the local-disk job and refusals of
tests/spark/test_cluster.py) runs in the same application, its facts or its traceback
under its name: an application's start is most of a test's time on a loaded 2-core
machine (tests/spark/cluster.py, ``run_cluster_app``).

The location and the storage options come on stdin as JSON, never on the command line
(where ``ps`` would show the secret), and the environment holds no ``AWS_*`` key: the
executors can reach the store only through the options their tasks carry. Prints one
JSON line.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import traceback
from typing import Any

from lakeline.spark import SparkEngine, read, session, write
from lakeline.table import Table

ROWS = 6_000


def main(master: str) -> None:
    job = json.load(sys.stdin)
    uri, options = job["uri"], job["options"]
    spark = session(master, "lakeline-s3-cluster-test", **{"spark.executor.memory": "768m", "spark.cores.max": "2"})
    day = "concat('d', cast(id % 3 as string)) as day"
    rows = spark.range(0, ROWS).selectExpr("id", "cast(1 as long) as ts", day, "concat('v', cast(id as string)) as v")
    first = write(rows, uri, "insert", storage_options=options)
    updates = spark.range(0, ROWS, 2).selectExpr("id", "cast(2 as long) as ts", day, "'updated' as v")
    second = write(updates, uri, "upsert", storage_options=options)
    t = Table.open(uri, storage_options=options)
    t.engine = SparkEngine(spark)
    compacted = t.services.compact()
    updated = read(spark, uri, filter="v = 'updated'", storage_options=options)
    source = spark.read.format("lakeline").options(**options).load(uri).filter("day = 'd1'")
    executors = set(spark.sparkContext.parallelize(range(8), 8).map(lambda _: os.getpid()).collect())
    parts: dict[str, Any] = {}
    for name, spec in job.get("parts", {}).items():
        module, function = spec["call"].split(":")
        try:
            parts[name] = getattr(importlib.import_module(module), function)(spark, *spec["args"])
        except Exception:  # noqa: BLE001 - a part that fails fails its own test, with this
            parts[name] = {"failed": traceback.format_exc()}
    print(
        json.dumps(
            {
                "parts": parts,
                "inserted": first.stats.get("inserted"),
                "updated": second.stats.get("updated"),
                "compacted": compacted.stats.get("file_groups_compacted"),
                "updated_rows": updated.count(),
                "d1_rows": source.count(),
                "total": read(spark, uri, storage_options=options).count(),
                "executor_pids": len(executors),
                "driver_pid": os.getpid(),
                "master": spark.sparkContext.master,
            }
        ),
        flush=True,
    )
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
