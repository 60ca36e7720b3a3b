"""``lakeline runner --config FILE [--once] [--metrics-port N]`` and ``lakeline runner status``.

``runner`` is a click group that also acts on its own (``invoke_without_command``):
with ``--config`` and no subcommand it runs the daemon (or one pass with ``--once``);
``runner status --config FILE`` is the one subcommand. Both spellings
are in docs/design.md, "Public API".

The daemon turns SIGTERM (and Ctrl-C) into :meth:`Runner.stop`: no new work, running
services get ``grace_seconds``, exit 0. Everything the runner does is logged on stderr
(one line per run that did something, every failure), and a summary per table and
service is printed when it stops. ``--once`` exits 1 when a run failed, so a cron job
or an Airflow task shows it; skips and aborted instants are not failures.

The runner module (and with it apscheduler, the ``runner`` extra) is imported when a
command runs, not when the CLI starts, so ``lakeline --help`` works without the extra.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from collections import Counter
from datetime import UTC, datetime
from types import FrameType
from typing import TYPE_CHECKING, Any

import click
from rich.markup import escape
from rich.table import Table as RichTable

from ..timeline.diagnostics.redact import RedactingFormatter
from .options import json_option
from .render import console, print_json

if TYPE_CHECKING:
    from ..services.runner import Runner, RunOutcome, TableStatus

#: Exit code of ``--once`` when a run failed (the command worked; a service did not).
FAILED_EXIT_CODE = 1
_CONFIG = click.Path(exists=False, dir_okay=False)


def _log_to_stderr(level: int) -> None:
    # Every line goes through redact(): a runner logs DSNs and driver errors (some quote
    # the connection string), and its stderr ends up in journals anyone may read.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])
    # apscheduler logs every job it fires at INFO: one line per schedule tick drowns ours.
    logging.getLogger("apscheduler").setLevel(logging.WARNING)


@click.group(invoke_without_command=True)
@click.option("--config", "config", type=_CONFIG, metavar="FILE", help="The runner's TOML config (docs/runner.md).")
@click.option("--once", is_flag=True, help="Run every scheduled service once and exit (for cron or Airflow).")
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    metavar="N",
    help="Serve Prometheus metrics on 127.0.0.1:N (overrides [runner] metrics_port; 0: off).",
)
@click.option("-v", "--verbose", is_flag=True, help="Log every run, also those with nothing to do.")
@json_option
@click.pass_context
def runner(
    ctx: click.Context, config: str | None, once: bool, metrics_port: int | None, verbose: bool, as_json: bool
) -> None:
    """Keep tables healthy: run their services on schedules (docs/runner.md).

    With --config FILE: run until SIGTERM (or Ctrl-C), then let running services finish
    within [runner] grace_seconds and exit 0; with --once, one pass and exit.
    `lakeline runner status --config FILE` shows each table's backlog.
    """
    if ctx.invoked_subcommand is not None:
        return
    if config is None:
        raise click.UsageError("--config FILE is required (or use `lakeline runner status --config FILE`)")
    from ..services.runner import Runner

    _log_to_stderr(logging.DEBUG if verbose else logging.INFO)
    r = Runner.from_toml(config, metrics_port=metrics_port)
    if once:
        outcomes = r.run_once()
        if as_json:
            print_json([o.to_dict() for o in outcomes])
        else:
            console().print(_outcomes_table(outcomes, "runner --once: what ran"))
        if any(o.outcome == "failed" for o in outcomes):
            ctx.exit(FAILED_EXIT_CODE)
        return
    _run_until_signalled(r, as_json)


def _run_until_signalled(r: Runner, as_json: bool) -> None:
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("lakeline.runner").info("%s: stopping", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        r.start()
        while not stop.wait(0.5):
            pass
        finished = r.stop()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    outcomes = r.outcomes()
    if as_json:
        print_json({"finished_in_grace": finished, "runs": _summary_rows(outcomes)})
    else:
        console().print(_summary_table(outcomes))
        if not finished:
            console().print(
                "[yellow]some services did not finish within the grace period; "
                "a later run finishes or rolls back their instants[/yellow]"
            )


def _summary_rows(outcomes: list[RunOutcome]) -> list[dict[str, Any]]:
    by: dict[tuple[str, str], Counter[str]] = {}
    instants: dict[tuple[str, str], list[int]] = {}
    for o in outcomes:
        by.setdefault((o.table, o.service), Counter())[o.outcome] += 1
        instants.setdefault((o.table, o.service), []).extend(o.instants)
    return [
        {"table": t, "service": s, "runs": sum(c.values()), **dict(c), "instants": instants[(t, s)]}
        for (t, s), c in sorted(by.items())
    ]


def _summary_table(outcomes: list[RunOutcome]) -> RichTable:
    table = RichTable(title="runner: what it did", title_justify="left")
    for col in ("table", "service", "runs", "done", "idle", "skipped", "aborted", "failed", "instants"):
        table.add_column(col, justify="right" if col not in ("table", "service", "instants") else "left")
    for row in _summary_rows(outcomes):
        table.add_row(
            escape(row["table"]),
            row["service"],
            str(row["runs"]),
            *(str(row.get(k, 0)) for k in ("done", "idle", "skipped", "aborted", "failed")),
            ",".join(map(str, row["instants"][-8:])) or "-",
        )
    return table


def _outcomes_table(outcomes: list[RunOutcome], title: str) -> RichTable:
    table = RichTable(title=title, title_justify="left")
    for col in ("table", "service", "outcome", "instants", "seconds", "error"):
        table.add_column(col, overflow="fold")
    style = {"done": "green", "failed": "red", "aborted": "yellow", "skipped": "cyan"}
    for o in outcomes:
        mark = style.get(o.outcome)
        table.add_row(
            escape(o.table),
            o.service,
            f"[{mark}]{o.outcome}[/{mark}]" if mark else o.outcome,
            ",".join(map(str, o.instants)) or "-",
            f"{o.seconds:.2f}",
            escape(o.error or ""),
        )
    return table


@runner.command("status")
@click.option(
    "--config", "config", type=_CONFIG, metavar="FILE", required=True, help="The runner's TOML config (docs/runner.md)."
)
@json_option
def status(config: str, as_json: bool) -> None:
    """Each table of the config and its backlog: pending instants per service, files,
    small-file share, log files per slice, and each service's last completed instant."""
    from ..services.runner import Runner

    _log_to_stderr(logging.WARNING)
    tables = Runner.from_toml(config).status()
    rows = [_status_row(ts, service) for ts in tables for service in (list(ts.target.schedules) or ["-"])]
    if as_json:
        print_json(rows)
        return
    table = RichTable(title=f"runner status ({escape(config)}; times in UTC)", title_justify="left")
    for col in ("table", "service", "schedule", "pending", "files", "small share", "logs/slice", "last completed"):
        table.add_column(col, justify="right" if col in ("pending", "files", "small share", "logs/slice") else "left")
    for row in rows:
        if row["error"]:
            table.add_row(
                escape(row["table"]),
                row["service"],
                row["schedule"],
                "[red]?[/red]",
                "",
                "",
                "",
                f"[red]{escape(row['error'])}[/red]",
            )
            continue
        table.add_row(
            escape(row["table"]),
            row["service"],
            escape(row["schedule"]),
            str(row["pending"]),
            str(row["files"]),
            f"{row['small_file_share']:.0%}",
            f"{row['log_files_per_slice']:.2f}",
            row["last_completed"] or "-",
        )
    console().print(table)


def _status_row(ts: TableStatus, service: str) -> dict[str, Any]:
    sched = ts.target.schedules.get(service)
    row: dict[str, Any] = {
        "table": ts.target.name,
        "service": service,
        "schedule": str(sched or "-"),
        "error": ts.error,
    }
    s = ts.stats
    if s is None:
        return row
    last_us = s.last_completed_us.get(service)
    last = datetime.fromtimestamp(last_us / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S") if last_us else None
    row.update(
        pending=s.pending.get(service, 0),
        files=s.files,
        slices=s.slices,
        log_files=s.log_files,
        small_slices=s.small_slices,
        small_file_share=round(s.small_file_share, 4),
        log_files_per_slice=round(s.logs_per_slice, 4),
        backlog=s.backlog,
        last_completed=last,
    )
    return row
