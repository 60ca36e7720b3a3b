"""Instants and events on their own (timeline/instant.py): the legal moves, the event
encoding and its refusals, and the one parse of an instant id."""

from __future__ import annotations

import json
import zlib

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


# -- the event's checksum (issue 45: the table's own metadata is checksummed) --------


def _commit_event() -> Event:
    files = [{"path": "g1_3_x.parquet", "bytes": 795651, "rows": 100000, "crc": "a nested key named like the field"}]
    return Event(5, 17, 3, Action.COMMIT, State.COMPLETED, {"files": files, "crc": 7}, "tok")


def test_an_event_carries_a_checksum_of_its_bytes_and_reads_back() -> None:
    e = _commit_event()
    text = e.to_json()
    body = text[: text.rfind(',"crc":"')] + "}"  # the JSON before the field, as one object
    assert json.loads(text)["crc"] == f"{zlib.crc32(body.encode()):08x}" and json.loads(body)["seq"] == 5
    assert Event.from_json(text, "x") == e == Event.from_json(text.encode(), "x")
    # The object-store log appends its predecessor's token after it: still checked, still read.
    assert Event.from_json(text[:-1] + ',"prev":"abc"}', "x") == e


@pytest.mark.parametrize(("old", "new"), [("795651", "795657"), ("100000", "100001"), ("g1_3_x", "g1_3_y")])
def test_a_byte_changed_after_writing_is_refused_though_the_json_still_parses(old: str, new: str) -> None:
    text = _commit_event().to_json()
    damaged = text.replace(old, new)
    json.loads(damaged)  # well-formed: without the checksum it would be trusted
    with pytest.raises(CorruptEventError, match="checksum"):
        Event.from_json(damaged, "00005.json")


@pytest.mark.parametrize("crc", ['"zzzzzzzz"', '"1"', "12345678", "null"])
def test_a_malformed_checksum_is_a_corrupt_event(crc: str) -> None:
    text = _commit_event().to_json()
    at = text.rfind(',"crc":"')
    with pytest.raises(CorruptEventError):
        Event.from_json(text[:at] + f',"crc":{crc}}}', "x")


def test_events_written_before_the_checksum_read_as_before() -> None:
    e = _commit_event()
    old = json.dumps(
        {"format": 1, "seq": 5, "ts_us": 17, "instant": 3, "action": "commit", "state": "completed"}
        | {"token": "tok", "payload": dict(e.payload)},
        sort_keys=True,
    )
    assert Event.from_json(old, "x") == e  # the payload's own "crc" key is not the field
