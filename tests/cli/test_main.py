"""Exit codes of bad input (issue 25, audit rows C1b, C6b, L1, L2): a refused command is
one red line on stderr and exit 2, whether lakeline, the operating system or pyarrow
refused; exit 1 stays "the command worked, the table did not pass" (an index
disagrees); anything else (a bug) keeps its traceback.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table

from tests.cli._data import SCHEMA, rows

LAKELINE = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "lakeline"

#: Every command that opens a table at PATH (audit row L1), with and without --json;
#: ``{p}`` is the path.
TABLE_COMMANDS = [
    ["timeline", "show", "{p}"],
    ["timeline", "show", "{p}", "--json"],
    ["timeline", "inspect", "{p}", "1"],
    ["timeline", "inspect", "{p}", "1", "--json"],
    ["timeline", "report", "{p}", "--html", "{p}.html"],
    ["index", "list", "{p}"],
    ["index", "list", "{p}", "--json"],
    ["index", "create", "{p}", "column_stats"],
    ["index", "create", "{p}", "column_stats", "--json"],
    ["index", "validate", "{p}"],
    ["index", "validate", "{p}", "--json"],
    ["index", "drop", "{p}", "cs"],
    ["service", "run", "{p}", "cleaning"],
    ["service", "run", "{p}", "cleaning", "--json"],
    ["service", "schedule", "{p}", "cleaning"],
    ["service", "schedule", "{p}", "cleaning", "--json"],
    ["savepoint", "create", "{p}"],
    ["savepoint", "create", "{p}", "--json"],
    ["savepoint", "list", "{p}"],
    ["savepoint", "list", "{p}", "--json"],
    ["savepoint", "release", "{p}", "1"],
    ["savepoint", "release", "{p}", "1", "--json"],
]


def _args(command: list[str], path: Path) -> list[str]:
    return [a.replace("{p}", str(path)) for a in command]


def assert_one_line(res: object, exit_code: int = 2) -> str:
    """The command was refused with exactly one line on stderr, and no traceback."""
    assert res.exit_code == exit_code, (res.exit_code, res.output, res.exception)  # type: ignore[attr-defined]
    lines = res.stderr.strip().splitlines()  # type: ignore[attr-defined]
    assert len(lines) == 1, lines
    assert "Traceback" not in res.stderr  # type: ignore[attr-defined]
    return lines[0]


@pytest.fixture
def indexed(tmp_path: Path) -> Table:
    """A cow table with a column_stats index that matches its data."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"])
    t.upsert(rows([1, 2, 3, 4]))
    t.indexes.create("column_stats", name="cs")
    return t


def a_base(t: Table) -> Path:
    return Path(t.storage.path(t.view(t.timeline).latest_slices()[0].base.path))  # type: ignore[union-attr]


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


@pytest.mark.parametrize("as_json", [[], ["--json"]])
@pytest.mark.parametrize("damage", ["truncate", "delete"])
def test_index_validate_over_a_damaged_file_exits_2(
    runner: CliRunner, indexed: Table, damage: str, as_json: list[str]
) -> None:
    base = a_base(indexed)
    if damage == "truncate":
        truncate(base)
    else:
        base.unlink()
    line = assert_one_line(runner.invoke(cli, ["index", "validate", indexed.path, *as_json]))
    rel = str(base.relative_to(indexed.path))
    assert rel in line
    assert line.endswith("[CorruptFileError]" if damage == "truncate" else "[SnapshotExpiredError]")


def test_index_validate_still_exits_1_for_a_mismatch(runner: CliRunner, indexed: Table) -> None:
    shutil.rmtree(Path(indexed.path) / ".lakeline" / "metadata")  # the entries are gone, the data is fine
    res = runner.invoke(cli, ["index", "validate", indexed.path, "--json"])
    assert res.exit_code == 1, res.output


def test_index_validate_over_a_truncated_file_in_a_subprocess(indexed: Table) -> None:
    truncate(a_base(indexed))
    proc = subprocess.run(
        [str(LAKELINE), "index", "validate", indexed.path], check=False, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("error: data file ") and line.endswith("[CorruptFileError]")


@pytest.mark.parametrize("command", TABLE_COMMANDS, ids=" ".join)
def test_a_command_on_a_regular_file_exits_2(runner: CliRunner, tmp_path: Path, command: list[str]) -> None:
    path = tmp_path / "f"
    path.write_text("x")
    assert_one_line(runner.invoke(cli, _args(command, path)))


@pytest.mark.parametrize("where", ["f", "f/t"])
def test_create_on_a_regular_file_exits_2(runner: CliRunner, tmp_path: Path, parquet_file: Path, where: str) -> None:
    (tmp_path / "f").write_text("x")
    args = ["create", str(tmp_path / where), "--key", "id", "--schema-from", str(parquet_file)]
    assert_one_line(runner.invoke(cli, args))
    assert (tmp_path / "f").read_text() == "x"


@pytest.mark.parametrize(
    "error",
    [
        NotADirectoryError(20, "Not a directory"),
        IsADirectoryError(21, "Is a directory"),
        PermissionError(13, "Permission denied"),
        pa.ArrowInvalid("Parquet magic bytes not found in footer"),
    ],
    ids=lambda e: type(e).__name__,
)
@pytest.mark.parametrize("command", [TABLE_COMMANDS[0], TABLE_COMMANDS[10], TABLE_COMMANDS[13]], ids=" ".join)
def test_os_and_arrow_errors_are_one_line(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: Exception, command: list[str]
) -> None:
    """Whatever Table.open lets through about a bad path (before or after it raises
    typed errors for one): one line naming the error's type, exit 2."""

    def refuse(*_: object, **__: object) -> Table:
        raise error

    monkeypatch.setattr(Table, "open", staticmethod(refuse))
    line = assert_one_line(runner.invoke(cli, _args(command, tmp_path / "t")))
    assert line.endswith(f"[{type(error).__name__}]")


def test_a_bug_keeps_its_traceback(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: object, **__: object) -> Table:
        raise KeyError("table_uuid")

    monkeypatch.setattr(Table, "open", staticmethod(broken))
    res = runner.invoke(cli, ["timeline", "show", str(tmp_path)])
    assert isinstance(res.exception, KeyError)  # not turned into a one-line refusal
    assert res.exit_code == 1
