"""``timeline report --html FILE`` where FILE cannot be written (issue 25, audit L5): one
line and exit 2 (:class:`OutputPathError`), checked before the table is read."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table


def test_report_into_a_missing_folder_is_one_line(runner: CliRunner, busy_table: Table, tmp_path: Path) -> None:
    target = tmp_path / "nope" / "dir" / "r.html"
    res = runner.invoke(cli, ["timeline", "report", busy_table.path, "--html", str(target)])
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        f"error: cannot write {target}: the folder {target.parent} does not exist [OutputPathError]"
    ]
    assert not target.parent.exists()


def test_report_into_an_existing_folder_still_works(runner: CliRunner, busy_table: Table, tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    res = runner.invoke(cli, ["timeline", "report", busy_table.path, "--html", str(target)])
    assert res.exit_code == 0, res.output
    assert target.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
