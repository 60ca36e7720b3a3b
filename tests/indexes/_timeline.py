"""Synthetic timelines for index tests: events built by hand, no store involved."""

from __future__ import annotations

from typing import Any

from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.timeline import Timeline


class Events:
    """Appends events at consecutive sequence numbers, like the log does."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def _add(self, instant: int | None, action: Action, state: State, payload: dict[str, Any]) -> int:
        seq = len(self.events)
        self.events.append(Event(seq, 1_000_000 + seq, seq if instant is None else instant, action, state, payload))
        return seq

    def request(self, action: Action = Action.COMMIT, plan: dict[str, Any] | None = None) -> int:
        return self._add(None, action, State.REQUESTED, plan or {})

    def move(self, instant: int, state: State, action: Action = Action.COMMIT) -> int:
        return self._add(instant, action, state, {})

    def complete(self, instant: int, action: Action = Action.COMMIT) -> int:
        return self.move(instant, State.COMPLETED, action)

    def roll_back(self, instant: int, action: Action = Action.COMMIT) -> int:
        return self.move(instant, State.ROLLED_BACK, action)

    def timeline(self) -> Timeline:
        return Timeline(list(self.events))
