"""``lakeline schema show|history``: a table's columns with their field ids, and how
they came to be (issue 29).

``show`` prints the schema the latest ``schema`` instant records: each column's name,
type, nullability and field id (the id readers match files by, so a rename keeps it),
with the record key, partition and ordering columns and the last id handed out.
``history`` lists every completed ``schema`` instant still on the active timeline: its
change (``create``, ``add-columns``, ``update``), the steps of an ``update_schema()``
block, and the columns it left. Both read only the timeline, never a data file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import click
from rich.markup import escape

from ..table import Table
from ..timeline.field_ids import field_id
from ..timeline.instant import Action
from ..timeline.table_config import TableConfig
from .options import json_option, opened_table, timeline_option
from .render import console, fmt_time, print_json, rows_table


@click.group()
def schema() -> None:
    """Show a table's schema (with field ids) and its history."""


def columns_of(cfg: TableConfig) -> list[dict[str, Any]]:
    """The columns of ``cfg`` as ``show --json`` prints them."""
    return [{"name": f.name, "type": str(f.type), "nullable": f.nullable, "id": field_id(f)} for f in cfg.schema]


def schema_dict(table: Table) -> dict[str, Any]:
    cfg = table.config
    return {
        "columns": columns_of(cfg),
        "record_key": list(cfg.record_key),
        "partition_by": list(cfg.partition_by),
        "ordering_field": cfg.ordering_field,
        "last_column_id": cfg.last_column_id,
        "instant": next((i.id for i in reversed(table.timeline.completed()) if i.action is Action.SCHEMA), None),
    }


def history_of(table: Table) -> list[dict[str, Any]]:
    """Every completed schema instant on the active timeline, oldest first."""
    out = []
    for inst in table.timeline.completed():
        if inst.action is not Action.SCHEMA:
            continue
        raw = inst.metadata.get("config")
        cols = [c["name"] for c in columns_of(TableConfig.from_dict(raw))] if isinstance(raw, Mapping) else []
        out.append(
            {
                "instant": inst.id,
                "completed_at": fmt_time(inst.completed_at),
                "change": inst.plan.get("change"),
                "steps": list(inst.plan.get("steps") or inst.plan.get("columns") or []),
                "columns": cols,
            }
        )
    return out


@schema.command("show")
@click.argument("path")
@json_option
@timeline_option
def show(path: str, as_json: bool, timeline_url: str | None) -> None:
    """The table's columns: name, type, nullable, field id."""
    with opened_table(path, timeline_url) as table:
        info = schema_dict(table)
    if as_json:
        print_json(info)
        return
    con = console()
    con.print(rows_table(info["columns"], escape(f"schema of {path} (instant {info['instant']})")))
    con.print(
        escape(
            f"record key {info['record_key'] or '-'}, partitions {info['partition_by'] or '-'}, "
            f"ordering {info['ordering_field'] or '-'}, last field id {info['last_column_id']}"
        )
    )


@schema.command("history")
@click.argument("path")
@json_option
@timeline_option
def history(path: str, as_json: bool, timeline_url: str | None) -> None:
    """Every schema instant: its change, its steps and the columns it left."""
    with opened_table(path, timeline_url) as table:
        rows = history_of(table)
    if as_json:
        print_json(rows)
        return
    console().print(rows_table(rows, escape(f"schema history of {path}")))
