"""``lakeline create``: from a Parquet file's schema to a table ``Table.open`` reads."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table


def test_create_from_parquet(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "t"
    res = runner.invoke(
        cli,
        [
            "create",
            str(path),
            "--schema-from",
            str(parquet_file),
            "--key",
            "id",
            "--ordering",
            "ts",
            "--partition-by",
            "day",
            "--type",
            "mor",
            "--property",
            "commit.max-retries=7",
            "-p",
            "user.owner=me",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "created" in res.stdout
    cfg = Table.open(path).config
    assert cfg.table_type == "mor"
    assert cfg.record_key == ("id",)
    assert cfg.ordering_field == "ts"
    assert cfg.partition_by == ("day",)
    assert cfg.properties == {"commit.max-retries": 7, "user.owner": "me"}
    assert cfg.schema.names == ["id", "ts", "day", "region", "amount"]
    assert not cfg.schema.metadata  # the file's pandas metadata is not the table's


def test_create_comma_lists_and_json(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "t"
    res = runner.invoke(
        cli,
        [
            "create",
            str(path),
            "--schema-from",
            str(parquet_file),
            "--key",
            "id,region",
            "--partition-by",
            "day, region",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    info = json.loads(res.stdout)
    assert info["record_key"] == ["id", "region"]
    assert info["partition_by"] == ["day", "region"]
    assert info["table_type"] == "cow"
    assert info["timeline"] == "filesystem"
    assert info["schema_instant"] == 0
    assert [c["name"] for c in info["schema"]] == ["id", "ts", "day", "region", "amount"]
    assert Table.open(path).config.record_key == ("id", "region")


def test_create_append_only(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["create", str(tmp_path / "t"), "--schema-from", str(parquet_file)])
    assert res.exit_code == 0, res.output
    assert Table.open(tmp_path / "t").config.record_key == ()


def _one_red_line(res_stderr: str, *needles: str) -> None:
    lines = res_stderr.strip().splitlines()
    assert len(lines) == 1, res_stderr
    assert lines[0].startswith("error: ")
    for n in needles:
        assert n in lines[0]


def test_unknown_property_is_one_line_exit_2(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    res = runner.invoke(
        cli, ["create", str(tmp_path / "t"), "--schema-from", str(parquet_file), "--property", "write.no-such-thing=1"]
    )
    assert res.exit_code == 2
    _one_red_line(res.stderr, "write.no-such-thing", "InvalidPropertyError")
    assert not (tmp_path / "t").exists()  # refused before anything is written


def test_unknown_key_column(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["create", str(tmp_path / "t"), "--schema-from", str(parquet_file), "--key", "nope"])
    assert res.exit_code == 2
    _one_red_line(res.stderr, "nope", "UnknownColumnError")


def test_create_twice_refused(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    args = ["create", str(tmp_path / "t"), "--schema-from", str(parquet_file), "--key", "id"]
    assert runner.invoke(cli, args).exit_code == 0
    res = runner.invoke(cli, args)
    assert res.exit_code == 2
    _one_red_line(res.stderr, "already exists", "TableExistsError")


def test_bad_property_syntax_and_bad_schema_file(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["create", str(tmp_path / "t"), "--schema-from", str(parquet_file), "-p", "oops"])
    assert res.exit_code == 2
    assert "KEY=VALUE" in res.stderr
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    res = runner.invoke(cli, ["create", str(tmp_path / "t2"), "--schema-from", str(junk)])
    assert res.exit_code == 2
    assert "cannot read a Parquet schema" in res.stderr
    assert "Traceback" not in res.output
