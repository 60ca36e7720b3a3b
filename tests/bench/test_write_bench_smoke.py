"""Smoke test of the write benchmark's harness (``python -m bench write``), not of speed.

Runs the whole benchmark at 20,000 rows through the same code path as a full run (data
generation, one subprocess per system and step, evaluation, JSON output) and checks that
every system ends in the same state: the same rows in the table and the same answer to
the 1,000-key read, both equal to what the generated data says they must be. A harness
that timed a failing step, read the wrong range or upserted with different semantics on
one system would compare numbers that mean different things.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("deltalake", reason="the benchmark's peers come with the bench extra: pip install -e '.[bench]'")
pytest.importorskip("pyiceberg", reason="the benchmark's peers come with the bench extra: pip install -e '.[bench]'")

import pyarrow as pa
import pyarrow.compute as pc

from bench import data
from bench.write import bench as write_bench
from bench.write.child import _digest

ROWS = 20_000


def expected_state(rows: int) -> tuple[pa.Table, pa.Table]:
    """The table after the appends and the upsert, and its 1,000-key read, computed
    straight from the generated data (updates carry a larger ts, so they win)."""
    per = rows // write_bench.APPENDS
    base = pa.concat_tables([data.append_batch(i, per) for i in range(write_bench.APPENDS)])
    ups = data.upsert_batch(per * write_bench.APPENDS, per * write_bench.APPENDS // 10)
    kept = base.filter(pc.invert(pc.is_in(base.column("key"), value_set=ups.column("key"))))
    final = pa.concat_tables([kept, ups])
    a, b = data.read_range(per * write_bench.APPENDS, write_bench.READ_KEYS)
    return final, final.filter((pc.field("key") >= a) & (pc.field("key") < b))


@pytest.mark.timeout(180)
def test_every_system_ends_in_the_same_state(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    rc = write_bench.main(["--rows", str(ROWS), "--workdir", str(tmp_path / "work"), "--no-docs", "--json", str(out)])
    assert rc == 0
    run = json.loads(out.read_text())

    results = run["results"]
    assert set(results) == set(write_bench.SYSTEMS)
    failed = {f"{s}/{step}": r["error"] for s, steps in results.items() for step, r in steps.items() if not r["ok"]}
    assert failed == {}
    assert all(set(steps) == set(write_bench.STEPS) for steps in results.values())

    final, window = expected_state(ROWS)
    assert window.num_rows == write_bench.READ_KEYS
    reads = {s: steps["read"] for s, steps in results.items()}
    assert {s: r["rows_total"] for s, r in reads.items()} == dict.fromkeys(reads, final.num_rows)
    assert {s: r["distinct_keys"] for s, r in reads.items()} == dict.fromkeys(reads, final.num_rows)
    assert {s: r["sum_ts"] for s, r in reads.items()} == dict.fromkeys(reads, pc.sum(final.column("ts")).as_py())
    assert {s: r["rows_read"] for s, r in reads.items()} == dict.fromkeys(reads, write_bench.READ_KEYS)
    assert {s: r["read_digest"] for s, r in reads.items()} == dict.fromkeys(reads, _digest(window))
    assert run["consistent"] is True

    # Every number the targets need was measured.
    for steps in results.values():
        for r in steps.values():
            assert r["seconds"] is not None and r["seconds"] >= 0
            assert r["peak_rss"] > 0
    assert results["lakeline-mor"]["upsert"]["bytes_written"] > 0
    assert run["input_upsert_bytes"] > 0
    assert {t["ok"] for t in run["targets"]} <= {True, False}  # none left unmeasured
