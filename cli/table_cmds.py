"""``lakeline table check PATH [--json] [--deep]``: is every file the table promises to read there?

One call of ``t.check()`` (:mod:`lakeline.table.check`): the files of the current and the
retained snapshots (those a time-travel read may still open) each stat'ed and their
Parquet footers read (with ``--deep``, every page read and verified against its CRC),
then ``t.indexes.validate()``. Exit codes as ``lakeline index
validate``: 0 when the table is healthy, 1 when a problem was found (one line per
problem, each naming its file), 2 when the command was refused (no table there).
"""

from __future__ import annotations

import click
from rich.markup import escape

from .options import json_option, opened_table, timeline_option
from .render import console, print_json, progress_bar

#: Exit code when the check found a problem: the command worked, the table did not pass
#: (as ``lakeline index validate``; 2 is a refused command).
PROBLEM_EXIT_CODE = 1


@click.group()
def table() -> None:
    """Check a table as a whole."""


@table.command("check")
@click.argument("path")
@click.option(
    "--skip-indexes", "skip_indexes", is_flag=True, help="Check the data files only, not t.indexes.validate()."
)
@click.option(
    "--deep", is_flag=True, help="Also read every page of every file and verify its CRC (reads the table's bytes once)."
)
@json_option
@timeline_option
def check(path: str, skip_indexes: bool, deep: bool, as_json: bool, timeline_url: str | None) -> None:
    """Check that every file the current and the retained snapshots of the table at PATH
    read exists with its recorded size and a readable footer (--deep: and that every page
    verifies), and that the indexes match the data; exits with 1 and one line per problem
    when there is one."""
    with opened_table(path, timeline_url) as t, progress_bar("checking files") as progress:
        report = t.check(indexes=not skip_indexes, progress=progress, deep=deep)
    if as_json:
        print_json(report.to_dict())
    else:
        con = console()
        for p in report.problems:  # one line each, however long (greps and scripts read them)
            con.print(f"[red]{escape(p.line())}[/red]", soft_wrap=True)
        what = f"{report.files_checked} files ({report.bytes_checked} bytes)"
        kept = "every snapshot" if report.retained_from < 0 else f"the snapshots from event {report.retained_from} on"
        indexes = "" if skip_indexes else " and the indexes"
        if report.ok:
            con.print(f"[green]ok[/green]: {what} of {kept}{indexes} check out")
        else:
            con.print(f"[red]{len(report.problems)} problems[/red] in {what} of {kept}{indexes}")
    if not report.ok:
        click.get_current_context().exit(PROBLEM_EXIT_CODE)
