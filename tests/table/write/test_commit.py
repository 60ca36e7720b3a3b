"""The commit protocol (lakeline.table.write.commit), step by step on a real table.

``begin`` appends ``requested`` (naming the snapshot the write read) and ``inflight``
and starts a heartbeat; ``complete`` appends ``completed`` only if the completion rule
passes on the log it lands on, and clears the beat; ``abort`` rolls the attempt back and
is a no-op once completed; ``write_rule`` refuses a write that a commit after its
snapshot conflicts with; a clean-up step after the commit point never fails the write.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.table.write.commit import Commit, after_commit_step, write_rule
from lakeline.timeline.commit_metadata import CommitMetadata
from lakeline.timeline.errors import AttemptConflictError
from lakeline.timeline.instant import Action, State
from lakeline.timeline.timeline import Timeline

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])

pytestmark = pytest.mark.usefixtures("no_faults")


def rows(ids: list[int], v: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [v] * len(ids)}, schema=SCHEMA)


#: A writer first beats after half an interval (timeline/heartbeat.py): 200 ms here, so
#: the tests that look at the beat can wait for it.
BEAT_MS = 200


def table(tmp_path: Path) -> Table:
    props = {"engine.parallelism": 1, "heartbeat.interval-ms": BEAT_MS}
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type="cow", properties=props)
    t.insert(rows([1, 2, 3]))
    return t


def events_of(t: Table, instant: int) -> list[State]:
    return [e.state for e in t.log.refresh().events if e.instant == instant]


def passes(_tl: Timeline) -> None:
    return None


def test_begin_appends_requested_and_inflight_and_beats(tmp_path: Path) -> None:
    t = table(tmp_path)
    ctx = t.context()
    commit = Commit.begin(ctx, Action.COMMIT, "upsert")
    try:
        assert events_of(t, commit.instant_id) == [State.REQUESTED, State.INFLIGHT]
        inst = t.log.refresh().get(commit.instant_id)
        assert inst.action == Action.COMMIT and inst.state == State.INFLIGHT
        assert inst.plan["operation"] == "upsert"
        assert inst.plan["snapshot_seq"] == ctx.snapshot.last_seq
        deadline = time.monotonic() + 10
        while commit.instant_id not in t.log.store.last_beats() and time.monotonic() < deadline:
            time.sleep(BEAT_MS / 10_000)
        assert commit.instant_id in t.log.store.last_beats()
    finally:
        commit.abort("test over")


def test_complete_appends_completed_and_clears_the_beat(tmp_path: Path) -> None:
    t = table(tmp_path)
    ctx = t.context()
    commit = Commit.begin(ctx, Action.COMMIT, "upsert")
    time.sleep(BEAT_MS / 1000)  # long enough to have beaten: the beat is then cleared
    metadata = CommitMetadata("upsert", ctx.snapshot.last_seq, stats={"updated": 0})
    inst = commit.complete(metadata, passes)
    assert inst.id == commit.instant_id and inst.state == State.COMPLETED
    assert events_of(t, commit.instant_id) == [State.REQUESTED, State.INFLIGHT, State.COMPLETED]
    assert CommitMetadata.from_dict(t.log.refresh().get(inst.id).metadata).operation == "upsert"
    assert commit.instant_id not in t.log.store.last_beats()
    commit.abort("too late")  # a no-op once completed
    assert t.log.refresh().get(inst.id).state == State.COMPLETED


def test_a_refusing_rule_appends_nothing_and_abort_rolls_back(tmp_path: Path) -> None:
    t = table(tmp_path)
    ctx = t.context()
    commit = Commit.begin(ctx, Action.COMMIT, "upsert")

    def refuses(_tl: Timeline) -> None:
        raise AttemptConflictError("another commit got there first")

    with pytest.raises(AttemptConflictError, match="got there first"):
        commit.complete(CommitMetadata("upsert", ctx.snapshot.last_seq), refuses)
    assert events_of(t, commit.instant_id) == [State.REQUESTED, State.INFLIGHT]
    commit.abort("conflict")
    assert t.log.refresh().get(commit.instant_id).state == State.ROLLED_BACK
    assert commit.instant_id not in t.log.store.last_beats()


def test_write_rule_refuses_a_rewrite_of_a_group_rewritten_after_the_snapshot(tmp_path: Path) -> None:
    t = table(tmp_path)
    ctx = t.context()
    (group,) = [s.file_group for s in ctx.view.latest_slices("")]
    t.upsert(rows([1], "meanwhile"))  # a copy-on-write rewrite of the same group, after the snapshot
    ours = CommitMetadata("upsert", ctx.snapshot.last_seq, rewritten=(("", group),))
    rule = write_rule(ctx, 10_000, "upsert", ours, None)
    with pytest.raises(AttemptConflictError, match="instant 10000"):
        rule(t.log.refresh())
    rule(ctx.snapshot)  # on the snapshot itself nothing completed after it: no conflict


def test_a_failing_step_after_the_commit_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    ran = []

    def step() -> None:
        ran.append(True)
        raise OSError("disk gone")

    with caplog.at_level(logging.WARNING, logger="lakeline.table.write.commit"):
        after_commit_step("removing markers", step)
    assert ran == [True]
    assert "removing markers failed after the commit landed" in caplog.text
    assert "disk gone" in caplog.text
