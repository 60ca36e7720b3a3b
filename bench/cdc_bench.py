"""CDC benchmark (issue 28 item 7): change batches streamed through the ``lakeline``
sink on ``local[2]`` into a merge-on-read table while a runner process compacts it,
against Spark's own Parquet streaming sink on the same input.

Why: most lake pipelines are streams of changes, and a sink whose batches slow down as
the table grows, or that a compacting runner stalls, is one users stop their streams
for. The input is generated up front (:func:`generate`): ``--batches`` files of
``--rows`` rows each, the first all new keys, then per batch ``--updates`` of the rows
updates of live keys, ``--deletes`` deletes of live keys and the rest new keys, rows in
random order; keys ``random`` (UUID-like hex) or ``sequential``. Each file carries an
``_op`` column (``insert``/``update``/``delete``): the lakeline sink applies such rows as
changes (``operation=upsert``: one write a batch, deletes and upserts together; see
:mod:`lakeline.spark.source_writer`),
the Parquet sink appends them as they are. Both read the folder with
``spark.readStream.parquet(...).option("maxFilesPerTrigger", 1)``, one file a
micro-batch, ``trigger(availableNow=True)``, after a few untimed warm-up batches.

Measured from Spark's progress reports: each micro-batch's ``triggerExecution``
(latency) and the rows per second over the query's wall time. Targets: throughput >=
0.5x the Parquet sink's, p95 latency <= 2x its, and flat: the median of the last 100
batches <= 1.2x the first 100's. The lakeline table must equal the model (the input
folded in order), and the runner must have compacted during the stream.

Command: ``python -m bench cdc [--batches 1000 --rows 5000]``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from .report import add_run_options, command_line, machine, today, update_section

THROUGHPUT_TARGET, P95_TARGET, FLAT_TARGET = 0.5, 2.0, 1.2
SCHEMA = pa.schema([("key", pa.string()), ("ts", pa.int64()), ("value", pa.float64()), ("note", pa.string())])
SPARK_SCHEMA = "key string, ts long, value double, note string, _op string"
#: The table's properties: small compaction trigger so the runner has work every few seconds.
PROPERTIES: dict[str, Any] = {"compaction.delta-commits": 3, "clean.retain": 5, "heartbeat.interval-ms": 1000}


def _key_strings(ids: np.ndarray, keys: str) -> list[str]:
    if keys == "sequential":
        return [f"k{i:012d}" for i in ids.tolist()]
    mixed = (ids.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)).tolist()  # a bijection: unique
    return [f"{m:016x}-{i % 9973:04x}" for m, i in zip(mixed, ids.tolist())]


def generate(batches: int, rows: int, updates: float, deletes: float, keys: str, seed: int = 7) -> Iterator[pa.Table]:
    """The change batches, in order: ``ts`` is the batch number (each key at most once a
    batch), ``_op`` insert, update or delete (a delete's other columns are null)."""
    rng = np.random.default_rng(seed)
    live = np.empty(0, dtype=np.int64)
    next_id = 0
    for b in range(batches):
        n_upd, n_del = (int(rows * updates), int(rows * deletes)) if len(live) else (0, 0)
        n_upd, n_del = min(n_upd, len(live)), min(n_del, max(len(live) - n_upd, 0))
        picked = rng.choice(len(live), n_upd + n_del, replace=False) if n_upd + n_del else np.empty(0, np.int64)
        upd, dele = live[picked[:n_upd]], live[picked[n_upd:]]
        live = np.delete(live, picked[n_upd:])
        n_new = rows - n_upd - n_del
        new = np.arange(next_id, next_id + n_new, dtype=np.int64)
        next_id += n_new
        live = np.concatenate([live, new])
        ids = np.concatenate([new, upd, dele])
        ops = ["insert"] * n_new + ["update"] * n_upd + ["delete"] * n_del
        order = rng.permutation(len(ids))
        values = rng.random(len(ids))
        alive = np.array([o != "delete" for o in ops])
        t = pa.table(
            {
                "key": pa.array(_key_strings(ids, keys)),
                "ts": pa.array(np.full(len(ids), b, dtype=np.int64)),
                "value": pa.array(values, mask=~alive),
                "note": pa.array([f"batch {b} row {i}" for i in range(len(ids))], mask=~alive),
                "_op": pa.array(ops),
            }
        )
        yield t.take(pa.array(order))


def model_of(batches: list[pa.Table]) -> pa.Table:
    """The table the batches leave: per key its last change (largest ``ts``), unless a
    delete; sorted by key."""
    all_rows = pa.concat_tables(batches)
    last = all_rows.group_by("key", use_threads=False).aggregate([("ts", "max")])
    rows = all_rows.join(last, ["key", "ts"], right_keys=["key", "ts_max"], join_type="inner", use_threads=False)
    rows = rows.filter(pc.not_equal(rows.column("_op"), "delete"))
    return rows.select(SCHEMA.names).cast(SCHEMA).sort_by("key")


def table_rows(path: str) -> pa.Table:
    """A lakeline table's rows, sorted by key, to compare with :func:`model_of`."""
    from lakeline.table import Table

    return Table.open(path).to_arrow(columns=SCHEMA.names).select(SCHEMA.names).cast(SCHEMA).sort_by("key")


def write_input(folder: Path, batches: list[pa.Table]) -> None:
    """One Parquet file per batch, modification times one second apart: Spark's file
    source takes files oldest first, so the batches stream in order."""
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.time() - len(batches) - 10
    for n, b in enumerate(batches):
        f = folder / f"batch-{n:06d}.parquet"
        pq.write_table(b, f)
        os.utime(f, (t0 + n, t0 + n))


@contextmanager
def runner_process(table: str, config_dir: Path, compaction: str, cleaning: str | None) -> Iterator[dict[str, Any]]:
    """A ``lakeline runner`` daemon (its own OS process) serving ``table`` while the
    block runs; stopped with SIGTERM after it. Yields a dict that holds, after the
    block, the runner's exit code and its JSON summary."""
    lines = ["[runner]", "threads = 1", "grace_seconds = 60", "", "[[tables]]", f"path = {json.dumps(table)}"]
    lines.append(f"compaction = {json.dumps(compaction)}")
    if cleaning:
        lines.append(f"cleaning = {json.dumps(cleaning)}")
    config = config_dir / "runner.toml"
    config.write_text("\n".join(lines) + "\n")
    out_path, err_path = config_dir / "runner.out", config_dir / "runner.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lakeline.cli", "runner", "--config", str(config), "--json"], stdout=out, stderr=err
        )
        result: dict[str, Any] = {"pid": proc.pid}
        try:
            yield result
        finally:
            result["alive_at_end"] = proc.poll() is None
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
            try:
                result["rc"] = proc.wait(90)
            except subprocess.TimeoutExpired:
                proc.kill()
                result["rc"] = proc.wait(30)
    text = out_path.read_text().strip()
    result["summary"] = json.loads(text) if text.startswith("{") else None
    result["stderr_tail"] = "\n".join(err_path.read_text().splitlines()[-20:])


def stream(spark: Any, source: Path, sink: str, target: str, checkpoint: Path, progress: Any = None) -> dict[str, Any]:
    """Stream every file of ``source`` (one a micro-batch) into ``sink`` (``lakeline``
    or ``parquet``); returns per-batch latencies (ms), rows and the wall time."""
    writer = (
        spark.readStream.schema(SPARK_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .parquet(str(source))
        .writeStream.format(sink)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    if sink == "lakeline":
        writer = writer.option("operation", "upsert")
    t0 = time.perf_counter()
    query = writer.start(target)
    while query.isActive:
        time.sleep(0.5)
        last = query.lastProgress
        if progress is not None and last is not None:
            progress(int(last["batchId"]) + 1)
    query.awaitTermination()
    wall = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(f"the {sink} stream failed: {query.exception()}")
    reports = [p for p in query.recentProgress if p["numInputRows"] > 0]
    return {
        "latency_ms": [float(p["durationMs"]["triggerExecution"]) for p in reports],
        "rows": sum(int(p["numInputRows"]) for p in reports),
        "wall_s": wall,
    }


def summarize(run: dict[str, Any]) -> dict[str, Any]:
    """Throughput, p50/p95 and the first and last windows' medians of one sink's run."""
    lat = run["latency_ms"]
    window = max(1, min(100, len(lat) // 4))
    return {
        **run,
        "batches": len(lat),
        "rows_per_s": run["rows"] / run["wall_s"],
        "p50_ms": float(np.percentile(lat, 50)),
        "p95_ms": float(np.percentile(lat, 95)),
        "window": window,
        "first_median_ms": statistics.median(lat[:window]),
        "last_median_ms": statistics.median(lat[-window:]),
    }


def _timed_sink(
    spark: Any, args: argparse.Namespace, work: Path, sink: str, warm: bool, progress: Any, result: dict[str, Any]
) -> dict[str, Any]:
    """One sink's untimed warm-up stream, then its timed stream of the input (lakeline's
    beside a runner process, whose outcome goes to ``result["runner"]``)."""
    from lakeline.table import Table

    target = work / f"{sink}-out"
    if sink == "lakeline":
        props = {
            **PROPERTIES,
            "compaction.trigger": args.trigger,
            "compaction.delta-commits": args.delta_commits,
            "compaction.log-ratio": args.log_ratio,
            **({} if args.small_file_limit is None else {"write.small-file-limit-bytes": args.small_file_limit}),
        }
        for path in (work / "warm-t", target):
            t = Table.create(path, SCHEMA, record_key="key", ordering_field="ts", table_type="mor", properties=props)
            if args.record_index:  # tagging answers from the index instead of reading every group's keys
                t.indexes.create("record_index", wait=True)
    if warm:  # JIT, Python workers and imports, paid before the timed stream as a long-running job's are
        warm_target = work / "warm-t" if sink == "lakeline" else work / "warm-parquet"
        stream(spark, work / "warm-input", sink, str(warm_target), work / f"warm-ck-{sink}")
    task = progress.add_task(f"{sink} sink", total=args.batches)
    done = lambda n: progress.update(task, completed=n)  # noqa: E731
    if sink == "parquet":
        raw = stream(spark, work / "input", sink, str(target), work / "ck-parquet", done)
    else:
        with runner_process(str(target), work, args.compact_every, args.clean_every) as runner:
            raw = stream(spark, work / "input", sink, str(target), work / "ck-lakeline", done)
        result["runner"] = runner
    progress.update(task, completed=args.batches)
    return raw


def run(args: argparse.Namespace, work: Path, progress: Any) -> dict[str, Any]:
    from lakeline.spark import session
    from lakeline.table import Table

    batches = list(generate(args.batches, args.rows, args.updates, args.deletes, args.keys))
    write_input(work / "input", batches)
    warm = list(generate(args.warmup, min(args.rows, 1000), args.updates, args.deletes, args.keys, seed=1))
    if warm:
        write_input(work / "warm-input", warm)
    spark = session(
        "local[2]", "lakeline-cdc-bench", **{"spark.sql.streaming.numRecentProgressUpdates": args.batches + 50}
    )
    result: dict[str, Any] = {
        "batches": args.batches,
        "rows": args.rows,
        "updates": args.updates,
        "deletes": args.deletes,
        "keys": args.keys,
        "compaction": args.compact_every,
        "trigger": args.trigger if args.trigger != "log-ratio" else f"log-ratio {args.log_ratio}",
        "delta_commits": args.delta_commits,
        "record_index": args.record_index,
        "small_file_limit": args.small_file_limit,
    }
    try:
        for sink in ("parquet", "lakeline"):
            result[sink] = summarize(_timed_sink(spark, args, work, sink, bool(warm), progress, result))
    finally:
        spark.stop()
    t = Table.open(str(work / "lakeline-out"))
    done = t.timeline.completed()
    result["compactions"] = sum(1 for i in done if i.action == "compaction")
    result["cleans"] = sum(1 for i in done if i.action == "clean")
    result["deltacommits"] = sum(1 for i in done if i.action == "deltacommit")
    result["pending"] = len(t.timeline.pending())
    result["equals_model"] = table_rows(t.path).equals(model_of(batches))
    result["parquet_rows"] = pq.read_table(work / "parquet-out").num_rows
    return result


def verdicts(result: dict[str, Any]) -> dict[str, tuple[float, bool]]:
    """(measured ratio, met) per target."""
    lk, pq_ = result["lakeline"], result["parquet"]
    thr = lk["rows_per_s"] / pq_["rows_per_s"]
    p95 = lk["p95_ms"] / pq_["p95_ms"]
    flat = lk["last_median_ms"] / lk["first_median_ms"]
    return {
        "throughput": (thr, thr >= THROUGHPUT_TARGET),
        "p95": (p95, p95 <= P95_TARGET),
        "flat": (flat, flat <= FLAT_TARGET),
    }


def report(result: dict[str, Any], command: str) -> str:
    v = verdicts(result)
    ok = lambda met: "met" if met else "**MISS**"  # noqa: E731
    lines = [
        "## CDC ingest through the streaming sink, beside a compacting runner",
        "",
        f"{today()}, {machine()}. Command: `{command}`",
        "",
        f"{result['batches']:,} micro-batches of {result['rows']:,} rows ({result['updates']:.0%} updates, "
        f"{result['deletes']:.0%} deletes, the rest new keys; {result['keys']} keys, rows in random order), "
        "one Parquet file a batch read by `spark.readStream` (`maxFilesPerTrigger=1`) on `local[2]`. "
        f"lakeline: a merge-on-read table, `operation=upsert` with the rows' `_op`, a `lakeline runner` process "
        f"compacting ({result['compaction']}) during the stream, the table's `compaction.trigger` "
        f"{result.get('trigger', 'delta-commits')} (delta-commits {result.get('delta_commits', 3)})"
        + (
            f", `write.small-file-limit-bytes` {result['small_file_limit']:,}"
            if result.get("small_file_limit") is not None
            else ""
        )
        + (", a record index" if result.get("record_index") else "")
        + ". "
        'Parquet: `writeStream.format("parquet")` of the same rows.',
        "",
        "| sink | rows/s | p50 ms | p95 ms | median first / last window ms |",
        "|---|---:|---:|---:|---:|",
    ]
    for sink in ("parquet", "lakeline"):
        s = result[sink]
        lines.append(
            f"| {sink} | {s['rows_per_s']:,.0f} | {s['p50_ms']:.0f} | {s['p95_ms']:.0f} | "
            f"{s['first_median_ms']:.0f} / {s['last_median_ms']:.0f} (window {s['window']}) |"
        )
    lines += [
        "",
        "| target | measured | verdict |",
        "|---|---:|---|",
        f"| throughput >= {THROUGHPUT_TARGET}x Parquet's | {v['throughput'][0]:.2f}x | {ok(v['throughput'][1])} |",
        f"| p95 latency <= {P95_TARGET}x Parquet's | {v['p95'][0]:.2f}x | {ok(v['p95'][1])} |",
        f"| last-window median <= {FLAT_TARGET}x first | {v['flat'][0]:.2f}x | {ok(v['flat'][1])} |",
        "",
        f"Table equals the model: {'yes' if result['equals_model'] else 'NO'}; "
        f"{result['deltacommits']} delta commits, {result['compactions']} compactions and {result['cleans']} cleans "
        f"completed, {result['pending']} pending at the end; runner exit code {result['runner']['rc']}.",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    p = argparse.ArgumentParser(prog="python -m bench cdc", description=__doc__.split("\n\n")[0])
    p.add_argument("--batches", type=int, default=1000, help="micro-batches (default 1,000)")
    p.add_argument("--rows", type=int, default=5000, help="rows per micro-batch (default 5,000)")
    p.add_argument("--updates", type=float, default=0.2, help="share of updates of live keys (default 0.2)")
    p.add_argument("--deletes", type=float, default=0.05, help="share of deletes of live keys (default 0.05)")
    p.add_argument("--keys", choices=["random", "sequential"], default="random")
    p.add_argument("--warmup", type=int, default=5, help="untimed warm-up batches per sink (default 5)")
    p.add_argument("--compact-every", default="every 5s", help="the runner's compaction schedule")
    p.add_argument("--clean-every", default="every 30s", help="the runner's cleaning schedule ('' for none)")
    p.add_argument("--delta-commits", type=int, default=3, help="compaction.delta-commits of the table")
    p.add_argument(
        "--trigger",
        choices=["delta-commits", "log-ratio", "time", "any"],
        default="delta-commits",
        help="compaction.trigger of the table (default delta-commits)",
    )
    p.add_argument("--log-ratio", type=float, default=0.5, help="compaction.log-ratio of the table (default 0.5)")
    p.add_argument("--record-index", action="store_true", help="give the table a record index before the stream")
    p.add_argument(
        "--small-file-limit",
        type=int,
        default=None,
        help="write.small-file-limit-bytes of the table (default: the property's): inserts fill the file "
        "groups below it, so it bounds how many groups (and logs) a batch of random updates touches",
    )
    add_run_options(p)
    args = p.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lakeline-cdc-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, transient=True) as progress:
            result = run(args, work, progress)
    finally:
        if args.workdir is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    text = report(result, command_line("cdc", argv, with_postgres=False))
    print(text)
    result["verdicts"] = {k: {"ratio": r, "met": m} for k, (r, m) in verdicts(result).items()}
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if not args.no_docs:
        update_section("cdc-bench", text)
    ok = result["equals_model"] and all(m for _, m in verdicts(result).values())
    return 1 if args.check and not ok else 0
