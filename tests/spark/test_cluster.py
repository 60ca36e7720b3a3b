"""End to end on a real Spark standalone cluster (a master and two workers from the
pyspark wheel, loopback only): a DataFrame write and upsert, a compaction on
``SparkEngine`` and a read, with the driver in its own process; and refusals on it,
raised as lakeline's errors and never retried.

Both tests read their part of the run's one cluster application
(``tests/spark/cluster.py::run_cluster_app``: the parts ``job``, from
``tests/children/cluster_job.py``, and ``refusals``, each on its own table on local
disk): an application's start is most of a test's time on a loaded 2-core machine. A
part that fails fails its own test, with its traceback."""

from __future__ import annotations

from typing import Any

from lakeline.table import Table

from tests.spark.cluster import Cluster, part


def test_write_read_and_compaction_on_a_standalone_cluster(cluster: Cluster, cluster_app: dict[str, Any]) -> None:
    path = cluster_app["path"]
    out = part(cluster_app, "job")
    assert out["master"] == cluster.url
    assert (out["inserted"], out["updated"], out["updated_rows"], out["total"]) == (20_000, 10_000, 10_000, 20_000)
    assert out["compacted"] and out["compacted"] > 0
    assert out["executor_pids"] >= 2, "the tasks did not run in the workers' executors"
    t = Table.open(path)
    assert t.timeline.pending() == []
    rows = t.to_arrow()
    assert rows.num_rows == 20_000 and sum(v == "updated" for v in rows.column("v").to_pylist()) == 10_000
    assert all(not s.logs for s in t.view(t.timeline).latest_slices()), "compaction left logs"


def test_refusals_on_a_cluster_are_lakelines_errors_and_never_retried(cluster_app: dict[str, Any]) -> None:
    """Issue 28 item 6: an executor's or a data source's refusal reaches the driver as
    lakeline's error, name and message first (it came as an ``AnalysisException``, the
    name deep in a traceback), and is not retried: the data source's commit runs once on
    the driver's side and ``lakeline.spark.write``'s planning tasks publish their error
    instead of raising it, so no task attempt fails (Spark would run a failed one
    ``spark.task.maxFailures`` = 4 times on a cluster). A bad option stops the write
    before any job. A task's own failure, a file removed under a running read, is
    retried by Spark like any task failure, and still arrives typed."""
    out = part(cluster_app, "refusals")
    for name in ("source_duplicate", "write_duplicate"):
        r = out[name]
        assert r["error"] == "DuplicateKeyError", r
        assert r["first_line"].startswith("lakeline.timeline.errors.DuplicateKeyError: insert carries"), r
        assert r["jobs"] >= 1 and r["tasks"] >= 2 and r["failed_attempts"] == 0, r
    option = out["source_unknown_option"]
    assert option["error"] == "InvalidOptionError" and "overwriteschema" in option["first_line"], option
    assert option["jobs"] == 0, option
    gone = out["read_file_gone"]
    assert gone["error"] == "SnapshotExpiredError", gone
    assert gone["first_line"].startswith("lakeline.timeline.errors.SnapshotExpiredError: "), gone
    # Nothing of any refused write reached the timeline.
    assert Table.open(cluster_app["refusal_path"]).timeline.last_seq == cluster_app["before"]
