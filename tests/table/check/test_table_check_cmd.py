"""``lakeline table check PATH [--json]`` (issue 45 item 7): exit 0 on a healthy table,
1 with one line per problem naming its file, 2 when there is no table; ``--json`` is
the report as JSON on stdout (the progress bar goes to stderr).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table
from lakeline.timeline.view.file_group import FileKind

from tests.table.check._tables import OTHER_DAY, current_file, delete, flip_footer, make, retained_only, truncate


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_healthy_table_exits_zero(runner: CliRunner, tmp_path: Path, table_type: str) -> None:
    t = make(str(tmp_path / table_type), table_type)
    t.indexes.create("bloom_filters")
    result = runner.invoke(cli, ["table", "check", t.path])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("ok:") and "and the indexes" in result.stdout
    result = runner.invoke(cli, ["table", "check", t.path, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is True and report["problems"] == [] and report["files_checked"] > 0
    assert report["indexes"]["mismatches"] == []


def _damaged(t: Table) -> dict[str, str]:
    """Damage one file of each kind the check finds: relative path -> the problem it names."""
    base, log = current_file(t, FileKind.BASE), current_file(t, FileKind.LOG, OTHER_DAY)
    old = retained_only(t)
    delete(t, base)
    truncate(t, log)
    flip_footer(t, old)
    return {base: "missing", log: "size_mismatch", old: "unreadable_footer"}


def test_damaged_files_exit_one_with_a_line_each(runner: CliRunner, tmp_path: Path) -> None:
    t = make(str(tmp_path / "mor"), "mor")
    damaged = _damaged(t)
    result = runner.invoke(cli, ["table", "check", t.path, "--skip-indexes"])
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    for rel, kind in damaged.items():
        assert any(line.startswith(f"{kind}: {rel}") for line in lines), (rel, result.stdout)
    assert "problems" in lines[-1]
    result = runner.invoke(cli, ["table", "check", t.path, "--json", "--skip-indexes"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert {(p["path"], p["kind"]) for p in report["problems"]} >= set(damaged.items())
    assert {p["path"] for p in report["problems"]} == set(damaged)


SIX = [
    ("base", delete, "missing"),
    ("base", truncate, "size_mismatch"),
    ("base", flip_footer, "unreadable_footer"),
    ("log", delete, "missing"),
    ("log", truncate, "size_mismatch"),
    ("retained", delete, "missing"),
]


@pytest.mark.parametrize("which,damage,kind", SIX, ids=[f"{w}-{d.__name__}" for w, d, _ in SIX])
def test_each_damage_exits_one_naming_the_file(
    runner: CliRunner, tmp_path: Path, which: str, damage: Callable[[Table, str], None], kind: str
) -> None:
    t = make(str(tmp_path / "mor"), "mor")
    rel = retained_only(t) if which == "retained" else current_file(t, FileKind(which))
    damage(t, rel)
    result = runner.invoke(cli, ["table", "check", t.path])
    assert result.exit_code == 1, result.output
    problem_lines = result.stdout.splitlines()[:-1]
    assert problem_lines and all(rel in line for line in problem_lines), result.stdout
    assert any(line.startswith(f"{kind}: {rel}") for line in problem_lines)
    result = runner.invoke(cli, ["table", "check", t.path, "--json"])
    assert result.exit_code == 1, result.output
    files = {p["path"] for p in json.loads(result.stdout)["problems"] if p["kind"] != "index_unverifiable"}
    assert files == {rel}


def test_indexes_are_validated_unless_skipped(runner: CliRunner, tmp_path: Path) -> None:
    t = make(str(tmp_path / "cow"), "cow")
    t.indexes.create("column_stats")
    truncate(t, current_file(t, FileKind.BASE))
    result = runner.invoke(cli, ["table", "check", t.path, "--json"])
    assert result.exit_code == 1, result.output
    kinds = {p["kind"] for p in json.loads(result.stdout)["problems"]}
    assert "index_unverifiable" in kinds
    result = runner.invoke(cli, ["table", "check", t.path, "--json", "--skip-indexes"])
    report = json.loads(result.stdout)
    assert "index_unverifiable" not in {p["kind"] for p in report["problems"]} and report["indexes"] is None


def test_no_table_is_a_refused_command(runner: CliRunner, tmp_path: Path) -> None:
    result = runner.invoke(cli, ["table", "check", str(tmp_path / "nothing")])
    assert result.exit_code == 2
    assert "TableNotFoundError" in result.stderr
