"""End to end on a real Spark standalone cluster (a master and two workers from the
pyspark wheel, loopback only): a DataFrame write and upsert, a compaction on
``SparkEngine`` and a read, with the driver in its own process; and refusals on it,
raised as lakeline's errors and never retried.

Both tests read the outcome of one driver (``tests/children/cluster_job.py``), one Spark
application on the run's cluster that does each test's part on its own table: an
application's start (the driver's and executors' JVMs, their Python workers) is most of
a test's time on a loaded 2-core machine. A part that fails fails its own test, with
its traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table

from tests.helpers import CHILDREN, child_env
from tests.spark.cluster import Cluster


@pytest.fixture(scope="module")
def cluster_run(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both tests' tables, and the driver's outcome on them: {"job", "refusals"} (each
    a part's JSON, or {"failed": its traceback}), the paths and the refusal table's
    last seq before the driver ran."""
    tmp = tmp_path_factory.mktemp("cluster-run")
    path, refusal_path = str(tmp / "t"), str(tmp / "refused")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("v", pa.string())])
    Table.create(path, schema, record_key="id", ordering_field="ts", partition_by=["day"], table_type="mor")
    t = Table.create(refusal_path, pa.schema([("id", pa.int64()), ("v", pa.string())]), record_key="id")
    t.insert(pa.table({"id": pa.array(range(100), pa.int64()), "v": ["a"] * 100}))
    before = Table.open(refusal_path).timeline.last_seq
    job = subprocess.run(
        [sys.executable, str(CHILDREN / "cluster_job.py"), cluster.url, path, refusal_path],
        capture_output=True,
        text=True,
        timeout=480,
        env=child_env(),
    )
    assert job.returncode == 0, f"{job.stdout}\n{job.stderr[-4000:]}\n{cluster.logs()}"
    out: dict[str, Any] = json.loads(job.stdout.strip().splitlines()[-1])
    return {**out, "path": path, "refusal_path": refusal_path, "before": before}


def part(run: dict[str, Any], name: str) -> dict[str, Any]:
    out: dict[str, Any] = run[name]
    assert "failed" not in out, out["failed"]
    return out


def test_write_read_and_compaction_on_a_standalone_cluster(cluster: Cluster, cluster_run: dict[str, Any]) -> None:
    path = cluster_run["path"]
    out = part(cluster_run, "job")
    assert out["master"] == cluster.url
    assert (out["inserted"], out["updated"], out["updated_rows"], out["total"]) == (20_000, 10_000, 10_000, 20_000)
    assert out["compacted"] and out["compacted"] > 0
    assert out["executor_pids"] >= 2, "the tasks did not run in the workers' executors"
    t = Table.open(path)
    assert t.timeline.pending() == []
    rows = t.to_arrow()
    assert rows.num_rows == 20_000 and sum(v == "updated" for v in rows.column("v").to_pylist()) == 10_000
    assert all(not s.logs for s in t.view(t.timeline).latest_slices()), "compaction left logs"


def test_refusals_on_a_cluster_are_lakelines_errors_and_never_retried(cluster_run: dict[str, Any]) -> None:
    """Issue 28 item 6: an executor's or a data source's refusal reaches the driver as
    lakeline's error, name and message first (it came as an ``AnalysisException``, the
    name deep in a traceback), and is not retried: the data source's commit runs once on
    the driver's side and ``lakeline.spark.write``'s planning tasks publish their error
    instead of raising it, so no task attempt fails (Spark would run a failed one
    ``spark.task.maxFailures`` = 4 times on a cluster). A bad option stops the write
    before any job. A task's own failure, a file removed under a running read, is
    retried by Spark like any task failure, and still arrives typed."""
    out = part(cluster_run, "refusals")
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
    assert Table.open(cluster_run["refusal_path"]).timeline.last_seq == cluster_run["before"]
