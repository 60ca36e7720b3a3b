"""Crashes in the middle of an append, and damaged events, on both stores.

Why: the event is the unit of atomicity (docs/format.md section 3.2). A process killed at any
step of an append must leave the log either without the event or with all of it, never
a gap or half an event, and the next appender must carry on. A damaged event must stop
readers with :class:`CorruptEventError` naming the file or row, never be skipped or
misread, because a skipped completion would silently change what a snapshot holds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import CorruptEventError
from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.log import EventLog
from lakeline.timeline.storage.event_log.filesystem import FileSystemStore, event_file_name
from lakeline.timeline.storage.event_log.protocol import TimelineStore

from tests.helpers import CHILDREN, StoreFactory, run_script, store_spec

CHILD = CHILDREN / "timeline_child.py"
STATES = ("requested", "inflight", "completed")

# (fault point, whether the event is in the log when the process dies there).
# Store points are reached once per append, so "@n" picks the n-th append of the child.
FS_POINTS = [
    ("log.before_append.{state}", False),
    ("log.store.before_write", False),  # temp file created, nothing written
    ("log.store.before_link", False),  # temp file complete and fsynced, not linked
    ("log.store.before_dir_fsync", True),  # linked: the event is in
    ("log.after_append.{state}", True),
]
PG_POINTS = [
    ("log.before_append.{state}", False),
    ("log.store.before_write", False),  # the INSERT was never sent
    ("log.store.after_write", True),  # the INSERT committed, the answer not used
    ("log.after_append.{state}", True),
]


def crash_cases() -> list[Any]:
    cases: list[Any] = []
    for kind, points in (("filesystem", FS_POINTS), ("postgresql", PG_POINTS)):
        for point, lands in points:
            for n, state in enumerate(STATES, start=1):
                name = point.format(state=state)
                spec = f"{name}=crash" if "{state}" in point else f"{name}=crash@{n}"
                cases.append(pytest.param(kind, spec, state, lands, id=f"{kind}-{spec}"))
    return cases


def prefill(store: TimelineStore) -> list[Event]:
    """A completed commit and a pending one before the crash."""
    log = EventLog(store)
    done = log.append(Action.COMMIT, State.REQUESTED, {"n": 1})
    log.append(Action.COMMIT, State.INFLIGHT, instant=done.instant)
    log.append(Action.COMMIT, State.COMPLETED, {"rows": 1}, instant=done.instant)
    log.append(Action.CLEAN, State.REQUESTED, {"plan": []})
    return store.read_from(0)


@pytest.mark.parametrize("store_factory, faults, state, lands", crash_cases(), indirect=["store_factory"])
def test_crash_during_append_leaves_a_sound_log(
    store_factory: StoreFactory, faults: str, state: str, lands: bool
) -> None:
    store = store_factory()
    before = prefill(store)
    rc, out, err = run_script(CHILD, ["lifecycle", store_spec(store)], faults=faults)
    assert rc == CRASH_EXIT_CODE, f"the child did not die at {faults}: rc={rc}\n{err}"

    fresh = store_factory.reopen(store)
    events = fresh.read_from(0)  # would raise on a gap or a half-written event
    assert [e.seq for e in events] == list(range(len(events)))
    assert events[: len(before)] == before
    crashed = events[len(before) :]
    expected = list(STATES[: STATES.index(state) + (1 if lands else 0)])
    assert [e.state.value for e in crashed] == expected
    assert all(e.payload == {"step": e.state.value} for e in crashed)
    if store_factory.kind == "filesystem":
        # Leftover temp files are not events and do not disturb readers.
        assert isinstance(fresh, FileSystemStore)
        names = sorted(p.name for p in fresh.events_dir.iterdir() if p.suffix == ".json")
        assert names == [event_file_name(e.seq) for e in events]

    # The log goes on: finish (or start over) the crashed instant and append a new one.
    log = EventLog(fresh)
    if crashed and crashed[-1].state.is_pending:
        inst = crashed[-1].instant
        if crashed[-1].state is State.REQUESTED:
            log.append(Action.DELTA_COMMIT, State.INFLIGHT, instant=inst)
        log.append(Action.DELTA_COMMIT, State.COMPLETED, {"recovered": True}, instant=inst)
    new = log.append(Action.COMMIT, State.REQUESTED, {"after": "crash"})
    final = store.read_from(0)
    assert [e.seq for e in final] == list(range(len(final)))
    assert final[-1] == new
    assert log.refresh().find(new.instant) is not None


# -- damaged events on the filesystem ------------------------------------------------


def _good(seq: int, **changes: object) -> bytes:
    raw = {
        "format": 1,
        "seq": seq,
        "ts_us": 1_700_000_000_000_000 + seq,
        "instant": seq,
        "action": "commit",
        "state": "requested",
        "token": "t",
        "payload": {"k": "v" * 40},
    }
    raw.update(changes)
    return json.dumps(raw).encode()


FS_DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda good: b"",
    "truncated": lambda good: good[: len(good) // 2],
    "not_json": lambda good: b"\x00\xff\xfe garbage",
    "not_an_object": lambda good: b"[1, 2, 3]",
    "unknown_format": lambda good: _good(2, format=99),
    "future_format_missing": lambda good: _good(2, format=None),
    "wrong_seq": lambda good: _good(1),
    "unknown_state": lambda good: _good(2, state="exploded"),
    "unknown_action": lambda good: _good(2, action="teleport"),
    "payload_not_an_object": lambda good: _good(2, payload=[1, 2]),
    "missing_field": lambda good: json.dumps({"format": 1, "seq": 2}).encode(),
}


@pytest.mark.parametrize("damage", sorted(FS_DAMAGE))
def test_damaged_event_file_is_named(tmp_path: Path, damage: str) -> None:
    store = FileSystemStore(tmp_path / ".lakeline")
    for seq in range(4):
        store.put_if_absent(Event.from_json(_good(seq), "test"))
    victim = store.events_dir / event_file_name(2)
    victim.write_bytes(FS_DAMAGE[damage](victim.read_bytes()))
    with pytest.raises(CorruptEventError) as info:
        store.read_from(0)
    assert str(victim) in str(info.value)
    with pytest.raises(CorruptEventError):
        store.read_from(2)  # the incremental (probing) read checks as much
    # An appender stops too instead of writing after a damaged event.
    with pytest.raises(CorruptEventError):
        EventLog(store).append(Action.COMMIT, State.REQUESTED, {})
    assert not (store.events_dir / event_file_name(4)).exists()


def test_damaged_tail_seen_by_an_incremental_read(tmp_path: Path) -> None:
    store = FileSystemStore(tmp_path / ".lakeline")
    log = EventLog(store)
    log.append(Action.COMMIT, State.REQUESTED, {})
    log.refresh()
    (store.events_dir / event_file_name(1)).write_bytes(b'{"format": 1, "seq"')
    with pytest.raises(CorruptEventError, match=event_file_name(1)):
        log.refresh()


# -- damaged rows in PostgreSQL ------------------------------------------------------

PG_DAMAGE: dict[str, tuple[str, object]] = {
    "payload_truncated": ("payload", '{"k": "vvv'),
    "payload_empty": ("payload", ""),
    "payload_not_json": ("payload", "\x01garbage"),
    "payload_not_an_object": ("payload", "[1, 2]"),
    "payload_trailing_garbage": ("payload", '{"k": 1}, "seq": 9'),
    "unknown_format": ("format", 99),
    "unknown_state": ("state", "exploded"),
    "unknown_action": ("action", "teleport"),
    "requested_instant_is_not_its_seq": ("instant", 7),
}


@pytest.mark.parametrize("damage", sorted(PG_DAMAGE))
@pytest.mark.parametrize("store_factory", ["postgresql"], indirect=True)
def test_damaged_row_is_named(store_factory: StoreFactory, damage: str) -> None:
    store = store_factory()
    log = EventLog(store)
    for i in range(4):
        log.append(Action.COMMIT, State.REQUESTED, {"i": i})
    column, value = PG_DAMAGE[damage]
    count, _ = store.execute(  # type: ignore[attr-defined]
        f"UPDATE lakeline_events SET {column} = %s WHERE table_id = %s AND seq = 2",
        (value, store.table_id),  # type: ignore[attr-defined]
        "damaging a row",
    )
    assert count == 1
    with pytest.raises(CorruptEventError) as info:
        store_factory.reopen(store).read_from(0)
    message = str(info.value)
    assert "seq=2" in message and "lakeline_events" in message and store.table_id in message  # type: ignore[attr-defined]
    with pytest.raises(CorruptEventError):
        store.read_from(1)
    with pytest.raises(CorruptEventError):
        EventLog(store_factory.reopen(store)).append(Action.COMMIT, State.REQUESTED, {})
