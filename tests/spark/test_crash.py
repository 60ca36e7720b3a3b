"""A Spark write's driver killed at each commit fault point (and after staging, before
any instant), and an executor's Python worker killed mid-task: ``rollback_failed``
restores the table, no file of a failed attempt is ever read, and the dead write's
staging folder (``.lakeline/staging/<write>/``) is gone.

The drivers are child processes (``spark_op`` of tests/children/table_workers.py) with
``LAKELINE_FAULTS`` set; they run at once, each on its own table, to keep the Spark
budget of ``make test``. The environment reaches the executors' Python workers too (the
JVM passes it on), which is how ``marker.after_create=crash-once`` kills one of them in
the middle of writing a file, after its marker and before its data.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.storage.staging_folders import read_owner, write_ids

from tests.children.table_workers import WORKERS_PY, check_files_on_disk, data_instants
from tests.helpers import finish, start_script
from tests.table.concurrency.crash_helpers import (
    EXPIRY_S,
    SEED,
    STATE_AT_CRASH,
    WRITE,
    make_table,
    orphan_files,
    state,
    upsert_spec,
)

#: The driver dies once its rows are staged, before its instant is requested.
STAGED = "spark.after_stage"
QUICK = [STAGED, "commit.before_complete", "commit.after_complete"]
MORE = ["commit.after_requested", "commit.after_inflight", "commit.delete_markers"]
#: Points where the driver already named its instant in the staging folder's owner file.
NAMED = {"commit.before_complete", "commit.after_complete", "commit.delete_markers"}


def crash_all(tmp_path: Path, points: list[str], table_type: str) -> dict[str, tuple[Table, set[int]]]:
    """Start one crashing Spark driver per point at once; wait for all to die."""
    runs: dict[str, Any] = {}
    for point in points:
        t = make_table(tmp_path / point, table_type, None)
        before = {i.id for i in t.timeline.instants()}
        proc = start_script(WORKERS_PY, ["spark_op", t.path, None, upsert_spec(WRITE)], faults=f"{point}=crash")
        runs[point] = (t, before, proc)
    out = {}
    for point, (t, before, proc) in runs.items():
        rc, stdout, err = finish(proc, timeout=240)
        assert rc == CRASH_EXIT_CODE, f"the driver did not die at {point}: rc={rc}\n{stdout}\n{err[-3000:]}"
        out[point] = (t, before)
    return out


def check_recovered(point: str, t: Table, before: set[int]) -> None:
    new = [i for i in data_instants(t.timeline) if i.id not in before]
    staged = write_ids(t.storage)
    assert len(staged) == 1, f"the dead write left no staging folder at {point}: the check below proves nothing"
    owner = read_owner(t.storage, staged[0])
    assert owner is not None
    if point == STAGED:
        assert new == [] and owner.instants == ()
        time.sleep(EXPIRY_S + 0.2)
        assert t.services.rollback_failed().stats["staging_removed"] == staged
        assert write_ids(t.storage) == []
        assert state(t) == SEED
        return
    assert len(new) == 1
    failed = new[0]
    assert failed.state == STATE_AT_CRASH.get(point, "completed")
    if point in NAMED:
        assert owner.instants == (failed.id,)
    time.sleep(EXPIRY_S + 0.2)
    t.services.rollback_failed()
    assert write_ids(t.storage) == [], f"the dead write's staging folder is left after its rollback at {point}"
    tl = t.timeline
    assert tl.pending() == [], f"left pending: {tl.pending()}"
    expected = dict(SEED)
    if point in ("commit.after_complete", "commit.delete_markers"):
        assert tl.get(failed.id).state == "completed"
        expected.update(WRITE)
    else:
        assert tl.get(failed.id).state == "rolled_back"
    assert state(t) == expected
    assert orphan_files(t) == set(), "files of the failed write are still on disk"
    check_files_on_disk(t)


def test_driver_killed_at_commit_points_and_an_executor_mid_task(spark_available: None, tmp_path: Path) -> None:
    """The quick run of make test: the drivers killed after staging and at two commit
    points, and the executor-kill write, run at once (four Spark applications), then
    each is checked."""
    executor = start_executor_kill(tmp_path / "executor", "cow")
    for point, (t, before) in crash_all(tmp_path, QUICK, "mor").items():
        check_recovered(point, t, before)
    check_executor_kill(*executor)


@pytest.mark.soak
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_driver_killed_at_every_commit_point(spark_available: None, tmp_path: Path, table_type: str) -> None:
    for point, (t, before) in crash_all(tmp_path, QUICK + MORE, table_type).items():
        check_recovered(point, t, before)


def start_executor_kill(tmp: Path, table_type: str) -> tuple[Table, Path, Any]:
    """One Python worker dies between a file's marker and its data; Spark retries the
    task (``local[1,4]``: up to 4 attempts) and the write commits once, reading only the
    files the successful attempts wrote; the dead attempt's marker is reconciled away."""
    t = make_table(tmp, table_type, None)
    fault_dir = tmp / "faults"
    fault_dir.mkdir()
    proc = start_script(
        WORKERS_PY,
        ["spark_op", t.path, None, upsert_spec(WRITE), "local[1,4]"],
        faults="marker.after_create=crash-once",
        env={"LAKELINE_FAULT_DIR": str(fault_dir)},
    )
    return t, fault_dir, proc


def check_executor_kill(t: Table, fault_dir: Path, proc: Any) -> None:
    rc, stdout, err = finish(proc, timeout=240)
    assert rc == 0, f"the write failed: {stdout}\n{err[-3000:]}"
    assert (fault_dir / "marker.after_create.fired").exists(), "no executor was killed: the test proved nothing"
    t = Table.open(t.path)
    assert t.timeline.pending() == []
    assert state(t) == {**SEED, **WRITE}
    assert orphan_files(t) == set()
    assert write_ids(t.storage) == [], "the write left its staging folder"
    check_files_on_disk(t)


@pytest.mark.soak
def test_executor_killed_mid_task_is_retried_on_mor(spark_available: None, tmp_path: Path) -> None:
    check_executor_kill(*start_executor_kill(tmp_path, "mor"))
