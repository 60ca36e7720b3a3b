"""``lakeline tables list|show|drop --catalog DSN`` against a real catalog: each command
prints what ``Catalog`` holds, and ``drop`` changes what it holds afterwards."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from lakeline.cli.main import cli
from lakeline.table import Catalog, Table

from tests.cli._data import SCHEMA, rows

pytestmark = pytest.mark.postgres


@pytest.fixture
def ns(cat: Catalog, tmp_path: Path) -> str:
    """A namespace of its own with two tables: ``orders`` (mor, two writes) and ``empty``."""
    ns = f"c{uuid.uuid4().hex[:12]}"
    t = cat.create_table(
        f"{ns}.orders",
        tmp_path / "orders",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type="mor",
        properties={"clean.retain": 5},
    )
    t.upsert(rows([1, 2, 3]))
    t.upsert(rows([2], ts=2))
    t.log.store.close()
    cat.create_table(f"{ns}.empty", tmp_path / "empty", SCHEMA).log.store.close()
    return ns


def _ok(runner: CliRunner, *args: str, input: str | None = None) -> Result:
    res = runner.invoke(cli, ["tables", *args], input=input)
    assert res.exit_code == 0, res.output
    return res


def _one_error_line(res: Result, error: str) -> str:
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"[{error}]" in lines[0], res.stderr
    return lines[0]


def test_list_json_and_table(runner: CliRunner, cat: Catalog, ns: str, pg_url: str, tmp_path: Path) -> None:
    listed = json.loads(_ok(runner, "list", ns, "--catalog", pg_url, "--json").stdout)
    assert [e["name"] for e in listed] == [f"{ns}.empty", f"{ns}.orders"]
    orders = listed[1]
    assert orders["location"] == str((tmp_path / "orders").resolve()) and orders["namespace"] == ns
    assert orders["table_uuid"] == cat.describe(f"{ns}.orders").table_uuid

    everything = json.loads(_ok(runner, "list", "--catalog", pg_url, "--json").stdout)
    assert {f"{ns}.empty", f"{ns}.orders"} <= {e["name"] for e in everything}

    text = _ok(runner, "list", ns, "--catalog", pg_url).stdout
    assert f"{ns}.orders" in text and f"{ns}.empty" in text and orders["table_uuid"] in text
    assert "no tables in namespace nothing_here" in _ok(runner, "list", "nothing_here", "--catalog", pg_url).stdout


def test_catalog_from_environment(runner: CliRunner, ns: str, pg_url: str) -> None:
    res = runner.invoke(cli, ["tables", "list", ns, "--json"], env={"LAKELINE_CATALOG": pg_url})
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)) == 2
    res = runner.invoke(cli, ["tables", "list", ns], env={"LAKELINE_CATALOG": None})
    assert res.exit_code == 2 and "--catalog" in res.output  # click's usage error


def test_show_json(runner: CliRunner, cat: Catalog, ns: str, pg_url: str) -> None:
    info = json.loads(_ok(runner, "show", f"{ns}.orders", "--catalog", pg_url, "--json").stdout)
    t = cat.load_table(f"{ns}.orders")
    last = t.timeline.last_completed()
    t.log.store.close()
    assert last is not None
    assert (info["name"], info["location"], info["table_uuid"]) == (f"{ns}.orders", t.path, t.config.table_uuid)
    assert [c["name"] for c in info["schema"]] == SCHEMA.names
    assert info["properties"] == {"clean.retain": 5}
    assert (info["table_type"], info["record_key"], info["partition_by"]) == ("mor", ["id"], ["day"])
    assert info["last_instant"]["id"] == last.id and info["last_instant"]["action"] == "deltacommit"


def test_show_human(runner: CliRunner, cat: Catalog, ns: str, pg_url: str) -> None:
    out = _ok(runner, "show", f"{ns}.orders", "--catalog", pg_url).stdout
    entry = cat.describe(f"{ns}.orders")
    assert entry.location in out and entry.table_uuid in out
    assert "clean.retain = 5" in out and "amount" in out and "deltacommit" in out


def test_show_refuses_unknown_and_bad_names(runner: CliRunner, ns: str, pg_url: str) -> None:
    _one_error_line(runner.invoke(cli, ["tables", "show", f"{ns}.nothing", "--catalog", pg_url]), "TableNotFoundError")
    _one_error_line(runner.invoke(cli, ["tables", "show", "no-dots", "--catalog", pg_url]), "InvalidTableNameError")
    _one_error_line(runner.invoke(cli, ["tables", "list", "--catalog", "/not/a/url"]), "TimelineConfigError")


def test_drop_asks_and_keeps_the_table(runner: CliRunner, cat: Catalog, ns: str, pg_url: str, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["tables", "drop", f"{ns}.orders", "--catalog", pg_url], input="n\n")
    assert res.exit_code == 1  # aborted: nothing dropped
    assert cat.table_exists(f"{ns}.orders")

    res = _ok(runner, "drop", f"{ns}.orders", "--catalog", pg_url, input="y\n")
    assert "dropped" in res.stdout
    assert cat.list_tables(ns) == [f"{ns}.empty"]
    t = Table.open(tmp_path / "orders", timeline=pg_url)  # only the name went
    assert t.to_arrow().num_rows == 3
    t.log.store.close()
    _one_error_line(
        runner.invoke(cli, ["tables", "drop", f"{ns}.orders", "--yes", "--catalog", pg_url]), "TableNotFoundError"
    )


def test_drop_purge(runner: CliRunner, cat: Catalog, ns: str, pg_url: str, tmp_path: Path) -> None:
    res = _ok(runner, "drop", f"{ns}.orders", "--purge", "--yes", "--catalog", pg_url)
    assert "purged" in res.stdout
    assert not (tmp_path / "orders").exists() and (tmp_path / "empty").exists()
    assert cat.list_tables(ns) == [f"{ns}.empty"]
