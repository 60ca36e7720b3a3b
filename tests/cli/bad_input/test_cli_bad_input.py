"""Bad input on the command line (audit 2026-12-07: D2, D4, D11, D20): one red line
naming the cause and exit 2, before anything is written; never a traceback, and never
exit 1 (which ``storage probe`` uses for "the store is unsafe")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table


def one_error_line(res: object, *parts: str) -> str:
    exit_code, output = res.exit_code, res.output  # type: ignore[attr-defined]
    assert exit_code == 2, output
    lines = output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), output
    for part in parts:
        assert part in lines[0], lines[0]
    return str(lines[0])


@pytest.mark.parametrize("uri", ["s3://lake/a/../b", "s3://lake/c/./d//e", "s3://lake/.."])
def test_storage_probe_of_a_dot_segment_location(runner: CliRunner, uri: str) -> None:
    """D2 (OS5): a traceback and exit 1 before."""
    res = runner.invoke(cli, ["storage", "probe", uri, "-o", "AWS_ENDPOINT_URL=http://127.0.0.1:9"])
    one_error_line(res, "not allowed in an object-store location", "[StorageConfigError]")


def test_create_at_a_dot_segment_location(runner: CliRunner, parquet_file: Path) -> None:
    """D2 (OS6)."""
    res = runner.invoke(cli, ["create", "s3://lake/a/../cli8", "--schema-from", str(parquet_file), "--key", "id"])
    one_error_line(res, "'..'", "[StorageConfigError]")


@pytest.mark.parametrize("endpoint", ["not a url", "http://127.0.0.1:99999"])
def test_storage_probe_with_a_malformed_endpoint(runner: CliRunner, endpoint: str) -> None:
    """D4 (OS20): a Rust panic with its backtrace, and exit 1, before."""
    res = runner.invoke(cli, ["storage", "probe", "s3://lake/pp", "-o", f"AWS_ENDPOINT_URL={endpoint}"])
    one_error_line(res, "AWS_ENDPOINT_URL", "[StorageConfigError]")


def test_a_property_given_twice_is_refused(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    """D11 (ME23): the last one silently won."""
    path = tmp_path / "t"
    res = runner.invoke(
        cli,
        ["create", str(path), "--schema-from", str(parquet_file), "--key", "id", "--ordering", "ts"]
        + ["-p", "commit.max-retries=3", "-p", "user.owner=me", "-p", "commit.max-retries= 7"],
    )
    one_error_line(res, "commit.max-retries is given twice", "=3", "=7", "[InvalidPropertyError]")
    assert not path.exists()


def test_distinct_properties_still_work(runner: CliRunner, parquet_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "t"
    res = runner.invoke(
        cli,
        ["create", str(path), "--schema-from", str(parquet_file), "--key", "id"] + ["-p", "user.a=1", "-p", "user.A=2"],
    )
    assert res.exit_code == 0, res.output
    assert Table.open(path).config.properties["user.A"] == "2"


def test_a_report_under_a_regular_file_says_it_is_a_file(runner: CliRunner, busy_table: Table, tmp_path: Path) -> None:
    """D20 (CL5): "the folder ... does not exist" where the folder is a file."""
    regular = tmp_path / "notes.txt"
    regular.write_text("x")
    res = runner.invoke(cli, ["timeline", "report", busy_table.path, "--html", str(regular / "x.html")])
    one_error_line(res, f"{regular} is a file, not a folder", "[OutputPathError]")
    deeper = runner.invoke(cli, ["timeline", "report", busy_table.path, "--html", str(regular / "a" / "x.html")])
    one_error_line(deeper, f"{regular} is a file, not a folder", "[OutputPathError]")
    assert regular.read_text() == "x"


def test_index_validate_without_an_index_does_not_say_ok(runner: CliRunner, busy_table: Table) -> None:
    """Issue 45 item 6: "ok" while a data file was truncated; nothing had been checked."""
    data = sorted(f.path for f in busy_table.view(busy_table.timeline).files())[0]
    full = busy_table.storage.read_bytes(busy_table.storage.path(data))
    Path(busy_table.storage.path(data)).write_bytes(full[: len(full) // 2])
    res = runner.invoke(cli, ["index", "validate", busy_table.path])
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    assert "nothing validated: the table has no index" in text and "lakeline table check" in text, text
    assert not text.startswith("ok")
    report = json.loads(runner.invoke(cli, ["index", "validate", busy_table.path, "--json"]).stdout)
    assert report["indexes_validated"] == [] and report["mismatches"] == []
