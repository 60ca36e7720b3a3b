"""``lakeline demo`` and :func:`run_demo`, which grows with the write path."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.compute as pc
import pytest
from click.testing import CliRunner
from lakeline.cli.demo import DEMO_TABLE, run_demo
from lakeline.cli.main import cli
from lakeline.table import Table


def test_run_demo_returns_the_table(tmp_path: Path) -> None:
    t = run_demo(tmp_path)
    assert isinstance(t, Table)
    assert Path(t.path) == (tmp_path / DEMO_TABLE).resolve()
    tl = t.timeline
    assert tl.instants()[0].action == "schema"
    if hasattr(t, "upsert"):
        [indexing] = tl.by_action("indexing")
        assert indexing.state == "completed"
        assert [(d.name, d.state) for d in t.indexes.list()] == [("column_stats", "ready")]
        assert t.indexes.validate()["mismatches"] == []
        # The concurrent writer committed, some of it while the index was building.
        writes = [i for i in tl.completed() if i.action == "deltacommit"]
        assert len(writes) >= 5 + 3
        assert any(i.completed_seq > indexing.id for i in writes if i.completed_seq < (indexing.completed_seq or 0))
        now = t.to_arrow(filter=pc.field("id") < 100).sort_by("id")
        assert now.column("id").to_pylist() == [2, 3, 4, 6, 7]
        # id 4's late upsert had an older ordering value: the stored version stays.
        assert now.filter(now["id"].to_numpy() == 4).column("ts").to_pylist() == [1]


def test_demo_command(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["demo", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert "created" in res.stdout and "timeline" in res.stdout
    if hasattr(Table, "upsert"):
        assert "time travel" in res.stdout
    again = runner.invoke(cli, ["demo", str(tmp_path)])
    assert again.exit_code == 2
    assert "TableExistsError" in again.stderr


def test_demo_default_dir_is_fresh(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the made folder lands in the test's own
    res = runner.invoke(cli, ["demo"])
    assert res.exit_code == 0, res.output
    [made] = tmp_path.glob("lakeline-demo-*")
    assert (made / DEMO_TABLE).is_dir()
    # It says where it wrote, in full, and how to remove it (the folder is the caller's).
    assert f"the demo wrote into {made}" in res.stdout
    assert f"remove it with: rm -rf {made}" in res.stdout
