"""Timeline benchmark: loading a 10,000-event log and appending one event, per store.

Why these two numbers: every read and every write starts by loading the timeline (a
fresh process reads the whole active log), and every commit is at least three appends.
Targets: a fresh load of 10,000 events under 0.5 s on every store; a filesystem append
under 5 ms (median), so the log is never what makes a small write slow.

Both stores are measured in one run: the filesystem store in a temp dir, and PostgreSQL
when ``LAKELINE_BENCH_PG_URL`` or ``LAKELINE_TEST_PG_URL`` names a server (otherwise
PostgreSQL alone is skipped, and said so). The log is built with ``EventLog.append`` of
requested/inflight/completed triples with realistic payloads (a commit's metadata names
its files), because load time is dominated by decoding those payloads.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakeline.timeline.instant import Action, State
from lakeline.timeline.log import EventLog
from lakeline.timeline.storage.event_log import open_store
from lakeline.timeline.storage.event_log.protocol import TimelineStore
from lakeline.timeline.storage.filesystem import Storage
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from .report import command_line, machine, today, update_section

SECTION = "timeline-bench"
LOAD_TARGET_S = 0.5
FS_APPEND_TARGET_MS = 5.0
PG_ENV = ("LAKELINE_BENCH_PG_URL", "LAKELINE_TEST_PG_URL")


@dataclass
class Result:
    """What one store measured (``skipped`` says why it did not run)."""

    store: str
    events: int = 0
    build_s: float = 0.0
    loads_s: list[float] = field(default_factory=list)
    appends_ms: list[float] = field(default_factory=list)
    append_target_ms: float | None = None
    skipped: str | None = None
    note: str = ""

    @property
    def load_median_s(self) -> float:
        return statistics.median(self.loads_s)

    @property
    def append_median_ms(self) -> float:
        return statistics.median(self.appends_ms)

    @property
    def append_p95_ms(self) -> float:
        return percentile(self.appends_ms, 95)

    @property
    def ok(self) -> bool:
        if self.skipped:
            return True
        load_ok = self.load_median_s < LOAD_TARGET_S
        return load_ok and (self.append_target_ms is None or self.append_median_ms < self.append_target_ms)


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (no interpolation: it is a value that was measured)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * pct // 100))  # ceil without floats
    return ordered[int(rank) - 1]


def _payload(state: State, instant: int, seq: int) -> dict[str, Any]:
    """A plan or commit metadata shaped like the write path's (two files per commit)."""
    if state is State.REQUESTED:
        return {"operation": "upsert", "snapshot_seq": seq - 1, "writer": True}
    if state is State.INFLIGHT:
        return {}
    group = uuid.uuid4().hex
    files = [
        {
            "path": f"day=2026-01-0{k + 1}/{group}_{instant}_{uuid.uuid4().hex[:8]}.log.parquet",
            "partition": f"day=2026-01-0{k + 1}",
            "file_group": group,
            "kind": "log",
            "rows": 1000,
            "bytes": 65536,
            "deletes": 0,
            "key_min": instant * 1000,
            "key_max": instant * 1000 + 999,
            "inserts": False,
        }
        for k in range(2)
    ]
    return {
        "operation": "upsert",
        "snapshot_seq": instant - 1,
        "files": files,
        "replaced": {},
        "rewritten": [],
        "replaced_partitions": [],
        "stats": {"inserted": 0, "updated": 2000, "deleted": 0, "files_added": 2, "bytes_written": 131072},
    }


def _triples(n_events: int) -> Iterator[State]:
    """The states of ``n_events`` appends: requested, inflight, completed, repeated."""
    cycle = (State.REQUESTED, State.INFLIGHT, State.COMPLETED)
    for i in range(n_events):
        yield cycle[i % 3]


def append_events(log: EventLog, n_events: int, on_append: Callable[[float], None] | None = None) -> None:
    """Append ``n_events`` events as instants moving through their three states;
    ``on_append`` gets each append's duration in seconds."""
    instant: int | None = None
    for state in _triples(n_events):
        seq = log.timeline.last_seq + 1
        t0 = time.perf_counter()
        ev = log.append(
            Action.DELTA_COMMIT,
            state,
            _payload(state, instant if instant is not None else seq, seq),
            instant=None if state is State.REQUESTED else instant,
        )
        elapsed = time.perf_counter() - t0
        instant = ev.instant
        if on_append is not None:
            on_append(elapsed)


def measure(name: str, store: TimelineStore, n_events: int, runs: int, n_appends: int, progress: Progress) -> Result:
    """Build the log, then time fresh loads and single appends on it."""
    result = Result(store=name, events=n_events)
    log = EventLog(store)
    task = progress.add_task(f"{name}: building {n_events:,} events", total=n_events)
    t0 = time.perf_counter()
    append_events(log, n_events, lambda _s: progress.advance(task))
    result.build_s = time.perf_counter() - t0
    progress.update(task, description=f"{name}: built {n_events:,} events")
    loaded = 0
    for _ in range(runs):
        t0 = time.perf_counter()
        loaded = EventLog(store).refresh().last_seq + 1
        result.loads_s.append(time.perf_counter() - t0)
    if loaded != n_events:
        raise RuntimeError(f"{name}: loaded {loaded} events, expected {n_events}")
    task = progress.add_task(f"{name}: {n_appends} single appends", total=n_appends)

    def timed(seconds: float) -> None:
        result.appends_ms.append(seconds * 1000)
        progress.advance(task)

    # Appends land on the full log: what a writer sees on a table with a long timeline.
    append_events(log, n_appends, timed)
    result.events = n_events
    return result


def run_filesystem(n_events: int, runs: int, n_appends: int, progress: Progress) -> Result:
    with tempfile.TemporaryDirectory(prefix="lakeline-bench-") as tmp:
        store = open_store(Storage.for_uri(tmp), None, uuid.uuid4().hex)
        result = measure("filesystem", store, n_events, runs, n_appends, progress)
        result.append_target_ms = FS_APPEND_TARGET_MS
        result.note = f"local dir under {Path(tmp).parent}, fsync of file and dir per append"
        return result


def pg_url() -> str | None:
    return next((os.environ[k] for k in PG_ENV if os.environ.get(k)), None)


def run_postgres(url: str | None, n_events: int, runs: int, n_appends: int, progress: Progress) -> Result:
    if url is None:
        return Result(store="postgresql", skipped=f"no server: set {' or '.join(PG_ENV)}")
    try:
        import psycopg  # noqa: F401 - only to say clearly why PostgreSQL is skipped
    except ImportError:
        return Result(store="postgresql", skipped="psycopg is not installed (pip install 'lakeline[postgres]')")
    table_id = f"bench-{uuid.uuid4().hex}"
    with tempfile.TemporaryDirectory(prefix="lakeline-bench-") as tmp:
        store = open_store(Storage.for_uri(tmp), url, table_id)
        try:
            result = measure("postgresql", store, n_events, runs, n_appends, progress)
            _, rows = store.execute(
                "SELECT current_setting('server_version'), current_setting('fsync')",  # type: ignore[attr-defined]
                (),
                "reading server settings",
            )
            version, fsync = rows[0]
            result.note = f"PostgreSQL {version}, fsync={fsync}, one connection reused"
        finally:
            # A bench must not leave its rows in what may be someone's catalog.
            for sql in (
                "DELETE FROM lakeline_events WHERE table_id = %s",
                "DELETE FROM lakeline_heartbeats WHERE table_id = %s",
                "DELETE FROM lakeline_tables WHERE table_id = %s",
            ):
                store.execute(sql, (table_id,), "removing bench rows")  # type: ignore[attr-defined]
            store.close()
    return result


def results_table(results: list[Result], n_events: int) -> RichTable:
    table = RichTable(title=f"timeline: load a {n_events:,}-event log, append one event")
    for col in (
        "store",
        "events",
        "load (median)",
        "load target",
        "append median",
        "append p95",
        "append target",
        "verdict",
    ):
        table.add_column(col, justify="right" if col not in ("store", "verdict") else "left")
    for r in results:
        if r.skipped:
            table.add_row(r.store, "-", "-", "-", "-", "-", "-", "[yellow]skipped[/yellow]")
            continue
        target = f"< {r.append_target_ms:g} ms" if r.append_target_ms else "-"
        verdict = "[green]meets targets[/green]" if r.ok else "[red]MISSES a target[/red]"
        table.add_row(
            r.store,
            f"{r.events:,}",
            f"{r.load_median_s * 1000:.0f} ms",
            f"< {LOAD_TARGET_S * 1000:.0f} ms",
            f"{r.append_median_ms:.2f} ms",
            f"{r.append_p95_ms:.2f} ms",
            target,
            verdict,
        )
    return table


def markdown(results: list[Result], runs: int, n_appends: int, command: str) -> str:
    lines = [
        "## Timeline: load and append",
        "",
        f"Measured {today()} on {machine()}.",
        "",
        f"Command: `{command}`",
        "",
        (
            f"| store | events | load, median of {runs} (min-max) | target | append median | append p95 | target "
            "| verdict |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        if r.skipped:
            lines.append(f"| {r.store} | skipped: {r.skipped} | | | | | | |")
            continue
        target = f"< {r.append_target_ms:g} ms" if r.append_target_ms else "-"
        spread = f"({min(r.loads_s) * 1000:.0f}-{max(r.loads_s) * 1000:.0f})"
        verdict = "meets targets" if r.ok else "**misses a target**"
        lines.append(
            f"| {r.store} | {r.events:,} | {r.load_median_s * 1000:.0f} ms {spread} "
            f"| < {LOAD_TARGET_S * 1000:.0f} ms | {r.append_median_ms:.2f} ms | {r.append_p95_ms:.2f} ms "
            f"| {target} | {verdict} |"
        )
    lines += [
        "",
        (
            "*Load* is a fresh `EventLog(store).refresh()` of the whole log (a new process opening "
            "the table reads this much); *append* is one `EventLog.append` on that full log "
            f"({n_appends} appends of requested/inflight/completed triples, each timed alone). "
            "Events carry write-path-shaped payloads (a commit's metadata names two files)."
        ),
        "",
    ]
    lines += [f"- {r.store}: {r.note}; building the log took {r.build_s:.1f} s" for r in results if not r.skipped]
    return "\n".join(lines)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench timeline", description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=10_000, help="events in the log (default 10000)")
    p.add_argument("--runs", type=int, default=5, help="fresh loads to take the median of (default 5)")
    p.add_argument("--appends", type=int, default=300, help="single appends to time (default 300)")
    p.add_argument("--no-docs", action="store_true", help="do not update docs/performance.md")
    p.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse(argv)
    # Piped (make, CI logs): rich would assume 80 columns and fold the table.
    con = Console(width=None if os.isatty(1) or "COLUMNS" in os.environ else 140)
    url = pg_url()
    con.print(
        f"[bold]timeline benchmark[/bold]: {args.events:,} events, {args.runs} loads, "
        f"{args.appends} appends, on {machine()}"
    )
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=con
    ) as progress:
        results = [
            run_filesystem(args.events, args.runs, args.appends, progress),
            run_postgres(url, args.events, args.runs, args.appends, progress),
        ]
    con.print(results_table(results, args.events))
    for r in results:
        if r.skipped:
            con.print(f"[yellow]{r.store} skipped[/yellow]: {r.skipped}")
    if not args.no_docs:
        command = command_line("timeline", argv, with_postgres=url is not None)
        update_section(SECTION, markdown(results, args.runs, args.appends, command))
        con.print(f"wrote the {SECTION} section of docs/performance.md")
    return 1 if args.check and not all(r.ok for r in results) else 0
