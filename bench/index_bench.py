"""Index benchmark: bloom filter and NDV sketch throughput, lakeline's numpy versions
against the libraries the design started from (pybloom-live, datasketches), in one run.

Why: every base file a writer or an index build produces gets a bloom filter over its
keys and an NDV sketch per column, so their per-value cost is on the write path (issue
4: a 500k-row copy-on-write upsert into 5M rows within 1.2x deltalake's merge; issue 5:
an index build at >= 0.5x the speed of a plain read). pybloom-live and the datasketches
bindings take one Python call per value; lakeline's filters and sketches hash whole
Arrow columns with numpy. ``docs/decisions.md`` records the numbers of this benchmark.
Numbers are keys (or values) per second, best of ``--repeat`` runs, printed as a table
and, with ``--json``, as one JSON object.

    python -m bench index [--keys 1000000] [--fpp 0.01] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from lakeline.indexes.bloom import FileBloom, key_hashes
from lakeline.indexes.column_stats import estimate, file_stats, ndv, sketch_values


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _keys(n: int, odd: bool) -> pa.Table:
    """Benchmark-style string keys ``k000000000``: even numbers present, odd absent."""
    nums = pa.array(np.arange(int(odd), 2 * n, 2, dtype=np.int64))
    return pa.table({"id": pc.binary_join_element_wise("k", pc.utf8_lpad(pc.cast(nums, pa.string()), 9, "0"), "")})


def _pybloom(present: pa.Table, absent: pa.Table, fpp: float, repeat: int) -> dict[str, float]:
    """pybloom-live on the same keys (text, one Python call per key)."""
    try:
        from pybloom_live import BloomFilter  # the bench extra carries it
    except ImportError:
        return {}
    keys = present.column("id").to_pylist()
    miss = absent.column("id").to_pylist()[:200_000]

    def build() -> Any:
        bf = BloomFilter(capacity=max(len(keys), 1), error_rate=fpp)
        for k in keys:
            bf.add(k)
        return bf

    t_build, bf = _best(build, repeat)
    t_miss, hits = _best(lambda: [k in bf for k in miss], repeat)
    return {
        "pybloom_build_keys_per_s": len(keys) / t_build,
        "pybloom_probe_miss_keys_per_s": len(miss) / t_miss,
        "pybloom_fpp_measured": sum(hits) / max(len(miss), 1),
    }


def _datasketches(ids: pa.Array, repeat: int) -> dict[str, float]:
    """The datasketches HLL (lg_k 12, HLL_8: lakeline's sketch format) on the same values,
    one call per value."""
    try:
        import datasketches
    except ImportError:
        return {}

    def sketch() -> float:
        sk = datasketches.hll_sketch(12, datasketches.HLL_8)
        for v in ids.to_pylist():
            sk.update(v)
        return float(sk.get_estimate())

    t, est = _best(sketch, repeat)
    return {
        "datasketches_hll_values_per_s": len(ids) / t,
        "datasketches_relative_error": abs(est - len(ids)) / len(ids),
    }


def run(keys: int, fpp: float, repeat: int) -> dict[str, Any]:
    """Measure and return the numbers (the smoke test calls this with small sizes)."""
    present, absent = _keys(keys, False), _keys(keys, True)
    t_hash, hashes = _best(lambda: key_hashes(present, ["id"]), repeat)
    t_build, fb = _best(lambda: FileBloom.build(present, ["id"], fpp=fpp), repeat)
    miss = key_hashes(absent, ["id"])
    t_hit, hit = _best(lambda: fb.might_contain(hashes), repeat)
    t_miss, false_hits = _best(lambda: fb.might_contain(miss), repeat)
    row = fb.to_row("f", "")
    t_de, _ = _best(lambda: FileBloom.from_row(row), repeat)
    ints = pa.array(np.arange(0, 2 * keys, 2, dtype=np.int64))
    t_sketch, sk = _best(lambda: sketch_values(ints), repeat)
    t_sketch_text, _ = _best(lambda: sketch_values(present.column("id")), repeat)
    t_stats, stats = _best(lambda: file_stats("f", "", pa.table({"id": ints})), repeat)
    est = ndv(stats, "id").estimate
    return {
        "keys": keys,
        "fpp_target": fpp,
        "bloom_key_hash_per_s": keys / t_hash,
        "bloom_build_keys_per_s": keys / t_build,
        "bloom_probe_hit_keys_per_s": keys / t_hit,
        "bloom_probe_miss_keys_per_s": len(miss) / t_miss,
        "bloom_no_false_negatives": bool(hit.all()),
        "bloom_fpp_measured": float(false_hits.mean()),
        "bloom_bytes": len(row["filter"]),  # type: ignore[arg-type]
        "bloom_deserialize_s": t_de,
        **_pybloom(present, absent, fpp, repeat),
        "hll_sketch_int_values_per_s": keys / t_sketch,
        "hll_sketch_text_values_per_s": keys / t_sketch_text,
        "hll_estimate": estimate(sk),
        "ndv_relative_error": abs(est - keys) / keys,
        "file_stats_s": t_stats,
        **_datasketches(ints, repeat),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench index", description=__doc__.splitlines()[0])
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--fpp", type=float, default=0.01)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    res = run(args.keys, args.fpp, args.repeat)
    if args.json:
        print(json.dumps(res))
        return 0
    width = max(len(k) for k in res)
    for k, v in res.items():
        text = f"{v:,.0f}" if isinstance(v, float) and v >= 100 else (f"{v:.4g}" if isinstance(v, float) else f"{v:,}")
        print(f"{k:<{width}}  {text}")
    return 0
