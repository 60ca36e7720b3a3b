"""Async-index benchmark: what building an index costs the writers, the lock and the clock.

Why: issue 5 promises that indexes are built while writers keep writing. A table of
``--rows`` rows (2M by default, merge-on-read, bench-sized files) gets one writer
process upserting small batches continuously; its commit latency is measured for
``--seconds`` without a build, then while this process builds ``column_stats`` and
``bloom_filters`` asynchronously. Reported, in one run:

* writer commit latency (median, p95) during the build / without a build (target <= 1.3);
* how long the indexer held the table lock (p99 of every hold; target < 100 ms);
* build throughput as a ratio of a plain pyarrow read of the same files (read time /
  bulk build time of both indexes; the read covers the base files and the writer's
  logs on them, which the build indexes too, and is taken under the same load, while
  the writer writes; target >= 0.5).

    python -m bench async-index [--rows 2000000] [--seconds 10] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .report import command_line, machine, today, update_section

SECTION = "async-index-bench"
LATENCY_RATIO, LOCK_P99_S, THROUGHPUT_RATIO = 1.3, 0.100, 0.5

_WRITER = r"""
import json, random, sys, time
from pathlib import Path
import pyarrow as pa
from lakeline.table import Table
path, n, stop, out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
t = Table.open(path)
rng = random.Random(1)
with open(out, "w") as log:
    while not stop.exists():
        ids = rng.sample(range(n), 50)
        ts = time.time_ns()
        r = t.upsert(pa.table({"id": ids, "ts": [ts] * 50, "v": ["u"] * 50}, schema=t.schema))
        log.write(json.dumps({"start": time.time() - r.timings["total_s"], "s": r.timings["total_s"]}) + "\n")
        log.flush()
"""


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def build_table(path: Path, rows: int) -> Any:
    import pyarrow as pa
    from lakeline.table import Table

    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
    t = Table.create(path, schema, record_key="id", ordering_field="ts", table_type="mor",
                     properties={"write.target-file-size-bytes": 16 * 1024 * 1024})
    step = 500_000
    for start in range(0, rows, step):
        ids = pa.array(range(start, min(rows, start + step)), pa.int64())
        t.insert(pa.table({"id": ids, "ts": ids, "v": pa.compute.cast(ids, pa.string())}, schema=schema))
    return t


def plain_read_s(t: Any) -> float:
    """Best of 3 plain pyarrow reads of the live data files: the bases and the logs the
    writer has added on them, i.e. the files an index build indexes."""
    import pyarrow.parquet as pq

    paths = [t.storage.path(f.path) for s in t.view(t.timeline).latest_slices() for f in s.files]
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for p in paths:
            pq.read_table(p)
        best = min(best, time.perf_counter() - t0)
    return best


def run(rows: int, seconds: float) -> dict[str, Any]:
    """Measure everything; the smoke test calls this small."""
    from lakeline.services import framework

    root = Path(tempfile.mkdtemp(prefix="lakeline-async-index-"))
    try:
        t = build_table(root / "t", rows)
        idle_read_s = plain_read_s(t)
        stop, log = root / "stop", root / "writer.log"
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, t.path, str(rows), str(stop), str(log)])
        try:
            deadline = time.monotonic() + 120
            while not (log.exists() and log.read_text().count("\n") >= 3):  # the writer is up
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the writer process did not start committing")
                time.sleep(0.05)
            time.sleep(seconds / 2)  # baseline: no build (half now, half after the build)
            # The read the build is compared with runs under the same load (the writer).
            read_s = plain_read_s(t)
            framework.lock_hold_s.clear()
            b0 = time.time()
            t.indexes.create("column_stats")
            t.indexes.create("bloom_filters")
            b1 = time.time()
            # Baseline again after the build: the writer's commits slow down as its logs
            # pile up (tagging reads them), so a baseline only before the build would
            # flatter it and one only after would flatter the build.
            time.sleep(seconds / 2)
        finally:
            stop.write_text("")
            proc.wait(timeout=120)
        commits = [json.loads(x) for x in log.read_text().splitlines()]
        base = [c["s"] for c in commits if c["start"] + c["s"] < b0 or c["start"] > b1]
        # Every commit that overlapped the build counts as "during" it.
        during = [c["s"] for c in commits if c["start"] < b1 and c["start"] + c["s"] > b0]
        holds = list(framework.lock_hold_s)
        # The bulk build (step 2 of the protocol) of both indexes, as the indexer timed it;
        # the rest of a create is waiting for the writer's inflight commits to land.
        build_s = sum(float(i.metadata.get("build_s", 0.0)) for i in t.timeline.completed()
                      if i.action == "indexing")
        return {
            "rows": rows, "files": len([s for s in t.view(t.timeline).latest_slices() if s.base is not None]),
            "baseline_commits": len(base), "during_commits": len(during),
            "baseline_median_s": statistics.median(base) if base else float("nan"), "baseline_p95_s": _pct(base, 0.95),
            "during_median_s": statistics.median(during) if during else float("nan"),
            "during_p95_s": _pct(during, 0.95),
            "lock_holds": len(holds), "lock_p99_s": _pct(holds, 0.99), "lock_max_s": max(holds),
            "build_s": build_s, "create_s": b1 - b0, "read_s": read_s, "idle_read_s": idle_read_s,
            "mismatches": len(t.indexes.validate()["mismatches"]),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def verdicts(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    med = r["during_median_s"] / r["baseline_median_s"]
    p95 = r["during_p95_s"] / r["baseline_p95_s"]
    thr = r["read_s"] / r["build_s"]
    return [
        ("writer commit latency, median: during build / without", f"{med:.2f}x", f"<= {LATENCY_RATIO}x",
         med <= LATENCY_RATIO),
        ("writer commit latency, p95: during build / without", f"{p95:.2f}x", f"<= {LATENCY_RATIO}x",
         p95 <= LATENCY_RATIO),
        ("table lock held by the indexer, p99", f"{r['lock_p99_s'] * 1000:.1f} ms", f"< {LOCK_P99_S * 1000:.0f} ms",
         r["lock_p99_s"] < LOCK_P99_S),
        ("build throughput: plain read time / build time", f"{thr:.2f}", f">= {THROUGHPUT_RATIO}",
         thr >= THROUGHPUT_RATIO),
        ("validate after the build", f"{r['mismatches']} mismatches", "0", r["mismatches"] == 0),
    ]


def markdown(r: dict[str, Any], cmd: str) -> str:
    lines = [
        "## Async index build while a writer writes",
        "",
        f"Measured {today()} on {machine()}.",
        "",
        f"Command: `{cmd}`",
        "",
        f"Table: {r['rows']:,} rows, merge-on-read, {r['files']} base files. One writer process upserts 50 "
        f"random keys per commit throughout; {r['baseline_commits']} commits without a build, before and after "
        f"it (median "
        f"{r['baseline_median_s'] * 1000:.0f} ms, p95 {r['baseline_p95_s'] * 1000:.0f} ms), "
        f"{r['during_commits']} during the build of `column_stats` (every column) and `bloom_filters` "
        f"(record key), {r['create_s']:.2f} s from the first create to the second index ready (median "
        f"{r['during_median_s'] * 1000:.0f} ms, p95 {r['during_p95_s'] * 1000:.0f} ms); the bulk builds of "
        f"both took {r['build_s']:.3f} s. Plain pyarrow read of the same base files while the writer "
        f"writes (its base files and the writer's logs on them, what the build indexes): {r['read_s']:.3f} s "
        f"(best of 3; {r['idle_read_s']:.3f} s for the base files alone, with no writer). "
        f"The indexer took the table lock {r['lock_holds']} times (longest {r['lock_max_s'] * 1000:.1f} ms).",
        "",
        "| target | measured | limit | result |",
        "|---|---|---|---|",
    ]
    for name, got, limit, ok in verdicts(r):
        lines.append(f"| {name} | {got} | {limit} | {'**PASS**' if ok else '**FAIL**'} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench async-index", description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--seconds", type=float, default=12.0, help="baseline without a build (half before, half after)")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = ap.parse_args(argv)
    r = run(args.rows, args.seconds)
    text = markdown(r, command_line("async-index", argv, with_postgres=False))
    print(text)
    if not args.no_write:
        update_section(SECTION, text)
    return 0 if all(ok for *_, ok in verdicts(r)) else 1
