"""Staging folders of dead Spark writes are removed by rollback and cleaning; a live
write's never is (no Spark here: the owners are faked with the owner file itself, or a
real :class:`OwnerBeat` thread standing in for a running driver).

The rules under test are :mod:`lakeline.timeline.storage.staging_folders`'.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest
from lakeline.table import Table
from lakeline.table.rollback import remove_dead_staging
from lakeline.timeline.instant import Action, State
from lakeline.timeline.log import now_us
from lakeline.timeline.plans import WriteRequest
from lakeline.timeline.storage.staging_folders import (
    OWNER_FILE,
    Owner,
    OwnerBeat,
    Rules,
    folder_of,
    judge,
    read_owner,
    remove,
    write_ids,
    write_owner,
)

from tests.table.concurrency.crash_helpers import SEED, make_table, rows

#: make_table's heartbeat: 100 ms × (1 + 1) tolerance.
RULES = Rules(100, 1, 3_600_000)
LONG_AGO = 60_000_000  # micros: far past any tolerance of these tests


def folder(t: Table, w: str) -> Path:
    return Path(t.storage.path(folder_of(w)))


def staged(t: Table, owner: Owner | None = None, age_s: float = 0.0) -> str:
    """A staging folder holding one staged file (and ``owner``'s file), all ``age_s`` old."""
    w = owner.write if owner is not None else uuid.uuid4().hex
    path = folder(t, w) / "input"
    path.mkdir(parents=True)
    (path / uuid.uuid4().hex).write_bytes(b"rows")
    if owner is not None:
        write_owner(t.storage, owner)
    if age_s:
        old = time.time() - age_s
        for p in [*folder(t, w).rglob("*"), folder(t, w)]:
            os.utime(p, (old, old))
    return w


def owner(beat_age_us: int, *instants: int) -> Owner:
    return Owner(uuid.uuid4().hex, now_us() - beat_age_us, tuple(instants))


def pending_write(t: Table, beat: bool) -> int:
    """A requested write instant of a writer that keeps (``beat``) or lost its heartbeat."""
    ev = t.log.append(Action.DELTA_COMMIT, State.REQUESTED, WriteRequest("upsert", None, True).to_dict())
    if beat:
        t.log.store.beat(ev.instant, now_us())
    return ev.instant


@pytest.fixture
def t(tmp_path: Path) -> Table:
    return make_table(tmp_path, "mor", None)


def verdict(t: Table, o: Owner | None, w: str | None = None) -> bool:
    tl = t.log.refresh()
    return judge(t.storage, w or (o.write if o else ""), o, tl, t.log.store.last_beats(), RULES).alive


def test_liveness_rules(t: Table) -> None:
    live_pending = pending_write(t, beat=True)
    dead_pending = pending_write(t, beat=False)
    t.log.append(Action.DELTA_COMMIT, State.ROLLED_BACK, {"reason": "test"}, instant=dead_pending)
    t.upsert(rows({1: "x"}))
    completed = t.timeline.completed()[-1].id
    time.sleep(0.25)  # dead_pending's requested time is now past the tolerance
    expired = pending_write(t, beat=False)
    t.log.store.beat(expired, now_us() - LONG_AGO)
    t.log.store.beat(live_pending, now_us())

    assert verdict(t, owner(0)), "a beating owner before its instant began"
    assert verdict(t, owner(0, dead_pending)), "a beating owner replaying after a rolled-back attempt"
    assert verdict(t, owner(LONG_AGO, live_pending)), "its instant is pending and beats"
    assert not verdict(t, owner(LONG_AGO)), "died before beginning an instant"
    assert not verdict(t, owner(LONG_AGO, expired)), "its instant's heartbeat expired too"
    assert not verdict(t, owner(LONG_AGO, completed)), "its instant completed"
    assert not verdict(t, owner(LONG_AGO, dead_pending)), "its instant was rolled back"
    assert not verdict(t, owner(LONG_AGO, 10**15)), "an instant the timeline never had: the beat decides"
    young, old = staged(t), staged(t, age_s=7200)
    assert verdict(t, None, young), "no owner file, younger than clean.orphan-age-ms"
    assert not verdict(t, None, old), "no owner file, older than clean.orphan-age-ms"


def test_owner_beat_names_instants_and_never_revives_a_removed_folder(t: Table) -> None:
    beat = OwnerBeat(t.storage, uuid.uuid4().hex, 20).start()
    w = beat.owner.write
    try:
        first = read_owner(t.storage, w)
        assert first is not None and first.instants == ()
        time.sleep(0.1)
        beat.begun(7)
        now = read_owner(t.storage, w)
        assert now is not None and now.instants == (7,) and now.beat_us > first.beat_us
        assert [p.name for p in folder(t, w).iterdir()] == [OWNER_FILE], "no file is left aside"
        assert remove(t.storage, [w]) == [w]
        time.sleep(0.1)  # several beats
        assert not folder(t, w).exists(), "a late beat brought the removed folder back"
    finally:
        beat.stop()


def test_rollback_removes_dead_writes_staging_even_without_an_instant(t: Table) -> None:
    dead = staged(t, owner(LONG_AGO))
    orphan = staged(t, age_s=7200)
    young = staged(t)
    live = OwnerBeat(t.storage, uuid.uuid4().hex, 100).start()  # a running driver, still staging
    try:
        (folder(t, live.owner.write) / "input").mkdir()
        result = t.services.rollback_failed()
        assert result.instant is not None
        assert result.instant.plan["staging"] == sorted([dead, orphan])
        assert sorted(result.stats["staging_removed"]) == sorted([dead, orphan])
        assert sorted(write_ids(t.storage)) == sorted([young, live.owner.write])
        assert t.services.rollback_failed().instant is None, "nothing left to do"
    finally:
        live.stop()


def test_rollback_of_a_failed_instant_removes_the_folder_naming_it(t: Table) -> None:
    failed = pending_write(t, beat=False)
    replaying = pending_write(t, beat=False)
    time.sleep(0.25)  # both instants' heartbeats expire
    gone = staged(t, owner(LONG_AGO, failed))
    # Its instant expired, but the owner still beats: a write that lost an attempt and
    # replays from its staged input. Ending the instant is right; the folder stays.
    kept = staged(t, owner(0, replaying))
    result = t.services.rollback_failed()
    assert sorted(result.stats["instants"]) == sorted([failed, replaying])
    assert result.stats["staging_removed"] == [gone]
    assert write_ids(t.storage) == [kept]


def test_a_folder_that_came_alive_since_the_plan_is_kept(t: Table) -> None:
    """Execute judges a planned folder again: a driver that was only paused past the
    tolerance, and beats again, keeps its staged input."""
    o = owner(LONG_AGO)
    w = staged(t, o)
    write_owner(t.storage, Owner(w, now_us()))
    assert remove_dead_staging(t.log, t.storage, RULES, only=(w,)) == []
    assert write_ids(t.storage) == [w]


def test_cleaning_removes_dead_writes_staging_and_keeps_a_live_one(tmp_path: Path) -> None:
    t = make_table(tmp_path, "cow", None)
    for n in range(3):  # old file versions, so the clean has something to do and runs
        t.upsert(rows({i: f"v{n}" for i in SEED}))
    dead = staged(t, owner(LONG_AGO))
    orphan = staged(t, age_s=10)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("not the table's")
    linked = uuid.uuid4().hex
    os.symlink(outside, folder(t, linked))  # a staging "folder" that is a link out of the table
    os.utime(folder(t, linked), (time.time() - 7200,) * 2, follow_symlinks=False)
    live = OwnerBeat(t.storage, uuid.uuid4().hex, 100).start()  # a concurrent Spark write
    try:
        time.sleep(0.3)  # past the heartbeat tolerance: only the live owner's beat is fresh
        result = t.services.clean(retain=1, dry_run=False, orphan_age_ms=0)
        assert result.instant is not None and result.stats["files_deleted"]
        assert dead in result.stats["staging_removed"] and orphan in result.stats["staging_removed"]
        assert live.owner.write in write_ids(t.storage), "a live write's staging was removed"
        assert read_owner(t.storage, live.owner.write) is not None
        assert {dead, orphan}.isdisjoint(write_ids(t.storage))
        assert (outside / "keep").read_text() == "not the table's", "removal followed a symbolic link"
    finally:
        live.stop()


def test_cleaning_with_nothing_else_to_delete_still_removes_dead_staging(t: Table) -> None:
    """A clean whose only work is a dead write's staging folder plans it (listed by a dry
    run) and removes it; a live write's folder planned as dead meanwhile is kept."""
    dead = staged(t, owner(LONG_AGO))
    listed = t.services.clean(retain=10, orphan_age_ms=0, dry_run=True)
    assert listed.instant is None and listed.plan["staging"] == [dead]
    assert dead in write_ids(t.storage)  # a dry run removes nothing
    result = t.services.clean(retain=10, dry_run=False, orphan_age_ms=0)
    assert result.instant is not None and result.instant.plan["staging"] == [dead]
    assert result.stats["files_deleted"] == 0 and result.stats["staging_removed"] == [dead]
    assert dead not in write_ids(t.storage)


def test_a_single_writer_tables_eager_rollback_removes_the_dead_writes_staging(tmp_path: Path) -> None:
    t = make_table(tmp_path, "mor", None, **{"write.concurrency-mode": "single-writer"})
    failed = pending_write(t, beat=False)  # a Spark driver that died mid-write
    gone = staged(t, owner(LONG_AGO, failed))
    other = staged(t, owner(LONG_AGO))  # dead too, but no instant of it was rolled back here
    t.upsert(rows({i: "next" for i in SEED}))
    assert t.timeline.get(failed).state is State.ROLLED_BACK
    assert gone not in write_ids(t.storage) and other in write_ids(t.storage)
