"""Longevity after LST-Bench's WP1 (issues 15 and 16): TPC-DS queries over rounds of data maintenance.

Each system (``bench/longevity/systems.py``: lakeline merge-on-read without compaction,
the same with lakeline's service runner beside the rounds, lakeline copy-on-write as a
reference, deltalake, deltalake with ``optimize.compact()`` after each round) is loaded
with TPC-DS ``store_sales`` (record key ``ss_item_sk, ss_ticket_number``) in its own
folder. Round 0 runs TPC-DS queries 3, 42, 52, 55 and 96 in DuckDB on the fresh table;
each of ``--rounds`` rounds then inserts 1% new tickets (rows copied from existing
tickets under new ``ss_ticket_number`` values) and deletes a 14-day ``ss_sold_date_sk``
window (moving 14 days a round from 2000-11-01, so the first deletes reach the queries'
November 2000), and runs the queries again. A round's query time is reading ``store_sales``
(the columns the queries use) through the system's Arrow reader plus the five queries
over it in DuckDB beside the dimension tables, the best of ``--repeat`` runs (the run
least disturbed by other work on the machine; the median is in the JSON), systems
measured in turns. Every system must return the same results each round.

Reported per system and round: query time (read and queries), maintenance time (insert,
delete, and optimize where the system does one), bytes written (every new file in its
folder, background compaction included), files the snapshot reads; per system the
degradation rate (LST-Bench's: mean over rounds of (t_i - t_{i-1}) / t_{i-1}) and the
last round's time over round 0's. Targets: lakeline mor without compaction within 1.3x
of round 0 in every round (issue 16); with the runner, within 1.1x after the last round
and maintenance faster than deltalake's (issue 15).

Data: generated offline by DuckDB's ``tpcds`` extension and cached as Parquet
(``bench/tpcds_data.py``, ``--cache``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import tpcds_data
from ..mor_reads_bench import store_sales
from ..report import ROOT, command_line, update_section
from .report import print_summary, report, targets
from .systems import SYSTEMS, System, make, runner_available

QUERIES = [3, 42, 52, 55, 96]
DIMENSIONS = ["date_dim", "item", "store", "time_dim", "household_demographics"]
#: The store_sales columns queries 3, 42, 52, 55 and 96 read.
COLUMNS = ["ss_sold_date_sk", "ss_sold_time_sk", "ss_item_sk", "ss_hdemo_sk", "ss_store_sk", "ss_ext_sales_price"]
WINDOW_START = "2000-11-01"
WINDOW_DAYS = 14
DEFAULT_CACHE = ROOT / "bench" / "out" / "tpcds-cache"


def new_tickets(rows: Any, round_no: int, top: int) -> Any:
    """1% of the rows as new tickets: a run of existing tickets (a different run each
    round) with ``ss_ticket_number`` moved past every number used so far."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = max(1, rows.num_rows // 100)
    start = (round_no * 7 * n) % max(1, rows.num_rows - n)
    part = rows.slice(start, n)
    i = part.schema.get_field_index("ss_ticket_number")
    moved = pc.add(part.column(i), pa.scalar(top * round_no, part.schema.field(i).type))
    return part.set_column(i, "ss_ticket_number", moved)


def normalized(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Query result rows in one order, floats rounded (sums may add in any order)."""
    return sorted((tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in rows), key=repr)


class DiskWatch:
    """Bytes of the files that appeared (or changed size) in a folder since the last look."""

    def __init__(self, path: Path) -> None:
        self.path, self.seen = path, dict[str, int]()

    def new_bytes(self) -> int:
        now: dict[str, int] = {}
        for root, _, names in os.walk(self.path):
            for n in names:
                try:
                    now[os.path.join(root, n)] = os.path.getsize(os.path.join(root, n))
                except FileNotFoundError:  # cleaned while we looked
                    pass
        new = sum(size for p, size in now.items() if self.seen.get(p) != size)
        self.seen = now
        return new

    def on_disk(self) -> int:
        return len(self.seen)


def measure(system: System, con: Any, texts: dict[int, str]) -> tuple[float, float, dict[int, list[Any]]]:
    """Read store_sales through the system, run the queries over it: (read s, queries s, results)."""
    t0 = time.perf_counter()
    data = system.read(COLUMNS)
    t1 = time.perf_counter()
    con.register("store_sales", data)
    try:
        results = {q: normalized(con.execute(text).fetchall()) for q, text in texts.items()}
    finally:
        con.unregister("store_sales")
    return t1 - t0, time.perf_counter() - t1, results


def query_round(
    systems: list[System], con: Any, texts: dict[int, str], repeat: int, round_no: int, out: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """Every system's read and queries ``repeat`` times in turns; per system the fastest
    run (its read and query parts) and the median.
    Results that differ from the first system's go to ``out["mismatches"]``; a digest of
    each query's result per round to ``out["digests"]`` (so a reader sees the rounds'
    writes reach the queries)."""
    times: dict[str, list[tuple[float, float]]] = {s.name: [] for s in systems}
    reference: dict[int, list[Any]] | None = None
    mismatches = out["mismatches"]
    for _ in range(repeat):
        for s in systems:
            read_s, queries_s, results = measure(s, con, texts)
            times[s.name].append((read_s, queries_s))
            if reference is None:
                reference = results
            for q in QUERIES:
                if results[q] != reference[q]:
                    mismatches.append({"round": round_no, "system": s.name, "query": q, "reference": systems[0].name})
                    print(
                        f"RESULTS DIFFER: round {round_no}, query {q}: {s.name} != {systems[0].name}", file=sys.stderr
                    )
    assert reference is not None
    out["digests"].append({q: hashlib.sha1(repr(rows).encode()).hexdigest()[:12] for q, rows in reference.items()})
    best = {name: min(ts, key=sum) for name, ts in times.items()}
    return {
        name: {
            "read_s": best[name][0],
            "queries_s": best[name][1],
            "query_time_s": sum(best[name]),
            "query_time_median_s": statistics.median(r + q for r, q in ts),
        }
        for name, ts in times.items()
    }


def degradation_rate(times: list[float]) -> float:
    """LST-Bench's: the mean relative change from one round to the next."""
    steps = [(b - a) / a for a, b in zip(times, times[1:])]
    return sum(steps) / len(steps) if steps else 0.0


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import duckdb
    import pyarrow.compute as pc

    cache = args.cache or DEFAULT_CACHE
    paths = tpcds_data.ensure_tables(["store_sales", *DIMENSIONS], args.sf, cache)
    rows = store_sales(args.sf, cache)
    texts = tpcds_data.query_texts(QUERIES)
    con = duckdb.connect()
    for t in DIMENSIONS:
        con.execute(f"CREATE TABLE {t} AS SELECT * FROM read_parquet('{paths[t]}')")
    start = con.execute(f"SELECT d_date_sk FROM date_dim WHERE d_date = DATE '{WINDOW_START}'").fetchone()[0]
    top = pc.max(rows.column("ss_ticket_number")).as_py()

    use_runner = "lakeline-mor-runner" in args.systems and runner_available()
    systems = [make(name, work, args.runner_every, use_runner) for name in args.systems]
    watches = {s.name: DiskWatch(s.path) for s in systems}
    out: dict[str, Any] = {
        "sf": args.sf,
        "rows": rows.num_rows,
        "rounds": args.rounds,
        "repeat": args.repeat,
        "systems": {s.name: {"mode": s.mode, "rounds": []} for s in systems},
        "mismatches": [],
        "digests": [],
    }
    for s in systems:
        t0 = time.perf_counter()
        s.load(rows)
        out["systems"][s.name]["load_s"] = time.perf_counter() - t0
        out["systems"][s.name]["load_bytes"] = watches[s.name].new_bytes()
    for s in systems:  # warm up: imports, DuckDB's first plans, the page cache (not timed)
        measure(s, con, texts)
    for s in systems:
        s.start()
    try:
        for round_no in range(args.rounds + 1):
            maintenance: dict[str, dict[str, float]] = {s.name: {} for s in systems}
            if round_no:
                fresh = new_tickets(rows, round_no, top)
                lo = start + WINDOW_DAYS * (round_no - 1)
                for s in systems:
                    t0 = time.perf_counter()
                    s.insert(fresh)
                    t1 = time.perf_counter()
                    s.delete_window(lo, lo + WINDOW_DAYS)
                    t2 = time.perf_counter()
                    optimize_s = s.after_round()
                    maintenance[s.name] = {
                        "insert_s": t1 - t0,
                        "delete_s": t2 - t1,
                        "optimize_s": optimize_s,
                        "maintenance_s": t2 - t0 + optimize_s,
                    }
            timed = query_round(systems, con, texts, args.repeat, round_no, out)
            for s in systems:
                files = s.files()
                written = watches[s.name].new_bytes()
                out["systems"][s.name]["rounds"].append(
                    {
                        "round": round_no,
                        **timed[s.name],
                        **maintenance[s.name],
                        "bytes_written": written if round_no else 0,
                        "files": files["data"],
                        "log_files": files["logs"],
                        "files_on_disk": watches[s.name].on_disk(),
                    }
                )
            print(
                f"round {round_no}: " + ", ".join(f"{n} {t['query_time_s']:.2f} s" for n, t in timed.items()),
                file=sys.stderr,
            )
    finally:
        for s in systems:
            out["systems"][s.name]["background"] = s.stop()
    for r in out["systems"].values():
        t = [x["query_time_s"] for x in r["rounds"]]
        r["summary"] = {
            "round0_s": t[0],
            "last_s": t[-1],
            "last_over_round0": t[-1] / t[0],
            "worst_over_round0": max(t) / t[0],
            "degradation_rate": degradation_rate(t),
            "maintenance_s": sum(x.get("maintenance_s", 0.0) for x in r["rounds"]),
            "bytes_written": sum(x["bytes_written"] for x in r["rounds"]),
            "files": r["rounds"][-1]["files"],
            "log_files": r["rounds"][-1]["log_files"],
        }
    if "deltalake" in out["systems"]:
        # Load on a shared machine moves every system's time alike (they are measured in
        # turns): the drift against deltalake's over the same rounds factors it out.
        d = out["systems"]["deltalake"]["summary"]["last_over_round0"]
        for r in out["systems"].values():
            r["summary"]["last_over_round0_vs_deltalake"] = r["summary"]["last_over_round0"] / d
    out["targets"] = targets(out)
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench longevity", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sf", type=float, default=1.0, help="TPC-DS scale factor (default 1)")
    parser.add_argument("--rounds", type=int, default=8, help="rounds of data maintenance after round 0")
    parser.add_argument("--repeat", type=int, default=5, help="reads + queries per system and round (best reported)")
    parser.add_argument(
        "--systems",
        type=lambda v: [s for s in v.split(",") if s],
        default=list(SYSTEMS),
        help=f"comma list (default {','.join(SYSTEMS)})",
    )
    parser.add_argument("--runner-every", default="5s", help="compaction and cleaning interval of the runner")
    parser.add_argument("--cache", type=Path, default=None, help=f"TPC-DS Parquet cache (default {DEFAULT_CACHE})")
    parser.add_argument("--workdir", type=Path, default=None, help="where tables go (default: a temp dir, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the tables")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results as JSON here")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/performance.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    unknown = set(args.systems) - set(SYSTEMS)
    if unknown:
        parser.error(f"unknown systems {sorted(unknown)}; choose from {', '.join(SYSTEMS)}")
    work = Path(tempfile.mkdtemp(prefix="lakeline-longevity-", dir=args.workdir))
    try:
        result = run(args, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = report(result, command_line("longevity", argv, with_postgres=False))
    print(text)
    print_summary(result)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str))
    if not args.no_docs:
        update_section("longevity-bench", text)
    if result["mismatches"]:
        print(f"FAILED: the systems' query results differ ({len(result['mismatches'])} times)", file=sys.stderr)
        return 1
    return 1 if args.check and not all(t["pass"] for t in result["targets"]) else 0
