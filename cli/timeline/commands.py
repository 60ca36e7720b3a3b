"""``lakeline timeline show|inspect``: read a table's timeline without writing anything.

Both commands read the log once and render from that one :class:`Timeline`, so the
listing and the events it shows are consistent even while writers keep appending.
``show`` lists the active timeline (what archival left in the event log) unless given
``--all``, which adds the archived instants; ``inspect`` finds archived instants too.
"""

from __future__ import annotations

import os

import click
from rich.markup import escape

from ...timeline.errors import OutputPathError
from ...timeline.instant import Action, Instant
from ..options import json_option, opened_table, timeline_option
from ..render import console, events_by_instant, instant_detail, instants_table, print_instant, print_json

_ACTIONS = [a.value for a in Action]


@click.group()
def timeline() -> None:
    """Inspect a table's timeline (instants and their events)."""


def select(
    instants: list[Instant], pending: bool, action: str | None, limit: int | None, archived_through: int = -1
) -> list[Instant]:
    """Filter a by-id listing (dropping archived instants, ids up to ``archived_through``),
    then keep the newest ``limit`` (newest = largest id)."""
    chosen = [
        i
        for i in instants
        if i.id > archived_through and (not pending or i.is_pending) and (action is None or i.action == action)
    ]
    if limit is not None:
        chosen = chosen[-limit:] if limit else []
    return chosen


@timeline.command("show")
@click.argument("path")
@click.option("--pending", is_flag=True, help="Only requested or inflight instants.")
@click.option(
    "--action", type=click.Choice(_ACTIONS, case_sensitive=False), default=None, help="Only instants of this action."
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Keep the newest N instants (after the other filters).",
)
@click.option("--all", "show_all", is_flag=True, help="Include archived instants (moved out of the active timeline).")
@json_option
@timeline_option
def show(
    path: str,
    pending: bool,
    action: str | None,
    limit: int | None,
    show_all: bool,
    as_json: bool,
    timeline_url: str | None,
) -> None:
    """List the instants of the table at PATH, oldest first (the active timeline; --all
    adds the archived instants)."""
    with opened_table(path, timeline_url) as table:
        tl = table.timeline
        archived = -1 if show_all or table.log.archive is None else table.log.archive.last_seq()
    action = action.lower() if action else None
    chosen = select(tl.instants(), pending, action, limit, archived)
    if as_json:
        print_json([i.to_dict() for i in chosen])
        return
    con = console()
    hidden = sum(1 for i in tl.instants() if i.id <= archived)
    title = escape(
        f"timeline of {table.path}: {len(chosen)} of {len(tl)} instants, "
        + (f"{hidden} archived (--all shows them), " if hidden else "")
        + f"last event {tl.last_seq} (times in UTC)"
    )
    if not chosen:
        con.print(title)
        con.print("[dim]no instants match[/dim]")
        return
    con.print(instants_table(chosen, events_by_instant(tl.events), title))


@timeline.command("inspect")
@click.argument("path")
@click.argument("instant_id", type=int)
@json_option
@timeline_option
def inspect(path: str, instant_id: int, as_json: bool, timeline_url: str | None) -> None:
    """Show one instant of the table at PATH in full, with its events."""
    with opened_table(path, timeline_url) as table:
        tl = table.timeline
    instant = tl.get(instant_id)  # InstantNotFoundError -> one-line error, exit 2
    events = [e for e in tl.events if e.instant == instant_id]
    if as_json:
        print_json(instant_detail(instant, events))
        return
    print_instant(console(), instant, events)


def _not_a_folder(folder: str) -> str:
    """Why ``folder`` (not a folder) cannot hold a file: it, or the nearest part of its
    path that exists, is a file; or nothing of it exists."""
    existing = folder
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if existing == folder:
        return f"{folder} is a file, not a folder"
    if os.path.lexists(existing) and not os.path.isdir(existing):
        return f"the folder {folder} cannot exist: {existing} is a file, not a folder"
    return f"the folder {folder} does not exist"


@timeline.command("report")
@click.argument("path")
@click.option(
    "--html",
    "html_file",
    required=True,
    type=click.Path(dir_okay=False, writable=True),
    help="Write the page here (one self-contained HTML file).",
)
@timeline_option
def report(path: str, html_file: str, timeline_url: str | None) -> None:
    """Write a picture of the timeline of the table at PATH as one HTML page: instants as
    bars on a time axis (a lane per action, colour by state), files and sizes per
    partition over time, and the indexes."""
    from .report import render_html, report_data

    folder = os.path.dirname(os.path.abspath(html_file))
    if not os.path.isdir(folder):  # before reading the table: a typo costs nothing
        raise OutputPathError(f"cannot write {html_file}: {_not_a_folder(folder)}")
    with opened_table(path, timeline_url) as table:
        data = report_data(table)
    page = render_html(data)
    try:
        with open(html_file, "w", encoding="utf-8") as f:
            f.write(page)
    except OSError as e:  # not writable, vanished meanwhile, disk full: one line, not a traceback
        raise OutputPathError(f"cannot write {html_file}: {e.strerror or e}") from e
    console().print(
        f"wrote {escape(html_file)}: {len(data.spans)} instants, "
        f"{len({p.partition for p in data.partitions})} partitions, {len(data.indexes)} indexes"
    )
