"""MERGE benchmark (issue 46 item 2): ``t.merge(source)`` against deltalake's
``DeltaTable.merge`` on the same data, and lakeline's own upsert of that source.

The data (:mod:`bench.data`, UUID keys, every batch in random row order): a table of
``--rows`` rows written as 5 appends, then a source of ``--source`` rows, half updates
of keys drawn uniformly over the table, half new keys. Two MERGEs, each on a fresh copy
of the table:

* ``upsert-merge``: ``when_matched_update()`` + ``when_not_matched_insert()`` (deltalake:
  ``when_matched_update_all`` + ``when_not_matched_insert_all``), what an upsert does;
* ``conditional``: a matched delete where ``source.value < 0.1``, else an update of one
  column from both sides (``target.value + source.value``), and inserts of the new keys
  whose ``value >= 0.5``.

Each system/step runs in a fresh process (so its peak memory is that process's
``ru_maxrss``), ``--runs`` times alternating systems, and the median is reported, as
a ratio to deltalake. Both outcomes are checked for the same row count and value sum.

Command: ``python -m bench merge [--rows 1000000 --source 100000 --runs 3]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .. import data
from ..report import command_line, machine, today, update_section

SHAPE = data.Shape("uuid", "random")
SYSTEMS = ("lakeline-cow", "lakeline-mor", "deltalake")
STEPS = ("upsert-merge", "conditional")
APPENDS = 5


def _build(system: str, path: Path, rows: int) -> None:
    per = rows // APPENDS
    batches = [data.append_batch(i, per, SHAPE) for i in range(APPENDS)]
    if system == "deltalake":
        from deltalake import write_deltalake

        for b in batches:
            write_deltalake(str(path), b, mode="append")
        return
    from lakeline.table import Table

    t = Table.create(str(path), data.SCHEMA, record_key="key", ordering_field="ts", table_type=system.split("-")[1])
    for b in batches:
        t.insert(b)


def _lakeline(path: Path, step: str, source: pa.Table) -> dict[str, int]:
    from lakeline.table import Table

    m = Table.open(str(path)).merge(source)
    if step == "upsert-merge":
        r = m.when_matched_update().when_not_matched_insert().execute()
    else:
        r = (
            m.when_matched_delete(pc.field("source.value") < 0.1)
            .when_matched_update(set={"value": pc.field("target.value") + pc.field("source.value")})
            .when_not_matched_insert(pc.field("source.value") >= 0.5)
            .execute()
        )
    return {k: int(r.stats.get(k, 0)) for k in ("rows_updated", "rows_inserted", "rows_deleted")}


def _deltalake(path: Path, step: str, source: pa.Table) -> dict[str, int]:
    from deltalake import DeltaTable

    m = DeltaTable(str(path)).merge(source, "target.key = source.key", source_alias="source", target_alias="target")
    if step == "upsert-merge":
        r = m.when_matched_update_all().when_not_matched_insert_all().execute()
    else:
        r = (
            m.when_matched_delete("source.value < 0.1")
            .when_matched_update({"value": "target.value + source.value"})
            .when_not_matched_insert_all("source.value >= 0.5")
            .execute()
        )
    return {
        "rows_updated": int(r.get("num_target_rows_updated", 0)),
        "rows_inserted": int(r.get("num_target_rows_inserted", 0)),
        "rows_deleted": int(r.get("num_target_rows_deleted", 0)),
    }


def _outcome(system: str, path: Path) -> tuple[int, float]:
    if system == "deltalake":
        from deltalake import DeltaTable

        table = DeltaTable(str(path)).to_pyarrow_table(columns=["value"])
    else:
        from lakeline.table import Table

        table = Table.open(str(path)).to_arrow(columns=["value"])
    return table.num_rows, round(float(pc.sum(table.column("value")).as_py()), 3)


def child(system: str, step: str, path: Path, source_file: Path) -> dict[str, Any]:
    """One timed MERGE in this (fresh) process: its seconds, stats and peak memory."""
    source = pq.read_table(source_file)
    t0 = time.perf_counter()
    stats = (_deltalake if system == "deltalake" else _lakeline)(path, step, source)
    seconds = time.perf_counter() - t0
    rows, total = _outcome(system, path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"seconds": seconds, "stats": stats, "rows": rows, "sum": total, "peak_bytes": peak}


def _run_child(system: str, step: str, path: Path, source_file: Path) -> dict[str, Any]:
    args = [sys.executable, "-m", "bench", "merge", "--child", system, step, str(path), str(source_file)]
    out = subprocess.run(args, capture_output=True, text=True, timeout=3600, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"{system} {step} failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _report(results: dict[tuple[str, str], list[dict[str, Any]]], args: argparse.Namespace, argv: list[str]) -> str:
    lines = [
        f"Measured {today()} on {machine()}: a table of {args.rows:,} rows (UUID keys, random order, "
        f"{APPENDS} appends), a source of {args.source:,} rows (half updates, half new keys), "
        f"median of {args.runs} runs, each in a fresh process.",
        "",
        f"Command: `{command_line('merge', argv, with_postgres=False)}`",
        "",
        "| step | system | seconds (median) | vs deltalake | peak memory | updated / inserted / deleted |",
        "|---|---|---|---|---|---|",
    ]
    for step in STEPS:
        base = statistics.median(r["seconds"] for r in results[("deltalake", step)])
        for system in SYSTEMS:
            runs = results[(system, step)]
            sec = statistics.median(r["seconds"] for r in runs)
            peak = max(r["peak_bytes"] for r in runs) / 2**20
            s = runs[-1]["stats"]
            counts = f"{s['rows_updated']:,} / {s['rows_inserted']:,} / {s['rows_deleted']:,}"
            lines.append(f"| {step} | {system} | {sec:.2f} | {sec / base:.2f}x | {peak:,.0f} MiB | {counts} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--child"]:
        print(json.dumps(child(argv[1], argv[2], Path(argv[3]), Path(argv[4]))), flush=True)
        # deltalake's runtime can abort the interpreter's teardown ("terminate called
        # without an active exception"), after the result is out: skip the teardown.
        os._exit(0)
    p = argparse.ArgumentParser(prog="python -m bench merge", description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--source", type=int, default=100_000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--no-docs", action="store_true", help="do not write docs/performance.md")
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="lakeline-merge-bench-"))
    try:
        source_file = work / "source.parquet"
        pq.write_table(data.upsert_batch(args.rows, args.source, SHAPE), source_file)
        for system in SYSTEMS:
            _build(system, work / f"base-{system}", args.rows)
        results: dict[tuple[str, str], list[dict[str, Any]]] = {(s, st): [] for s in SYSTEMS for st in STEPS}
        for run in range(args.runs):
            for step in STEPS:
                for system in SYSTEMS if run % 2 == 0 else tuple(reversed(SYSTEMS)):
                    copy = work / f"{system}-{step}-{run}"
                    shutil.copytree(work / f"base-{system}", copy)
                    res = _run_child(system, step, copy, source_file)
                    results[(system, step)].append(res)
                    print(f"{step:13s} {system:13s} {res['seconds']:7.2f} s  {res['stats']}", flush=True)
                    shutil.rmtree(copy)
        for step in STEPS:
            outcomes = {(r[-1]["rows"], r[-1]["sum"]) for (s, st), r in results.items() if st == step}
            if len(outcomes) != 1:
                raise RuntimeError(f"{step}: the systems disagree on the outcome: {outcomes}")
        body = _report(results, args, argv)
        print(body)
        if not args.no_docs:
            update_section("merge", "## MERGE against deltalake's\n\n" + body)
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)
