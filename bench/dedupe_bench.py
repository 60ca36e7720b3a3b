"""Unsorted-batch benchmark: deduplicating a batch, and tagging it, in random key order.

Why: a batch in random key order used to pay for its order twice (issue 30, item 3):
the check for repeated keys counted distinct strings (2 s for 5M keys) and a batch
with repeats was sorted whole. Deduplication now hashes the keys and folds only the
rows that may repeat (:mod:`lakeline.table.write.dedupe`); this prints both ways, the
sort-based one ("before": Arrow's distinct count, then its sort and group_by over every
row, as ``records.deduplicate`` did) and the hashing one ("after"), for 32-hex-digit
keys with no repeat, with 10% repeats, and in key order. With ``--table-rows`` it also
plans an upsert of a random-order batch and of the same batch sorted against a table
of sequential string keys (copy-on-write and merge-on-read) and prints the tagging
time (``WriteResult.timings["tag_s"]`` as the planner counts it), which should not
depend on the batch's order. Every number is the median of ``--repeat`` runs.

    python -m bench dedupe [--rows 5000000] [--repeat 5] [--table-rows 5000000 --batch 500000]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .data import SCHEMA, UPDATE_TS, append_batch, keys


def hex_keys(n: int, seed: int) -> pa.Array:
    """``n`` random 32-hex-digit string keys (distinct with overwhelming likelihood),
    built from raw buffers (no Python string per row)."""
    raw = np.random.default_rng(seed).integers(0, 256, (n, 16), dtype=np.uint8)
    digits = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)
    text = np.stack([digits[raw >> 4], digits[raw & 15]], axis=-1).reshape(-1)
    offsets = np.arange(0, 32 * (n + 1), 32, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(text.tobytes())])


def batches(n: int) -> dict[str, pa.Table]:
    """The batches deduplicated: unique random keys, 10% repeats, unique sorted keys."""
    rng = np.random.default_rng(30)
    unique = pa.table({"key": hex_keys(n, 30), "ts": pa.array(rng.integers(0, 1000, n)), "v": np.arange(n)})
    distinct = n - n // 10
    rows = np.concatenate([np.arange(distinct), rng.integers(0, distinct, n - distinct)])
    rng.shuffle(rows)
    return {
        "random, no repeat": unique,
        "random, 10% repeats": unique.take(pa.array(rows)),
        "sorted, no repeat": unique.sort_by("key"),
    }


def deduplicate_before(table: pa.Table, key: tuple[str, ...], ordering: str) -> pa.Table:
    """The sort-based deduplication that issue 30 replaced, for comparison: keys in
    increasing order or as many distinct keys as rows mean no repeat, else Arrow's sort
    and group_by of every row."""
    from lakeline.table.write.dedupe import _fold_exact, _keep

    col = table.column(key[0]).combine_chunks()
    if not pc.any(pc.less_equal(col[1:], col[:-1])).as_py() or pc.count_distinct(col).as_py() == len(col):
        return table
    everything = np.arange(table.num_rows)
    return _keep(table, everything, _fold_exact(table, key, ordering, everything))


def median_s(run: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def bench_dedupe(n: int, repeat: int) -> None:
    from lakeline.table.write.records import deduplicate

    print(f"deduplicate, {n:,} rows of 32-hex-digit string keys (median of {repeat}):")
    for name, table in batches(n).items():
        before = median_s(lambda t=table: deduplicate_before(t, ("key",), "ts"), repeat)
        after = median_s(lambda t=table: deduplicate(t, ("key",), "ts"), repeat)
        print(f"  {name:<22} before {before:7.3f} s   after {after:7.3f} s")


def bench_tagging(table_rows: int, batch: int, repeat: int) -> None:
    from lakeline.table import Table
    from lakeline.table.write.operations import plan_upsert
    from lakeline.table.write.records import prepare_rows

    rng = np.random.default_rng(31)
    numbers = rng.choice(table_rows, batch, replace=False)
    cols = [keys(numbers), pa.array(UPDATE_TS + numbers), pa.array(rng.random(batch)), pa.nulls(batch, pa.string())]
    shuffled = pa.Table.from_arrays(cols, schema=SCHEMA)
    print(f"tagging an upsert of {batch:,} keys against {table_rows:,} sequential keys (tag_s, median of {repeat}):")
    with tempfile.TemporaryDirectory(prefix="lakeline-dedupe-bench-") as tmp:
        for table_type in ("cow", "mor"):
            t = Table.create(Path(tmp) / table_type, SCHEMA, "key", ordering_field="ts", table_type=table_type)
            per_insert = 1_000_000
            for i in range((table_rows + per_insert - 1) // per_insert):
                t.insert(append_batch(i, per_insert).slice(0, table_rows - i * per_insert))
            line = []
            for name, data in (("random", shuffled), ("sorted", shuffled.sort_by("key"))):
                rows, _ = prepare_rows(data, t.config)
                tags = [plan_upsert(t.context(), rows).timings["tag_s"] for _ in range(repeat)]
                line.append(f"{name} {statistics.median(tags):6.3f} s")
            print(f"  {table_type}: " + "   ".join(line))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench dedupe", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000, help="rows of each deduplicated batch")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each measure; the median is printed")
    parser.add_argument("--table-rows", type=int, default=0, help="also time tagging against a table this big")
    parser.add_argument("--batch", type=int, default=500_000, help="keys of the tagged upsert batch")
    args = parser.parse_args(argv)
    bench_dedupe(args.rows, args.repeat)
    if args.table_rows:
        bench_tagging(args.table_rows, args.batch, args.repeat)
    return 0
