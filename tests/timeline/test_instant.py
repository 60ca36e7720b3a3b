"""Instants and events on their own (timeline/instant.py): the legal moves, the event
encoding and its refusals, and the one parse of an instant id."""

from __future__ import annotations

import json

import pytest
from lakeline.timeline.errors import CorruptEventError, InstantNotFoundError, InvalidTransitionError
from lakeline.timeline.instant import TRANSITIONS, Action, Event, State, check_transition, instant_id_of

ALL_STATES: list[State | None] = [None, *State]


@pytest.mark.parametrize("current", ALL_STATES)
@pytest.mark.parametrize("target", list(State))
def test_check_transition_allows_exactly_the_table(current: State | None, target: State) -> None:
    legal = {
        None: {State.REQUESTED},
        State.REQUESTED: {State.INFLIGHT, State.ROLLED_BACK},
        State.INFLIGHT: {State.INFLIGHT, State.COMPLETED, State.ROLLED_BACK},
        State.COMPLETED: set(),
        State.ROLLED_BACK: set(),
    }
    assert set(TRANSITIONS[current]) == legal[current]
    if target in legal[current]:
        check_transition(5, current, target)
    else:
        with pytest.raises(InvalidTransitionError, match="instant 5 cannot move from"):
            check_transition(5, current, target)


def test_terminal_and_pending_states() -> None:
    assert {s for s in State if s.is_terminal} == {State.COMPLETED, State.ROLLED_BACK}
    assert {s for s in State if s.is_pending} == {State.REQUESTED, State.INFLIGHT}
    assert Action.COMPACTION.writes_data and not Action.CLEAN.writes_data


def test_event_json_round_trips() -> None:
    event = Event(7, 1_700_000_000_000_000, 3, Action.DELTA_COMMIT, State.COMPLETED, {"files": []}, "tok")
    assert Event.from_json(event.to_json(), "e7") == event
    assert Event.from_json(event.to_json().encode(), "e7") == event


@pytest.mark.parametrize(
    "text",
    [
        "",
        '{"format": 1, "seq": 1',
        "[1, 2]",
        '{"format": 99, "seq": 1, "ts_us": 1, "instant": 1, "action": "commit", "state": "requested"}',
        '{"format": 1, "seq": 1, "ts_us": 1, "instant": 1, "action": "commit", "state": "requested", "payload": [1]}',
        '{"format": 1, "seq": 1, "ts_us": 1, "instant": 1, "action": "nope", "state": "requested"}',
        '{"format": 1, "seq": 2, "ts_us": 1, "instant": 1, "action": "commit", "state": "requested"}',
    ],
)
def test_damaged_event_is_corrupt_naming_where(text: str) -> None:
    with pytest.raises(CorruptEventError, match="where-it-was"):
        Event.from_json(text, "where-it-was")


def test_event_without_payload_reads_as_empty_plan() -> None:
    raw = {"format": 1, "seq": 4, "ts_us": 9, "instant": 4, "action": "clean", "state": "requested"}
    event = Event.from_json(json.dumps(raw), "e4")
    assert event.payload == {} and event.token == "" and event.action is Action.CLEAN


@pytest.mark.parametrize(("value", "expected"), [(3, 3), ("3", 3), (" 12 ", 12), (0, 0)])
def test_instant_id_of_takes_ints_and_int_text(value: object, expected: int) -> None:
    assert instant_id_of(value) == expected


@pytest.mark.parametrize("value", [True, 3.0, "3.0", "x", "-1", None, "٣"])
def test_instant_id_of_refuses_what_is_no_id(value: object) -> None:
    with pytest.raises(InstantNotFoundError):
        instant_id_of(value)
