"""Fenced service executors (issue 11, item 3; the catch-up half of item 8).

Why: an executor of a service instant can stall (a GC pause, a stopped VM) past its
heartbeat while another executor takes the instant over. When it wakes, nothing it does
may take effect: not its ``completed`` event, not its abort (``rolled_back`` and the
clean-up behind it), not a drop or rebuild of an index partition, not the clearing of a
heartbeat. Each case stalls a real child process at a fault point (``wait``) and then
stops it with SIGSTOP, as a stall stops every thread of a process, its heartbeat
included; another executor takes over; the child is let go and must be refused by the
log. Each test fails on the code before the fencing (the reason is in its docstring).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.indexes.metadata_table import MetadataTable
from lakeline.indexes.states import partition_of
from lakeline.services import Service
from lakeline.services.compaction import CompactionService
from lakeline.services.indexing.indexer import IndexingService
from lakeline.services.phases import execute, schedule
from lakeline.services.plugin import ATTEMPT
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import IndexBuildError, ServiceBusyError
from lakeline.timeline.instant import Action, Instant, State
from lakeline.timeline.timeline import Timeline

from tests.helpers import CHILDREN, finish, start_script

CHILD = CHILDREN / "fencing_child.py"
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
EXPIRY_S = 0.1 * (1 + 1)


pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def rows(ids: range | list[int], ts: int = 1) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{i}-{ts}" for i in ids]}, schema=SCHEMA)


def make(tmp: Path, kind: str = "cow", timeline: str | None = None, **props: Any) -> Table:
    t = Table.create(
        tmp / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=kind,
        properties={**HEARTBEAT, "write.small-file-limit-bytes": 0, **props},
        timeline=timeline,
    )
    for start in range(0, 300, 100):
        t.insert(rows(range(start, start + 100)))
    return t


class Stalled:
    """A child process that runs until fault point ``point`` (``wait``), then is stopped
    (SIGSTOP: its heartbeat thread stops too) until :meth:`wake`."""

    def __init__(self, tmp: Path, script: Path, args: list[Any], point: str, more_faults: str = "") -> None:
        self.dir = tmp / f"faults-{point}"
        self.dir.mkdir()
        self.point = point
        spec = f"{point}=wait" + (f",{more_faults}" if more_faults else "")
        self.proc: subprocess.Popen[str] = start_script(
            script, args, faults=spec, env={"LAKELINE_FAULT_DIR": str(self.dir)}
        )

    def stall(self) -> Stalled:
        reached = self.dir / f"{self.point}.reached"
        deadline = time.monotonic() + 60
        while not reached.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.proc.kill()
                _, err = self.proc.communicate()
                raise AssertionError(f"child never reached {self.point}: {err[-3000:]}")
            time.sleep(0.01)
        os.kill(self.proc.pid, signal.SIGSTOP)
        (self.dir / f"{self.point}.release").write_text("")  # seen once it runs again
        time.sleep(EXPIRY_S * 3)  # its heartbeat expires
        return self

    def wake(self) -> tuple[int, str, str]:
        os.kill(self.proc.pid, signal.SIGCONT)
        return finish(self.proc)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.kill()
            self.proc.communicate()


def claims(t: Table, instant: int) -> list[str]:
    """The attempts that claimed ``instant``, in order (from its inflight events)."""
    return [
        str(ev.payload.get(ATTEMPT, ""))
        for ev in t.log.refresh().events
        if ev.instant == instant and ev.state is State.INFLIGHT
    ]


def states(t: Table, instant: int) -> list[str]:
    return [ev.state.value for ev in t.log.refresh().events if ev.instant == instant]


def files_of(t: Table, partition: str) -> set[str]:
    return {i.path for i in t.storage.list_files(t.storage.path(MetadataTable(t.storage).rel_dir(partition)))}


def assert_exact(t: Table, name: str) -> None:
    assert {d.name: d.state for d in t.indexes.list()}.get(name) == "ready", t.indexes.list()
    report = t.indexes.validate()
    assert report["mismatches"] == [], report["mismatches"][:5]
    assert report["files_checked"] > 0


@pytest.mark.parametrize("timeline", ["filesystem", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_stale_indexer_that_wakes_after_another_completed(
    tmp_path: Path, request: pytest.FixtureRequest, timeline: str
) -> None:
    """Before the fencing: A's ``completed`` was refused, and its abort path dropped the
    partition of the index B had just made ready (``validate`` then lists every file)."""
    url = request.getfixturevalue("pg_url") if timeline == "postgresql" else None
    t = make(tmp_path, timeline=url)
    a = Stalled(tmp_path, CHILD, ["create", t.path, url, "column_stats"], "indexing.before_finalize")
    try:
        a.stall()
        [inst] = [i for i in t.timeline.pending() if i.action is Action.INDEXING]
        t.upsert(rows([1, 2, 500], ts=2))  # a writer's entries land in the partition too
        [done] = t.services.run("indexing")  # B re-claims the expired instant and completes it
        assert done.instant is not None and done.instant.state == "completed"
        part = partition_of("column_stats", inst.id)
        before = files_of(t, part)
        code, out, err = a.wake()
    finally:
        a.kill()
    assert code == 0, err
    # A learns the instant completed (by another attempt) and reports it as it stands.
    assert json.loads(out.splitlines()[-1]) == {"ok": True, "state": "ready"}, out
    assert states(t, inst.id) == ["requested", "inflight", "inflight", "completed"], "A appended nothing"
    first, second = claims(t, inst.id)
    assert first and second and first != second
    assert files_of(t, part) >= before, "the stale attempt removed files of the ready index"
    assert_exact(t, "column_stats")
    assert not t.log.store.beats(), "a heartbeat was left behind"


def test_stale_indexer_that_wakes_while_another_finalizes(tmp_path: Path) -> None:
    """A wakes while B holds the instant and has not completed it. Before the fencing,
    A's ``completed`` landed, B's was refused and B's abort dropped the partition of
    the index A had made ready."""
    t = make(tmp_path)
    a = Stalled(tmp_path, CHILD, ["create", t.path, None, "column_stats"], "indexing.before_finalize")
    woke: list[tuple[int, str, str]] = []
    try:
        a.stall()
        [inst] = [i for i in t.timeline.pending() if i.action is Action.INDEXING]
        faults.on("indexing.before_finalize", lambda: woke.append(a.wake()))
        result = execute(t, IndexingService(), inst.id)
    finally:
        a.kill()
    [(code, out, err)] = woke
    assert code == 0, err
    assert json.loads(out.splitlines()[-1])["error"] == "StaleAttemptError", out
    assert result.instant is not None and result.instant.state == "completed" and result.aborted is None
    assert states(t, inst.id) == ["requested", "inflight", "inflight", "completed"]
    assert_exact(t, "column_stats")


def test_recreated_index_is_not_touched_by_a_stale_builder_of_the_old_one(tmp_path: Path) -> None:
    """create "column_stats", its builder A stalls before writing its build; B finishes
    it; the index is dropped and created again. Before the partitions were keyed by the
    creating instant, A's late bulk build replaced the new definition's base with its
    own old one and its refused completion dropped the new index's partition."""
    t = make(tmp_path)
    a = Stalled(tmp_path, CHILD, ["create", t.path, None, "column_stats"], "indexing.after_build")
    try:
        a.stall()
        [old] = [i for i in t.timeline.pending() if i.action is Action.INDEXING]
        [done] = t.services.run("indexing")
        assert done.instant is not None and done.instant.state == "completed"
        t.indexes.drop("column_stats")
        new = t.indexes.create("column_stats")
        assert new.instant != old.id and new.partition != partition_of("column_stats", old.id)
        t.upsert(rows([3, 4, 600], ts=3))
        assert t.indexes.compact()  # the new partition gets a base newer than A's
        before = files_of(t, new.partition)
        code, out, err = a.wake()
    finally:
        a.kill()
    assert code == 0, err
    # A's instant completed (by B) but its definition was dropped since: A reports it absent.
    assert json.loads(out.splitlines()[-1])["error"] == "IndexBuildError", out
    assert files_of(t, new.partition) == before, "the stale builder touched the re-created index"
    assert [d.instant for d in t.indexes.list()] == [new.instant]
    assert_exact(t, "column_stats")
    t.services.clean(policy="keep_latest_commits", retain=1, dry_run=False)
    assert_exact(t, "column_stats")


def test_stale_compaction_cannot_abort_the_holders_work(tmp_path: Path) -> None:
    """A stalls before completing a compaction, B re-claims it; A wakes while B is about
    to complete and fails (an injected error before its ``completed`` event). Before the
    fencing A's ``rolled_back`` landed and its abort deleted every file of the instant,
    B's among them, and B's completion was refused."""
    t = make(tmp_path, "mor")
    t.upsert(rows(range(0, 300, 7), ts=2))
    expected = t.to_arrow().sort_by("id")
    a = Stalled(
        tmp_path,
        CHILD,
        ["compact", t.path, None],
        "compaction.before_complete",
        more_faults="log.before_append.completed=raise",
    )
    woke: list[tuple[int, str, str]] = []
    try:
        a.stall()
        [inst] = [i for i in t.timeline.pending() if i.action is Action.COMPACTION]
        faults.on("compaction.before_complete", lambda: woke.append(a.wake()))
        result = execute(t, CompactionService(), inst.id)
    finally:
        a.kill()
    [(code, out, err)] = woke
    # A fails: on the injected error (its first completion attempt uses the log as it
    # last read it, where it still holds the claim), or fenced if it read B's claim
    # first. Either way its abort must be fenced: no rolled_back, B's files kept.
    assert code != 0 and ("StaleAttemptError" in err or "FaultInjectedError" in err), (code, out, err[-2000:])
    assert result.aborted is None and result.instant is not None and result.instant.state == "completed"
    assert states(t, inst.id) == ["requested", "inflight", "inflight", "completed"]
    assert t.to_arrow().sort_by("id").equals(expected)
    assert all(not s.logs for s in t.view(t.timeline).latest_slices()), "B's bases are in place"


class _HeldPlan:
    """The toy service's plan: nothing to say."""

    def to_dict(self) -> dict[str, Any]:
        return {}


class _Held(Service):
    """A toy service (on the savepoint action) whose work waits for an event."""

    name = "held"
    action = Action.SAVEPOINT
    working = threading.Event()
    release = threading.Event()

    def plan(self, table: Table, snapshot: Timeline, **options: Any) -> _HeldPlan:
        return _HeldPlan()

    def execute(self, table: Table, instant: Instant, progress: Any = None) -> dict[str, Any]:
        _Held.working.set()
        assert _Held.release.wait(30)
        return {"done": True}


def test_loser_of_the_claim_race_leaves_the_winners_heartbeat(tmp_path: Path) -> None:
    """L decides to claim a requested instant; W claims it first (L's claim is appended
    right after, at the next slot). Before the fencing both beat under the instant's id
    and L's lost race cleared the beat while W worked on, so W looked dead."""
    t = Table.create(tmp_path / "t", SCHEMA, properties=HEARTBEAT)
    inst = schedule(t, _Held())
    assert inst is not None
    _Held.working.clear()
    _Held.release.clear()
    winner: list[Any] = []
    w = threading.Thread(target=lambda: winner.append(execute(Table.open(t.path), _Held(), inst.id)))

    def w_claims_first() -> None:
        w.start()
        assert _Held.working.wait(30)

    faults.on("log.before_append.inflight", w_claims_first)
    try:
        with pytest.raises(ServiceBusyError):
            execute(t, _Held(), inst.id)
        [w_attempt] = claims(t, inst.id)
        beats = t.log.store.beats()
        assert (inst.id, w_attempt) in beats, f"the winner's beat was cleared: {beats}"
        assert len(beats) == 1, "the loser left its own beat behind"
        time.sleep(EXPIRY_S * 3)
        fresh = t.log.store.beats()[(inst.id, w_attempt)]
        assert fresh > beats[(inst.id, w_attempt)], "the winner keeps beating"
        with pytest.raises(ServiceBusyError):  # ... so nobody takes it over
            execute(t, _Held(), inst.id)
    finally:
        _Held.release.set()
        w.join(30)
    assert winner and winner[0].instant.state == "completed"
    assert not t.log.store.beats()


def test_catch_up_leaves_out_a_file_cleaned_meanwhile(tmp_path: Path) -> None:
    """An instant completed after the index's base without entries (its delta was lost)
    and its file was then replaced by a clustering and removed by a clean. Before the
    fix the catch-up read it and failed with a bare FileNotFoundError; a file that is
    no longer live needs no entry, so the build now completes and validates."""
    t = make(tmp_path, **{"clean.orphan-age-ms": 0})
    other = Table.open(t.path)
    seen: dict[str, Any] = {}

    def between_build_and_catch_up() -> None:
        r = other.insert(rows(range(1000, 1010)))
        seen["file"] = [f["path"] for f in r.instant.metadata["files"]]
        [d] = other.indexes.list()
        for p in files_of(other, d.partition):  # the writer's entries are lost
            if f"/delta_{r.instant.id}_" in p:
                other.storage.delete(p)
        assert other.services.cluster().instant is not None  # replaces its file group
        other.services.clean(policy="keep_latest_commits", retain=1, dry_run=False)
        assert not any(Path(other.storage.path(p)).exists() for p in seen["file"]), "cleaned"

    faults.on("indexing.after_build", between_build_and_catch_up)
    d = t.indexes.create("column_stats")
    assert seen and d.state == "ready"
    assert_exact(t, "column_stats")
    assert t.to_arrow().num_rows == 310


def test_build_leaves_out_base_files_that_vanished_and_refuses_a_lost_live_one(tmp_path: Path) -> None:
    """Right after the index's base is fixed (its requested event), a clustering replaces
    every file of that snapshot and the replaced files disappear (the cleaner protects a
    pending build's base, so they are removed by hand here, as a clean of an older
    version would). Before the fix the bulk build failed with a bare FileNotFoundError;
    files that are no longer live are now left out and the index validates. A *live*
    file that is missing is a typed IndexBuildError, and the build is rolled back."""
    t = make(tmp_path)
    other = Table.open(t.path)
    old = {f.path for f in t.view(t.timeline).files()}

    def replace_and_remove() -> None:
        assert other.services.cluster().instant is not None
        for p in old:
            other.storage.delete(other.storage.path(p))

    faults.on("indexing.after_requested", replace_and_remove)
    d = t.indexes.create("column_stats")
    assert d.state == "ready"
    assert_exact(t, "column_stats")
    assert t.to_arrow().num_rows == 300
    faults.disarm_all()
    live = t.view(t.timeline).files()[0].path
    t.storage.delete(t.storage.path(live))
    with pytest.raises(IndexBuildError, match="live data file"):
        t.indexes.create("bloom_filters")
    assert [i.state for i in t.timeline.instants() if i.plan.get("index") == "bloom_filters"] == ["rolled_back"]
