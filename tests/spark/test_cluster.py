"""End to end on a real Spark standalone cluster (a master and two workers from the
pyspark wheel, loopback only): a DataFrame write and upsert, a compaction on
``SparkEngine`` and a read, with the driver in its own process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
from lakeline.table import Table

from tests.helpers import CHILDREN
from tests.spark.cluster import Cluster


def test_write_read_and_compaction_on_a_standalone_cluster(spark_available: None, tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("v", pa.string())])
    Table.create(path, schema, record_key="id", ordering_field="ts", partition_by=["day"], table_type="mor")
    cluster = Cluster(tmp_path / "cluster").start()
    try:
        job = subprocess.run(
            [sys.executable, str(CHILDREN / "cluster_job.py"), cluster.url, path],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert job.returncode == 0, f"{job.stdout}\n{job.stderr[-4000:]}\n{cluster.logs()}"
        out = json.loads(job.stdout.strip().splitlines()[-1])
    finally:
        cluster.stop()
    assert out["master"] == cluster.url
    assert (out["inserted"], out["updated"], out["updated_rows"], out["total"]) == (20_000, 10_000, 10_000, 20_000)
    assert out["compacted"] and out["compacted"] > 0
    assert out["executor_pids"] >= 2, "the tasks did not run in the workers' executors"
    t = Table.open(path)
    assert t.timeline.pending() == []
    rows = t.to_arrow()
    assert rows.num_rows == 20_000 and sum(v == "updated" for v in rows.column("v").to_pylist()) == 10_000
    assert all(not s.logs for s in t.view(t.timeline).latest_slices()), "compaction left logs"
