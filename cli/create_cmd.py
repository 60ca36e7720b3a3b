"""``lakeline create``: a new table whose schema is taken from an existing Parquet file.

Reading the schema from a file people already have avoids inventing a schema syntax for
the shell; every other argument maps one to one onto ``Table.create``.
"""

from __future__ import annotations

from typing import Any

import click
import pyarrow as pa
import pyarrow.parquet as pq
from rich.markup import escape

from ..table import Table
from ..timeline.errors import InvalidPropertyError
from ..timeline.table_config import TABLE_TYPES, TableType
from .options import json_option, timeline_option
from .render import console, print_json


def split_columns(values: tuple[str, ...]) -> list[str]:
    """``--key a,b --key c`` -> ``["a", "b", "c"]`` (comma lists and repeats both work)."""
    return [c.strip() for v in values for c in v.split(",") if c.strip()]


def parse_properties(values: tuple[str, ...]) -> dict[str, str]:
    """``--property k=v`` pairs; values stay strings (the table's typed properties
    convert and validate them, so the CLI and Python refuse the same things).

    Raises:
        InvalidPropertyError: a key given twice (which one was meant is a guess; the
            last silently won, so ``-p merge.n.aggregate=sum -p merge.n.aggregate=max``
            made a ``max`` table).
    """
    props: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE", param_hint="--property")
        key = key.strip()
        if key in props:
            raise InvalidPropertyError(
                f"property {key} is given twice (--property {key}={props[key]} and {key}={value.strip()}); give it once"
            )
        props[key] = value.strip()
    return props


def read_schema(path: str) -> pa.Schema:
    """The Arrow schema of a Parquet file, without file-level metadata (the pandas
    index description and the like belong to that file, not to the table)."""
    try:
        return pq.read_schema(path).remove_metadata()
    except (pa.ArrowException, OSError) as e:
        raise click.BadParameter(f"cannot read a Parquet schema from {path}: {e}", param_hint="--schema-from") from e


def describe(table: Table) -> dict[str, Any]:
    """What ``create`` reports about the new table."""
    cfg = table.config
    last = table.timeline.last_completed()
    return {
        "path": table.path,
        "table_uuid": cfg.table_uuid,
        "table_type": cfg.table_type.value,
        "record_key": list(cfg.record_key),
        "ordering_field": cfg.ordering_field,
        "partition_by": list(cfg.partition_by),
        "properties": dict(cfg.properties),
        "timeline": table.log.store.kind,
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in cfg.schema],
        "schema_instant": last.id if last else None,
    }


@click.command()
@click.argument("path")
@click.option(
    "--schema-from",
    "schema_from",
    required=True,
    metavar="FILE.parquet",
    type=click.Path(exists=True, dir_okay=False),
    help="Take the schema from this Parquet file.",
)
@click.option(
    "--key",
    "keys",
    multiple=True,
    metavar="COLS",
    help="Record key column(s), comma separated; omit for an append-only table.",
)
@click.option(
    "--ordering",
    default=None,
    metavar="COL",
    help="Ordering (precombine) field: the larger value wins when two versions of a key meet.",
)
@click.option(
    "--partition-by", "partition_by", multiple=True, metavar="COLS", help="Partition column(s), comma separated."
)
@click.option(
    "--type",
    "table_type",
    type=click.Choice(TABLE_TYPES),
    default=TableType.COW.value,
    show_default=True,
    help="cow: copy-on-write; mor: merge-on-read.",
)
@click.option(
    "--property",
    "-p",
    "properties",
    multiple=True,
    metavar="KEY=VALUE",
    help="A table property (repeatable); see config/defaults.toml.",
)
@json_option
@timeline_option
def create(
    path: str,
    schema_from: str,
    keys: tuple[str, ...],
    ordering: str | None,
    partition_by: tuple[str, ...],
    table_type: str,
    properties: tuple[str, ...],
    as_json: bool,
    timeline_url: str | None,
) -> None:
    """Create a table at PATH."""
    props = parse_properties(properties)
    key_cols = split_columns(keys)
    table = Table.create(
        path,
        read_schema(schema_from),
        record_key=key_cols or None,
        ordering_field=ordering,
        partition_by=split_columns(partition_by) or None,
        table_type=table_type,
        properties=props,
        timeline=timeline_url,
    )
    try:
        info = describe(table)
    finally:
        table.log.store.close()
    if as_json:
        print_json(info)
        return
    con = console()
    con.print(f"[green]created[/green] {info['table_type']} table at [bold]{escape(info['path'])}[/bold]")
    con.print(f"  uuid      {info['table_uuid']}", markup=False)
    con.print(f"  key       {','.join(info['record_key']) or '(none: append-only)'}", markup=False)
    con.print(f"  ordering  {info['ordering_field'] or '-'}", markup=False)
    con.print(f"  partition {','.join(info['partition_by']) or '-'}", markup=False)
    con.print(f"  columns   {', '.join(c['name'] + ':' + c['type'] for c in info['schema'])}", markup=False)
    con.print(f"  timeline  {info['timeline']} (schema instant {info['schema_instant']})", markup=False)
