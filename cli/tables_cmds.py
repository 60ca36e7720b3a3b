"""``lakeline tables list|show|drop --catalog DSN``: the tables of a catalog from a shell.

Each command is one call of :class:`lakeline.table.Catalog` (``show`` also opens the
table for its schema and last instant), so the CLI refuses exactly what Python refuses
and adds only rendering. ``drop`` asks before it acts unless ``--yes``: dropping a name
breaks every job that loads it, and ``--purge`` deletes data.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, TypeVar

import click
from rich.markup import escape
from rich.table import Table as RichTable

from ..table import Catalog
from ..table.catalog import CatalogTable
from ..timeline.diagnostics.redact import redact
from .options import json_option
from .render import console, fmt_time, print_json

F = TypeVar("F", bound=Callable[..., Any])


def catalog_option(fn: F) -> F:
    """``--catalog DSN`` (required; also read from ``LAKELINE_CATALOG``)."""
    return click.option(
        "--catalog",
        "dsn",
        metavar="DSN",
        required=True,
        envvar="LAKELINE_CATALOG",
        help="postgresql://... URL of the catalog's database (or $LAKELINE_CATALOG).",
    )(fn)


@contextmanager
def opened_catalog(dsn: str) -> Iterator[Catalog]:
    """A catalog whose connection is closed when the command ends."""
    cat = Catalog(dsn)
    try:
        yield cat
    finally:
        cat.close()


def entry_dict(entry: CatalogTable) -> dict[str, Any]:
    """One catalog entry as ``list --json`` prints it."""
    return {
        "name": entry.name,
        "namespace": entry.namespace,
        "location": entry.location,
        "table_uuid": entry.table_uuid,
        "created_at": entry.created_at.isoformat(),
    }


@click.group()
def tables() -> None:
    """List, show and drop the tables of a catalog (tables by name in PostgreSQL)."""


@tables.command("list")
@click.argument("namespace", required=False)
@catalog_option
@json_option
def list_(namespace: str | None, dsn: str, as_json: bool) -> None:
    """List the tables of the catalog (of NAMESPACE only, if given)."""
    with opened_catalog(dsn) as cat:
        entries = cat.describe_tables(namespace)
    if as_json:
        print_json([entry_dict(e) for e in entries])
        return
    con = console()
    if not entries:
        con.print("no tables" + (f" in namespace {escape(namespace)}" if namespace else " in the catalog"))
        return
    view = RichTable(title=escape(f"tables of {namespace}" if namespace else "tables"), title_justify="left")
    for col in ("name", "location", "uuid", "created_at (UTC)"):
        view.add_column(col, overflow="fold", no_wrap=col != "location")
    for e in entries:
        view.add_row(f"[bold]{escape(e.name)}[/bold]", escape(e.location), e.table_uuid, _utc(e.created_at))
    con.print(view)


def _utc(when: datetime) -> str:
    return fmt_time(when.astimezone(UTC))


def show_dict(cat: Catalog, name: str) -> dict[str, Any]:
    """What ``show`` reports: the catalog entry, the table's configuration, and its last
    completed instant."""
    out = entry_dict(cat.describe(name))
    table = cat.load_table(name)
    try:
        cfg = table.config
        last = table.timeline.last_completed()
    finally:
        table.log.store.close()
    out.update(
        {
            "table_type": cfg.table_type.value,
            "record_key": list(cfg.record_key),
            "ordering_field": cfg.ordering_field,
            "partition_by": list(cfg.partition_by),
            "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in cfg.schema],
            # A property may carry a credential (a callback URL with user:password@): never printed.
            "properties": {k: redact(v) if isinstance(v, str) else v for k, v in cfg.properties.items()},
            "last_instant": None
            if last is None
            else {
                "id": last.id,
                "action": str(last.action),
                "state": str(last.state),
                "completed_at": last.completed_at.isoformat() if last.completed_at else None,
            },
        }
    )
    return out


@tables.command("show")
@click.argument("name")
@catalog_option
@json_option
def show(name: str, dsn: str, as_json: bool) -> None:
    """Show table NAME (namespace.name): location, uuid, schema, properties, last instant."""
    with opened_catalog(dsn) as cat:
        info = show_dict(cat, name)
    if as_json:
        print_json(info)
        return
    con = console()
    con.print(f"[bold]{escape(info['name'])}[/bold]  {info['table_type']} table")
    lines = [
        ("location", info["location"]),
        ("uuid", info["table_uuid"]),
        ("created", _utc(datetime.fromisoformat(info["created_at"])) + " UTC"),
        ("key", ",".join(info["record_key"]) or "(none: append-only)"),
        ("ordering", info["ordering_field"] or "-"),
        ("partition", ",".join(info["partition_by"]) or "-"),
    ]
    last = info["last_instant"]
    if last is not None and last["completed_at"]:
        lines.append(
            (
                "last",
                f"instant {last['id']} ({last['action']}), completed "
                f"{_utc(datetime.fromisoformat(last['completed_at']))} UTC",
            )
        )
    else:
        lines.append(("last", "-"))
    for key, value in lines:
        con.print(f"  {key:<10}{value}", markup=False)
    schema = RichTable(title="schema", title_justify="left")
    for col in ("column", "type", "nullable"):
        schema.add_column(col)
    for f in info["schema"]:
        schema.add_row(escape(f["name"]), escape(f["type"]), "yes" if f["nullable"] else "no")
    con.print(schema)
    props = info["properties"]
    con.print("[bold]properties[/bold]" + ("" if props else "  (none set; defaults apply)"))
    for key in sorted(props):
        con.print(f"  {key} = {props[key]}", markup=False)


@tables.command("drop")
@click.argument("name")
@click.option(
    "--purge",
    is_flag=True,
    help="Also delete the table's own files (its .lakeline/ and the data "
    "files it wrote) and its timeline; anything else at its location stays.",
)
@click.option("--yes", "-y", "yes", is_flag=True, help="Do not ask for confirmation.")
@catalog_option
def drop(name: str, purge: bool, yes: bool, dsn: str) -> None:
    """Drop table NAME from the catalog. Without --purge only the name goes: the table
    stays at its location (open it with --timeline DSN)."""
    with opened_catalog(dsn) as cat:
        entry = cat.describe(name)  # refuses an unknown name before asking
        if not yes:
            what = (
                f"drop {entry.name} and DELETE its files at {entry.location}"
                if purge
                else f"drop the name {entry.name} (the table stays at {entry.location})"
            )
            click.confirm(f"{what}?", abort=True, err=True)
        dropped = cat.drop_table(name, purge=purge)
    con = console()
    if purge:
        con.print(
            f"[red]purged[/red] {escape(dropped.name)}: its files at {escape(dropped.location)} and its "
            "timeline are deleted (anything else there stays)"
        )
    else:
        con.print(f"[green]dropped[/green] {escape(dropped.name)}; the table stays at {escape(dropped.location)}")
