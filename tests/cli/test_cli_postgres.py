"""The CLI on a table whose timeline is in PostgreSQL (``--timeline URL``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table

from tests.cli._data import rows

pytestmark = pytest.mark.postgres


def test_create_show_inspect_on_postgres(runner: CliRunner, parquet_file: Path, tmp_path: Path, pg_url: str) -> None:
    path = str(tmp_path / "pg_table")
    res = runner.invoke(
        cli,
        [
            "create",
            path,
            "--schema-from",
            str(parquet_file),
            "--key",
            "id",
            "--ordering",
            "ts",
            "--type",
            "mor",
            "--timeline",
            pg_url,
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["timeline"] == "postgresql"

    t = Table.open(path, timeline=pg_url)
    if hasattr(t, "upsert"):
        t.upsert(rows([1, 2, 3]))
    t.log.store.close()

    res = runner.invoke(cli, ["timeline", "show", path, "--timeline", pg_url, "--json"])
    assert res.exit_code == 0, res.output
    shown = json.loads(res.stdout)
    assert shown[0]["action"] == "schema"
    last = shown[-1]["id"]
    res = runner.invoke(cli, ["timeline", "inspect", path, str(last), "--timeline", pg_url, "--json"])
    assert res.exit_code == 0, res.output
    assert [e["state"] for e in json.loads(res.stdout)["events"]] == ["requested", "inflight", "completed"]


def test_postgres_table_without_url_is_refused(
    runner: CliRunner, parquet_file: Path, tmp_path: Path, pg_url: str
) -> None:
    path = str(tmp_path / "pg_table")
    assert runner.invoke(cli, ["create", path, "--schema-from", str(parquet_file), "--timeline", pg_url]).exit_code == 0
    res = runner.invoke(cli, ["timeline", "show", path])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "PostgreSQL" in lines[0] and "TimelineConfigError" in lines[0]
