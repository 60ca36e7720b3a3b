"""The refusals of the standalone-cluster test (issue 28 item 6): refusals through
``df.write.format("lakeline")`` and ``lakeline.spark.write`` on a session of the cluster,
on the table at ``path`` (which holds keys 0..99). For each: the exception's type, its
text's first line, and the task attempts Spark ran and failed (from its status tracker,
by job group).

:func:`refusals` runs as a part of the run's one cluster application
(tests/spark/cluster.py, ``run_cluster_app``: an application's start, its driver's and
executors' JVMs and their Python workers, is most of each test's time); run as a script
(``refusal_driver.py MASTER PATH``), its own application, printing one JSON line.
"""

from __future__ import annotations

import glob
import json
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any

from lakeline.spark import session, write


def refusals(spark: Any, path: str) -> dict[str, dict[str, Any]]:
    """Each refusal's outcome, by name; the job groups are this function's own."""
    sc = spark.sparkContext

    def run(group: str, action: Callable[[], Any]) -> dict[str, Any]:
        sc.setJobGroup(group, group)
        out: dict[str, Any] = {"error": None, "first_line": None}
        try:
            action()
        except Exception as e:  # noqa: BLE001 - what the caller sees is the measurement
            out["error"] = type(e).__name__
            out["first_line"] = traceback.format_exception_only(e)[0].splitlines()[0]
            out["text"] = str(e)[-3000:]  # for the test's failure message
        tracker = sc.statusTracker()
        jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
        stages = [tracker.getStageInfo(s) for j in jobs if j is not None for s in j.stageIds]
        out["jobs"] = len(jobs)
        out["tasks"] = sum(s.numTasks for s in stages if s is not None)
        out["failed_attempts"] = sum(s.numFailedTasks for s in stages if s is not None)
        return out

    def again(keys: range) -> Any:
        return spark.createDataFrame([(i, "again") for i in keys], "id long, v string").repartition(2)

    results = {
        "source_duplicate": run(
            "source", lambda: again(range(90, 110)).write.format("lakeline").mode("append").save(path)
        ),
        "write_duplicate": run("write", lambda: write(again(range(95, 105)), path, "insert")),
        # A DataFrame without a shuffle: Spark asks for the writer before any job (with
        # one, adaptive execution runs the shuffle's job first, writing nothing of the table).
        # Delta's overwriteSchema: an option lakeline does not take (mergeSchema it does).
        "source_unknown_option": run(
            "option",
            lambda: (
                spark.createDataFrame([(200, "x")], "id long, v string")
                .write.format("lakeline")
                .option("overwriteSchema", "true")
                .mode("append")
                .save(path)
            ),
        ),
    }
    # A task's own failure: a file of the planned snapshot removed before the read runs.
    planned = spark.read.format("lakeline").load(path)
    for f in glob.glob(os.path.join(path, "**", "*.parquet"), recursive=True):
        os.remove(f)
    results["read_file_gone"] = run("read", planned.collect)
    return results


def main(master: str, path: str) -> None:
    spark = session(master, "lakeline-refusal-test", **{"spark.executor.memory": "768m", "spark.cores.max": "2"})
    print(json.dumps(refusals(spark, path)), flush=True)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
