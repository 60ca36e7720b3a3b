"""End to end on a real Spark standalone cluster (a master and two workers from the
pyspark wheel, loopback only): a DataFrame write and upsert, a compaction on
``SparkEngine`` and a read, with the driver in its own process; and refusals on it,
raised as lakeline's errors and never retried."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
from lakeline.table import Table

from tests.helpers import CHILDREN
from tests.spark.cluster import Cluster


def _run_driver(tmp_path: Path, script: str, path: str, timeout: float) -> tuple[dict[str, Any], str]:
    """Run the child driver ``script`` against a fresh standalone cluster and the table
    at ``path``; its last stdout line (JSON), and the cluster's master URL."""
    cluster = Cluster(tmp_path / "cluster").start()
    try:
        job = subprocess.run(
            [sys.executable, str(CHILDREN / script), cluster.url, path], capture_output=True, text=True, timeout=timeout
        )
        assert job.returncode == 0, f"{job.stdout}\n{job.stderr[-4000:]}\n{cluster.logs()}"
        return json.loads(job.stdout.strip().splitlines()[-1]), cluster.url
    finally:
        cluster.stop()


def test_write_read_and_compaction_on_a_standalone_cluster(spark_available: None, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("v", pa.string())])
    Table.create(path, schema, record_key="id", ordering_field="ts", partition_by=["day"], table_type="mor")
    out, url = _run_driver(tmp_path, "cluster_job.py", path, timeout=240)
    assert out["master"] == url
    assert (out["inserted"], out["updated"], out["updated_rows"], out["total"]) == (20_000, 10_000, 10_000, 20_000)
    assert out["compacted"] and out["compacted"] > 0
    assert out["executor_pids"] >= 2, "the tasks did not run in the workers' executors"
    t = Table.open(path)
    assert t.timeline.pending() == []
    rows = t.to_arrow()
    assert rows.num_rows == 20_000 and sum(v == "updated" for v in rows.column("v").to_pylist()) == 10_000
    assert all(not s.logs for s in t.view(t.timeline).latest_slices()), "compaction left logs"


def test_refusals_on_a_cluster_are_lakelines_errors_and_never_retried(spark_available: None, tmp_path: Path) -> None:
    """Issue 28 item 6: an executor's or a data source's refusal reaches the driver as
    lakeline's error, name and message first (it came as an ``AnalysisException``, the
    name deep in a traceback), and is not retried: the data source's commit runs once on
    the driver's side and ``lakeline.spark.write``'s planning tasks publish their error
    instead of raising it, so no task attempt fails (Spark would run a failed one
    ``spark.task.maxFailures`` = 4 times on a cluster). A bad option stops the write
    before any job. A task's own failure, a file removed under a running read, is
    retried by Spark like any task failure, and still arrives typed."""
    path = str(tmp_path / "t")
    t = Table.create(path, pa.schema([("id", pa.int64()), ("v", pa.string())]), record_key="id")
    t.insert(pa.table({"id": pa.array(range(100), pa.int64()), "v": ["a"] * 100}))
    before = Table.open(path).timeline.last_seq
    out, _ = _run_driver(tmp_path, "refusal_driver.py", path, timeout=300)
    for name in ("source_duplicate", "write_duplicate"):
        r = out[name]
        assert r["error"] == "DuplicateKeyError", r
        assert r["first_line"].startswith("lakeline.timeline.errors.DuplicateKeyError: insert carries"), r
        assert r["jobs"] >= 1 and r["tasks"] >= 2 and r["failed_attempts"] == 0, r
    option = out["source_unknown_option"]
    assert option["error"] == "InvalidOptionError" and "mergeschema" in option["first_line"], option
    assert option["jobs"] == 0, option
    gone = out["read_file_gone"]
    assert gone["error"] == "SnapshotExpiredError", gone
    assert gone["first_line"].startswith("lakeline.timeline.errors.SnapshotExpiredError: "), gone
    # Nothing of any refused write reached the timeline.
    assert Table.open(path).timeline.last_seq == before
