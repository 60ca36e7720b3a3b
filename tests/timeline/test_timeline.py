"""The timeline as readers see it: order of instants, time travel, event timestamps.

Why: ``completed()`` in completion order and ``pending()`` by id are part of the public
contract (docs/design.md, "Public API"), snapshots are named by completed-event positions, and
time travel by wall-clock time must work even when a machine's clock steps back, which
is why event timestamps may never go backwards.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone

import pytest
from lakeline.timeline.errors import InstantNotFoundError
from lakeline.timeline.instant import Action, State, micros_to_datetime
from lakeline.timeline.log import EventLog
from lakeline.timeline.timeline import Timeline

from tests.helpers import StoreFactory

T0 = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z in microseconds


def fake_clock(values: list[int]) -> Callable[[], int]:
    """A clock that returns ``values`` one by one (then keeps the last)."""
    it: Iterator[int] = iter(values)
    last = [values[0]]

    def clock() -> int:
        last[0] = next(it, last[0])
        return last[0]

    return clock


def second(n: int) -> int:
    return T0 + n * 1_000_000


@pytest.fixture
def story(store_factory: StoreFactory) -> tuple[EventLog, dict[str, int]]:
    """Four instants interleaved; event n is written at second n.

    seq 0 A requested   seq 3 B inflight    seq 6 A completed
    seq 1 B requested   seq 4 B completed   seq 7 D requested
    seq 2 C requested   seq 5 A inflight    seq 8 C inflight
    """
    log = EventLog(store_factory(), clock=fake_clock([second(n) for n in range(20)]))
    a = log.append(Action.COMMIT, State.REQUESTED, {"name": "A"}).instant
    b = log.append(Action.DELTA_COMMIT, State.REQUESTED, {"name": "B"}).instant
    c = log.append(Action.COMPACTION, State.REQUESTED, {"name": "C"}).instant
    log.append(Action.DELTA_COMMIT, State.INFLIGHT, instant=b)
    log.append(Action.DELTA_COMMIT, State.COMPLETED, {"done": "B"}, instant=b)
    log.append(Action.COMMIT, State.INFLIGHT, instant=a)
    log.append(Action.COMMIT, State.COMPLETED, {"done": "A"}, instant=a)
    d = log.append(Action.CLEAN, State.REQUESTED, {"name": "D"}).instant
    log.append(Action.COMPACTION, State.INFLIGHT, instant=c)
    return log, {"A": a, "B": b, "C": c, "D": d}


def ids(instants: list) -> list[int]:  # type: ignore[type-arg]
    return [i.id for i in instants]


def test_completed_in_completion_order_pending_by_id(story: tuple[EventLog, dict[str, int]]) -> None:
    log, i = story
    tl = log.refresh()
    assert ids(tl.instants()) == [0, 1, 2, 7]
    assert ids(tl.completed()) == [i["B"], i["A"]]  # B completed first though A is older
    assert ids(tl.pending()) == [i["C"], i["D"]]
    assert tl.last_completed().id == i["A"]  # type: ignore[union-attr]
    assert [tl.get(x).state for x in (0, 1, 2, 7)] == ["completed", "completed", "inflight", "requested"]
    a = tl.get(i["A"])
    assert (a.action, a.plan, a.metadata, a.completed_seq) == ("commit", {"name": "A"}, {"done": "A"}, 6)
    assert a.requested_at == micros_to_datetime(second(0))
    assert a.completed_at == micros_to_datetime(second(6))
    assert ids(tl.by_action("compaction", Action.CLEAN)) == [i["C"], i["D"]]
    assert ids(tl.completed_after(4)) == [i["A"]]
    assert [e.seq for e in tl.events_after(6)] == [7, 8]
    with pytest.raises(InstantNotFoundError):
        tl.get(3)  # seq 3 is an event, not an instant


def test_incremental_reads_equal_a_fresh_read(story: tuple[EventLog, dict[str, int]]) -> None:
    log, _ = story
    incremental = log.refresh()  # built up event by event while appending
    fresh = Timeline(log.store.read_from(0))
    assert incremental.events == fresh.events
    assert incremental.instants() == fresh.instants()
    assert incremental.completed() == fresh.completed()
    assert incremental.pending() == fresh.pending()


def test_as_of_seq(story: tuple[EventLog, dict[str, int]]) -> None:
    log, i = story
    tl = log.refresh()
    at4 = tl.as_of_seq(4)
    assert at4.last_seq == 4
    assert ids(at4.completed()) == [i["B"]]
    assert ids(at4.pending()) == [i["A"], i["C"]]
    assert at4.get(i["A"]).state == "requested"
    assert i["D"] not in at4
    assert tl.as_of_seq(100) is tl
    assert tl.as_of_seq(-1).instants() == []


def test_as_of_instant(story: tuple[EventLog, dict[str, int]]) -> None:
    log, i = story
    tl = log.refresh()
    assert tl.as_of_instant(i["B"]).last_seq == 4
    assert tl.as_of_instant(i["A"]).last_seq == 6
    for not_done in (i["C"], i["D"], 42):
        with pytest.raises(InstantNotFoundError):
            tl.as_of_instant(not_done)


def test_as_of_time(story: tuple[EventLog, dict[str, int]]) -> None:
    log, i = story
    tl = log.refresh()
    at = micros_to_datetime  # UTC datetimes
    assert tl.as_of_time(at(second(4))).last_completed().id == i["B"]  # type: ignore[union-attr]
    assert tl.as_of_time(at(second(5) + 999_999)).last_completed().id == i["B"]  # type: ignore[union-attr]
    assert tl.as_of_time(at(second(6))).last_completed().id == i["A"]  # type: ignore[union-attr]
    assert tl.as_of_time(at(second(99))).last_seq == 6  # last completion, not the last event
    with pytest.raises(InstantNotFoundError):
        tl.as_of_time(at(second(4) - 1))
    # The same moment in another time zone, and as a naive local time, is the same moment.
    other_zone = at(second(4)).astimezone(timezone(timedelta(hours=-7)))
    assert tl.as_of_time(other_zone).last_seq == 4
    naive_local = datetime.fromtimestamp(second(4) / 1_000_000)
    assert tl.as_of_time(naive_local).last_seq == 4


def test_every_completion_time_names_its_own_snapshot(store_factory: StoreFactory) -> None:
    # Microsecond-exact: a completed_at read back must select that very instant.
    log = EventLog(store_factory(), clock=fake_clock([T0 + 7 * n + n * n for n in range(200)]))
    for _ in range(30):
        inst = log.append(Action.COMMIT, State.REQUESTED).instant
        log.append(Action.COMMIT, State.INFLIGHT, instant=inst)
        log.append(Action.COMMIT, State.COMPLETED, instant=inst)
    tl = log.refresh()
    for inst in tl.completed():
        assert tl.as_of_time(inst.completed_at).last_completed() == inst  # type: ignore[arg-type]


def test_timestamps_never_go_backwards_when_the_clock_steps_back(store_factory: StoreFactory) -> None:
    clock = fake_clock([second(10), second(20), second(5), second(5), second(30), second(1)])
    log = EventLog(store_factory(), clock=clock)
    stamps = [log.append(Action.COMMIT, State.REQUESTED).ts_us for _ in range(6)]
    assert stamps == [second(10), second(20), second(20) + 1, second(20) + 2, second(30), second(30) + 1]
    assert [e.ts_us for e in log.store.read_from(0)] == stamps


def test_timestamps_never_go_backwards_across_writers(store_factory: StoreFactory) -> None:
    store = store_factory()
    ahead = EventLog(store, clock=lambda: second(100))
    behind = EventLog(store_factory.reopen(store), clock=lambda: second(1))  # a machine far behind
    x = ahead.append(Action.COMMIT, State.REQUESTED)
    y = behind.append(Action.COMMIT, State.REQUESTED)
    z = behind.append(Action.COMMIT, State.INFLIGHT, instant=y.instant)
    assert x.ts_us < y.ts_us < z.ts_us
    # Time travel stays consistent with log order although the second clock was wrong.
    behind.append(Action.COMMIT, State.COMPLETED, instant=y.instant)
    tl = behind.refresh()
    assert tl.as_of_time(micros_to_datetime(second(200))).last_completed().id == y.instant  # type: ignore[union-attr]


def test_instant_to_dict_is_json_ready(story: tuple[EventLog, dict[str, int]]) -> None:
    import json

    log, i = story
    d = log.refresh().get(i["A"]).to_dict()
    assert json.loads(json.dumps(d))["completed_seq"] == 6
    assert d["state"] == "completed" and d["action"] == "commit"


def test_instant_is_typed_and_prints_as_one_short_line(story: tuple[EventLog, dict[str, int]]) -> None:
    """``action``/``state`` are the str enums of docs/design.md, "Public API"; ``repr``/``str``
    is one short line, not the plan and metadata (a log or a debugger prints thousands)."""
    log, ids = story
    b = log.timeline.get(ids["B"])
    assert b.action is Action.DELTA_COMMIT and b.state is State.COMPLETED
    assert b.action == "deltacommit" and b.state == "completed"  # still plain strings
    assert repr(b) == str(b) == f"Instant({ids['B']} deltacommit completed)"
    assert f"{b.action} {b.state}" == "deltacommit completed"
    assert b.to_dict()["action"] == "deltacommit" and type(b.to_dict()["state"]) is str
