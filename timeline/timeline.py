"""An immutable view of a table's timeline at one position of its event log.

A :class:`Timeline` is built from the events up to some sequence number and answers
every question readers and writers ask: which instants exist, which completed and in
what order, which are pending, and what the table looked like as of an earlier event or
wall-clock time. It never changes; reading the log again gives a new one.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from datetime import datetime

from .errors import InstantNotFoundError
from .instant import Action, Event, Instant, State, datetime_to_micros


class Timeline:
    """The instants of one table as of the last event it was built from."""

    def __init__(self, events: Sequence[Event], archived: Iterable[Instant] = ()) -> None:
        self._events: tuple[Event, ...] = ()
        self._archived: tuple[Instant, ...] = tuple(archived)
        self._by_id: dict[int, Instant] = {i.id: i for i in self._archived}
        self._completed: list[Instant] = sorted(
            (i for i in self._archived if i.is_completed), key=lambda i: i.completed_seq or 0
        )
        self._completed_seqs: list[int] = [i.completed_seq or 0 for i in self._completed]
        self._apply(events)

    def extended(self, new_events: Sequence[Event]) -> Timeline:
        """A new view with ``new_events`` (which follow this view's last event) applied.

        Cheaper than rebuilding: only the new events are replayed.
        """
        if not new_events:
            return self
        tl = Timeline.__new__(Timeline)
        tl._events = self._events
        tl._archived = self._archived
        tl._by_id = dict(self._by_id)
        tl._completed = list(self._completed)
        tl._completed_seqs = list(self._completed_seqs)
        tl._apply(new_events)
        return tl

    def _apply(self, events: Sequence[Event]) -> None:
        by_id = self._by_id
        completed = State.COMPLETED
        for ev in events:
            state = ev.state
            if state is State.REQUESTED:
                by_id[ev.instant] = Instant(ev.instant, ev.action, state, ev.ts_us, None, ev.payload, {}, None, ev.seq)
                continue
            cur = by_id.get(ev.instant)
            if cur is None:
                # The instant's requested event was archived away; keep what we know.
                cur = Instant(ev.instant, ev.action, state, ev.ts_us)
            if state is completed:
                done = Instant(
                    cur.id, cur.action, completed, cur.requested_us, ev.ts_us, cur.plan, ev.payload, ev.seq, ev.seq
                )
                by_id[ev.instant] = done
                self._completed.append(done)  # events arrive in order: completion order
                self._completed_seqs.append(ev.seq)
            else:
                by_id[ev.instant] = Instant(
                    cur.id,
                    cur.action,
                    state,
                    cur.requested_us,
                    cur.completed_us,
                    cur.plan,
                    cur.metadata,
                    cur.completed_seq,
                    ev.seq,
                )
        self._events = self._events + tuple(events)

    # -- positions ----------------------------------------------------------------------

    @property
    def events(self) -> tuple[Event, ...]:
        return self._events

    @property
    def last_seq(self) -> int:
        """Sequence number of the newest event, -1 for an empty log."""
        return self._events[-1].seq if self._events else -1

    @property
    def last_ts_us(self) -> int:
        return self._events[-1].ts_us if self._events else 0

    # -- the contract ---------------------------------------------------------------------

    def instants(self) -> list[Instant]:
        """Every instant, by id."""
        return sorted(self._by_id.values(), key=lambda i: i.id)

    def completed(self) -> list[Instant]:
        """Completed instants in completion order."""
        return list(self._completed)

    def pending(self) -> list[Instant]:
        """Requested or inflight instants, by id."""
        return sorted((i for i in self._by_id.values() if i.is_pending), key=lambda i: i.id)

    def last_completed(self) -> Instant | None:
        """The instant completed last, or None on an empty timeline."""
        return self._completed[-1] if self._completed else None

    # -- lookups -------------------------------------------------------------------------

    def get(self, instant_id: int) -> Instant:
        """The instant with this id.

        Raises:
            InstantNotFoundError: no such instant.
        """
        try:
            return self._by_id[instant_id]
        except KeyError:
            raise InstantNotFoundError(f"no instant {instant_id} on the timeline") from None

    def find(self, instant_id: int) -> Instant | None:
        return self._by_id.get(instant_id)

    def __contains__(self, instant_id: object) -> bool:
        return instant_id in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def by_action(self, *actions: Action | str) -> list[Instant]:
        """Instants of the given actions, by id."""
        wanted = {Action(a) for a in actions}
        return [i for i in self.instants() if i.action in wanted]

    def completed_after(self, seq: int) -> list[Instant]:
        """Instants whose completing event comes after ``seq``, in completion order."""
        start = bisect.bisect_right(self._completed_seqs, seq)
        return self._completed[start:]

    def events_after(self, seq: int) -> list[Event]:
        """Events with a sequence number greater than ``seq``."""
        if not self._events:
            return []
        first = self._events[0].seq
        return list(self._events[max(0, seq + 1 - first) :])

    # -- time travel -------------------------------------------------------------------

    def as_of_seq(self, seq: int) -> Timeline:
        """The timeline as it was right after event ``seq``."""
        if not self._events or seq >= self.last_seq:
            return self
        first = self._events[0].seq
        return Timeline(self._events[: max(0, seq + 1 - first)], self._archived)

    def as_of_instant(self, instant_id: int) -> Timeline:
        """The timeline right after instant ``instant_id`` completed.

        Raises:
            InstantNotFoundError: no such instant, or it is not completed.
        """
        inst = self._by_id.get(instant_id)
        if inst is None or inst.completed_seq is None:
            state = "absent" if inst is None else inst.state
            raise InstantNotFoundError(f"instant {instant_id} is not a completed instant ({state})")
        return self.as_of_seq(inst.completed_seq)

    def as_of_time(self, when: datetime) -> Timeline:
        """The timeline as of the last instant completed at or before ``when``.

        Raises:
            InstantNotFoundError: nothing had completed by then.
        """
        us = datetime_to_micros(when)
        done = [i for i in self._completed if (i.completed_us or 0) <= us]
        if not done:
            raise InstantNotFoundError(f"no instant had completed at {when.isoformat()}")
        return self.as_of_seq(done[-1].completed_seq or 0)
