"""Every door on a table on S3, in one session whose every output is grepped for the secret.

Issue 27 items 4 and 5: the CLI (as real processes, options from the environment as
AWS tools take them), all services, the runner (``path = "s3://..."``), hooks (inline
compaction), indexes, DuckDB/Polars/pandas through ``to_pyarrow_dataset``, the HTML
report, and the catalog (a location on the store; ``drop(purge=True)`` deletes under it
only and refuses a location that holds another table). Then the server's secret must
appear in none of: what the commands printed, the runner daemon's log and metrics,
the HTML report, error messages, logging at DEBUG, and every object lakeline wrote on
the store (events, plans, commit metadata, checkpoints, markers, heartbeats).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import duckdb
import pyarrow.compute as pc
import pytest
from lakeline.table import Catalog, Table
from lakeline.timeline.errors import LakelineError, TableIdentityError
from lakeline.timeline.storage.filesystem import Storage

from tests.object_storage.s3_tables import SCHEMA, rows
from tests.seaweedfs import SeaweedServer, free_ports

LAKELINE = [sys.executable, "-m", "lakeline.cli"]


def run_cli(*args: str, expect: tuple[int, ...] = (0,)) -> str:
    proc = subprocess.run([*LAKELINE, *args], capture_output=True, text=True, timeout=120, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode in expect, f"{args}: exit {proc.returncode}\n{out}"
    return out


def stored_text(storage: Storage) -> str:
    """Every small object under the table (events, plans, checkpoints, markers, beats)."""
    assert storage.objects is not None
    parts = []
    for item in storage.objects.list(storage.base):
        if not item.path.endswith(".parquet") and item.size < 1 << 20:
            parts.append(storage.objects.get(item.path).decode("utf-8", "replace"))
    return "\n".join(parts)


def runner_daemon(config: Path) -> str:
    """The runner daemon's log and metrics text over a few ticks, then SIGTERM."""
    [port] = free_ports(1)
    proc = subprocess.Popen(
        [*LAKELINE, "runner", "--config", str(config), "--metrics-port", str(port), "-v"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = ""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and "lakeline_runner_runs_total{" not in metrics:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    metrics = r.read().decode()
            except OSError:
                continue
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "lakeline_runner_runs_total{" in metrics, metrics
    return metrics + out + err


def test_a_full_session_on_s3_prints_no_secret(
    s3: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    for key, value in s3.options().items():
        monkeypatch.setenv(key, value)  # the CLI processes and Table.open below read these
    uri = s3.uri("events")
    t = Table.create(
        uri,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type="mor",
        properties={"inline.services": "compaction", "compaction.delta-commits": 2, "clean.orphan-age-ms": 0},
    )
    t.insert(rows(0, 500))
    for i in range(3):
        t.upsert(rows(i * 100, i * 100 + 200, ts=i + 2, v=float(i)))
    assert any(i.action == "compaction" for i in t.timeline.completed()), "the inline hook compacted"
    t.indexes.create("bloom_filters", columns=["id"], wait=True)
    expected = t.to_arrow().sort_by("id")

    # DuckDB, Polars and pandas reach the rows on the store through the dataset.
    t.services.compact()  # a dataset sees base files only
    ds = t.to_pyarrow_dataset()
    assert duckdb.sql("select count(*) from ds").fetchone() == (500,)
    assert t.to_polars().collect().height == 500 and len(t.to_pandas()) == 500
    assert pc.sum(ds.to_table()["v"]).equals(pc.sum(expected["v"]))

    html = tmp_path / "report.html"
    config = tmp_path / "runner.toml"
    config.write_text(f'[runner]\nthreads = 1\n\n[[tables]]\npath = "{uri}"\ncleaning = "every 1s"\n')
    last = str(t.timeline.completed()[-1].id)
    outputs = [
        run_cli("timeline", "show", uri),
        run_cli("timeline", "show", uri, "--json"),
        run_cli("timeline", "inspect", uri, last, "--json"),
        run_cli("index", "list", uri, "--json"),
        run_cli("service", "run", uri, "clustering"),
        run_cli("service", "run", uri, "cleaning", "--json"),
        run_cli("timeline", "report", uri, "--html", str(html)),
        run_cli("storage", "probe", uri, "--json"),
        run_cli("runner", "--config", str(config), "--once", "--json"),
        run_cli("runner", "status", "--config", str(config), "--json"),
        runner_daemon(config),
        run_cli("timeline", "show", s3.uri("missing"), expect=(2,)),
    ]
    status = json.loads(outputs[9])
    assert {r["table"] for r in status} == {uri}
    errors = []
    with monkeypatch.context() as m:  # a wrong secret: refused, and not printed either
        m.setenv("AWS_SECRET_ACCESS_KEY", "wrong-" + s3.secret_key)
        outputs.append(run_cli("timeline", "show", uri, expect=(2,)))
        assert "StoragePermissionError" in outputs[-1]
        with pytest.raises(LakelineError) as e:
            Table.open(uri)
        errors.append(str(e.value))
    assert Table.open(uri).to_arrow().sort_by("id").equals(expected)  # the services kept every row
    assert t.indexes.validate()["mismatches"] == []

    for out in [*outputs, html.read_text(), caplog.text, *errors, stored_text(t.storage), repr(t.storage)]:
        assert s3.secret_key not in out


def test_the_catalog_keeps_tables_on_s3_and_purges_only_its_own(s3: SeaweedServer, pg_url: str) -> None:
    location = s3.uri("named")
    with Catalog(pg_url, storage_options=s3.options()) as cat:
        name = f"s3ns.t{os.getpid()}_{int(time.time() * 1000) % 10**6}"
        t = cat.create_table(name, location, SCHEMA, record_key="id", ordering_field="ts")
        t.insert(rows(0, 100))
        storage = t.storage
        assert storage.objects is not None
        neighbour = f"{storage.base}-neighbour/keep.txt"  # a sibling prefix: never the table's
        storage.objects.put(neighbour, b"not the table's")
        assert cat.load_table(name).to_arrow().num_rows == 100
        cat.drop_table(name, purge=True)
        assert [o.path for o in storage.objects.list(storage.base)] == []
        assert storage.objects.get(neighbour) == b"not the table's"

        other = f"{name}_b"
        t2 = cat.create_table(other, s3.uri("reused"), SCHEMA, record_key="id")
        t2.insert(rows(0, 10))
        for item in list(t2.storage.objects.list(t2.storage.base)):  # the folder emptied by hand...
            t2.storage.objects.delete(item.path)
        stranger = Table.create(t2.path, SCHEMA, record_key="id", storage_options=s3.options())  # ...and reused
        stranger.insert(rows(0, 5))
        with pytest.raises(TableIdentityError):
            cat.drop_table(other, purge=True)
        assert Table.open(t2.path, storage_options=s3.options()).to_arrow().num_rows == 5
        cat.drop_table(other)
