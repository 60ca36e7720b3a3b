"""Spark benchmark (issue 13): an upsert through ``lakeline.spark.write`` on ``local[2]``
against the local engine's upsert of the same rows and against Spark writing the same
rows as plain Parquet (the floor), and a compaction on ``SparkEngine`` against the local
engine's.

One run, the data of :mod:`bench.data`: a table of ``--rows`` rows (10 appends through
the local API), copied once per system, then an upsert of ``--upsert`` rows (half
updates spread over the table, half new keys) read from one Parquet file:

1. **local**: ``Table.upsert`` in one Python process kept for every round (input read
   before the timer), as the Spark side keeps its driver and workers.
2. **spark**: ``lakeline.spark.write(spark.read.parquet(input), path, "upsert")`` on a
   ``local[2]`` session started (and warmed up) before the timer. A bare scan of Parquet
   files: the write stages the files, and no row crosses from the JVM into Python.
   **spark, crossing**: the same with a filter every row passes (``key IS NOT NULL``),
   as any DataFrame that is not a bare scan: its rows cross into Python (``mapInArrow``).
3. **spark parquet**: ``spark.read.parquet(input).write.parquet(out)``: what Spark
   needs to read and write the same rows with no table format at all.
4. **compaction** (merge-on-read): ``t.services.compact()`` of the table the Spark
   upsert left, on ``SparkEngine(spark)`` and on the local engine (a fresh process).

Targets: Spark upsert <= 1.5x the local engine (issue 30; 2x in issue 13), and <= 3x
Spark's plain Parquet write.
Both tables must hold the same rows afterwards (count and a checksum of the keys).
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

from . import data
from .report import add_run_options, command_line, machine, today, update_section

UPSERT_TARGET = 1.5
PARQUET_TARGET = 3.0


def build_base(path: Path, rows: int, table_type: str) -> None:
    from lakeline.table import Table

    t = Table.create(str(path), data.SCHEMA, record_key="key", ordering_field="ts", table_type=table_type)
    for i in range(10):
        t.insert(data.append_batch(i, rows // 10))


def _child(code: str) -> dict[str, Any]:
    """Run ``code`` (which prints one JSON line last) in a fresh Python process."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        check=True,
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


class LocalUpserts:
    """The local engine's side: one Python process for every round, as the Spark side
    keeps its driver and Python workers, so both are equally warm (a fresh process's
    first upsert of 5M rows was 0.6 s slower than its next ones). The input is read
    before the first timer; each :meth:`upsert` times one ``Table.upsert``."""

    _CODE = """
import json, sys, time, pyarrow.parquet as pq
from lakeline.table import Table
rows = pq.read_table(sys.argv[1])
print("ready", flush=True)
for line in sys.stdin:
    t = Table.open(line.strip())
    t0 = time.perf_counter(); r = t.upsert(rows); s = time.perf_counter() - t0
    print(json.dumps({"seconds": s, "stats": r.stats, "timings": r.timings}), flush=True)
"""

    def __init__(self, input_path: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", self._CODE, str(input_path)],
            text=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[1],
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def upsert(self, path: Path) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{path}\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def local_compact(path: Path) -> dict[str, Any]:
    return _child(f"""
import json, time
from lakeline.table import Table
t = Table.open({str(path)!r})
t0 = time.perf_counter(); r = t.services.compact(); s = time.perf_counter() - t0
print(json.dumps({{"seconds": s, "stats": r.stats}}))
""")


def checksum(path: Path) -> tuple[int, int]:
    import pyarrow.compute as pc
    from lakeline.table import Table

    keys = Table.open(str(path)).to_arrow(columns=["key", "ts"])
    return keys.num_rows, int(pc.sum(keys.column("ts")).as_py())


def _import_lakeline(_: int) -> bool:
    import lakeline.spark.write_tasks  # noqa: F401

    return True


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import pyarrow.parquet as pq
    from lakeline.spark import session, write

    base, input_path = work / "base", work / "upsert.parquet"
    t0 = time.perf_counter()
    build_base(base, args.rows, args.table_type)
    pq.write_table(data.upsert_batch(args.rows, args.upsert), input_path)
    print(f"base table of {args.rows:,} rows and the input in {time.perf_counter() - t0:.1f} s", flush=True)
    result: dict[str, Any] = {
        "rows": args.rows,
        "upsert": args.upsert,
        "table_type": args.table_type,
        "repeat": args.repeat,
    }
    spark = session("local[2]", "lakeline-bench", **{"spark.driver.memory": args.driver_memory})
    # Start both kinds of Python workers (the DataFrame and the RDD path each keep their
    # own) with lakeline imported, as a long-running application's are: worker start is
    # paid once per application, not per write.
    spark.range(100).mapInArrow(lambda it: it, "id long").collect()
    spark.sparkContext.parallelize([1, 2], 2).map(_import_lakeline).collect()

    def transfer() -> None:
        spark.read.parquet(str(input_path)).mapInArrow(lambda it: (b.slice(0, 0) for b in it), "key string").count()

    # One untimed pass over the input, so no timed Spark step pays the JVM's warm-up
    # (JIT) of the Parquet reader and the Arrow conversion alone.
    transfer()
    local_side = LocalUpserts(input_path)
    runs: dict[str, list[float]] = {"local": [], "spark": [], "crossing": [], "parquet": [], "transfer": []}
    result["load"] = [os.getloadavg()[0]]
    # Rounds interleave the systems, so each sees the same load; every upsert starts
    # from a fresh copy of the base table.
    for i in range(args.repeat):
        local_path, spark_path = work / f"local-{i}", work / f"spark-{i}"
        shutil.copytree(base, local_path)
        shutil.copytree(base, spark_path)
        os.sync()  # the copies' write-back must not compete with the timed steps
        local = local_side.upsert(local_path)
        runs["local"].append(local["seconds"])
        t0 = time.perf_counter()
        r = write(spark.read.parquet(str(input_path)), str(spark_path), "upsert")
        runs["spark"].append(time.perf_counter() - t0)
        result["spark_timings"] = dict(r.timings)
        crossing_path = work / f"crossing-{i}"
        shutil.copytree(base, crossing_path)
        os.sync()
        t0 = time.perf_counter()
        r = write(spark.read.parquet(str(input_path)).filter("key IS NOT NULL"), str(crossing_path), "upsert")
        runs["crossing"].append(time.perf_counter() - t0)
        result["crossing_timings"] = dict(r.timings)
        same = checksum(crossing_path)
        shutil.rmtree(crossing_path)
        t0 = time.perf_counter()
        spark.read.parquet(str(input_path)).write.parquet(str(work / f"plain-{i}"))
        runs["parquet"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        transfer()  # the floor of any Python work on a DataFrame's rows
        runs["transfer"].append(time.perf_counter() - t0)
        print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in runs.items()), flush=True)
        result["same_rows"] = checksum(local_path) == checksum(spark_path) == same
        if i + 1 < args.repeat:  # the last round's tables stay, for the compaction
            for done in (local_path, spark_path, work / f"plain-{i}"):
                shutil.rmtree(done)
    local_side.close()
    result["load"].append(os.getloadavg()[0])
    for k, v in runs.items():
        result[k] = {"seconds": statistics.median(v), "runs": v}

    if args.table_type == "mor":
        from lakeline.spark import SparkEngine
        from lakeline.table import Table

        shutil.copytree(spark_path, work / "compact-local")
        t = Table.open(str(spark_path))
        t.engine = SparkEngine(spark)
        t0 = time.perf_counter()
        t.services.compact()
        result["compact_spark"] = {"seconds": time.perf_counter() - t0}
        result["compact_local"] = local_compact(work / "compact-local")
        print(
            f"compaction: spark {result['compact_spark']['seconds']:.2f} s, "
            f"local {result['compact_local']['seconds']:.2f} s",
            flush=True,
        )
    spark.stop()
    return result


def report(result: dict[str, Any], command: str) -> str:
    local, spark_s, parquet = result["local"]["seconds"], result["spark"]["seconds"], result["parquet"]["seconds"]
    lines = [
        "## Spark: upsert through `lakeline.spark.write`, compaction on `SparkEngine`",
        "",
        f"{today()}, {machine()}{_load(result)}. Command: `{command}`",
        "",
        f"Upsert of {result['upsert']:,} rows (half updates, half new keys) into a "
        f"{result['table_type']} table of {result['rows']:,} rows; Spark is `local[2]`, its start not timed. "
        f"Each step's median of {result['repeat']} interleaved rounds (every upsert into a fresh copy of the table).",
        "",
        "| step | seconds | ratio | target |",
        "|---|---:|---:|---|",
        f"| local engine upsert | {local:.2f} | 1.00 | |",
        f"| `lakeline.spark.write` upsert (bare Parquet scan: the files are staged) | {spark_s:.2f} | "
        f"{spark_s / local:.2f}x local | <= {UPSERT_TARGET}x |",
    ]
    if "crossing" in result:
        cross = result["crossing"]["seconds"]
        lines.append(
            f"| `lakeline.spark.write` upsert of the scan filtered (the rows cross into Python) | {cross:.2f} | "
            f"{cross / local:.2f}x local | |"
        )
    lines.append(
        f"| Spark plain Parquet write of the same rows | {parquet:.2f} | spark upsert = "
        f"{spark_s / parquet:.2f}x this | <= {PARQUET_TARGET}x |"
    )
    if "transfer" in result:
        xfer = result["transfer"]["seconds"]
        lines.append(
            f"| Spark reading the rows into Python (`mapInArrow`, no work) | {xfer:.2f} | {xfer / local:.2f}x local | |"
        )
    if "compact_spark" in result:
        cs, cl = result["compact_spark"]["seconds"], result["compact_local"]["seconds"]
        lines.append(f"| compaction on SparkEngine | {cs:.2f} | {cs / cl:.2f}x local ({cl:.2f} s) | |")
    lines += ["", f"The tables hold the same rows afterwards: {'yes' if result['same_rows'] else 'NO'}."]
    for name, key, label in (("spark", "spark_timings", "scan"), ("crossing", "crossing_timings", "filtered scan")):
        timings = result.get(key, {})
        if timings:
            staged = result[name]["runs"][-1] - timings.get("total_s", 0.0)
            lines.append(
                f"Spark upsert phases of the last round, {label} (s): stage (input to staging, before the attempt) "
                f"{staged:.2f}, " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items()) + "."
            )
    return "\n".join(lines)


def _load(result: dict[str, Any]) -> str:
    load = result.get("load", [])
    return f"; 1-minute load average {load[0]:.1f} at the start, {load[-1]:.1f} at the end" if len(load) == 2 else ""


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench spark", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=50_000_000, help="rows of the table (default 50M)")
    parser.add_argument("--upsert", type=int, default=5_000_000, help="rows upserted (default 5M)")
    parser.add_argument("--table-type", choices=["mor", "cow"], default="mor")
    parser.add_argument("--driver-memory", default="6g")
    parser.add_argument("--repeat", type=int, default=3, help="rounds; the report gives each step's median")
    add_run_options(parser)
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lakeline-spark-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        result = run(args, work)
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = report(result, command_line("spark", argv, with_postgres=False))
    print(text)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if not args.no_docs:
        update_section("spark-bench", text)
    ok = (
        result["same_rows"]
        and result["spark"]["seconds"] <= UPSERT_TARGET * result["local"]["seconds"]
        and result["spark"]["seconds"] <= PARQUET_TARGET * result["parquet"]["seconds"]
    )
    return 1 if args.check and not ok else 0
