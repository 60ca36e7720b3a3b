"""Smoke test of ``python -m bench mor-reads``'s harness, not of speed: TPC-DS
``store_sales`` at a tiny scale factor, both steps measured on a table with logs, and
each table holding the rows of its compacted copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("duckdb_extension_tpcds", reason="TPC-DS data comes with the bench extra")

from bench import mor_reads_bench


@pytest.mark.timeout(240)
def test_both_steps_read_a_table_with_logs_and_equal_its_compacted_copy(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    docs = ROOT / "docs" / "performance.md"
    before = docs.read_text()
    rc = mor_reads_bench.main(
        ["--sf", "0.01", "--repeat", "2", "--cache", str(tmp_path), "--no-docs", "--json", str(out)]
    )
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["rows"] > 20_000
    assert set(result["steps"]) == {"after delete_where", "after upsert"}
    for step, r in result["steps"].items():
        assert r["log_files"] > 0, step
        assert r["same_rows"], step
        assert r["merged_s"] > 0 and r["compacted_s"] > 0
    assert docs.read_text() == before
