"""``lakeline service run|schedule``: a run finishes pending plans and what is due, a
schedule only plans, a service that gives up exits 1, and names the table's services do
not know are one red line with exit 2."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from lakeline.cli.main import cli
from lakeline.services import ServiceAbortedError
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.instant import Action, State

from tests.cli._data import SCHEMA, rows

#: Short heartbeats, so a write left pending is failed (and rolled back) within a test.
HEARTBEAT = {"heartbeat.interval-ms": 50, "heartbeat.tolerable-misses": 1}


@pytest.fixture
def table(tmp_path: Path) -> Table:
    t = Table.create(
        tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], properties=HEARTBEAT
    )
    t.upsert(rows([1, 2, 3]))
    t.upsert(rows([4, 5]))
    return t


def _run(runner: CliRunner, *args: str, code: int = 0) -> Result:
    res = runner.invoke(cli, ["service", *args])
    assert res.exit_code == code, res.output
    return res


def _failed_write(t: Table) -> int:
    """A write whose writer died: requested, then no heartbeat until it expires."""
    ev = t.log.append(
        Action.COMMIT, State.REQUESTED, {"operation": "upsert", "snapshot_seq": t.timeline.last_seq, "writer": True}
    )
    time.sleep(0.3)  # > interval × (misses + 1)
    return ev.instant


def _pending_build(t: Table, name: str = "cs") -> int:
    """An index build scheduled by a process that never ran it (as ``index create --no-wait``)."""
    inst = t.services.schedule("indexing", op="create", index=name, kind="column_stats", columns=None, options=None)
    assert inst is not None
    return inst.id


def test_rollback_with_nothing_to_do(runner: CliRunner, table: Table) -> None:
    before = len(table.timeline)
    assert "rollback: nothing to do" in _run(runner, "run", table.path, "rollback").stdout
    out = json.loads(_run(runner, "run", table.path, "rollback", "--json").stdout)
    assert out == {"service": "rollback", "dry_run": False, "results": [], "left_pending": []}
    assert "nothing new to plan" in _run(runner, "run", table.path, "rollback", "--dry-run").stdout
    assert len(Table.open(table.path).timeline) == before


def test_rollback_of_a_failed_write_dry_run_then_run(runner: CliRunner, table: Table) -> None:
    failed = _failed_write(table)
    before = len(table.timeline)
    dry = json.loads(_run(runner, "run", table.path, "rollback", "--dry-run", "--json").stdout)
    (result,) = dry["results"]
    assert result["instant"] is None and result["plan"]["targets"] == [failed]
    assert len(Table.open(table.path).timeline) == before  # a dry run appends nothing
    assert "would plan" in _run(runner, "run", table.path, "rollback", "--dry-run").stdout

    out = json.loads(_run(runner, "run", table.path, "rollback", "--json").stdout)
    (result,) = out["results"]
    assert result["instant"]["action"] == "rollback" and result["instant"]["state"] == "completed"
    assert result["stats"]["rolled_back"] == 1 and result["stats"]["instants"] == [failed]
    assert result["aborted"] is None
    assert Table.open(table.path).timeline.get(failed).state == "rolled_back"
    assert "nothing to do" in _run(runner, "run", table.path, "rollback").stdout


def test_run_for_people_shows_the_instant_run(runner: CliRunner, table: Table) -> None:
    _failed_write(table)
    text = _run(runner, "run", table.path, "rollback").stdout
    assert "rollback: ran 1 instant(s)" in text and "completed" in text and "rolled_back=1" in text


def test_indexing_finishes_a_pending_build(runner: CliRunner, table: Table) -> None:
    inst = _pending_build(table)
    assert [(d.name, d.state) for d in table.indexes.list()] == [("cs", "building")]
    res = _run(runner, "run", table.path, "indexing")
    assert "indexing" in res.stdout and "completed" in res.stdout
    bar = re.search(r"indexing .*?(\d+)/(\d+)", res.stderr)
    assert bar is not None and bar.group(1) == bar.group(2) and int(bar.group(2)) > 0, res.stderr
    t = Table.open(table.path)
    assert [(d.name, d.state, d.instant) for d in t.indexes.list()] == [("cs", "ready", inst)]
    report = t.indexes.validate("cs")
    assert report["files_checked"] > 0 and report["mismatches"] == []
    out = json.loads(_run(runner, "run", table.path, "indexing", "--json").stdout)
    assert out["results"] == [] and out["left_pending"] == []


def test_indexing_json_and_dry_run(runner: CliRunner, table: Table) -> None:
    inst = _pending_build(table)
    dry = json.loads(_run(runner, "run", table.path, "indexing", "--dry-run", "--json").stdout)
    assert dry["results"][0]["pending"] == [inst]
    assert Table.open(table.path).indexes.list()[0].state == "building"
    out = json.loads(_run(runner, "run", table.path, "indexing", "--json").stdout)
    (result,) = out["results"]
    assert result["instant"]["id"] == inst and result["instant"]["state"] == "completed"
    assert result["stats"]["index"] == "cs"


def test_an_aborted_run_exits_1_and_says_why(runner: CliRunner, table: Table) -> None:
    inst = _pending_build(table)

    def give_up() -> None:
        raise ServiceAbortedError("inputs changed under the build")

    faults.on("indexing.after_build", give_up)
    try:
        res = _run(runner, "run", table.path, "indexing", code=1)
    finally:
        faults.disarm_all()
    assert f"aborted instant {inst}" in res.stdout and "inputs changed under the build" in res.stdout
    t = Table.open(table.path)
    assert t.timeline.get(inst).state == "rolled_back" and t.indexes.list() == []


def test_schedule_then_run(runner: CliRunner, table: Table) -> None:
    assert json.loads(_run(runner, "schedule", table.path, "rollback", "--json").stdout) is None
    assert "nothing to do" in _run(runner, "schedule", table.path, "rollback").stdout
    failed = _failed_write(table)
    planned = json.loads(_run(runner, "schedule", table.path, "rollback", "--json").stdout)
    assert planned["action"] == "rollback" and planned["state"] == "requested"
    assert planned["plan"]["targets"] == [failed]
    t = Table.open(table.path)
    assert t.timeline.get(planned["id"]).state == "requested"
    assert t.timeline.get(failed).state == "requested"  # only planned, nothing done yet
    out = json.loads(_run(runner, "run", table.path, "rollback", "--json").stdout)
    assert [r["instant"]["id"] for r in out["results"]] == [planned["id"]]  # the pending plan is run
    assert Table.open(table.path).timeline.get(failed).state == "rolled_back"


def test_schedule_for_people(runner: CliRunner, table: Table) -> None:
    _failed_write(table)
    text = _run(runner, "schedule", table.path, "rollback").stdout
    assert "scheduled rollback" in text and "requested" in text and "lakeline service run" in text


def test_names_the_services_do_not_know_are_one_red_line(runner: CliRunner, table: Table) -> None:
    before = len(table.timeline)
    for args in (["run", table.path, "foo"], ["run", table.path, "foo", "--dry-run"], ["schedule", table.path, "foo"]):
        res = _run(runner, *args, code=2)
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "unknown service 'foo'" in lines[0] and "[UnknownServiceError]" in lines[0]
        assert res.stdout == ""
    res = _run(runner, "schedule", table.path, "indexing", code=2)
    (line,) = res.stderr.strip().splitlines()
    assert "lakeline index create" in line and "[UnsupportedOperationError]" in line
    assert len(Table.open(table.path).timeline) == before


def test_missing_table_is_one_line_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    for args in (["run", str(tmp_path / "nope"), "rollback"], ["schedule", str(tmp_path / "nope"), "rollback"]):
        res = _run(runner, *args, code=2)
        (line,) = res.stderr.strip().splitlines()
        assert "TableNotFoundError" in line
