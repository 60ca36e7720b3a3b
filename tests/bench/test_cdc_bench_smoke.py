"""Smoke test of the CDC benchmark (``python -m bench cdc``), not of speed: at a tiny size
both sinks stream every batch, the runner process starts and stops cleanly, the lakeline
table equals the model of the input, and the JSON carries every number the report and
the targets are made of.

Why a child process: the benchmark starts its own ``local[2]`` session and stops it at
the end, which would stop the session the Spark tests of the same run share.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from bench.cdc_bench import generate, model_of
from tests.helpers import REPO, child_env
from tests.spark.conftest import spark_missing


def test_the_generator_makes_the_asked_shape_and_the_model_folds_it() -> None:
    batches = list(generate(4, 200, 0.2, 0.05, "random"))
    assert [b.num_rows for b in batches] == [200] * 4
    ops = [b.column("_op").to_pylist() for b in batches]
    assert ops[0].count("insert") == 200
    assert all(o.count("update") == 40 and o.count("delete") == 10 for o in ops[1:])
    assert all(len(set(b.column("key").to_pylist())) == b.num_rows for b in batches)  # once a batch
    assert ops[1] != sorted(ops[1])  # rows in random order
    model = model_of(batches)
    assert model.num_rows == 200 + 3 * (150 - 10)  # every insert, less the deletes
    one = pa.table({"key": ["a", "a", "b"], "ts": [0, 1, 0], "value": [1.0, None, 2.0], "note": ["x", None, "y"]})
    one = one.append_column("_op", pa.array(["insert", "delete", "insert"]))
    assert model_of([one]).column("key").to_pylist() == ["b"]


@pytest.mark.spark
def test_cdc_bench_runs_both_sinks_and_the_table_equals_the_model(tmp_path: Path) -> None:
    if (problem := spark_missing()) is not None:
        pytest.skip(problem)
    out = tmp_path / "cdc.json"
    argv = ["--batches", "4", "--rows", "200", "--warmup", "0", "--delta-commits", "1", "--compact-every", "every 1s"]
    argv += ["--no-docs", "--json", str(out), "--workdir", str(tmp_path / "work")]
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "cdc", *argv], cwd=REPO, env=child_env(), capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(out.read_text())
    assert result["equals_model"] is True
    assert result["parquet_rows"] == 4 * 200
    for sink in ("parquet", "lakeline"):
        s = result[sink]
        assert s["batches"] == 4 and s["rows"] == 4 * 200
        assert all(s[k] > 0 for k in ("rows_per_s", "p50_ms", "p95_ms", "first_median_ms", "last_median_ms"))
    assert result["deltacommits"] == 4  # one write a batch, its deletes and upserts together
    assert result["runner"]["rc"] == 0 and result["runner"]["alive_at_end"] is True
    assert result["pending"] == 0
    assert set(result["verdicts"]) == {"throughput", "p95", "flat"}
    assert "CDC ingest through the streaming sink" in proc.stdout
