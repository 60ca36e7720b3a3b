"""Legal and illegal instant transitions through :meth:`EventLog.append`, on both stores.

Why: an instant moves ``requested -> inflight -> completed`` or ends ``rolled_back``, and
nothing else. The log checks every move against the instant's state *as of the slot it
is about to win*, which is what makes a stale writer unable to complete an instant that
was rolled back meanwhile (docs/concurrency.md section 4, failed writes) and makes completion
happen exactly once.
"""

from __future__ import annotations

import pytest
from lakeline.timeline.errors import InvalidTransitionError
from lakeline.timeline.instant import TRANSITIONS, Action, State
from lakeline.timeline.log import EventLog
from lakeline.timeline.timeline import Timeline

from tests.helpers import StoreFactory

# The events that bring a new instant into each state.
PATH_TO: dict[State, list[State]] = {
    State.REQUESTED: [State.REQUESTED],
    State.INFLIGHT: [State.REQUESTED, State.INFLIGHT],
    State.COMPLETED: [State.REQUESTED, State.INFLIGHT, State.COMPLETED],
    State.ROLLED_BACK: [State.REQUESTED, State.ROLLED_BACK],
}

ILLEGAL = [
    pytest.param(current, target, id=f"{current.value}->{target.value}")
    for current in PATH_TO
    for target in State
    if target is not State.REQUESTED and target not in TRANSITIONS[current]
]


def bring_to(log: EventLog, state: State, action: Action = Action.COMMIT) -> int:
    """A new instant moved along its path to ``state``; returns its id."""
    first = log.append(action, State.REQUESTED, {"plan": 1})
    for step in PATH_TO[state][1:]:
        log.append(action, step, {"step": step.value}, instant=first.instant)
    return first.instant


@pytest.mark.parametrize(
    "path",
    [
        [State.REQUESTED, State.INFLIGHT, State.COMPLETED],
        [State.REQUESTED, State.ROLLED_BACK],
        [State.REQUESTED, State.INFLIGHT, State.ROLLED_BACK],
    ],
    ids=lambda p: "->".join(s.value for s in p),
)
def test_legal_paths(store_factory: StoreFactory, path: list[State]) -> None:
    log = EventLog(store_factory())
    first = log.append(Action.COMPACTION, State.REQUESTED, {"plan": [1]})
    assert first.instant == first.seq == 0
    for state in path[1:]:
        ev = log.append(Action.COMPACTION, state, {"s": state.value}, instant=first.instant)
        assert ev.instant == first.instant
    inst = log.refresh().get(first.instant)
    assert inst.state is path[-1]
    assert inst.plan == {"plan": [1]}
    if path[-1] is State.COMPLETED:
        assert inst.metadata == {"s": "completed"} and inst.completed_seq == len(path) - 1


@pytest.mark.parametrize("current, target", ILLEGAL)
def test_illegal_moves_are_refused_and_append_nothing(
    store_factory: StoreFactory, current: State, target: State
) -> None:
    log = EventLog(store_factory())
    inst = bring_to(log, current)
    before = log.refresh().last_seq
    with pytest.raises(InvalidTransitionError, match=f"from {current.value} to {target.value}"):
        log.append(Action.COMMIT, target, instant=inst)
    assert log.refresh().last_seq == before
    assert log.timeline.get(inst).state is current


def test_requested_only_for_new_instants(store_factory: StoreFactory) -> None:
    log = EventLog(store_factory())
    inst = bring_to(log, State.REQUESTED)
    with pytest.raises(InvalidTransitionError):
        log.append(Action.COMMIT, State.REQUESTED, instant=inst)  # requested twice
    with pytest.raises(InvalidTransitionError):
        log.append(Action.COMMIT, State.INFLIGHT)  # a new instant must start requested
    with pytest.raises(InvalidTransitionError, match="absent"):
        log.append(Action.COMMIT, State.INFLIGHT, instant=99)  # no such instant
    assert log.refresh().last_seq == 0


def test_action_must_match_the_instant(store_factory: StoreFactory) -> None:
    log = EventLog(store_factory())
    inst = bring_to(log, State.REQUESTED, Action.CLUSTERING)
    with pytest.raises(InvalidTransitionError, match="clustering"):
        log.append(Action.COMPACTION, State.INFLIGHT, instant=inst)


def test_stale_writer_cannot_complete_a_rolled_back_instant(store_factory: StoreFactory) -> None:
    store = store_factory()
    writer = EventLog(store)
    inst = bring_to(writer, State.INFLIGHT)
    writer_view = writer.timeline  # the writer read the log, then paused
    # Meanwhile the rollback service (another process, another store object) ends it.
    service = EventLog(store_factory.reopen(store))
    service.append(Action.COMMIT, State.ROLLED_BACK, {"reason": "heartbeat expired"}, instant=inst)
    assert writer_view.get(inst).state is State.INFLIGHT
    with pytest.raises(InvalidTransitionError, match="rolled_back to completed"):
        writer.append(Action.COMMIT, State.COMPLETED, {"files": ["x"]}, instant=inst)
    final = EventLog(store_factory.reopen(store)).refresh()
    assert final.get(inst).state is State.ROLLED_BACK
    assert final.completed() == []


def test_completion_happens_once_between_two_writers(store_factory: StoreFactory) -> None:
    store = store_factory()
    a = EventLog(store)
    b = EventLog(store_factory.reopen(store))
    inst = bring_to(a, State.INFLIGHT)
    b.refresh()
    a.append(Action.COMMIT, State.COMPLETED, {"by": "a"}, instant=inst)
    with pytest.raises(InvalidTransitionError):
        b.append(Action.COMMIT, State.COMPLETED, {"by": "b"}, instant=inst)
    (done,) = b.refresh().completed()
    assert done.metadata == {"by": "a"}


class Refused(Exception):
    """Stands for whatever a caller's check raises (e.g. CommitConflictError)."""


def test_an_append_on_an_old_read_lands_only_where_nothing_came_between(store_factory: StoreFactory) -> None:
    """The first attempt puts right after what the log last read, without reading again;
    when another writer appended meanwhile, that slot is taken, and the check runs again
    on the fresh timeline (and refuses here), so an old read never lets a check pass."""
    store = store_factory()
    mine = EventLog(store)
    inst = bring_to(mine, State.INFLIGHT)
    stale = mine.timeline.last_seq
    other = EventLog(store_factory.reopen(store))
    bring_to(other, State.COMPLETED, Action.REPLACE_COMMIT)
    seen: list[int] = []

    def no_concurrent_replace(tl: Timeline) -> None:
        seen.append(tl.last_seq)
        if any(i.action is Action.REPLACE_COMMIT for i in tl.completed_after(1)):
            raise Refused("replaced")

    with pytest.raises(Refused):
        mine.append(Action.COMMIT, State.COMPLETED, instant=inst, check=no_concurrent_replace)
    assert seen[0] == stale and seen[-1] == other.timeline.last_seq > stale
    # Without a conflict, the old read's slot is lost and the next one is won.
    done = mine.append(Action.COMMIT, State.COMPLETED, instant=inst)
    assert done.seq == other.timeline.last_seq + 1 == mine.refresh().last_seq
    assert [e.seq for e in mine.refresh().events_after(-1)] == list(range(done.seq + 1))


def test_check_sees_the_fresh_timeline_and_can_refuse(store_factory: StoreFactory) -> None:
    store = store_factory()
    mine = EventLog(store)
    inst = bring_to(mine, State.INFLIGHT)
    other = EventLog(store_factory.reopen(store))
    other_inst = bring_to(other, State.COMPLETED, Action.REPLACE_COMMIT)
    seen: list[int] = []

    def no_concurrent_replace(tl: Timeline) -> None:
        seen.append(tl.last_seq)
        if any(i.action is Action.REPLACE_COMMIT for i in tl.completed_after(1)):
            raise Refused(f"instant {other_inst} replaced my file groups")

    before = mine.refresh().last_seq
    with pytest.raises(Refused):
        mine.append(Action.COMMIT, State.COMPLETED, instant=inst, check=no_concurrent_replace)
    assert seen[-1] == before  # the refusal came from everything, incl. the other writer's events
    assert mine.refresh().last_seq == before
    mine.append(Action.COMMIT, State.ROLLED_BACK, instant=inst)
