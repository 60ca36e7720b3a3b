"""``lakeline index create|drop|list|validate``: each command changes (or reads) what
``Table.open(path).indexes`` then sees, and refuses bad input with one red line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from lakeline.cli.main import cli
from lakeline.indexes.metadata_table import MetadataTable
from lakeline.table import Table

from tests.cli._data import SCHEMA, rows


@pytest.fixture
def table(tmp_path: Path) -> Table:
    """A cow table with data in two partitions, so a build has files to index."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"])
    t.upsert(rows([1, 2, 3]))
    t.upsert(rows([4, 5]))
    return t


def _ok(runner: CliRunner, *args: str) -> Result:
    res = runner.invoke(cli, ["index", *args])
    assert res.exit_code == 0, res.output
    return res


def _one_error_line(res: Result, error: str) -> str:
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"[{error}]" in lines[0], res.stderr
    return lines[0]


def test_create_builds_with_a_progress_bar_and_the_index_is_ready(runner: CliRunner, table: Table) -> None:
    res = _ok(runner, "create", table.path, "column_stats", "--columns", "id,amount")
    assert "column_stats" in res.stdout and "ready" in res.stdout
    # Off a terminal rich prints the bar once, as it ended: every base file indexed.
    bar = re.search(r"building column_stats .*?(\d+)/(\d+)", res.stderr)
    assert bar is not None and bar.group(1) == bar.group(2) and int(bar.group(2)) > 0, res.stderr
    (idx,) = Table.open(table.path).indexes.list()
    assert (idx.name, idx.kind, idx.columns, idx.state) == ("column_stats", "column_stats", ("id", "amount"), "ready")


def test_create_bloom_filters_with_name_and_fpp(runner: CliRunner, table: Table) -> None:
    res = _ok(runner, "create", table.path, "bloom_filters", "--name", "ids", "--fpp", "0.001", "--json")
    out = json.loads(res.stdout)
    assert out["name"] == "ids" and out["kind"] == "bloom_filters" and out["state"] == "ready"
    assert out["columns"] == ["id"]  # the default of bloom filters: the record key, spelled out
    assert out["options"] == {"fpp": 0.001}
    (idx,) = Table.open(table.path).indexes.list()
    assert (idx.name, idx.state, dict(idx.options)) == ("ids", "ready", {"fpp": 0.001})


def test_create_no_wait_only_schedules(runner: CliRunner, table: Table) -> None:
    res = _ok(runner, "create", table.path, "column_stats", "--name", "cs", "--no-wait", "--json")
    out = json.loads(res.stdout)
    assert out["name"] == "cs" and out["state"] == "building"
    assert out["columns"] == SCHEMA.names  # column_stats default: every column
    t = Table.open(table.path)
    assert [(d.name, d.state) for d in t.indexes.list()] == [("cs", "building")]
    assert [i.id for i in t.timeline.pending()] == [out["instant"]]
    assert res.stderr == ""  # nothing was built, so no progress bar
    human = _ok(runner, "create", table.path, "bloom_filters", "--no-wait")
    assert "building" in human.stdout and "lakeline service run" in human.stdout


def test_refused_creates_are_one_red_line_and_create_nothing(runner: CliRunner, table: Table) -> None:
    before = len(table.timeline)
    line = _one_error_line(runner.invoke(cli, ["index", "create", table.path, "nope"]), "InvalidIndexError")
    assert "unknown index kind 'nope'" in line
    _one_error_line(
        runner.invoke(cli, ["index", "create", table.path, "column_stats", "--columns", "id,zzz"]), "InvalidIndexError"
    )
    _one_error_line(
        runner.invoke(cli, ["index", "create", table.path, "column_stats", "--name", "files"]), "InvalidIndexError"
    )
    assert Table.open(table.path).indexes.list() == []
    assert len(Table.open(table.path).timeline) == before
    _ok(runner, "create", table.path, "column_stats")
    _one_error_line(runner.invoke(cli, ["index", "create", table.path, "column_stats"]), "IndexExistsError")
    # --fpp is for bloom filters, and a rate must lie in (0, 1): click's usage errors.
    assert (
        runner.invoke(cli, ["index", "create", table.path, "column_stats", "--name", "x", "--fpp", "0.1"]).exit_code
        == 2
    )
    assert runner.invoke(cli, ["index", "create", table.path, "bloom_filters", "--fpp", "1.5"]).exit_code == 2
    assert [d.name for d in Table.open(table.path).indexes.list()] == ["column_stats"]


def test_list_json_and_for_people(runner: CliRunner, table: Table) -> None:
    assert json.loads(_ok(runner, "list", table.path, "--json").stdout) == []
    assert "no indexes" in _ok(runner, "list", table.path).stdout
    table.indexes.create("column_stats", columns=["amount"])
    table.indexes.create("bloom_filters", options={"fpp": 0.01})
    table.services.schedule("indexing", op="create", index="later", kind="column_stats", columns=None, options=None)
    out = json.loads(_ok(runner, "list", table.path, "--json").stdout)
    assert [(i["name"], i["kind"], i["columns"], i["state"]) for i in out] == [
        ("bloom_filters", "bloom_filters", ["id"], "ready"),
        ("column_stats", "column_stats", ["amount"], "ready"),
        ("later", "column_stats", SCHEMA.names, "building"),
    ]
    assert out[0]["options"] == {"fpp": 0.01}
    assert {i["instant"] for i in out} == {d.instant for d in table.indexes.list()}
    text = _ok(runner, "list", table.path).stdout
    for needle in ("bloom_filters", "column_stats", "later", "ready", "building", "amount", "0.01"):
        assert needle in text, needle


def test_drop(runner: CliRunner, table: Table) -> None:
    part = table.indexes.create("column_stats").partition  # <name>@<creating instant>
    assert part in MetadataTable(table.storage).indexes_on_storage()
    assert "dropped" in _ok(runner, "drop", table.path, "column_stats").stdout
    assert Table.open(table.path).indexes.list() == []
    assert part not in MetadataTable(table.storage).indexes_on_storage()
    assert json.loads(_ok(runner, "list", table.path, "--json").stdout) == []
    line = _one_error_line(runner.invoke(cli, ["index", "drop", table.path, "column_stats"]), "IndexNotFoundError")
    assert "column_stats" in line
    _one_error_line(runner.invoke(cli, ["index", "drop", table.path, "files"]), "InvalidIndexError")


def test_validate_sound_indexes(runner: CliRunner, table: Table) -> None:
    table.indexes.create("column_stats")
    table.indexes.create("bloom_filters")
    table.upsert(rows([3, 6], ts=2))  # entries written by the writer, not the build
    for args in ((), ("column_stats",), ("bloom_filters",)):
        report = json.loads(_ok(runner, "validate", table.path, *args, "--json").stdout)
        assert report["files_checked"] > 0 and report["mismatches"] == [], args
    assert "ok" in _ok(runner, "validate", table.path).stdout
    _one_error_line(runner.invoke(cli, ["index", "validate", table.path, "nope"]), "IndexNotFoundError")


def test_validate_reports_a_lost_base_and_exits_1(runner: CliRunner, table: Table) -> None:
    part = table.indexes.create("column_stats").partition
    # Lose what the build wrote (its base), as a damaged store would.
    bases = MetadataTable(table.storage).bases(part)
    assert bases
    for _, path in bases:
        table.storage.delete(path)
    res = runner.invoke(cli, ["index", "validate", table.path, "--json"])
    assert res.exit_code == 1, res.output
    report = json.loads(res.stdout)
    assert report["mismatches"] and all(
        m["problem"] == "missing" and m["index"] == "column_stats" for m in report["mismatches"]
    )
    res = runner.invoke(cli, ["index", "validate", table.path, "column_stats"])
    assert res.exit_code == 1
    assert "missing" in res.stdout and f"{len(report['mismatches'])} mismatches" in res.stdout


def test_missing_table_is_one_line_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    nowhere = str(tmp_path / "nope")
    for args in (
        ["create", nowhere, "column_stats"],
        ["drop", nowhere, "x"],
        ["list", nowhere, "--json"],
        ["validate", nowhere],
    ):
        res = runner.invoke(cli, ["index", *args])
        _one_error_line(res, "TableNotFoundError")
        assert res.stdout == "", args


def test_create_and_validate_a_record_index_with_buckets(runner: CliRunner, table: Table) -> None:
    out = json.loads(_ok(runner, "create", table.path, "record_index", "--buckets", "3", "--json").stdout)
    assert (out["kind"], out["state"], out["columns"], out["options"]) == (
        "record_index",
        "ready",
        ["id"],
        {"buckets": 3},
    )
    report = json.loads(_ok(runner, "validate", table.path, "record_index", "--json").stdout)
    assert report["mismatches"] == [] and report["files_checked"] > 0
    # A bucket count is for record indexes only, and must lie in [1, 65536].
    assert runner.invoke(cli, ["index", "create", table.path, "column_stats", "--buckets", "3"]).exit_code == 2
    _one_error_line(
        runner.invoke(cli, ["index", "create", table.path, "record_index", "--name", "r0", "--buckets", "0"]),
        "InvalidIndexOptionsError",
    )
    assert [d.name for d in Table.open(table.path).indexes.list()] == ["record_index"]
