"""``lakeline timeline show|inspect`` over a table with instants in every state."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table


def _show(runner: CliRunner, table: Table, *args: str) -> list[dict]:
    res = runner.invoke(cli, ["timeline", "show", table.path, "--json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_show_json_lists_every_instant(runner: CliRunner, busy_table: Table) -> None:
    out = _show(runner, busy_table)
    assert [i["id"] for i in out] == [i.id for i in busy_table.timeline.instants()]
    assert out == [i.to_dict() for i in busy_table.timeline.instants()]
    assert out[0]["action"] == "schema" and out[0]["state"] == "completed"
    assert {i["state"] for i in out} == {"completed", "rolled_back", "requested"}


def test_show_filters_and_limit(runner: CliRunner, busy_table: Table) -> None:
    tl = busy_table.timeline
    pending = _show(runner, busy_table, "--pending")
    assert [i["id"] for i in pending] == [i.id for i in tl.pending()]
    assert [i["action"] for i in pending] == ["clean"]
    writes = _show(runner, busy_table, "--action", "deltacommit")
    assert len(writes) == 3 and all(i["action"] == "deltacommit" for i in writes)
    newest = _show(runner, busy_table, "--action", "DeltaCommit", "--limit", "2")
    assert [i["id"] for i in newest] == [i["id"] for i in writes][-2:]
    assert [i["id"] for i in _show(runner, busy_table, "--limit", "1")] == [tl.instants()[-1].id]
    assert _show(runner, busy_table, "--pending", "--action", "commit") == []


def test_show_rejects_bad_options(runner: CliRunner, busy_table: Table) -> None:
    assert runner.invoke(cli, ["timeline", "show", busy_table.path, "--limit", "0"]).exit_code == 2
    assert runner.invoke(cli, ["timeline", "show", busy_table.path, "--action", "nope"]).exit_code == 2


def test_show_for_people(runner: CliRunner, busy_table: Table) -> None:
    res = runner.invoke(cli, ["timeline", "show", busy_table.path])
    assert res.exit_code == 0, res.output
    text = res.stdout
    for needle in (
        "requested_at",
        "completed_at",
        "summary",
        "deltacommit",
        "rolled_back",
        "clean",
        "create: mor",
        "upsert inserted=3",
        "heartbeat expired",
        "policy",
    ):
        assert needle in text, needle
    res = runner.invoke(cli, ["timeline", "show", busy_table.path, "--action", "archive"])
    assert res.exit_code == 0 and "no instants match" in res.stdout


def test_inspect_json_has_events(runner: CliRunner, busy_table: Table) -> None:
    write = busy_table.timeline.completed()[1]
    res = runner.invoke(cli, ["timeline", "inspect", busy_table.path, str(write.id), "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["id"] == write.id and out["metadata"]["operation"] == "upsert"
    assert [e["state"] for e in out["events"]] == ["requested", "inflight", "completed"]
    assert out["events"][0]["seq"] == write.id
    assert out["events"][-1]["seq"] == write.completed_seq
    assert all({"seq", "ts", "state"} <= e.keys() for e in out["events"])


def test_inspect_for_people(runner: CliRunner, busy_table: Table) -> None:
    rolled = next(i for i in busy_table.timeline.instants() if i.state == "rolled_back")
    res = runner.invoke(cli, ["timeline", "inspect", busy_table.path, str(rolled.id)])
    assert res.exit_code == 0, res.output
    assert f"instant {rolled.id}" in res.stdout
    assert "events" in res.stdout and "rolled_back" in res.stdout and "heartbeat expired" in res.stdout


def test_inspect_unknown_instant(runner: CliRunner, busy_table: Table) -> None:
    res = runner.invoke(cli, ["timeline", "inspect", busy_table.path, "9999"])
    assert res.exit_code == 2
    assert res.stderr.strip().splitlines() == ["error: no instant 9999 on the timeline [InstantNotFoundError]"]


def test_missing_table_is_one_line_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    for args in (
        ["timeline", "show", str(tmp_path / "nope")],
        ["timeline", "show", str(tmp_path / "nope"), "--json"],
        ["timeline", "inspect", str(tmp_path / "nope"), "0"],
    ):
        res = runner.invoke(cli, args)
        assert res.exit_code == 2, args
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and "no lakeline table at" in lines[0] and "TableNotFoundError" in lines[0]
        assert res.stdout == ""
        assert res.exception is None or isinstance(res.exception, SystemExit)


def test_wrong_timeline_kind_is_refused(runner: CliRunner, busy_table: Table) -> None:
    res = runner.invoke(cli, ["timeline", "show", busy_table.path, "--timeline", "postgresql://x/y"])
    assert res.exit_code == 2
    assert "filesystem" in res.stderr
