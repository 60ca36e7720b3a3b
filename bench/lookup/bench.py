"""Lookup benchmark (issue 4, metadata table and indexes): reads that indexes should
make cheap, and the upsert they must not make expensive, lakeline against deltalake.

One run, the same data for every system (:mod:`bench.data`, through the write
benchmark's :func:`bench.write.bench.prepare_inputs`): ``--rows`` rows (5M by default)
written as 10 appends, then on lakeline (copy-on-write and merge-on-read) the indexes
``column_stats``, ``bloom_filters`` (record key) and ``bloom_ts`` (a bloom filter on
``ts``) are built and timed. Then, on the table after the appends and again after the
upsert:

* a 1,000-key read, ``key >= a AND key < b`` (:func:`bench.data.read_range`);
* a point lookup of one key, ``key == k`` (issue 30's target with uuid keys);
* a point lookup on a column that is not the key, ``ts == v`` for one existing row that
  the upsert does not touch. ``ts`` follows the key on appends, so min/max statistics
  alone find its file there; after the upsert every rewritten file's ``ts`` range reaches
  the updates' larger values, and only a bloom filter tells the files apart.

and in between the upsert of ``rows / 10`` rows (half updates spread over the key space,
half new keys) with the indexes ready: lakeline ``Table.upsert`` (its
``WriteResult.timings``: ``tag_s``, ``index_s``, ...) against deltalake's ``merge`` (the
write benchmark's). deltalake skips files with the per-file min/max of its log.

The data's shape is chosen with ``--keys sequential|uuid`` and ``--order random|sorted``
(:class:`bench.data.Shape`; default sequential keys, batches in random order), and
deltalake is read through its own ``DeltaTable.scan(predicate=...)`` (issue 30), its
``to_pyarrow_dataset`` read timed after each query for comparison.

Every system/step runs in a fresh subprocess (times include opening the table; peak
memory is its ``ru_maxrss``), reads ``--repeat`` times, the median reported. Targets
(issue 4): the 1,000-key read and the ``ts`` lookup read no more files than deltalake and
take <= 1.0x its time; the upsert spends <= 1 s tagging; the copy-on-write upsert takes
<= 1.2x deltalake's merge.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .. import data
from ..report import add_run_options, command_line, today, unwinds_on_sigterm, update_section
from ..write.bench import APPENDS, DEFAULT_ROWS, READ_KEYS, default_timeout, prepare_inputs
from ..write.bench import run_step as run_write_step
from ..write.environment import machine_line
from ..write.report import Run, StepResult, _fmt_b
from ..write.systems import LAKELINE
from . import systems as ls
from .report import evaluate

SECTION = "lookup-bench"
RESULT_MARK = "LOOKUP_BENCH_RESULT "
REPEAT = 5  # reads take 50-400 ms: fewer runs let one noisy neighbour decide a ratio


# Fraction of the key space where the looked-up ``ts`` row sits: past the middle, so that
# after the upsert most rewritten files' ``ts`` ranges still contain it.
LOOKUP_AT = 0.7


@dataclass
class LookupRun(Run):
    """A write-benchmark run record plus what only this benchmark has."""

    lookup_ts: int = 0
    lookup_key: str = ""
    repeat: int = REPEAT
    queries: dict[str, str] = field(default_factory=dict)  # name -> filter text
    read_rows_appended: int = 0  # rows the range read returns before the upsert


# --------------------------------------------------------------------------------------
# Child side.


def child_main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.lookup.bench --child")
    p.add_argument("--child", nargs=3, metavar=("SYSTEM", "STEP", "WORKDIR"), required=True)
    system, step, workdir = p.parse_args(argv).child
    try:
        out = ls.run_child(system, step, Path(workdir))
    except Exception as e:  # noqa: BLE001 - reported to the parent as a failed step
        out = {
            "system": system,
            "step": step,
            "ok": False,
            "error": f"{type(e).__name__}: {e}"[:500],
            "traceback": traceback.format_exc()[-4000:],
        }
    sys.stdout.write("\n" + RESULT_MARK + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0 if out["ok"] else 1


# --------------------------------------------------------------------------------------
# Parent side.


def prepare(workdir: Path, rows: int, read_keys: int, shape: data.Shape = data.DEFAULT) -> dict[str, Any]:
    """The write benchmark's inputs in ``shape``, plus the row to look up (by its key and
    by its ``ts``): the first row at :data:`LOOKUP_AT` of the row numbers that the upsert
    leaves alone, so the lookups have the same one-row answer before and after it; and
    how many rows the range read returns after the appends (with uuid keys some of the
    keys in its range are new keys of the upsert)."""
    import numpy as np

    spec = prepare_inputs(workdir, rows, APPENDS, read_keys, shape)
    updated, _fresh = data.upsert_numbers(spec["rows"], spec["upsert_rows"])
    touched = set(updated.tolist())
    n = int(spec["rows"] * LOOKUP_AT)
    while n in touched:
        n += 1
    appended = spec["read_keys"]
    if shape.keys != "sequential":
        appended = data.rows_in_range(np.arange(spec["rows"]), spec["read_a"], spec["read_b"], shape.keys)
    spec.update(
        lookup_row=n, lookup_key=data.key(n, shape.keys), lookup_ts=data.APPEND_TS + n, read_rows_appended=appended
    )
    (workdir / "spec.json").write_text(json.dumps(spec, indent=2))
    return spec


def run_step(system: str, step: str, workdir: Path, timeout: float) -> StepResult:
    """One step in a fresh interpreter: the write benchmark's runner, on this module's child."""
    return run_write_step(system, step, workdir, timeout, module="bench.lookup.bench", mark=RESULT_MARK)


def median_of(results: list[StepResult]) -> StepResult:
    """The run with the median time, carrying every time; a failure wins (it is news)."""
    failed = [r for r in results if not r.ok]
    if failed:
        return failed[0]
    ordered = sorted(results, key=lambda r: r.seconds or 0.0)
    mid = ordered[(len(ordered) - 1) // 2]
    mid.detail["seconds_all"] = [r.seconds for r in results]
    # Files read and the answer are facts of the table, not of the run: they must repeat.
    mid.detail["stable"] = len({(r.files_read, r.read_digest) for r in results}) == 1
    return mid


def run_benchmark(
    rows: int,
    workdir: Path,
    step_timeout: float,
    read_keys: int = READ_KEYS,
    repeat: int = REPEAT,
    log: Callable[[str], None] = print,
    shape: data.Shape = data.DEFAULT,
    systems: tuple[str, ...] = ls.SYSTEMS,
) -> LookupRun:
    """Build the tables once, then every step for every system, each in its own process."""
    t_start = time.perf_counter()
    load_start = os.getloadavg()[0]
    spec = data.in_fresh_process(prepare, workdir, rows, read_keys, shape)  # the parent stays small
    qs = ls.queries(spec)
    log(
        f"data ({shape.label}): {spec['rows']:,} rows in {APPENDS} appends, upsert {spec['upsert_rows']:,} rows; "
        f"queries: {'; '.join(q['text'] for q in qs.values())}"
    )
    run = LookupRun(
        rows=spec["rows"],
        appends=APPENDS,
        upsert_rows=spec["upsert_rows"],
        input_upsert_bytes=spec["upsert_bytes"],
        read_range=(spec["read_a"], spec["read_b"]),
        read_keys=spec["read_keys"],
        results={s: {} for s in systems},
        lookup_ts=spec["lookup_ts"],
        lookup_key=spec["lookup_key"],
        repeat=repeat,
        queries={q: d["text"] for q, d in qs.items()},
        read_rows_appended=spec["read_rows_appended"],
        shape=shape.as_dict(),
    )

    def record(res: StepResult) -> None:
        run.results[res.system][res.step] = res
        if not res.ok:
            log(f"{res.system:13} {res.step:12} FAILED: {res.error}")
            return
        extra = f", {res.files_read} files, {res.rows_read} rows" if res.files_read is not None else ""
        every = res.detail.get("seconds_all")
        times = f" (of {', '.join(f'{s:.2f}' for s in every)})" if every and len(every) > 1 else ""
        log(f"{res.system:13} {res.step:12} {res.seconds:8.2f} s{times}  peak {_fmt_b(res.peak_rss):>9}{extra}")

    def alive(system: str) -> bool:
        return all(r.ok for r in run.results[system].values())

    for system in systems:  # build: the write benchmark's append step, as it is
        record(run_write_step(system, "append", workdir, step_timeout))
    for system in (s for s in systems if s.startswith("lakeline")):
        if alive(system):
            record(run_step(system, "index", workdir, step_timeout))
    for phase in ls.PHASES:
        if phase == "upserted":
            record_upserts(workdir, step_timeout, alive, record, systems)
        # Repeats go round the systems, so each system's runs share the machine's load
        # at that moment with the others'.
        tries: dict[tuple[str, str], list[StepResult]] = {}
        for _ in range(repeat):
            for q in ls.QUERIES:
                for system in systems:
                    if alive(system):
                        step = f"{q}@{phase}"
                        tries.setdefault((system, step), []).append(run_step(system, step, workdir, step_timeout))
        for results in tries.values():
            record(median_of(results))
    run.total_s = time.perf_counter() - t_start
    run.load = (load_start, os.getloadavg()[0])
    run.source = source_state()
    evaluate(run)
    return run


#: Upserts per system, each on the table as the appends left it; the median is kept.
UPSERT_REPEAT = 3


def record_upserts(
    workdir: Path,
    step_timeout: float,
    alive: Callable[[str], bool],
    record: Callable[[StepResult], None],
    systems: tuple[str, ...] = ls.SYSTEMS,
) -> None:
    """Run the upsert :data:`UPSERT_REPEAT` times per system, going round the systems
    (so their runs share the machine's load), restoring each table from a copy taken
    before the first; record the run with the median time (a single run of a second or
    so swings by a fifth on this machine)."""
    from ..write.systems import make_system

    snaps = workdir / "before-upsert"
    tries: dict[str, list[StepResult]] = {}
    for attempt in range(UPSERT_REPEAT):
        for system in systems:
            if not alive(system) or any(not r.ok for r in tries.get(system, [])):
                continue
            path, snap = Path(make_system(system, workdir).path), snaps / system
            if attempt == 0:
                shutil.copytree(path, snap)
            else:
                shutil.rmtree(path)
                shutil.copytree(snap, path)
            tries.setdefault(system, []).append(run_step(system, "upsert", workdir, step_timeout))
    shutil.rmtree(snaps, ignore_errors=True)
    for results in tries.values():
        record(median_of(results))


def source_state() -> str:
    """:func:`bench.write.environment.source_state`, with indexes/ counted as measured code."""
    from ..write.environment import source_state as write_source

    return write_source(("table", "timeline", "config", "indexes"))


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench lookup", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_ROWS,
        help=f"rows appended in total, in {APPENDS} appends (default {DEFAULT_ROWS:,}); the upsert is a tenth of that",
    )
    p.add_argument("--read-keys", type=int, default=READ_KEYS, help="consecutive keys read (default 1000)")
    p.add_argument(
        "--systems",
        default=",".join(ls.SYSTEMS),
        help=f"comma-separated, of {','.join(ls.ALL_SYSTEMS)} (default {','.join(ls.SYSTEMS)}); "
        "-ri: created with index.record-index",
    )
    data.add_shape_options(p)
    add_run_options(p, repeat=REPEAT)
    args = p.parse_args(argv)
    args.systems = tuple(s.strip() for s in args.systems.split(",") if s.strip())
    if unknown := [s for s in args.systems if s not in ls.ALL_SYSTEMS]:
        p.error(f"unknown system(s) {unknown}; choose from {', '.join(ls.ALL_SYSTEMS)}")
    args.shapes = data.shapes_of(args.keys, args.order)
    if args.rows < APPENDS * 2:
        p.error(f"--rows must be at least {APPENDS * 2}")
    return args


@unwinds_on_sigterm
def main(argv: list[str]) -> int:
    from rich.console import Console

    from ..write.repeats import one_section
    from .report import findings, markdown, rich_tables

    args = parse(argv)
    con = Console(width=None if os.isatty(1) or "COLUMNS" in os.environ else 160)
    con.print(f"[bold]lookup benchmark[/bold] ({'; '.join(s.label for s in args.shapes)}) on {machine_line()}")
    own_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="lakeline-lookup-bench-")) if own_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    timeout = args.step_timeout or default_timeout(args.rows)
    runs: list[LookupRun] = []

    def log(m: str) -> None:
        con.print(m, markup=False, highlight=False)

    try:
        for shape in args.shapes:  # one run per shape, each with its own inputs and tables
            where = workdir if len(args.shapes) == 1 else workdir / f"{shape.keys}-{shape.order}"
            runs.append(run_benchmark(args.rows, where, timeout, args.read_keys, args.repeat, log, shape, args.systems))
    finally:
        if own_dir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    notes = {}
    for run in runs:
        for t in rich_tables(run):
            con.print(t)
        colour = "[green]" if run.consistent else "[red]"
        con.print(colour + f"consistency: {run.consistency_note}", markup=True, highlight=False)
        failed = [f"{s} {st}: {r.error}" for s, steps in run.results.items() for st, r in steps.items() if not r.ok]
        notes[id(run)] = findings(run) + failed
        for n in notes[id(run)]:
            con.print(f"[yellow]{n}[/yellow]", highlight=False)
    if args.keep:
        con.print(f"kept {workdir}")
    if args.json is not None:
        payloads = [{**asdict(run), "date": today(), "machine": machine_line()} for run in runs]
        args.json.write_text(json.dumps(payloads[0] if len(runs) == 1 else {"runs": payloads}, indent=2, default=str))
    if not args.no_docs:
        command = command_line("lookup", argv, with_postgres=False)
        bodies = [markdown(run, command, notes[id(run)]) for run in runs]
        update_section(SECTION, bodies[0] if len(runs) == 1 else one_section(runs, bodies, SUMMARY))
        con.print(f"wrote the {SECTION} section of docs/performance.md")
    missed = any(t.ok is False for run in runs for t in run.targets) or any(r.consistent is False for r in runs)
    return 1 if args.check and missed else 0


#: The columns of the section's ratio summary when it holds a run per shape.
SUMMARY = [
    (f"{s.removeprefix('lakeline-')} {step.replace('@upserted', ', after upsert')}", s, step)
    for step in ("upsert", "range@upserted", "key@upserted", "ts@upserted")
    for s in LAKELINE
]


if __name__ == "__main__":
    if "--child" in sys.argv[1:]:
        sys.exit(child_main(sys.argv[1:]))
    sys.exit(main(sys.argv[1:]))
