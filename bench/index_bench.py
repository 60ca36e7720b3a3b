"""Index benchmark: pybloom-live build and probe throughput, and HLL NDV accuracy/speed.

Why: upsert tagging probes a bloom filter per candidate file for every incoming key
(issue 4 wants 500k keys against 5M rows tagged in under 1 s), so the per-key cost of
pybloom-live decides whether it can stay; and column stats sketch every column of
every file written, so sketching must not dominate a write. Numbers are keys (or
values) per second, best of ``--repeat`` runs, printed as a table and, with ``--json``,
as one JSON object.

    python -m bench index [--keys 1000000] [--fpp 0.01] [--repeat 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from lakeline.indexes.bloom import FileBloom, key_strings
from lakeline.indexes.column_stats import estimate, file_stats, ndv, sketch_values


def _best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def run(keys: int, fpp: float, repeat: int) -> dict[str, Any]:
    """Measure and return the numbers (the smoke test calls this with small sizes)."""
    ids = pa.table({"id": pa.array(range(0, 2 * keys, 2), pa.int64())})
    t_str, strs = _best(lambda: key_strings(ids, ["id"]), repeat)
    t_build, fb = _best(lambda: FileBloom.build(ids, ["id"], fpp=fpp), repeat)
    present = strs[: min(keys, 200_000)]
    absent = [str(i) for i in range(1, 2 * len(present), 2)]
    t_hit, _ = _best(lambda: fb.might_contain(present), repeat)
    t_miss, hits = _best(lambda: fb.might_contain(absent), repeat)
    size = len(fb.to_bytes())
    t_ser, raw = _best(fb.to_bytes, repeat)
    t_de, _ = _best(lambda: FileBloom.filter_from_bytes(raw), repeat)
    t_sketch, sk = _best(lambda: sketch_values(ids.column("id")), repeat)
    t_stats, stats = _best(lambda: file_stats("f", "", ids), repeat)
    est = ndv(stats, "id").estimate
    return {
        "keys": keys,
        "fpp_target": fpp,
        "bloom_key_text_per_s": keys / t_str,
        "bloom_build_keys_per_s": keys / t_build,
        "bloom_probe_hit_keys_per_s": len(present) / t_hit,
        "bloom_probe_miss_keys_per_s": len(absent) / t_miss,
        "bloom_fpp_measured": sum(hits) / max(len(absent), 1),
        "bloom_bytes": size,
        "bloom_serialize_s": t_ser,
        "bloom_deserialize_s": t_de,
        "hll_sketch_values_per_s": keys / t_sketch,
        "hll_estimate": estimate(sk),
        "ndv_relative_error": abs(est - keys) / keys,
        "file_stats_s": t_stats,
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
