"""``lakeline savepoint create|release|list``: pin a snapshot against cleaning and
archival from a shell, release it, and see which are active.

Each is one call of ``t.services`` (:mod:`lakeline.services.savepoints`), so the
savepoints a shell makes are the ones every process and the cleaner see; errors (no
such instant, a snapshot already cleaned) are the usual one red line with exit 2.
"""

from __future__ import annotations

from dataclasses import asdict

import click

from ..timeline.instant import Instant
from ..timeline.plans import SavepointCreatePlan, SavepointReleasePlan
from .options import json_option, opened_table, timeline_option
from .render import console, print_json, rows_table


@click.group()
def savepoint() -> None:
    """Pin snapshots against cleaning and archival, release them, list them."""


def _report(inst: Instant, as_json: bool, message: str) -> None:
    if as_json:
        print_json(inst.to_dict())
    else:
        console().print(message)


@savepoint.command("create")
@click.argument("path")
@click.argument("instant", type=int, required=False)
@json_option
@timeline_option
def create(path: str, instant: int | None, as_json: bool, timeline_url: str | None) -> None:
    """Pin the snapshot as of completed INSTANT (default: the latest) of the table at PATH."""
    with opened_table(path, timeline_url) as table:
        sp = table.services.savepoint(instant)
    pinned = SavepointCreatePlan.from_dict(sp.plan).instant
    _report(sp, as_json, f"savepoint {sp.id} pins the snapshot as of instant {pinned}")


@savepoint.command("release")
@click.argument("path")
@click.argument("savepoint_id", metavar="SAVEPOINT", type=int)
@json_option
@timeline_option
def release(path: str, savepoint_id: int, as_json: bool, timeline_url: str | None) -> None:
    """End SAVEPOINT (its id, or the pinned instant's) on the table at PATH."""
    with opened_table(path, timeline_url) as table:
        done = table.services.release_savepoint(savepoint_id)
    released = SavepointReleasePlan.from_dict(done.plan).savepoint
    _report(done, as_json, f"savepoint {released} released; the next clean may remove what it kept")


@savepoint.command("list")
@click.argument("path")
@json_option
@timeline_option
def list_(path: str, as_json: bool, timeline_url: str | None) -> None:
    """Active savepoints of the table at PATH."""
    with opened_table(path, timeline_url) as table:
        rows = [asdict(s) for s in table.services.savepoints()]
    if as_json:
        print_json(rows)
    elif rows:
        console().print(rows_table(rows, "active savepoints"))
    else:
        console().print("no active savepoints")
