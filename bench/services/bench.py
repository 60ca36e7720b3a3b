"""Services benchmark (issue 6, table services): what compaction costs against the I/O it
cannot avoid, what z-order clustering buys a key read against deltalake's ``z_order``,
and what merge-on-read logs cost a read until compaction folds them.

One run, the data of :mod:`bench.data` (the write benchmark's inputs): ``--rows`` rows
(2M by default) in 10 appends.

1. **Compaction throughput.** A merge-on-read table gets the 10 appends (10 file
   groups), then :data:`UPDATE_ROUNDS` rounds of updates of ``rows / 20`` keys drawn
   over the whole key space, so every group has 5 logs. ``t.services.compact()`` is
   timed against a plain pyarrow job that reads the same base and log files
   (``pq.read_table``) and writes as many rows per group (``pq.write_table``, Snappy),
   run once before and once after the compaction; ratio = plain time / compaction time
   (target >= 0.7: compaction may spend at most ~43% over the bare I/O on merging,
   planning and committing).
2. **Reads after z-order clustering.** The same rows, shuffled, appended to a lakeline
   copy-on-write table and a deltalake table; lakeline builds a ``column_stats`` index
   and runs ``t.services.cluster(sort_by=["key", "value"], strategy="zorder")``,
   deltalake ``optimize.z_order(["key", "value"])``, both cutting files at the same
   target size (table bytes / 16). Then a range query on both columns and the 1,000-key
   read: files read after pruning and the median time of ``--repeat`` runs (target, as
   in the lookup benchmark: no more files than deltalake, <= 1.0x its time).
3. **Merge-on-read read cost.** A full-table read and a point read of the table of (1)
   with its 5 logs per group, and again after the compaction.

Every step runs in a fresh process (the write benchmark's ``run_step``/``child_main``;
the child side is :mod:`bench.services.steps`), so times include opening the table and
no step inherits another's caches; peak memory is the process's ``ru_maxrss``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..lookup.bench import median_of
from ..report import add_run_options, command_line, today, unwinds_on_sigterm, update_section
from ..write.bench import APPENDS, READ_KEYS, child_main, prepare_inputs, run_step
from ..write.environment import machine_line, source_state
from ..write.report import StepResult, Target, _fmt_b, _ratio
from . import steps as ss
from .report import findings, markdown

SECTION = "services-bench"
RESULT_MARK = "SERVICES_BENCH_RESULT "
DEFAULT_ROWS = 2_000_000
UPDATE_ROUNDS = 5
UPDATE_SHARE = 20  # each round updates rows / 20 keys
Z_FILES = 16  # the z-order target file size is the table's bytes / this
REPEAT = 5

# Targets: issue 6 for compaction; the lookup benchmark's read target for z-order.
COMPACTION_RATIO = 0.7
ZREAD_RATIO = 1.0


@dataclass
class ServicesRun:
    spec: dict[str, Any]
    results: dict[str, dict[str, StepResult]] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    consistent: bool | None = None
    consistency_note: str = ""
    total_s: float = 0.0
    load: tuple[float, float] | None = None
    source: str = ""

    def get(self, system: str, step: str) -> StepResult | None:
        return self.results.get(system, {}).get(step)

    def seconds(self, system: str, step: str) -> float | None:
        r = self.get(system, step)
        return r.seconds if r is not None and r.ok else None


def prepare(workdir: Path, rows: int) -> dict[str, Any]:
    """The write benchmark's appends, plus the update rounds, the shuffled copy of the
    appended rows for the z-order tables, and the queries; saved as ``spec.json``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from .. import data

    spec = prepare_inputs(workdir, rows, APPENDS, READ_KEYS)
    inputs, total, per = workdir / "input", spec["rows"], spec["rows_per_append"]
    appends = [inputs / f"append_{i:02d}.parquet" for i in range(APPENDS)]
    update_rows = max(1, total // UPDATE_SHARE)
    for r in range(UPDATE_ROUNDS):
        pq.write_table(data.update_batch(total, update_rows, r), inputs / f"update_{r}.parquet")
    every = data.shuffled(pa.concat_tables(pq.read_table(p) for p in appends))
    for i in range(APPENDS):
        pq.write_table(every.slice(i * per, per), inputs / f"z_{i:02d}.parquet")
    lo, hi = data.key(total // 4), data.key(total // 2)
    point = data.key(total // 3)
    spec.update(
        update_rounds=UPDATE_ROUNDS,
        update_rows=update_rows,
        z_target_bytes=max(1024, sum(p.stat().st_size for p in appends) // Z_FILES),
        point_query={"kind": "eq", "column": "key", "value": point, "text": f"key == '{point}'"},
        z_queries={
            "zrange": {
                "kind": "and",
                "parts": [
                    {"kind": "range", "column": "key", "a": lo, "b": hi},
                    {"kind": "range", "column": "value", "a": 0.25, "b": 0.5},
                ],
                "text": f"key >= '{lo}' AND key < '{hi}' AND value >= 0.25 AND value < 0.5",
            },
            "zkeys": {
                "kind": "range",
                "column": "key",
                "a": spec["read_a"],
                "b": spec["read_b"],
                "text": f"key >= '{spec['read_a']}' AND key < '{spec['read_b']}'",
            },
        },
    )
    (workdir / "spec.json").write_text(json.dumps(spec, indent=2))
    return spec


def run_benchmark(
    rows: int, workdir: Path, step_timeout: float, repeat: int = REPEAT, log: Callable[[str], None] = print
) -> ServicesRun:
    """Build the tables, then every step, each in its own process; evaluate."""
    t_start, load_start = time.perf_counter(), os.getloadavg()[0]
    # The data is made in a process of its own: a child's ru_maxrss starts at its parent's
    # resident size (Linux keeps it across fork and exec), so a parent holding the
    # generated rows would inflate every step's peak memory.
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        run = ServicesRun(spec=pool.submit(prepare, workdir, rows).result())
    run.spec["repeat"] = repeat
    log(
        f"data: {run.spec['rows']:,} rows in {APPENDS} appends; {UPDATE_ROUNDS} update rounds of "
        f"{run.spec['update_rows']:,}; z-order target file size {_fmt_b(run.spec['z_target_bytes'])}"
    )

    def step(system: str, name: str) -> StepResult:
        return run_step(system, name, workdir, step_timeout, module="bench.services.bench", mark=RESULT_MARK)

    def record(res: StepResult) -> StepResult:
        run.results.setdefault(res.system, {})[res.step] = res
        if not res.ok:
            log(f"{res.system:13} {res.step:15} FAILED: {res.error}")
            return res
        every = res.detail.get("seconds_all")
        times = f" (of {', '.join(f'{s:.2f}' for s in every)})" if every and len(every) > 1 else ""
        extra = f", {res.files_read} files, {res.rows_read:,} rows" if res.rows_read is not None else ""
        log(f"{res.system:13} {res.step:15} {res.seconds:8.2f} s{times}  peak {_fmt_b(res.peak_rss):>9}{extra}")
        return res

    def repeated(pairs: list[tuple[str, str]]) -> None:
        # Repeats go round the steps, so each step's runs share the machine's load at
        # that moment with the others'.
        tries: dict[tuple[str, str], list[StepResult]] = {}
        for _ in range(repeat):
            for system, name in pairs:
                tries.setdefault((system, name), []).append(step(system, name))
        for results in tries.values():
            record(median_of(results))

    if record(step(ss.MOR, "build")).ok:
        repeated([(ss.MOR, f"{r}@logs") for r in ss.MOR_READS])
        # The plain job runs before and after the compaction (it reads the files of the
        # slices saved by the build, which the compaction leaves in place), so the two
        # bracket whatever the machine's load did meanwhile.
        record(step(ss.PLAIN, "plain@before"))
        if record(step(ss.MOR, "compact")).ok:
            record(step(ss.PLAIN, "plain@after"))
            repeated([(ss.MOR, f"{r}@compacted") for r in ss.MOR_READS])
    built = [s for s in ss.ZSYSTEMS if record(step(s, "zbuild")).ok]
    repeated([(s, q) for q in ss.ZQUERIES for s in built])
    run.total_s, run.load = time.perf_counter() - t_start, (load_start, os.getloadavg()[0])
    run.source = source_state(("table", "timeline", "config", "indexes", "services"))
    evaluate(run)
    return run


def plain_seconds(run: ServicesRun) -> float | None:
    """The plain job's time: the mean of its runs before and after the compaction."""
    done = [s for st in ("plain@before", "plain@after") if (s := run.seconds(ss.PLAIN, st)) is not None]
    return statistics.mean(done) if done else None


def evaluate(run: ServicesRun) -> None:
    """Targets (PASS/FAIL) and the check that every read returned the rows it must."""
    plain, comp = plain_seconds(run), run.seconds(ss.MOR, "compact")
    ratio = _ratio(plain, comp)
    run.targets = [
        Target(
            "compaction throughput vs plain pyarrow read + write",
            "n/a" if ratio is None else f"{ratio:.2f} ({plain:.2f} s plain vs {comp:.2f} s compaction)",
            f">= {COMPACTION_RATIO:g}",
            None if ratio is None else ratio >= COMPACTION_RATIO,
        )
    ]
    for q, label in (("zrange", "range on key and value"), ("zkeys", f"{READ_KEYS:,}-key read")):
        mine, base = run.get(ss.COW, q), run.get(ss.DELTA, q)
        ok = mine is not None and mine.ok and base is not None and base.ok
        r = _ratio(mine.seconds, base.seconds) if ok else None  # type: ignore[union-attr]
        measured = (
            "n/a"
            if r is None
            else (
                f"{mine.files_read} vs {base.files_read} files, {r:.2f}x "  # type: ignore[union-attr]
                f"({mine.seconds * 1000:.0f} vs {base.seconds * 1000:.0f} ms)"
            )
        )  # type: ignore[union-attr]
        run.targets.append(
            Target(
                f"after z-order: {label}, lakeline vs deltalake",
                measured,
                f"files <= deltalake, <= {ZREAD_RATIO:g}x time",
                None if r is None else mine.files_read <= base.files_read and r <= ZREAD_RATIO,
            )
        )  # type: ignore[union-attr]
    consistency(run)


def consistency(run: ServicesRun) -> None:
    """Compaction and the plain job wrote every row; the merge-on-read reads return the
    same rows before and after compaction; lakeline and deltalake return the same rows
    for both z-order queries; repeats of a read agree with each other."""
    rows, bad = run.spec["rows"], []
    for system, st in ((ss.MOR, "compact"), (ss.PLAIN, "plain@before"), (ss.PLAIN, "plain@after")):
        r = run.get(system, st)
        if r is None or not r.ok or r.rows_total != rows:
            bad.append(f"{system} {st}: rows written {None if r is None else r.rows_total}, expected {rows:,}")
    want = {"full": rows, "point": 1, "zkeys": run.spec["read_keys"]}
    pairs = [(ss.MOR, [f"{q}@{p}" for p in ss.PHASES], q) for q in ss.MOR_READS]
    pairs += [(None, [q], q) for q in ss.ZQUERIES]
    for system, steps, q in pairs:
        got = {(s, st): run.get(s, st) for st in steps for s in ([system] if system else ss.ZSYSTEMS)}
        done = {k: r for k, r in got.items() if r is not None and r.ok}
        if len(done) < len(got):
            bad.append(f"{q}: not run or failed on {sorted(set(got) - set(done))}")
        if len({r.read_digest for r in done.values()}) > 1:
            bad.append(f"{q}: rows differ { ({f'{s} {st}': r.read_digest for (s, st), r in done.items()}) }")
        if any(r.rows_read != want.get(q, r.rows_read) or not r.rows_read for r in done.values()):
            bad.append(f"{q}: rows {[r.rows_read for r in done.values()]}, expected {want.get(q, '> 0')}")
        if any(r.detail.get("stable") is False for r in done.values()):
            bad.append(f"{q}: files read or rows changed between repeats")
        if any(r.distinct_keys not in (None, r.rows_read) for r in done.values()):
            bad.append(f"{q}: a key appears twice")
    run.consistent = not bad
    if bad:
        run.consistency_note = "MISMATCH: " + "; ".join(bad)
        return
    digest = {q: run.get(ss.DELTA, q).read_digest for q in ss.ZQUERIES}  # type: ignore[union-attr]
    run.consistency_note = (
        f"compaction and the plain job wrote {rows:,} rows; the full read ({rows:,} rows, fingerprint "
        f"{run.get(ss.MOR, 'full@logs').read_digest}) and the point read return the same rows with logs and "  # type: ignore[union-attr]
        f"after compaction; lakeline and deltalake return the same rows after z-order (range "
        f"{run.get(ss.DELTA, 'zrange').rows_read:,} rows, digest {digest['zrange']}; "  # type: ignore[union-attr]
        f"{READ_KEYS:,}-key read digest {digest['zkeys']})"
    )


# --------------------------------------------------------------------------------------
# Command line.


def default_timeout(rows: int) -> float:
    """Per step: the longest (the z-order build) takes well under a minute at 2M rows."""
    return max(120.0, 300.0 * rows / DEFAULT_ROWS)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench services", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--rows",
        type=int,
        default=DEFAULT_ROWS,
        help=f"rows in every table, in {APPENDS} appends (default {DEFAULT_ROWS:,})",
    )
    add_run_options(p, repeat=REPEAT)
    args = p.parse_args(argv)
    if args.rows < APPENDS * UPDATE_SHARE:
        p.error(f"--rows must be at least {APPENDS * UPDATE_SHARE}")
    return args


@unwinds_on_sigterm
def main(argv: list[str]) -> int:
    args = parse(argv)
    print(f"services benchmark on {machine_line()}", flush=True)
    own_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="lakeline-services-bench-")) if own_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        run = run_benchmark(
            args.rows,
            workdir,
            args.step_timeout or default_timeout(args.rows),
            args.repeat,
            log=lambda m: print(m, flush=True),
        )
    finally:
        if own_dir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    notes = findings(run) + [
        f"{s} {st}: {r.error}" for s, steps in run.results.items() for st, r in steps.items() if not r.ok
    ]
    md = markdown(run, command_line("services", argv, with_postgres=False), notes)
    print("\n" + md)
    if args.keep:
        print(f"kept {workdir}")
    if args.json is not None:
        from dataclasses import asdict

        args.json.write_text(
            json.dumps({**asdict(run), "date": today(), "machine": machine_line()}, indent=2, default=str)
        )
    if not args.no_docs:
        update_section(SECTION, md)
        print(f"wrote the {SECTION} section of docs/performance.md")
    missed = any(t.ok is False for t in run.targets) or run.consistent is False
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    if "--child" in sys.argv[1:]:
        sys.exit(child_main(sys.argv[1:], run=ss.run_child, mark=RESULT_MARK))
    sys.exit(main(sys.argv[1:]))
