"""``lakeline schema show|history``: the columns with their field ids, and the schema
instants that made them, as rich tables and as ``--json`` (issue 29)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table


def _table(path: Path) -> Table:
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), ("qty", pa.int32()), ("tags", pa.list_(pa.string()))]
    )
    t = Table.create(path, schema, record_key="id")
    t.insert(pa.table({"id": [1], "qty": pa.array([2], pa.int32()), "tags": [["a"]]}))
    with t.update_schema() as u:
        u.rename_column("qty", "quantity")
        u.update_column("quantity", pa.int64())
        u.add_column("note", pa.string(), after="id")
    return t


def test_show_lists_columns_with_their_field_ids(tmp_path: Path) -> None:
    _table(tmp_path / "t")
    res = CliRunner().invoke(cli, ["schema", "show", str(tmp_path / "t"), "--json"])
    assert res.exit_code == 0, res.output
    info = json.loads(res.output)
    assert [(c["name"], c["type"], c["id"]) for c in info["columns"]] == [
        ("id", "int64", 1),
        ("note", "string", 5),
        ("quantity", "int64", 2),
        ("tags", "list<item: string>", 3),
    ]
    assert info["record_key"] == ["id"] and info["last_column_id"] == 5
    res = CliRunner().invoke(cli, ["schema", "show", str(tmp_path / "t")])
    assert res.exit_code == 0 and "quantity" in res.output and "last field id 5" in res.output


def test_history_lists_every_schema_instant_with_its_steps(tmp_path: Path) -> None:
    t = _table(tmp_path / "t")
    res = CliRunner().invoke(cli, ["schema", "history", str(tmp_path / "t"), "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)
    assert [r["change"] for r in rows] == ["create", "update"]
    assert rows[0]["columns"] == ["id", "qty", "tags"]
    assert rows[1]["steps"] == ["rename qty to quantity", "update quantity int64", "add note string after id"]
    assert rows[1]["columns"] == t.schema.names and rows[1]["instant"] == t.timeline.last_completed().id
    res = CliRunner().invoke(cli, ["schema", "history", str(tmp_path / "t")])
    assert res.exit_code == 0 and "rename qty to quantity" in res.output


def test_a_missing_table_is_one_red_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["schema", "show", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "TableNotFoundError" in res.stderr
