"""A real Spark standalone cluster for tests: one master and two workers, started from
the pyspark wheel with ``spark-class`` (no ``start-master.sh``), bound to 127.0.0.1,
and stopped by their process groups whatever happens (``stop()`` in a ``finally`` and
at interpreter exit). Their logs stay in the cluster's folder for failure messages.

And the one Spark application every cluster test reads the outcome of
(:func:`run_cluster_app`): an application's start (the driver's and executors' JVMs,
their Python workers) is most of a cluster test's time on a loaded 2-core machine, so
one driver (``tests/children/s3_cluster_job.py``) runs every cluster test's part: the
write, read and compaction on S3, and each part of :data:`PARTS` and the local-disk
parts of ``test_cluster.py`` on a table of its own. A part that fails fails its own
test, with its traceback.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from lakeline.table import Table

from tests.helpers import CHILDREN, child_env
from tests.seaweedfs import SeaweedServer


def free_ports(n: int) -> list[int]:
    """``n`` distinct free ports: bound all at once, since a port asked for one at a
    time can come back twice while the JVM that was given it has not bound it yet."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in sockets]
    finally:
        for s in sockets:
            s.close()


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


@dataclass
class Cluster:
    folder: Path
    workers: int = 2
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.master_port, self.ui_port, *self.worker_ui_ports = free_ports(2 + self.workers)

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _start(self, name: str, *args: str) -> None:
        # No AWS_* variable: the cluster is shared by a run's tests, and the object-store
        # test proves its executors reach the store through the options alone.
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOG_DIR": str(self.folder),
            "SPARK_WORKER_DIR": str(self.folder / "work"),
        }
        log = open(self.folder / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the process's life
        self.procs.append(
            subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )

    def start(self, timeout: float = 90.0) -> Cluster:
        self.folder.mkdir(parents=True, exist_ok=True)
        atexit.register(self.stop)
        self._start(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.master_port),
            "--webui-port",
            str(self.ui_port),
        )
        for w in range(self.workers):
            self._start(
                f"worker-{w}",
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                "1g",
                "--webui-port",
                str(self.worker_ui_ports[w]),
                "--work-dir",
                str(self.folder / f"work-{w}"),
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.alive_workers() >= self.workers:
                return self
            if any(p.poll() is not None for p in self.procs):
                break
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the standalone cluster did not come up with {self.workers} workers:\n{self.logs()}")

    def alive_workers(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):  # not up yet, or not the master's page
            return 0

    def logs(self) -> str:
        logs = sorted(self.folder.glob("*.log"))
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in logs)

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        self.procs.clear()


SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("v", pa.string())])
#: Issue 46's parts on S3: name -> the module with ``cluster_part`` / ``check_cluster_part``.
PARTS = {
    "nullability": "tests.spark.dataframes.nullability_cluster",
    "merge": "tests.spark.merge.merge_cluster",
    "stream_staging": "tests.spark.sink.stream_cluster",
}


def run_cluster_app(cluster: Cluster, s3: SeaweedServer, tmp: Path) -> dict[str, Any]:
    """Run the application; its JSON (the S3 write's facts and ``parts``: name -> a
    part's facts or {"failed": traceback}) with the locations and what was known before."""
    uri, opts = s3.uri(), s3.options()
    Table.create(
        uri, SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type="mor",
        storage_options=opts,
    )  # fmt: skip
    # The local-disk tables of tests/spark/test_cluster.py: the cluster shares this disk.
    path, refusal_path = str(tmp / "t"), str(tmp / "refused")
    Table.create(path, SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type="mor")
    t = Table.create(refusal_path, pa.schema([("id", pa.int64()), ("v", pa.string())]), record_key="id")
    t.insert(pa.table({"id": pa.array(range(100), pa.int64()), "v": ["a"] * 100}))
    before = Table.open(refusal_path).timeline.last_seq
    parts: dict[str, dict[str, Any]] = {
        name: {"call": f"{module}:cluster_part", "args": [s3.uri(name), opts]} for name, module in PARTS.items()
    }
    parts["job"] = {"call": "tests.children.cluster_job:job", "args": [path]}
    parts["refusals"] = {"call": "tests.children.refusal_driver:refusals", "args": [refusal_path]}
    # No AWS_* variable: executors reach the store through the options their tasks carry.
    env = {k: v for k, v in child_env().items() if not k.startswith("AWS_")}
    started = time.monotonic()
    job = subprocess.run(
        [sys.executable, str(CHILDREN / "s3_cluster_job.py"), cluster.url],
        input=json.dumps({"uri": uri, "options": opts, "parts": parts}),  # stdin: no secret on a command line
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert job.returncode == 0, f"{job.stdout}\n{job.stderr[-4000:]}\n{cluster.logs()}"
    out: dict[str, Any] = json.loads(job.stdout.strip().splitlines()[-1])
    return {
        **out,
        "uri": uri,
        "opts": opts,
        "path": path,
        "refusal_path": refusal_path,
        "before": before,
        "seconds": time.monotonic() - started,
        "logs": cluster.logs(),
        "printed": job.stdout + job.stderr,
    }


def part(app: dict[str, Any], name: str) -> dict[str, Any]:
    """A part's facts; its traceback as the failure when it failed."""
    out: dict[str, Any] = app["parts"][name]
    assert "failed" not in out, out["failed"]
    return out
