"""The index benchmark runs on small sizes and reports sane numbers for lakeline and the
libraries it is compared with."""

from __future__ import annotations

from bench.index_bench import main, run


def test_index_bench_small_run() -> None:
    res = run(keys=5_000, fpp=0.01, repeat=1)
    assert res["bloom_build_keys_per_s"] > 0 and res["bloom_probe_miss_keys_per_s"] > 0
    assert res["bloom_no_false_negatives"]
    assert 0 < res["bloom_fpp_measured"] < 0.05
    assert res["ndv_relative_error"] < 0.03
    assert res["pybloom_build_keys_per_s"] > 0 and res["datasketches_hll_values_per_s"] > 0
    assert main(["--keys", "2000", "--repeat", "1", "--json"]) == 0
