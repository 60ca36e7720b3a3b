"""The two edges of a write attempt: a begin that fails, and errors after the slot was won.

Why: docs/concurrency.md section 1 says a commit ends committed, aborted or unknown, and that
files are never deleted while the outcome is unknown (issue 11, items 6 and 7).

* A failure after ``requested`` landed but inside ``Commit.begin`` (the ``inflight``
  append, a fault point) happens before the write's own guard: before the fix the
  heartbeat thread beat forever, so in a long-lived process the instant was never
  failed and never rolled back. Now the beat stops and the instant ends at once (or,
  when even that fails, it expires and ``rollback_failed`` ends it).
* An error after the put won its slot (a follow-up query inside the store failing,
  as PostgreSQL's ``archived_through`` did) made a committed write report a failure;
  a caller retrying an insert then duplicated rows. Now the log reads its slot back by
  token: committed is success, and only a log that cannot be read says
  :class:`CommitOutcomeUnknownError` (with nothing deleted). Cleanup after the commit
  (the beat, the markers) never fails it.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import CommitOutcomeUnknownError, FaultInjectedError, StoreUnavailableError
from lakeline.timeline.instant import Event, State
from lakeline.timeline.markers import instants_with_markers, list_markers

from tests.children.table_workers import check_files_on_disk, data_files_on_disk, data_instants, referenced_files

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
EXPIRY_S = 0.1 * (1 + 1)
SEED = {i: "seed" for i in range(10)}


pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def make_table(tmp: Path, timeline: str | None, table_type: str = "mor") -> Table:
    path = str(tmp / "table")
    Table.create(
        path,
        SCHEMA,
        record_key="id",
        table_type=table_type,
        properties={**HEARTBEAT, "engine.parallelism": 1},
        timeline=timeline,
    )
    t = Table.open(path, timeline=timeline)
    t.insert(rows(SEED))
    return t


def rows(values: dict[int, str]) -> pa.Table:
    return pa.table({"id": pa.array(list(values), pa.int64()), "v": pa.array(list(values.values()))})


def state(t: Table) -> dict[int, str]:
    table = t.to_arrow()
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), f"a key appears twice: {sorted(ids)}"
    return dict(zip(ids, table.column("v").to_pylist()))


def beating(instant: int) -> bool:
    return any(th.name == f"heartbeat-{instant}" and th.is_alive() for th in threading.enumerate())


def new_instants(t: Table, before: set[int]) -> list[Any]:
    return [i for i in data_instants(t.timeline) if i.id not in before]


# -- item 6: a begin that fails does not leave a heartbeat beating ----------------------------


@pytest.mark.parametrize("point", ["commit.after_requested", "log.before_append.inflight", "commit.after_inflight"])
def test_failed_begin_stops_its_heartbeat_and_ends_the_instant(
    tmp_path: Path, point: str, timeline: str | None
) -> None:
    t = make_table(tmp_path, timeline)
    before = {i.id for i in t.timeline.instants()}
    faults.arm(point, "raise")
    with pytest.raises(FaultInjectedError):
        t.upsert(rows({1: "lost"}))
    [failed] = new_instants(t, before)
    assert not beating(failed.id), "the heartbeat of the failed begin is still beating"
    assert failed.state == "rolled_back", "the instant is ended at once"
    assert failed.id not in t.log.store.last_beats()
    assert t.timeline.pending() == []
    assert failed.id not in instants_with_markers(t.storage)
    t.upsert(rows({1: "next"}))
    assert state(t) == {**SEED, 1: "next"}
    check_files_on_disk(t)


def test_failed_begin_whose_rollback_fails_expires(tmp_path: Path) -> None:
    """The store refuses the rollback too: the beat stops anyway, so the instant expires
    and ``rollback_failed`` ends it."""
    t = make_table(tmp_path, None)
    before = {i.id for i in t.timeline.instants()}
    faults.arm("log.before_append.inflight", "raise")
    faults.arm("log.before_append.rolled_back", "raise")
    with pytest.raises(FaultInjectedError, match="inflight"):
        t.upsert(rows({1: "lost"}))
    [failed] = new_instants(t, before)
    assert failed.state == "requested"
    assert not beating(failed.id)
    time.sleep(EXPIRY_S + 0.2)
    result = t.services.rollback_failed()
    assert result.stats["instants"] == [failed.id]
    assert t.timeline.pending() == []
    assert state(t) == SEED


# -- item 7: errors after the slot was won -------------------------------------------------


class FailAfterPut:
    """Make the store fail right after the put of a ``state`` event won its slot, the way
    PostgreSQL's ``archived_through`` query did (and, with ``reads_fail``, make reading
    the log fail too until :meth:`heal`)."""

    def __init__(self, t: Table, state: State, reads_fail: bool = False) -> None:
        self.store = store = t.log.store
        self.state = state
        self.reads_fail = reads_fail
        self.fired = 0
        self._put = store.put_if_absent
        self._read = store.read_from
        store.put_if_absent = self.put  # type: ignore[method-assign]
        store.read_from = self.read  # type: ignore[method-assign]
        self.broken = False

    def put(self, event: Event) -> None:
        self._put(event)
        if event.state is self.state and not self.fired:
            self.fired += 1
            self.broken = self.reads_fail
            raise StoreUnavailableError("archived_through failed: the server went away")

    def read(self, seq: int) -> list[Event]:
        if self.broken:
            raise StoreUnavailableError("reading the log failed: the server went away")
        return self._read(seq)

    def heal(self) -> None:
        self.broken = False


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_store_error_after_the_completed_put_is_a_committed_write(
    tmp_path: Path, table_type: str, timeline: str | None
) -> None:
    t = make_table(tmp_path, timeline, table_type)
    fail = FailAfterPut(t, State.COMPLETED)
    r = t.upsert(rows({1: "new", 20: "new"}))
    assert fail.fired == 1
    assert r.instant is not None and r.instant.state == "completed"
    assert t.timeline.get(r.instant.id).state == "completed"
    assert state(t) == {**SEED, 1: "new", 20: "new"}
    assert t.timeline.pending() == []
    assert list_markers(t.storage, r.instant.id) == []
    check_files_on_disk(t)


@pytest.mark.parametrize("hit, state_name", [(1, "requested"), (2, "inflight"), (3, "completed")])
def test_fault_after_put_resolves_by_reading_the_log(
    tmp_path: Path, hit: int, state_name: str, timeline: str | None
) -> None:
    """A raise at ``log.after_put`` (the slot is won) on any of the write's appends: the
    log finds its event by token and the write goes on; the row lands exactly once."""
    t = make_table(tmp_path, timeline)
    before = {i.id for i in t.timeline.instants()}
    faults.arm("log.after_put", "raise", on_hit=hit)
    r = t.insert(rows({20: "new"}))
    [inst] = new_instants(t, before)
    assert r.instant is not None and r.instant.id == inst.id and inst.state == "completed"
    assert [e.state.value for e in t.timeline.events_after(0) if e.instant == inst.id] == [
        "requested",
        "inflight",
        "completed",
    ]
    assert state(t) == {**SEED, 20: "new"}
    check_files_on_disk(t)


def test_unknown_outcome_deletes_nothing(tmp_path: Path, timeline: str | None) -> None:
    """The put won, then neither the store's follow-up nor reading the log back works:
    the caller gets CommitOutcomeUnknownError and no file is deleted; the log, once
    readable, shows the write committed."""
    t = make_table(tmp_path, timeline)
    before = {i.id for i in t.timeline.instants()}
    on_disk = data_files_on_disk(t)
    fail = FailAfterPut(t, State.COMPLETED, reads_fail=True)
    with pytest.raises(CommitOutcomeUnknownError):
        t.upsert(rows({1: "new", 20: "new"}))
    written = data_files_on_disk(t) - on_disk
    assert written, "the write's files are kept"
    fail.heal()
    [inst] = new_instants(t, before)
    assert inst.state == "completed"
    assert written <= referenced_files(t)
    assert state(t) == {**SEED, 1: "new", 20: "new"}


def test_a_failure_before_the_put_is_still_a_failure(tmp_path: Path) -> None:
    """The contrast: a typed store error before the put, with the slot still empty, is
    a failure (the attempt is rolled back), not a success and not unknown."""
    t = make_table(tmp_path, None)
    before = {i.id for i in t.timeline.instants()}
    faults.arm("log.store.before_write", "raise", on_hit=3)  # the completed event's put
    with pytest.raises(FaultInjectedError):
        t.upsert(rows({1: "lost"}))
    [inst] = new_instants(t, before)
    assert inst.state == "rolled_back"
    assert state(t) == SEED
    check_files_on_disk(t)


@pytest.mark.parametrize("what", ["markers", "heartbeat"])
def test_cleanup_after_completed_never_fails_the_write(tmp_path: Path, what: str, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline)
    store = t.log.store
    if what == "markers":
        faults.arm("commit.delete_markers", "raise")
    else:
        cleared: list[object] = []

        def clear_beat(*args: Any, **kwargs: Any) -> None:
            cleared.append(args)
            raise StoreUnavailableError("clearing the beat failed")

        store.clear_beat = clear_beat  # type: ignore[method-assign]
        # A writer first beats after half an interval; a commit that takes longer beats,
        # so it clears its beat after completing.
        faults.on("commit.before_complete", lambda: time.sleep(0.12))
    r = t.upsert(rows({1: "new"}))
    if what == "heartbeat":
        assert cleared, "the commit beat, so it tried to clear the beat"
    assert r.instant is not None and r.instant.state == "completed"
    assert state(t) == {**SEED, 1: "new"}
    assert not beating(r.instant.id)
    if what == "markers":
        assert list_markers(t.storage, r.instant.id), "the markers were left behind"
        t.services.rollback_failed()
        assert r.instant.id not in instants_with_markers(t.storage), "rollback_failed removes them"
    assert t.timeline.get(r.instant.id).state == "completed"
    assert state(t) == {**SEED, 1: "new"}
