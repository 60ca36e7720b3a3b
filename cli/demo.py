"""``lakeline demo``: a small table created, written and read back, to see lakeline work;
then an index built asynchronously while a second writer keeps upserting.

:func:`run_demo` grows with the library: it only uses what the ``Table`` in this build
offers (writes if there is ``upsert``, time travel if there is ``to_arrow``), so the
demo keeps running at every stage of the project and shows more as more lands.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import click
import pyarrow as pa
from rich.console import Console
from rich.markup import escape

from ..indexes.states import IndexKind
from ..table import Table
from ..timeline.table_config import TableType
from .render import arrow_table, console, events_by_instant, instants_table

#: Name of the demo table inside the demo directory.
DEMO_TABLE = "demo_table"

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("ts", pa.int64()),
        pa.field("day", pa.string()),
        pa.field("name", pa.string()),
        pa.field("amount", pa.float64()),
    ]
)


def _rows(ids: list[int], ts: int, amount: float) -> pa.Table:
    return pa.table(
        {
            "id": ids,
            "ts": [ts] * len(ids),
            "day": [f"2026-01-0{1 + i % 2}" for i in ids],
            "name": [f"user-{i}" for i in ids],
            "amount": [amount * i for i in ids],
        },
        schema=SCHEMA,
    )


def _report(con: Console, what: str, result: Any) -> int | None:
    """Print one write's outcome; return its instant id (None when nothing was written)."""
    inst = getattr(result, "instant", None)
    stats = " ".join(f"{k}={v}" for k, v in (getattr(result, "stats", None) or {}).items() if v)
    where = f"instant {inst.id} ({inst.action})" if inst is not None else "nothing to write"
    con.print(f"[green]{what}[/green] -> {where} {stats}")
    return inst.id if inst is not None else None


def run_demo(directory: str | os.PathLike[str] | None = None, con: Console | None = None) -> Table:
    """Create a merge-on-read table in ``directory`` (a fresh temp dir by default),
    write a few batches if this build can write, and print what happened.

    Returns:
        The demo table.

    Raises:
        TableExistsError: ``directory`` already holds a demo table.
    """
    con = con or console()
    base = Path(directory) if directory is not None else Path(tempfile.mkdtemp(prefix="lakeline-demo-"))
    path = base / DEMO_TABLE
    table = Table.create(
        path, SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type=TableType.MOR
    )
    con.print(f"[green]created[/green] merge-on-read table at [bold]{escape(table.path)}[/bold]")

    first_write: int | None = None
    if hasattr(table, "upsert"):
        first_write = _report(con, "upsert ids 1-6", table.upsert(_rows([1, 2, 3, 4, 5, 6], ts=1, amount=10.0)))
        _report(con, "upsert ids 2,3 (newer ts), 7 (new)", table.upsert(_rows([2, 3, 7], ts=2, amount=100.0)))
        # An older ordering value loses against the stored version: id 4 stays as it was.
        _report(con, "upsert id 4 with an older ts", table.upsert(_rows([4], ts=0, amount=-1.0)))
    if hasattr(table, "delete"):
        _report(con, "delete ids 1,5", table.delete(pa.table({"id": pa.array([1, 5], pa.int64())})))

    _index_while_writing(table, con)

    tl = table.timeline
    con.print(
        instants_table(tl.instants(), events_by_instant(tl.events), f"timeline ({len(tl)} instants, times in UTC)")
    )
    if hasattr(table, "to_arrow"):
        con.print(arrow_table(table.to_arrow().sort_by("id"), "now"))
        if first_write is not None:
            old = table.to_arrow(as_of=first_write).sort_by("id")
            con.print(arrow_table(old, f"as of instant {first_write} (time travel)"))
    con.print(
        f"\nlook around: [bold]lakeline timeline show {escape(table.path)}[/bold]"
        f"  |  [bold]lakeline timeline inspect {escape(table.path)} <id>[/bold]"
    )
    if directory is None:
        # A folder the demo made is the caller's to remove: say so, or every run leaves
        # one in the temp folder unnoticed.
        con.print(
            f"the demo wrote into [bold]{escape(str(base))}[/bold], a new temp folder (DIR chooses one);"
            f" remove it with: rm -rf {escape(str(base))}",
            soft_wrap=True,
        )
    return table


def _index_while_writing(table: Table, con: Console) -> None:
    """A second writer keeps upserting while a ``column_stats`` index is built
    asynchronously: the writer never waits, and the index is exact when it is ready."""
    table.upsert(_rows(list(range(100, 20_100)), ts=1, amount=1.0))
    stop = threading.Event()
    commits: list[int] = []

    def writer() -> None:
        other = Table.open(table.path)  # its own handle, opened before the index existed
        n = 0
        while not stop.is_set() or n < 3:
            ids = list(range(100 + 50 * (n % 400), 150 + 50 * (n % 400)))
            inst = other.upsert(_rows(ids, ts=10 + n, amount=2.0)).instant
            assert inst is not None  # the rows are never empty, so there is a commit
            commits.append(inst.id)
            n += 1

    def let_the_writer_in(done: int, total: int) -> None:
        # The build takes a fraction of a second on the demo's data: before it starts,
        # let the writer land two commits while the index is already building, so the
        # demo always shows writes landing mid-build (they write the building index too).
        if done == 0:
            deadline = time.monotonic() + 30
            while len(commits) < before + 2 and time.monotonic() < deadline:
                time.sleep(0.005)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        before = len(commits)
        created = table.indexes.create(
            IndexKind.COLUMN_STATS, columns=["id", "amount"], wait=False, progress=let_the_writer_in
        )
        con.print(
            f"[green]index column_stats[/green] -> instant {created.instant}, state [bold]{created.state}[/bold]"
            " (building in the background while the writer keeps upserting)"
        )
        ready = table.indexes.wait(IndexKind.COLUMN_STATS.value, timeout_s=300)
    finally:
        stop.set()
        thread.join()
    report = table.indexes.validate(IndexKind.COLUMN_STATS.value)
    con.print(
        f"[green]index column_stats[/green] -> state [bold]{ready.state}[/bold]; the writer committed "
        f"{len(commits)} upserts meanwhile; validate: {report['files_checked']} files, "
        f"{len(report['mismatches'])} mismatches"
    )
    for d in table.indexes.list():
        con.print(
            f"  index [bold]{escape(d.name)}[/bold] kind={d.kind} columns={','.join(d.columns)} "
            f"state={d.state} (instant {d.instant})"
        )


@click.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
def demo(directory: str | None) -> None:
    """Create a demo table in DIRECTORY (default: a new temp dir), write to it and show it."""
    table = run_demo(directory)
    table.log.store.close()
