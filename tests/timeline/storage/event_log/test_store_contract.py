"""The timeline-store contract, run against every backend (filesystem, PostgreSQL).

Why one suite: the event log, the commit protocol and every service rely on exactly
what :class:`TimelineStore` promises (put-if-absent, gapless ordered reads, heartbeats),
so both stores must keep the same promises, checked by the same tests. The centrepiece
is the race: 8 processes appending to one log at once must never share a slot, lose an
event or leave a gap.
"""

from __future__ import annotations

import collections
import pickle
from pathlib import Path

import pytest
from lakeline.timeline.errors import SlotTakenError, TimelineGapError
from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.log import EventLog
from lakeline.timeline.storage.event_log.protocol import TimelineStore

from tests.helpers import CHILDREN, StoreFactory, finish, run_script, start_script, store_spec, wait_for_files

CHILD = CHILDREN / "timeline_child.py"


def ev(seq: int, instant: int | None = None, state: State = State.REQUESTED, **payload: object) -> Event:
    return Event(
        seq=seq,
        ts_us=1_000_000 + seq,
        instant=seq if instant is None else instant,
        action=Action.COMMIT,
        state=state,
        payload=dict(payload),
        token=f"tok-{seq}",
    )


def setup_events(store: TimelineStore) -> list[Event]:
    """A schema instant, as Table.create writes it: 3 events before the race."""
    log = EventLog(store)
    req = log.append(Action.SCHEMA, State.REQUESTED, {"change": "create"})
    log.append(Action.SCHEMA, State.INFLIGHT, instant=req.instant)
    log.append(Action.SCHEMA, State.COMPLETED, {"config": {"k": 1}}, instant=req.instant)
    return list(store.read_from(0))


def test_fresh_store_is_empty(store_factory: StoreFactory) -> None:
    store = store_factory()
    assert store.kind == store_factory.kind
    assert not store.has_events()
    assert store.read_from(0) == []
    assert store.read_from(5) == []
    assert store.last_beats() == {}


def test_append_read_round_trip(store_factory: StoreFactory) -> None:
    store = store_factory()
    payload = {"files": ["a.parquet", "b.parquet"], "rows": 3, "stats": {"min": -1.5, "max": None}}
    events = [
        ev(0, nested=payload),
        ev(1, instant=0, state=State.INFLIGHT),
        ev(2, instant=0, state=State.COMPLETED, text='ünïcødé \u0000 "quoted"', big=2**62),
    ]
    for e in events:
        store.put_if_absent(e)
    assert store.has_events()
    assert store.read_from(0) == events
    assert store.read_from(1) == events[1:]
    assert store.read_from(2) == events[2:]
    assert store.read_from(3) == []


def test_nan_in_payload_survives(store_factory: StoreFactory) -> None:
    # Column statistics of float columns can hold NaN; the log must keep it.
    store = store_factory()
    store.put_if_absent(ev(0, min=float("nan"), max=float("inf")))
    (back,) = store.read_from(0)
    assert back.payload["min"] != back.payload["min"]
    assert back.payload["max"] == float("inf")


def test_put_if_absent_refuses_a_taken_slot(store_factory: StoreFactory) -> None:
    store = store_factory()
    first = ev(0, who="first")
    store.put_if_absent(first)
    intruder = Event(0, 5, 0, Action.CLEAN, State.REQUESTED, {"who": "second"}, "other-token")
    with pytest.raises(SlotTakenError):
        store.put_if_absent(intruder)
    with pytest.raises(SlotTakenError):
        store_factory.reopen(store).put_if_absent(intruder)
    assert store.read_from(0) == [first]


def test_gap_between_events_is_an_error(store_factory: StoreFactory) -> None:
    store = store_factory()
    for seq in (0, 1, 3):
        store.put_if_absent(ev(seq))
    with pytest.raises(TimelineGapError, match="2"):
        store.read_from(0)
    with pytest.raises(TimelineGapError):
        EventLog(store).refresh()


def test_reads_are_gapless_and_ordered(store_factory: StoreFactory) -> None:
    store = store_factory()
    # Written out of order (a slow appender may land later than a faster one's read),
    # read back in order.
    for seq in (0, 2, 1, 3):
        store.put_if_absent(ev(seq))
    assert [e.seq for e in store.read_from(0)] == [0, 1, 2, 3]
    assert [e.seq for e in store.read_from(2)] == [2, 3]


def test_heartbeats(store_factory: StoreFactory) -> None:
    store = store_factory()
    store.beat(7, 100)
    store.beat(9, 300)
    store.beat(7, 200)  # a newer beat replaces the older one
    assert store.last_beats() == {7: 200, 9: 300}
    assert store_factory.reopen(store).last_beats() == {7: 200, 9: 300}
    store.clear_beat(7)
    store.clear_beat(7)  # clearing twice is harmless
    store.clear_beat(12345)
    assert store.last_beats() == {9: 300}


def test_heartbeats_are_per_attempt(store_factory: StoreFactory) -> None:
    """Two executors of one instant (a service attempt re-claimed it) keep separate
    beats: neither replaces nor clears the other's (issue 11, item 3)."""
    store = store_factory()
    store.beat(7, 100)  # a writer's beat: the empty attempt
    store.beat(8, 100, "a1")
    store.beat(8, 300, "b2")
    store.beat(8, 200, "a1")  # a1's newer beat replaces only a1's
    assert store.beats() == {(7, ""): 100, (8, "a1"): 200, (8, "b2"): 300}
    assert store_factory.reopen(store).beats() == store.beats()
    assert store.last_beats() == {7: 100, 8: 300}  # the newest beat of each instant
    store.clear_beat(8, "a1")  # the loser clears its own beat only
    store.clear_beat(8)  # the empty attempt of 8 has none: nothing happens
    assert store.beats() == {(7, ""): 100, (8, "b2"): 300}
    store.clear_beat(8, "b2")
    store.clear_beat(7)
    assert store.beats() == {} and store.last_beats() == {}


def test_heartbeats_are_per_table(store_factory: StoreFactory) -> None:
    a, b = store_factory(), store_factory()
    a.beat(1, 10)
    assert b.last_beats() == {}
    a.put_if_absent(ev(0))
    assert not b.has_events()


def test_event_log_appends_gapless(store_factory: StoreFactory) -> None:
    store = store_factory()
    log = EventLog(store)
    for i in range(20):
        log.append(Action.COMMIT, State.REQUESTED, {"i": i})
    events = store.read_from(0)
    assert [e.seq for e in events] == list(range(20))
    assert [e.payload["i"] for e in events] == list(range(20))


def test_two_store_objects_share_the_log(store_factory: StoreFactory) -> None:
    store = store_factory()
    other = store_factory.reopen(store)
    a, b = EventLog(store), EventLog(other)
    x = a.append(Action.COMMIT, State.REQUESTED, {"by": "a"})
    y = b.append(Action.COMMIT, State.REQUESTED, {"by": "b"})  # must not take x's slot
    assert (x.seq, y.seq) == (0, 1)
    assert a.refresh().events == b.refresh().events


def test_store_survives_pickling(store_factory: StoreFactory) -> None:
    store = store_factory()
    EventLog(store).append(Action.COMMIT, State.REQUESTED, {})
    copy = pickle.loads(pickle.dumps(store))
    try:
        assert copy.read_from(0) == store.read_from(0)
    finally:
        copy.close()


def test_another_process_sees_the_same_log(store_factory: StoreFactory) -> None:
    store = store_factory()
    setup = setup_events(store)
    rc, out, err = run_script(CHILD, ["lifecycle", store_spec(store)])
    assert rc == 0, err
    mine = store.read_from(0)
    assert mine[: len(setup)] == setup and len(mine) == len(setup) + 3
    rc, out, err = run_script(CHILD, ["read", store_spec(store)])
    assert rc == 0, err
    import json

    assert json.loads(out) == [[e.seq, e.instant, e.state.value, e.token] for e in mine]


PROCESSES = 8
#: Appends per process: 250 (on the object store, where an append is a few requests and
#: 100 of them already race for seconds, 100; 250 there under soak).
PER_PROCESS, PER_PROCESS_ON_OBJECT_STORE = 250, 100


@pytest.mark.parametrize("long", [False, pytest.param(True, marks=pytest.mark.soak)], ids=["short", "soak"])
def test_race_of_eight_appenders(store_factory: StoreFactory, tmp_path: Path, long: bool) -> None:
    """8 processes x 250 appends at once (100 on the object store in make test): every
    event once, no gap, no shared slot."""
    if long and store_factory.kind != "object_store":
        pytest.skip("the long run is the object store's; the others run it in full in make test")
    per_process = PER_PROCESS_ON_OBJECT_STORE if store_factory.kind == "object_store" and not long else PER_PROCESS
    store = store_factory()
    setup = setup_events(store)
    spec = store_spec(store)
    go = tmp_path / "go"
    ready = [tmp_path / f"ready-{k}" for k in range(PROCESSES)]
    children = [start_script(CHILD, ["append", spec, per_process, k, str(r), str(go)]) for k, r in enumerate(ready)]
    try:
        wait_for_files(ready)
        go.write_text("go")
        results = [finish(c, timeout=180) for c in children]
    finally:
        for c in children:
            if c.poll() is None:
                c.kill()
    for rc, _, err in results:
        assert rc == 0, err

    events = store_factory.reopen(store).read_from(0)
    assert len(events) == len(setup) + PROCESSES * per_process
    assert events[: len(setup)] == setup
    assert [e.seq for e in events] == list(range(len(events)))
    raced = events[len(setup) :]
    assert all(e.state is State.REQUESTED and e.instant == e.seq for e in raced)
    seen = collections.Counter((e.payload["p"], e.payload["i"]) for e in raced)
    assert set(seen) == {(k, i) for k in range(PROCESSES) for i in range(per_process)}
    assert max(seen.values()) == 1
    # Each appender's own events are in its program order, and time never goes back.
    for k in range(PROCESSES):
        assert [e.payload["i"] for e in raced if e.payload["p"] == k] == list(range(per_process))
    assert all(a.ts_us < b.ts_us for a, b in zip(events, events[1:], strict=False))
    assert len({e.token for e in raced}) == len(raced)
