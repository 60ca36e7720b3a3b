"""Smoke test of ``python -m bench longevity``'s harness, not of speed: TPC-DS at a tiny
scale factor, two rounds of maintenance on every system, every system answering the five
queries alike in every round, and the report's shape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("duckdb_extension_tpcds", reason="TPC-DS data comes with the bench extra")
pytest.importorskip("deltalake", reason="deltalake comes with the bench extra")

from bench.longevity import bench as longevity_bench
from bench.longevity import first_load
from bench.longevity.systems import SYSTEMS


@pytest.mark.timeout(120)
def test_two_rounds_on_every_system_answer_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run.json"
    docs = ROOT / "docs" / "performance.md"
    before = docs.read_text() if docs.exists() else None
    rc = longevity_bench.main(
        [
            "--sf",
            "0.01",
            "--rounds",
            "2",
            "--repeat",
            "1",
            "--runner-every",
            "1s",
            "--cache",
            str(tmp_path / "cache"),
            "--workdir",
            str(tmp_path),
            "--no-docs",
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["rows"] > 20_000 and result["rounds"] == 2
    assert result["mismatches"] == []
    # The rounds' deletes reach the queries (the first windows are in November 2000: queries 42 and 52).
    digests = result["digests"]
    assert len(digests) == 3 and digests[1] != digests[0] and digests[2] != digests[1]
    assert list(result["systems"]) == list(SYSTEMS)
    for name, r in result["systems"].items():
        assert [x["round"] for x in r["rounds"]] == [0, 1, 2], name
        for x in r["rounds"]:
            assert x["read_s"] > 0 and x["queries_s"] > 0 and x["query_time_s"] > 0, name
        for x in r["rounds"][1:]:
            assert x["insert_s"] > 0 and x["delete_s"] > 0 and x["bytes_written"] > 0, name
            assert x["maintenance_s"] >= x["insert_s"] + x["delete_s"], name
        assert r["summary"]["files"] > 0 and r["load_bytes"] > 0, name
    # lakeline mor without compaction keeps its logs; deltalake-optimize compacts every round.
    assert result["systems"]["lakeline-mor"]["summary"]["log_files"] > 0
    assert all(x["optimize_s"] > 0 for x in result["systems"]["deltalake-optimize"]["rounds"][1:])
    assert result["systems"]["lakeline-mor-runner"]["background"]["mode"]
    assert {t["target"].split(":")[0] for t in result["targets"]} >= {"lakeline-mor (no compaction)"}
    text = capsys.readouterr().out
    assert "## Longevity" in text and "same query results in every round: yes" in text
    assert (docs.read_text() if docs.exists() else None) == before
    assert not list(tmp_path.glob("lakeline-longevity-*")), "the work folder is removed"


@pytest.mark.timeout(120)
def test_first_load_runs_every_system_and_every_table_holds_every_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "first.json"
    rc = first_load.main(
        ["--sf", "0.01", "--repeat", "2", "--cache", str(tmp_path / "cache"), "--no-docs", "--json", str(out)]
    )
    assert rc == 0
    result = json.loads(out.read_text())
    assert result["every_row_held"] is True
    assert set(result["runs"]) == set(first_load.SYSTEMS)
    for runs in result["runs"].values():
        assert len(runs) == 2 and all(r["rows"] > 20_000 and r["wall_s"] > 0 and r["cpu_s"] > 0 for r in runs)
    text = capsys.readouterr().out
    assert "## First load" in text and "first load <= 1.0x deltalake" in text
