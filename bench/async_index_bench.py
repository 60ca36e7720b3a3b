"""Async-index benchmark: what building an index costs the writers, the lock and the clock.

Why: issue 5 promises that indexes are built while writers keep writing. A table of
``--rows`` rows (2M by default, merge-on-read, bench-sized files) gets one writer
process upserting small batches continuously; its commit latency is measured for
``--seconds`` without a build, then while this process builds ``column_stats`` and
``bloom_filters`` asynchronously. Reported, in one run:

* writer commit latency (median, p95) during the build / without a build (target <= 1.3);
* how long the indexer held the table lock (p99 of every hold; target < 100 ms);
* build throughput of each index as a ratio of a plain pyarrow read of the same files
  (read time / bulk build time, median over the rounds; the read covers the base files
  and the writer's logs on them, which the build indexes too, and runs right before the
  build, under the same writer, on the build's engine; target >= 0.5).

    python -m bench async-index [--rows 2000000] [--seconds 10] [--no-write]
"""

from __future__ import annotations

import argparse
import json
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
    t = Table.create(
        path,
        schema,
        record_key="id",
        ordering_field="ts",
        table_type="mor",
        properties={"write.target-file-size-bytes": 16 * 1024 * 1024},
    )
    step = 500_000
    for start in range(0, rows, step):
        ids = pa.array(range(start, min(rows, start + step)), pa.int64())
        t.insert(pa.table({"id": ids, "ts": ids, "v": pa.compute.cast(ids, pa.string())}, schema=schema))
    return t


def _read_file(path: str) -> int:
    import pyarrow.parquet as pq

    return pq.read_table(path).num_rows


def plain_read_s(t: Any, engine: Any = None, repeat: int = 3) -> float:
    """Best of ``repeat`` plain pyarrow reads of the live data files: the bases and the
    logs the writer has added on them, i.e. the files an index build indexes. With
    ``engine``, the files are read through it (the build's own engine: same threads,
    same priority), else one after the other here."""
    paths = [t.storage.path(f.path) for s in t.view(t.timeline).latest_slices() for f in s.files]
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        if engine is not None:
            engine.map(_read_file, paths)
        else:
            for p in paths:
                _read_file(p)
        best = min(best, time.perf_counter() - t0)
    return best


#: The indexes the benchmark builds: (kind, name).
INDEXES = (("column_stats", "column_stats"), ("bloom_filters", "bloom_filters"))


def run(rows: int, seconds: float, rounds: int = 5) -> dict[str, Any]:
    """Measure everything; the smoke test calls this small.

    The indexes are built ``rounds`` times (dropped in between), so enough writer
    commits overlap a build for a median and a p95 to mean something. Each round first
    reads the files plainly through the build's engine, then builds; a build's
    throughput ratio is that round's read time over its build time (the read and the
    build see the same files and the same load), and the median over rounds is
    reported for each index.
    """
    from lakeline.timeline.diagnostics import metrics

    root = Path(tempfile.mkdtemp(prefix="lakeline-async-index-"))
    try:
        t = build_table(root / "t", rows)
        idle_read_s = plain_read_s(t)
        stop, log = root / "stop", root / "writer.log"
        proc = subprocess.Popen([sys.executable, "-c", _WRITER, t.path, str(rows), str(stop), str(log)])
        windows: list[tuple[float, float]] = []
        reads: list[float] = []
        builds: dict[str, list[float]] = {name: [] for _, name in INDEXES}
        try:
            deadline = time.monotonic() + 120
            while not (log.exists() and log.read_text().count("\n") >= 3):  # the writer is up
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the writer process did not start committing")
                time.sleep(0.05)
            time.sleep(seconds / 2)  # baseline: no build (half now, half after the builds)
            serial_read_s = plain_read_s(t)
            with metrics.recording() as sink:  # the indexer's lock holds during the rounds
                for r in range(rounds):
                    if r:
                        for _, name in INDEXES:
                            t.indexes.drop(name)
                        time.sleep(seconds / (2 * rounds))
                    # The read each build is compared with: same load (the writer), same
                    # engine (the service threads, at service.nice), right before it.
                    reads.append(plain_read_s(t, t.service_engine, repeat=1))
                    b0 = time.time()
                    for kind, name in INDEXES:
                        d = t.indexes.create(kind, name=name)
                        builds[name].append(float(t.timeline.get(d.instant).metadata["build_s"]))
                    windows.append((b0, time.time()))
            # Baseline again after the builds: the writer's commits slow down as its logs
            # pile up (tagging reads them), so a baseline only before the builds would
            # flatter them and one only after would flatter the builds.
            time.sleep(seconds / 2)
        finally:
            stop.write_text("")
            proc.wait(timeout=120)
        commits = [json.loads(x) for x in log.read_text().splitlines()]

        def overlaps(c: dict[str, float]) -> bool:
            return any(c["start"] < b1 and c["start"] + c["s"] > b0 for b0, b1 in windows)

        # Every commit that overlapped a build counts as "during" it.
        base = [c["s"] for c in commits if not overlaps(c)]
        during = [c["s"] for c in commits if overlaps(c)]
        holds = sink.values("service.lock_hold_seconds")
        # The bulk build (step 2 of the protocol) as the indexer timed it; the rest of a
        # create is waiting for the writer's inflight commits to land.
        ratios = {name: statistics.median(rd / b for rd, b in zip(reads, bs)) for name, bs in builds.items()}
        return {
            "rows": rows,
            "files": len([s for s in t.view(t.timeline).latest_slices() if s.base is not None]),
            "data_files": len([f for s in t.view(t.timeline).latest_slices() for f in s.files]),
            "baseline_commits": len(base),
            "during_commits": len(during),
            "baseline_median_s": statistics.median(base) if base else float("nan"),
            "baseline_p95_s": _pct(base, 0.95),
            "during_median_s": statistics.median(during) if during else float("nan"),
            "during_p95_s": _pct(during, 0.95),
            "lock_holds": len(holds),
            "lock_p99_s": _pct(holds, 0.99),
            "lock_max_s": max(holds),
            "rounds": rounds,
            "reads_s": reads,
            "builds_s": builds,
            "throughput": ratios,
            "build_s": sum(statistics.median(bs) for bs in builds.values()),
            "create_s": statistics.median(b - a for a, b in windows),
            "read_s": statistics.median(reads),
            "serial_read_s": serial_read_s,
            "idle_read_s": idle_read_s,
            "mismatches": len(t.indexes.validate()["mismatches"]),
        }
    finally:
        shutil.rmtree(root, ignore_errors=True)


def verdicts(r: dict[str, Any]) -> list[tuple[str, str, str, bool]]:
    med = r["during_median_s"] / r["baseline_median_s"]
    p95 = r["during_p95_s"] / r["baseline_p95_s"]
    out = [
        (
            "writer commit latency, median: during build / without",
            f"{med:.2f}x",
            f"<= {LATENCY_RATIO}x",
            med <= LATENCY_RATIO,
        ),
        (
            "writer commit latency, p95: during build / without",
            f"{p95:.2f}x",
            f"<= {LATENCY_RATIO}x",
            p95 <= LATENCY_RATIO,
        ),
        (
            "table lock held by the indexer, p99",
            f"{r['lock_p99_s'] * 1000:.1f} ms",
            f"< {LOCK_P99_S * 1000:.0f} ms",
            r["lock_p99_s"] < LOCK_P99_S,
        ),
    ]
    for name, thr in r["throughput"].items():
        out.append(
            (
                f"build throughput of `{name}`: plain read time / build time (median of rounds)",
                f"{thr:.2f}",
                f">= {THROUGHPUT_RATIO}",
                thr >= THROUGHPUT_RATIO,
            )
        )
    out.append(("validate after the build", f"{r['mismatches']} mismatches", "0", r["mismatches"] == 0))
    return out


def markdown(r: dict[str, Any], cmd: str) -> str:
    rounds = "; ".join(f"`{name}` " + ", ".join(f"{b:.3f}" for b in bs) + " s" for name, bs in r["builds_s"].items())
    lines = [
        "## Async index build while a writer writes",
        "",
        f"Measured {today()} on {machine()}.",
        "",
        f"Command: `{cmd}`",
        "",
        f"Table: {r['rows']:,} rows, merge-on-read, {r['files']} base files ({r['data_files']} data files with "
        f"the writer's logs at the end). One writer process upserts 50 random keys per commit throughout; "
        f"{r['baseline_commits']} commits without a build, before and after the builds (median "
        f"{r['baseline_median_s'] * 1000:.0f} ms, p95 {r['baseline_p95_s'] * 1000:.0f} ms), "
        f"{r['during_commits']} during {r['rounds']} rounds of building `column_stats` (every column) and "
        f"`bloom_filters` (record key), dropped between rounds, {r['create_s']:.2f} s per round (median) from "
        f"the first create to the second index ready (median {r['during_median_s'] * 1000:.0f} ms, p95 "
        f"{r['during_p95_s'] * 1000:.0f} ms).",
        "",
        "Build throughput: each round reads the live data files (the bases and the writer's logs on them, "
        "what a build indexes) with plain `pyarrow.parquet.read_table` through the build's engine (the same "
        "threads at `service.nice`, under the same writer), then builds; reads "
        + ", ".join(f"{x:.3f}" for x in r["reads_s"])
        + f" s; bulk builds {rounds}. For scale: "
        f"{r['serial_read_s']:.3f} s to read them one after the other at normal priority, "
        f"{r['idle_read_s']:.3f} s for the base files alone with no writer. The indexer took the table lock "
        f"{r['lock_holds']} times (longest {r['lock_max_s'] * 1000:.1f} ms).",
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
