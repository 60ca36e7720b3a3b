"""Retention from the timeline alone (timeline/retention.py): savepoints pin snapshots
until released, and a read before the furthest retain point of a clean is refused."""

from __future__ import annotations

from typing import Any

import pytest
from lakeline.timeline.errors import SnapshotExpiredError
from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.retention import (
    active_savepoints,
    check_retained,
    furthest_retain_seq,
    last_retain_seq,
    pinned_seqs,
)
from lakeline.timeline.timeline import Timeline


class Log:
    def __init__(self) -> None:
        self.events: list[Event] = []

    def add(self, instant: int | None, action: Action, state: State, payload: dict[str, Any] | None = None) -> int:
        seq = len(self.events)
        self.events.append(Event(seq, 1_000 + seq, seq if instant is None else instant, action, state, payload or {}))
        return seq

    def done(self, action: Action, plan: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None) -> int:
        i = self.add(None, action, State.REQUESTED, plan)
        self.add(i, action, State.COMPLETED, metadata)
        return i


def test_savepoints_pin_until_released() -> None:
    log = Log()
    log.done(Action.COMMIT)
    sp1 = log.done(Action.SAVEPOINT, {"op": "create", "instant": 0, "seq": 1})
    sp2 = log.add(None, Action.SAVEPOINT, State.REQUESTED, {"op": "create", "instant": 0, "seq": 5})
    gone = log.add(None, Action.SAVEPOINT, State.REQUESTED, {"op": "create", "instant": 0, "seq": 9})
    log.add(gone, Action.SAVEPOINT, State.ROLLED_BACK)
    t = Timeline(log.events)
    assert [s.id for s in active_savepoints(t)] == [sp1, sp2] and pinned_seqs(t) == [1, 5]
    log.done(Action.SAVEPOINT, {"op": "release", "savepoint": sp1})
    assert pinned_seqs(Timeline(log.events)) == [5]


def test_retain_points_and_check() -> None:
    log = Log()
    log.done(Action.COMMIT)
    t = Timeline(log.events)
    assert last_retain_seq(t) is None and furthest_retain_seq(t) is None
    check_retained(t, 0, "never cleaned")
    log.done(Action.SAVEPOINT, {"op": "create", "instant": 0, "seq": 1})
    log.done(Action.CLEAN, metadata={"retain_seq": 8})
    log.done(Action.CLEAN, metadata={"retain_seq": 6})
    t = Timeline(log.events)
    assert last_retain_seq(t) == 6 and furthest_retain_seq(t) == 8
    check_retained(t, 8, "at the retain point")
    check_retained(t, 1, "savepointed")
    with pytest.raises(SnapshotExpiredError, match="as of old"):
        check_retained(t, 3, "old")
