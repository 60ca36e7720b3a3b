"""The async-index benchmark runs end to end on a small table and measures every target."""

from __future__ import annotations

import math

from bench.async_index_bench import markdown, run, verdicts


def test_async_index_bench_smoke() -> None:
    r = run(rows=50_000, seconds=1.5)
    assert r["baseline_commits"] > 0 and r["lock_holds"] >= 4 and r["mismatches"] == 0
    assert 0 < r["build_s"] < r["create_s"]
    assert all(not math.isnan(r[k]) for k in ("baseline_median_s", "lock_p99_s", "build_s", "read_s"))
    assert len(verdicts(r)) == 6 and set(r["throughput"]) == {"column_stats", "bloom_filters"}
    assert "Async index build" in markdown(r, "python -m bench async-index --rows 50000")
