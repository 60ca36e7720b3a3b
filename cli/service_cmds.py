"""``lakeline service run|schedule``: run a table service now, or only plan it.

Both are one call of ``t.services``, so a name the table's services do not know is
refused by the API itself (``UnknownServiceError``, one red line and exit 2), and the
list of services grows with the framework without touching the CLI. ``run`` first
finishes pending plans of the service whose executor died, then plans and executes
what is due; ``schedule`` only appends the plan, for a runner or a later ``run``.
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.json import JSON
from rich.markup import escape

from ..services.plugin import ServiceResult
from ..timeline.errors import UnsupportedOperationError
from .options import json_option, opened_table, timeline_option
from .render import console, events_by_instant, instants_table, print_json, progress_bar

#: Exit code of ``service run`` when a service gave up (its instant rolled back): the
#: command worked, the service did not (distinct from 2, a refused command).
ABORTED_EXIT_CODE = 1

#: Services whose ``run`` only reports its plan unless ``--execute`` is given: they delete.
DRY_BY_DEFAULT = ("cleaning",)


@click.group()
def service() -> None:
    """Run or schedule a table's services (indexing, rollback, ...)."""


def result_dict(result: ServiceResult) -> dict[str, Any]:
    """One service result as ``run --json`` prints it."""
    return {
        "service": result.service,
        "instant": result.instant.to_dict() if result.instant else None,
        "stats": result.stats,
        "aborted": result.aborted,
        "conflict": None if result.conflict is None else result.conflict.kind.value,
        "dry_run": result.dry_run,
        "plan": result.plan,
        "pending": list(result.pending),
    }


@service.command("run")
@click.argument("path")
@click.argument("name", metavar="NAME")
@click.option(
    "--dry-run", "dry_run", is_flag=True, help="Plan without appending anything and print what would be done."
)
@click.option(
    "--execute",
    "--no-dry-run",
    "execute",
    is_flag=True,
    help="cleaning only: really delete (cleaning is a dry run by default).",
)
@json_option
@timeline_option
def run(path: str, name: str, dry_run: bool, execute: bool, as_json: bool, timeline_url: str | None) -> None:
    """Run service NAME on the table at PATH: finish its pending plans, then plan and
    execute what is due. Exits with 1 when a run gave up (its instant is rolled back).

    NAME: one of the table's services (compaction, clustering, cleaning,
    archival, rollback, indexing; one this version lacks is refused). Cleaning
    deletes files, so it only lists them unless --execute is given (docs/services.md, "Cleaning").
    """
    if name in DRY_BY_DEFAULT and not execute:
        dry_run = True
    with opened_table(path, timeline_url) as table:
        with progress_bar(name) as progress:
            results = table.services.run(name, dry_run=dry_run, progress=progress)
        # Pending plans a run skipped belong to live executors; say so rather than "nothing to do".
        left = [] if dry_run else [i.id for i in table.services.pending([name])]
        events = events_by_instant(table.timeline.events)
    aborted = [r for r in results if r.aborted is not None]
    if as_json:
        print_json(
            {"service": name, "dry_run": dry_run, "results": [result_dict(r) for r in results], "left_pending": left}
        )
    elif dry_run:
        _print_dry_run(name, results[0])
    else:
        con = console()
        ran = [r.instant for r in results if r.instant is not None]
        if ran:
            con.print(instants_table(ran, events, escape(f"{name}: ran {len(ran)} instant(s) (times in UTC)")))
        else:
            con.print(f"{escape(name)}: nothing to do")
        for r in aborted:
            con.print(f"[red]aborted[/red] instant {r.instant.id if r.instant else '-'}: {escape(str(r.aborted))}")
        if left:
            con.print(f"still pending (a live process is executing them): {', '.join(map(str, left))}")
    if aborted:
        click.get_current_context().exit(ABORTED_EXIT_CODE)


def _print_dry_run(name: str, result: ServiceResult) -> None:
    con = console()
    plan = result.plan
    if plan is None:
        con.print(f"dry run: {escape(name)} has nothing new to plan")
    else:
        con.print(f"dry run: {escape(name)} would plan")
        con.print(JSON(json.dumps(plan, default=str)))
    if result.pending:
        con.print(f"pending instants a run would finish first: {', '.join(map(str, result.pending))}")
    if name in DRY_BY_DEFAULT:
        con.print(f"nothing was deleted; run again with --execute to {escape(name)}")


@service.command("schedule")
@click.argument("path")
@click.argument("name", metavar="NAME")
@json_option
@timeline_option
def schedule(path: str, name: str, as_json: bool, timeline_url: str | None) -> None:
    """Plan service NAME on the table at PATH now, as a requested instant that
    `lakeline service run PATH NAME` (in any process) executes later.

    NAME: one of the table's services (compaction, clustering, cleaning,
    archival, rollback, indexing; one this version lacks is refused); indexing is planned by
    `lakeline index create|drop`.
    """
    if name == "indexing":
        # An indexing plan needs an index and a kind: the index commands carry them.
        raise UnsupportedOperationError(
            "indexing is planned by `lakeline index create|drop`; "
            "`lakeline service run PATH indexing` builds what they planned"
        )
    with opened_table(path, timeline_url) as table:
        inst = table.services.schedule(name)
        events = events_by_instant(table.timeline.events)
    if as_json:
        print_json(inst.to_dict() if inst else None)
        return
    con = console()
    if inst is None:
        con.print(f"{escape(name)}: nothing to do")
        return
    con.print(instants_table([inst], events, escape(f"scheduled {name} (times in UTC)")))
    con.print(f"run it with: lakeline service run {path} {name}", markup=False)
