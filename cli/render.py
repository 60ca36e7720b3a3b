"""Rendering for the CLI: rich tables and progress bars for people, JSON for scripts.

Commands build plain data (``Instant``s, dicts, Arrow tables) and hand it here, so
what a listing shows and what its ``--json`` prints come from the same values.
"""

from __future__ import annotations

import json
import os
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import click
import pyarrow as pa
from rich.console import Console
from rich.json import JSON
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table as RichTable

from ..timeline.instant import Action, Event, Instant, State
from ..timeline.plans import SchemaChangePlan, WriteRequest

#: Longest summary shown in a listing; ``inspect`` shows everything.
SUMMARY_WIDTH = 72

_STATE_STYLE = {State.REQUESTED: "yellow", State.INFLIGHT: "cyan", State.COMPLETED: "green", State.ROLLED_BACK: "red"}


#: Width used when stdout is not a terminal (piped to a file, a pager, ``make``): rich
#: would fall back to 80 columns and squeeze the summary column away.
PIPE_WIDTH = 160


def console() -> Console:
    """A console on the current stdout (looked up per call so test runners that swap
    ``sys.stdout`` capture the output)."""
    width = None
    if not sys.stdout.isatty() and "COLUMNS" not in os.environ:
        width = PIPE_WIDTH
    return Console(highlight=False, width=width)


def print_json(value: Any) -> None:
    """Print ``value`` as indented JSON on stdout, with nothing else around it."""
    click.echo(json.dumps(value, indent=2, default=str))


def fmt_time(when: datetime | None) -> str:
    """UTC time (titles say so) to the millisecond: precise enough to order events, short enough to read."""
    if when is None:
        return "-"
    return when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def events_by_instant(events: Iterable[Event]) -> dict[int, list[Event]]:
    """The events of each instant, in log order."""
    out: dict[int, list[Event]] = defaultdict(list)
    for ev in events:
        out[ev.instant].append(ev)
    return out


#: Counts people look for first; any other count follows in its stored order.
_COUNT_ORDER = ("inserted", "updated", "deleted", "rolled_back", "files_added", "files_deleted", "bytes_written")


def _counts(stats: Mapping[str, Any]) -> str:
    # Zero counts are noise in a one-line summary; lists (e.g. instant ids) are shown by inspect.
    keys = [k for k in _COUNT_ORDER if k in stats] + [k for k in stats if k not in _COUNT_ORDER]
    return " ".join(
        f"{k}={stats[k]}" for k in keys if isinstance(stats[k], int) and not isinstance(stats[k], bool) and stats[k]
    )


def _short(text: str, width: int = SUMMARY_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def summarize(instant: Instant, events: Sequence[Event] = ()) -> str:
    """A one-line description of what an instant did or plans to do."""
    plan, meta = dict(instant.plan), dict(instant.metadata)
    write = WriteRequest.from_dict(plan)
    if instant.state is State.ROLLED_BACK:
        reason = next((e.payload.get("reason") for e in reversed(events) if e.state is State.ROLLED_BACK), None)
        what = write.operation or instant.action
        return _short(f"{what}; rolled back" + (f": {reason}" if reason else ""))
    if instant.action is Action.SCHEMA:
        change = SchemaChangePlan.from_dict(plan)
        cfg = meta.get("config")
        if not isinstance(cfg, Mapping):
            return _short(f"schema change: {change.change or '?'}")
        parts = [f"{change.change or 'schema'}: {cfg.get('table_type')}", f"{len(cfg.get('fields', []))} columns"]
        if cfg.get("record_key"):
            parts.append("key " + ",".join(cfg["record_key"]))
        if cfg.get("partition_by"):
            parts.append("partitioned by " + ",".join(cfg["partition_by"]))
        if change.columns:
            parts.append("added " + ",".join(change.columns))
        return _short(", ".join(parts))
    if "operation" in meta or write.operation:
        op = meta.get("operation") or write.operation
        counts = _counts(meta.get("stats") or {})
        if instant.is_pending:
            counts = f"planned at seq {write.snapshot_seq}" if write.snapshot_seq is not None else ""
        return _short(f"{op} {counts}".strip())
    return _short(_fields(meta if meta else plan))


def _fields(body: Mapping[str, Any]) -> str:
    """``k=v`` for every field of a plan or metadata; long nested values as their size."""
    parts = []
    for key, value in body.items():
        text = json.dumps(value, separators=(",", ":"), default=str) if not isinstance(value, str) else value
        if isinstance(value, (list, dict)) and len(text) > 24:
            text = f"<{len(value)} items>"
        parts.append(f"{key}={text}")
    return " ".join(parts)


def instants_table(instants: Sequence[Instant], events: Mapping[int, Sequence[Event]], title: str) -> RichTable:
    """The listing of ``timeline show``."""
    table = RichTable(title=title, title_justify="left")
    table.add_column("id", justify="right", no_wrap=True)
    table.add_column("action", no_wrap=True)
    table.add_column("state", no_wrap=True)
    table.add_column("requested_at", no_wrap=True)
    table.add_column("completed_at", no_wrap=True)
    table.add_column("summary", overflow="fold")
    for inst in instants:
        style = _STATE_STYLE.get(inst.state, "")
        table.add_row(
            str(inst.id),
            inst.action,
            f"[{style}]{inst.state}[/{style}]" if style else inst.state,
            fmt_time(inst.requested_at),
            fmt_time(inst.completed_at),
            escape(summarize(inst, events.get(inst.id, ()))),  # payload text is not markup
        )
    return table


def event_dict(event: Event) -> dict[str, Any]:
    """An event as ``inspect --json`` prints it."""
    return {
        "seq": event.seq,
        "ts": event.timestamp.isoformat(),
        "ts_us": event.ts_us,
        "state": event.state.value,
        "token": event.token,
        "payload": dict(event.payload),
    }


def instant_detail(instant: Instant, events: Sequence[Event]) -> dict[str, Any]:
    """One instant in full: :meth:`Instant.to_dict` plus its events."""
    out = instant.to_dict()
    out["events"] = [event_dict(e) for e in events]
    return out


def print_instant(con: Console, instant: Instant, events: Sequence[Event]) -> None:
    """The human view of ``timeline inspect``: header, events, then plan and metadata."""
    style = _STATE_STYLE.get(instant.state, "")
    con.print(f"[bold]instant {instant.id}[/bold]  {instant.action}  [{style}]{instant.state}[/{style}]")
    con.print(f"requested_at  {fmt_time(instant.requested_at)}")
    con.print(
        f"completed_at  {fmt_time(instant.completed_at)}"
        + (f"  (event {instant.completed_seq})" if instant.completed_seq is not None else "")
    )
    ev_table = RichTable(title="events", title_justify="left")
    for col in ("seq", "ts", "state", "token", "payload"):
        ev_table.add_column(col, overflow="fold", no_wrap=col != "payload")
    for ev in events:
        payload = json.dumps(dict(ev.payload), separators=(",", ":"), default=str) if ev.payload else ""
        ev_table.add_row(str(ev.seq), fmt_time(ev.timestamp), ev.state.value, ev.token[:8], escape(_short(payload, 48)))
    con.print(ev_table)
    for name, body in (("plan", instant.plan), ("metadata", instant.metadata)):
        con.print(f"[bold]{name}[/bold]")
        con.print(JSON(json.dumps(dict(body), default=str)) if body else "  (empty)")


def arrow_table(data: pa.Table, title: str, max_rows: int = 20) -> RichTable:
    """An Arrow table as a rich table (first ``max_rows`` rows)."""
    table = RichTable(title=f"{title} ({data.num_rows} rows)", title_justify="left")
    for name in data.column_names:
        table.add_column(name, overflow="fold")
    for row in data.slice(0, max_rows).to_pylist():
        table.add_row(*("∅" if v is None else escape(str(v)) for v in row.values()))
    if data.num_rows > max_rows:
        table.add_row(*(["…"] * data.num_columns))
    return table


def rows_table(rows: Sequence[Mapping[str, Any]], title: str) -> RichTable:
    """Dicts of varying keys (e.g. validation mismatches) as a rich table: one column per
    key in first-seen order, nested values as compact JSON."""
    keys = list(dict.fromkeys(k for row in rows for k in row))
    table = RichTable(title=title, title_justify="left")
    for key in keys:
        table.add_column(key, overflow="fold")
    for row in rows:
        cells = (row.get(k, "") for k in keys)
        table.add_row(
            *(escape(v if isinstance(v, str) else json.dumps(v, separators=(",", ":"), default=str)) for v in cells)
        )
    return table


@contextmanager
def progress_bar(description: str) -> Iterator[Callable[[int, int], None]]:
    """A ``progress(done, total)`` callback that drives a rich progress bar on stderr.

    The bar starts on the first call, so a command refused before any work prints only
    its one error line; stderr keeps stdout to the result (``--json`` stays parseable).
    Off a terminal rich prints the bar once, as it ended, instead of redrawing it.
    """
    state: dict[str, tuple[Progress, TaskID]] = {}

    def update(done: int, total: int) -> None:
        if "bar" not in state:
            bar = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True, highlight=False),
            )
            bar.start()
            state["bar"] = (bar, bar.add_task(description, total=total))
        bar, task = state["bar"]
        bar.update(task, completed=done, total=total)

    try:
        yield update
    finally:
        if "bar" in state:
            state["bar"][0].stop()
