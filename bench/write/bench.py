"""Write benchmark: appends, an upsert and a 1,000-key read, lakeline against peers.

One run, the same data for every system (:mod:`bench.data`): ``--rows`` rows (5M by
default) written as 10 appends, then an upsert of a tenth as many rows (half updates of
keys spread uniformly over the whole key space with a larger ``ts``, half new keys), then
a read of 1,000 consecutive keys (``key >= a AND key < b``). Systems: lakeline
copy-on-write and merge-on-read (``Table.insert``/``upsert``/``scan``), deltalake
(``write_deltalake(mode="append")``, ``DeltaTable.merge(...)``, its own
``DeltaTable.scan(predicate=...)``) and pyiceberg (SQL catalog on sqlite; ``append``,
``upsert``, ``scan``).

The data's shape (issue 30, :class:`bench.data.Shape`): ``--keys sequential|uuid`` and
``--order random|sorted``; by default sequential keys with every batch (the appends and
the upsert) in random row order, as users' data arrives. ``--order sorted`` reproduces
the numbers measured before, which hold for sorted input only; the report states the
shape it ran with.

Every system/step runs in a fresh subprocess, so its peak memory is that process's
``ru_maxrss`` (which includes the interpreter and the imported libraries) and no step
inherits caches from another. Times cover opening the table and the operation, not
reading the input batch from its Parquet file. *Bytes written* is the size of every file
under the system's folder that is new or changed after the step (data, logs, metadata,
catalog), so files a step writes and deletes again are not counted.

Targets (lakeline against deltalake measured in the same run): the 10 appends within
1.2x; the merge-on-read upsert within 1.0x and writing at most 2x the upsert batch's own
Parquet size; the copy-on-write upsert within 1.5x; no step above 2 GiB of memory.

``--store s3`` runs it on an object store (:mod:`.object_store`): one SeaweedFS for the
run, every table at a fresh ``s3://`` prefix, issue 27's targets (:mod:`.s3_report`),
and the same steps on local disk in the same run for comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import data
from ..data import Shape, prepare_inputs
from ..report import command_line, today, unwinds_on_sigterm, update_section
from . import s3_report
from .child import child_main, print_profile, run_step
from .environment import machine_line, source_state, versions
from .object_store import S3_SYSTEMS, StoreConfig, local_workdir, prime_store_verdict, server_version, start_server
from .repeats import keep_median_run, one_section, seconds_of
from .report import MiB, Run, StepResult, _fmt_b, evaluate, markdown, rich_tables
from .systems import DEFAULT_SYSTEMS, LAKELINE, SYSTEMS, TABLE_SUFFIX, method_notes

if TYPE_CHECKING:
    from tests.seaweedfs import SeaweedServer

SECTION = "write-bench"
STEPS = ("append", "upsert", "read")
DEFAULT_ROWS = 5_000_000
APPENDS = 10
READ_KEYS = 1_000


# --------------------------------------------------------------------------------------
# Parent side: data, children, report.


def run_benchmark(
    rows: int,
    systems: list[str],
    workdir: Path,
    step_timeout: float,
    read_keys: int = READ_KEYS,
    appends: int = APPENDS,
    profile: tuple[str, str] | None = None,
    log: Callable[[str], None] = print,
    spec: dict[str, Any] | None = None,
    append_runs: int = 1,
    shape: Shape = data.DEFAULT,
    delta_read: str = "scan",
    read_runs: int = 1,
) -> Run:
    """Generate the data (unless ``spec`` says it is in ``workdir`` already), run every
    system/step in its own process, evaluate. ``append_runs`` > 1 runs the append step
    that often per system (each on a table of its own, the systems in turns) and keeps
    the median run's times: ten appends take a second or two on the store, where one
    run says little. ``read_runs`` does the same for the read (on the one table: a read
    changes nothing), which takes well under a second."""
    t_start = time.perf_counter()
    load_start = os.getloadavg()[0]
    if spec is None:
        spec = data.in_fresh_process(prepare_inputs, workdir, rows, appends, read_keys, shape, delta_read)
        log(
            f"data ({shape.label}): {spec['rows']:,} rows in {appends} batches, upsert {spec['upsert_rows']:,} rows "
            f"({spec['upsert_bytes'] / MiB:.1f} MiB Parquet), read {spec['read_a']} <= key < {spec['read_b']} "
            f"({time.perf_counter() - t_start:.1f} s to generate)"
        )
    run = Run(
        rows=spec["rows"],
        appends=appends,
        upsert_rows=spec["upsert_rows"],
        input_upsert_bytes=spec["upsert_bytes"],
        read_range=(spec["read_a"], spec["read_b"]),
        read_keys=spec["read_keys"],
        results={s: {} for s in systems},
        shape={"keys": spec.get("keys", "sequential"), "order": spec.get("order", "sorted")},
        delta_read=spec.get("delta_read", "scan"),
    )
    # Step by step rather than system by system: the systems' runs of one step follow
    # each other closely, so they share whatever else the machine is doing at the time.
    for step in STEPS:
        earlier: dict[str, list[StepResult]] = {s: [] for s in systems}
        runs_of_step = {"append": append_runs, "read": read_runs}.get(step, 1)
        for rep in range(runs_of_step - 1):
            for system in _turn(systems, rep):
                if step == "read" and not all(r.ok for r in run.results[system].values()):
                    continue
                env = {TABLE_SUFFIX: f"-run{rep}"} if step == "append" else None
                res = run_step(system, step, workdir, step_timeout, extra_env=env)
                earlier[system].append(res)
                log(f"{system:13} {step:7} run {rep + 1} of {runs_of_step}: " + seconds_of(res))
                if env is not None:
                    # Gone before the next run: its files would still be in the page cache
                    # waiting to be written back (up to 2 GB dirty here after a few runs),
                    # which slowed each later run of a system by the bytes it wrote, not
                    # by its own work (a record-indexed table's appends: 2.0 s, then 2.5,
                    # 2.9, 3.1 s, deltalake's flat).
                    shutil.rmtree(workdir / "tables" / f"{system}-run{rep}", ignore_errors=True)
        for system in _turn(systems, runs_of_step - 1):
            if step != "append" and not run.results[system].get("append", StepResult(system, step, ok=True)).ok:
                continue  # nothing to upsert into or read
            prof = None
            if profile is not None and profile == (system, step):
                prof = workdir / f"profile-{system}-{step}.prof"
            res = run_step(system, step, workdir, step_timeout, prof)
            keep_median_run(res, earlier[system])
            run.results[system][step] = res
            if res.ok:
                extra = f", {res.files_read} files read" if step == "read" else ""
                log(
                    f"{system:13} {step:7} {res.seconds:8.2f} s  peak {_fmt_b(res.peak_rss):>9}  "
                    f"wrote {_fmt_b(res.bytes_written):>10}{extra}  ({res.wall_s:.1f} s with startup)"
                )
            else:
                log(f"{system:13} {step:7} FAILED: {res.error}")
            if prof is not None and prof.exists():
                log(f"profile written to {prof}")
    run.total_s = time.perf_counter() - t_start
    run.load = (load_start, os.getloadavg()[0])
    run.source = source_state()
    evaluate(run)
    return run


def _turn(systems: list[str], rep: int) -> list[str]:
    """``systems`` in the order of repetition ``rep``: rotated, so each system goes first
    in one repetition. The first step measured on a fresh store also pays its warm-up
    (SeaweedFS grows its volumes on the first writes): on the store lakeline-cow, always
    first, had its first append run at 2.0 s where its others took 1.6-1.7 s."""
    k = rep % len(systems) if systems else 0
    return systems[k:] + systems[:k]


def default_timeout(rows: int) -> float:
    """Per step. lakeline and deltalake take well under a minute per step at 5M rows;
    pyiceberg's upsert took about 260 s on a loaded 2-core machine, and is the only step
    this is likely to cut off. Keeps a full run under 15 minutes even then."""
    return max(120.0, 420.0 * rows / DEFAULT_ROWS)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench write", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_ROWS,
        help=f"rows appended in total, in {APPENDS} appends (default {DEFAULT_ROWS:,}); the upsert is a tenth of that",
    )
    p.add_argument(
        "--systems",
        default=None,
        help=f"comma-separated subset of {','.join(SYSTEMS)} (default: {','.join(DEFAULT_SYSTEMS)}; "
        f"on s3: {','.join(S3_SYSTEMS)}); -ri: created with index.record-index",
    )
    p.add_argument(
        "--store",
        choices=("local", "s3"),
        default="local",
        help="local disk, or s3: one SeaweedFS on loopback for the run, tables at fresh s3:// prefixes",
    )
    p.add_argument("--no-local", action="store_true", help="with --store s3: skip the same steps on local disk")
    p.add_argument(
        "--append-runs",
        type=int,
        default=None,
        help="runs of the append step per system, the median kept (default: 3 on s3, 1 locally)",
    )
    p.add_argument(
        "--read-runs",
        type=int,
        default=None,
        help="runs of the read step per system, the median kept (default: 3 locally, 1 on s3)",
    )
    p.add_argument("--read-keys", type=int, default=READ_KEYS, help="consecutive keys read (default 1000)")
    data.add_shape_options(p)
    p.add_argument(
        "--step-timeout",
        type=float,
        default=None,
        help="seconds one system/step may take before it is killed (default scales with --rows)",
    )
    p.add_argument("--workdir", type=Path, default=None, help="where tables go (default: a temp dir, removed)")
    p.add_argument("--keep", action="store_true", help="keep the temp dir (tables, inputs, profiles)")
    p.add_argument(
        "--profile",
        metavar="SYSTEM:STEP",
        default=None,
        help="run that step under cProfile and print where its time goes (implies --keep); "
        "cProfile sees the calling thread only, so work the engine runs in its "
        "thread pool shows as waiting: for those, py-spy record on the child",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the raw results as JSON here")
    p.add_argument("--no-docs", action="store_true", help="do not update docs/performance.md")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed or systems disagree")
    args = p.parse_args(argv)
    allowed = S3_SYSTEMS if args.store == "s3" else SYSTEMS
    default = S3_SYSTEMS if args.store == "s3" else DEFAULT_SYSTEMS
    args.systems = [s.strip() for s in (args.systems or ",".join(default)).split(",") if s.strip()]
    unknown = [s for s in args.systems if s not in allowed]
    if unknown:
        p.error(f"unknown system(s) {unknown} for --store {args.store}; choose from {', '.join(allowed)}")
    # On the store the shape stays the one its report states (sequential, sorted) and
    # deltalake is read through to_pyarrow_dataset, as that report says.
    args.shapes = data.shapes_of(args.keys, args.order, data.SORTED_SEQUENTIAL if args.store == "s3" else data.DEFAULT)
    if args.store == "s3" and args.shapes != [data.SORTED_SEQUENTIAL]:
        p.error("--store s3 measures sequential keys in sorted batches only (its report says so)")
    args.delta_read = "dataset" if args.store == "s3" else "scan"
    if args.append_runs is None:
        args.append_runs = 3 if args.store == "s3" else 1
    if args.read_runs is None:
        args.read_runs = 1 if args.store == "s3" else 3
    if args.append_runs < 1 or args.read_runs < 1:
        p.error("--append-runs and --read-runs must be at least 1")
    if args.rows < APPENDS * 2:
        p.error(f"--rows must be at least {APPENDS * 2}")
    if args.profile is not None:
        system, _, step = args.profile.partition(":")
        if system not in SYSTEMS or step not in STEPS:
            p.error(f"--profile takes SYSTEM:STEP, e.g. lakeline-mor:upsert (steps: {', '.join(STEPS)})")
        args.profile = (system, step)
        args.keep = True
        if len(args.shapes) > 1:
            p.error("--profile takes one data shape")
    return args


@unwinds_on_sigterm
def main(argv: list[str], server: SeaweedServer | None = None) -> int:
    """Run the benchmark; with ``--store s3`` on ``server`` (a running SeaweedFS, as the
    tests' session has one) or on one started for the run and stopped after."""
    from rich.console import Console

    args = parse(argv)
    t_start = time.perf_counter()
    con = Console(width=None if os.isatty(1) or "COLUMNS" in os.environ else 160)
    shapes = "; ".join(sh.label for sh in args.shapes)
    con.print(f"[bold]write benchmark[/bold] ({shapes}) on {machine_line()}; {versions()}")
    own_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="lakeline-write-bench-")) if own_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    timeout = args.step_timeout or default_timeout(args.rows)
    on_store = args.store == "s3"
    started: SeaweedServer | None = None
    local: Run | None = None
    probe_s: float | None = None
    cache_dir = os.environ.get("LAKELINE_CACHE_DIR")  # prime_store_verdict points it at the run

    def log(m: str) -> None:
        con.print(m, markup=False, highlight=False)

    runs: list[Run] = []
    try:
        if on_store:
            if server is None:
                server = started = start_server()
            config = StoreConfig.on(server)
            config.save(workdir)
            log(f"store: SeaweedFS {server_version()} at {server.endpoint}, bucket {server.bucket}")
            # The conformance probe, once for the run as for a user's first table on the
            # bucket; the children's tables are created on its remembered verdict.
            probe_s = prime_store_verdict(config, workdir)
            log(f"lakeline's conformance probe of the store: {probe_s:.2f} s (once; the verdict is remembered)")
        else:
            StoreConfig.forget(workdir)  # a reused --workdir of an earlier run on the store
        for shape in args.shapes:  # one run per shape, each with its own inputs and tables
            where = workdir if len(args.shapes) == 1 else workdir / f"{shape.keys}-{shape.order}"
            where.mkdir(parents=True, exist_ok=True)
            runs.append(
                run_benchmark(
                    args.rows,
                    args.systems,
                    where,
                    timeout,
                    args.read_keys,
                    profile=args.profile,
                    log=log,
                    append_runs=args.append_runs,
                    shape=shape,
                    delta_read=args.delta_read,
                    read_runs=args.read_runs,
                )
            )
        run = runs[0]
        run.probe_s = probe_s
        if on_store and not args.no_local:
            log("the same steps on local disk:")
            spec = json.loads((workdir / "spec.json").read_text())
            local = run_benchmark(
                args.rows, args.systems, local_workdir(workdir), timeout, args.read_keys, log=log, spec=spec
            )
    finally:
        if cache_dir is None:
            os.environ.pop("LAKELINE_CACHE_DIR", None)
        else:
            os.environ["LAKELINE_CACHE_DIR"] = cache_dir
        if started is not None:
            started.stop()
        if own_dir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    if on_store:
        run.targets = s3_report.s3_targets(run)
        run.total_s = time.perf_counter() - t_start
        run.load = (run.load[0] if run.load else os.getloadavg()[0], os.getloadavg()[0])
    notes = {id(r): failures(r, local) for r in runs}
    for r in runs:
        for t in s3_report.rich_tables(r, local) if on_store else rich_tables(r):
            con.print(t)
        colour = "[green]" if r.consistent else "[red]"
        con.print(colour + f"consistency: {r.consistency_note}", markup=True, highlight=False)
        for n in notes[id(r)]:
            con.print(f"[yellow]{n}[/yellow]", highlight=False)
    if args.profile is not None:
        prof = workdir / f"profile-{args.profile[0]}-{args.profile[1]}.prof"
        if prof.exists():
            print_profile(prof, con)
    if args.keep:
        con.print(f"kept {workdir}" + (" (the store's tables went with its server)" if started else ""))
    if args.json is not None:
        payloads = []
        for r in runs:
            payload = asdict(r)
            payload["date"], payload["machine"], payload["store"] = today(), machine_line(), args.store
            if local is not None:
                payload["local"] = asdict(local)
            payloads.append(payload)
        out = payloads[0] if len(payloads) == 1 else {"runs": payloads}
        args.json.write_text(json.dumps(out, indent=2, default=str))
    if not args.no_docs:
        command = command_line("write", argv, with_postgres=False)
        if on_store:
            update_section(s3_report.SECTION, s3_report.markdown(run, local, command, server_version(), notes[id(run)]))
        else:
            bodies = [markdown(r, command, method_notes(r) + notes[id(r)]) for r in runs]
            update_section(SECTION, bodies[0] if len(runs) == 1 else one_section(runs, bodies, SUMMARY))
        con.print(f"wrote the {s3_report.SECTION if on_store else SECTION} section of docs/performance.md")
    missed = any(t.ok is False for r in runs for t in r.targets) or any(r.consistent is False for r in runs)
    return 1 if args.check and missed else 0


#: The columns of the section's ratio summary when it holds a run per shape.
SUMMARY = [(f"{s.removeprefix('lakeline-')} {step}", s, step) for step in STEPS for s in LAKELINE]


def failures(run: Run, local: Run | None) -> list[str]:
    """A note for every step that failed or did not run, on the store and on local disk."""
    notes = []
    for where, r_ in (("", run), ("on local disk: ", local)):
        for s, steps in (r_.results if r_ is not None else {}).items():
            for st, r in steps.items():
                if not r.ok:
                    notes.append(f"{where}{s} {st}: {r.error}")
            if len(steps) < len(STEPS):
                notes.append(f"{where}{s}: later steps not run (its append failed)")
    return notes


if __name__ == "__main__":
    if "--child" in sys.argv[1:]:
        sys.exit(child_main(sys.argv[1:]))
    sys.exit(main(sys.argv[1:]))
