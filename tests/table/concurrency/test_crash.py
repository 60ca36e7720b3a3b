"""Writers that die, stall or crash mid-rollback, and the recovery that follows.

Why: docs/concurrency.md section 4 (failed writes). A writer can die at any step of the commit;
its instant must then end as ``rolled_back`` once its heartbeat expires, with every
file it wrote deleted, and the table must read as if the write never started (or, if
it died after completing, as if it had finished normally). A writer that only *stalls*
past its heartbeat and wakes after its rollback must not complete. A single-writer
table does not wait for the heartbeat. A rollback that itself dies is finished by the
next run.

The writers are child processes killed by ``LAKELINE_FAULTS="<point>=crash"`` (an
``os._exit``: no cleanup runs); a stalled writer is paused with the ``wait`` fault and
frozen with SIGSTOP so its heartbeat thread stops too. Tables use
``heartbeat.interval-ms=100`` and ``heartbeat.tolerable-misses=1``: a writer is failed
200 ms after its last beat. A writer killed while writing a marker, and what a rollback
deletes, are in ``test_marker_crash.py``; the helpers both use in ``crash_helpers.py``.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE

from tests.children.table_workers import WORKERS_PY, check_files_on_disk
from tests.helpers import finish, run_script, start_script, wait_for_files
from tests.table.concurrency.crash_helpers import (
    COMMIT_POINTS,
    EXPIRY_S,
    SEED,
    WRITE,
    crash_writer,
    kill_writer_and_recover,
    make_table,
    orphan_files,
    pending_writes,
    rows,
    state,
    upsert_spec,
)

# -- a writer killed at each commit fault point ---------------------------------------------


@pytest.mark.sampled_matrix
@pytest.mark.parametrize("point", COMMIT_POINTS)
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_writer_killed_at_commit_point_is_rolled_back(
    tmp_path: Path, table_type: str, point: str, timeline: str | None
) -> None:
    kill_writer_and_recover(make_table(tmp_path, table_type, timeline), point)


def test_rollback_leaves_a_live_writer_alone(tmp_path: Path) -> None:
    """A writer paused before completing keeps beating: it is not failed, whatever the
    rollback service runs meanwhile, and it completes afterwards."""
    t = make_table(tmp_path, "mor", None)
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    proc = start_script(
        WORKERS_PY,
        ["op", t.path, None, upsert_spec(WRITE)],
        faults="commit.before_complete=wait",
        env={"LAKELINE_FAULT_DIR": str(fault_dir)},
    )
    wait_for_files([fault_dir / "commit.before_complete.reached"])
    time.sleep(EXPIRY_S * 3)
    assert t.services.rollback_failed().instant is None
    assert len(pending_writes(t)) == 1
    (fault_dir / "commit.before_complete.release").write_text("go")
    rc, out, err = finish(proc)
    assert rc == 0, err
    assert json.loads(out)["ok"]
    assert state(t) == {**SEED, **WRITE}
    check_files_on_disk(t)


# -- a stale writer wakes up after its rollback ---------------------------------------------


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_stale_writer_cannot_complete_after_its_rollback(tmp_path: Path, table_type: str, timeline: str | None) -> None:
    t = make_table(tmp_path, table_type, timeline)
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    proc = start_script(
        WORKERS_PY,
        ["op", t.path, timeline, upsert_spec(WRITE)],
        faults="commit.before_complete=wait",
        env={"LAKELINE_FAULT_DIR": str(fault_dir)},
    )
    try:
        wait_for_files([fault_dir / "commit.before_complete.reached"])
        os.kill(proc.pid, signal.SIGSTOP)  # its heartbeat thread stops too: a long GC pause, a VM freeze
        [stale] = pending_writes(t)
        assert orphan_files(t)
        time.sleep(EXPIRY_S + 0.3)
        result = t.services.rollback_failed()
        assert result.stats["instants"] == [stale.id]
        assert t.timeline.get(stale.id).state == "rolled_back"
        assert orphan_files(t) == set(), "rollback deleted the stale writer's files"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    (fault_dir / "commit.before_complete.release").write_text("go")
    rc, out, err = finish(proc)
    assert rc == 0, err
    res = json.loads(out)
    assert res["ok"] is False and res["error"] == "InvalidTransitionError", res

    tl = t.timeline
    assert tl.get(stale.id).state == "rolled_back"
    assert stale.id not in {i.id for i in tl.completed()}
    assert tl.pending() == []
    assert state(t) == SEED
    assert orphan_files(t) == set()
    check_files_on_disk(t)
    assert stale.id not in t.log.store.last_beats(), "the woken writer left a heartbeat behind"


# -- single-writer tables do not wait for the heartbeat -------------------------------------


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_single_writer_rolls_back_a_pending_write_eagerly(
    tmp_path: Path, table_type: str, timeline: str | None
) -> None:
    t = make_table(
        tmp_path, table_type, timeline, **{"write.concurrency-mode": "single-writer", "heartbeat.interval-ms": 60_000}
    )
    crash_writer(t, "commit.before_complete=crash")
    [dead] = pending_writes(t)
    assert orphan_files(t)
    r = t.upsert(rows({0: "next"}))  # long before the heartbeat (60 s) could expire
    tl = t.timeline
    assert tl.get(dead.id).state == "rolled_back"
    assert tl.get(r.instant.id).state == "completed"
    assert tl.pending() == []
    assert state(t) == {**SEED, 0: "next"}
    assert orphan_files(t) == set()
    check_files_on_disk(t)


def test_optimistic_writer_leaves_a_pending_write_alone(tmp_path: Path) -> None:
    """The contrast: with several writers allowed, a pending write may be alive; the next
    write neither waits for it nor touches it, and only the rollback service ends it."""
    t = make_table(tmp_path, "mor", None, **{"heartbeat.interval-ms": 60_000})
    crash_writer(t, "commit.before_complete=crash")
    [dead] = pending_writes(t)
    t.upsert(rows({0: "next"}))
    assert t.timeline.get(dead.id).state == "inflight"
    assert t.services.rollback_failed().instant is None  # its heartbeat has not expired
    assert state(t) == {**SEED, 0: "next"}


# -- the rollback itself crashes ------------------------------------------------------------


ROLLBACK_POINTS = [
    "rollback.after_inflight=crash",  # the target is not ended yet
    "rollback.after_event=crash",  # ended (rolled_back), no file deleted
    "rollback.mid_delete=crash",  # ended, about to delete the first file
    "rollback.mid_delete=crash@2",  # ended, one file deleted
]


@pytest.mark.sampled_matrix
@pytest.mark.parametrize("faults", ROLLBACK_POINTS)
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_rollback_killed_midway_is_finished_by_the_next_run(
    tmp_path: Path, table_type: str, faults: str, timeline: str | None
) -> None:
    t = make_table(tmp_path, table_type, timeline)
    crash_writer(t, "commit.before_complete=crash")
    [dead] = pending_writes(t)
    written = orphan_files(t)
    assert len(written) == 2
    time.sleep(EXPIRY_S + 0.2)

    rc, out, err = run_script(WORKERS_PY, ["rollback", t.path, timeline], faults=faults)
    assert rc == CRASH_EXIT_CODE, f"the rollback did not die at {faults}: rc={rc}\n{out}\n{err[-3000:]}"
    left = orphan_files(t)
    if faults.endswith("@2"):
        assert len(left) == 1, "one file deleted before the crash"
    else:
        assert left == written
    ended = t.timeline.get(dead.id).state
    assert ended == ("inflight" if "after_inflight" in faults else "rolled_back")

    time.sleep(EXPIRY_S + 0.2)
    again = t.services.rollback_failed()
    assert again.instant is not None and again.instant.state == "completed"

    tl = t.timeline
    assert tl.get(dead.id).state == "rolled_back"
    assert tl.pending() == [], f"left pending: {[(i.id, i.action, i.state) for i in tl.pending()]}"
    assert state(t) == SEED
    assert orphan_files(t) == set()
    check_files_on_disk(t)
    assert t.services.rollback_failed().instant is None, "a third run has nothing left to do"
