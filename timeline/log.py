"""Appending to the event log: put-if-absent at the next slot, validated, retried.

:class:`EventLog` is the only writer of events. An append checks the move against the
instant's current state (and an optional caller check, e.g. the commit's conflict
rules), then puts the event at the next sequence number. Because a slot can only be won
by an appender that has seen every event before it, the checks are exact; if the slot
is taken the log reads the new events and tries the next one. So the first attempt
uses the log as this process last read it, without reading again: a read before the put
would only find out early what a lost slot finds out anyway, and costs a round trip per
event on an object store. A refusal by the checks is believed only from a fresh read.

Event timestamps never go backwards: each is at least one microsecond after the one
before, whatever the wall clock does. If anything fails once the put may have won its
slot (the put itself, a follow-up query inside the store, the fault point
``log.after_put``), the log reads the slot back by the attempt's random token: our
event there is success; another event there means ours never landed (the next slot is
tried); an empty slot re-raises a typed store error; and only when the log cannot be
read (or the error was untyped) does it report :class:`CommitOutcomeUnknownError`.

Reading merges the archive (:mod:`.archive`) and the active log: the archived events
first, then the active ones after the archive's last. Archival may move events while a
log is being read (the store then says :class:`EventsArchivedError`): the log reads the
new archived events and goes on, so every reader sees each event exactly once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from .archive import EventArchive
from .diagnostics import faults
from .errors import (
    CommitOutcomeUnknownError,
    EventsArchivedError,
    InvalidTransitionError,
    LakelineError,
    SlotTakenError,
    TimelineGapError,
    UnsafeStorageError,
)
from .instant import Action, Event, State, check_transition
from .storage.event_log.protocol import TimelineStore
from .timeline import Timeline

#: A check run against the fresh timeline right before each put attempt; it raises to
#: refuse the append (the error propagates to the caller unchanged).
AppendCheck = Callable[[Timeline], None]

_MAX_SLOT_RETRIES = 10_000
#: What reading the log back after a failed put found (besides our own event).
_TAKEN, _ABSENT, _UNKNOWN = object(), object(), object()
#: Times a read goes back to the archive because archival moved events under it.
_MAX_ARCHIVE_ROUNDS = 20


def now_us() -> int:
    return time.time_ns() // 1000


class EventLog:
    """The append side of one table's timeline, over any :class:`TimelineStore`."""

    def __init__(
        self, store: TimelineStore, clock: Callable[[], int] = now_us, archive: EventArchive | None = None
    ) -> None:
        self.store = store
        self.archive = archive
        self._clock = clock
        self._timeline: Timeline | None = None

    def assume_empty(self) -> None:
        """Take the log as empty without reading it (a new table's, whose location this
        process just claimed): the next append puts at slot 0 straight away. Safe
        whatever the store holds: winning slot 0 proves the log was empty (events are
        gapless, and a slot archival freed is refused), and a lost slot costs a read and
        the append's checks against it, as for any stale read."""
        if self._timeline is None:
            self._timeline = Timeline([])

    def refresh(self) -> Timeline:
        """Read events appended (or archived) since the last read and return the current
        timeline: every event, archived or active.

        Raises:
            TimelineGapError: an event is neither in the archive nor in the active log.
            EventsArchivedError: events this log has not read were archived and it has
                no archive to read them from.
        """
        from_archive = self._timeline is None
        early = self._first_read() if from_archive and self.archive is not None else None
        if early and early[0].seq == 0:
            return self._extend(early)
        for _ in range(_MAX_ARCHIVE_ROUNDS):
            last = self._timeline.last_seq if self._timeline is not None else -1
            archived = self.archive.read(after=last) if self.archive is not None and from_archive else []
            start = archived[-1].seq + 1 if archived else last + 1
            try:
                if early and early[0].seq <= start:
                    active = [e for e in early if e.seq >= start]  # read before the archive: a prefix
                elif early == [] and not archived:
                    # Empty, and the archive, read after it, empty too: nothing had been
                    # archived when the active log was read (the archive is written
                    # before the log loses an event), so the log was empty then (a new
                    # table's first read; not read a second time).
                    active = []
                else:
                    active = self.store.read_from(start)
            except EventsArchivedError:
                if self.archive is None:
                    raise
                active = None
            early = None
            if active and active[0].seq != start and self.archive is not None:
                active = None  # the log starts later than the archive ends: archived meanwhile
            timeline = self._extend(archived + (active or []))
            if active is not None:
                return timeline
            # Archival moved events we have not read; they are in the archive by now
            # (it is written before the active log loses them).
            from_archive = True
        raise TimelineGapError(f"events of {self.store!r} are neither in the archive nor in the active log")

    def _first_read(self) -> list[Event] | None:
        """The active log, read before the archive on a first read. When it starts at
        event 0 it is the whole log and the archive need not be read (a listing and its
        files): archival writes events to the archive before it removes any, oldest
        first, so an archive file whose events are still active only repeats them."""
        try:
            return self.store.read_from(0)
        except EventsArchivedError:
            return None

    def _extend(self, events: list[Event]) -> Timeline:
        if self._timeline is None:
            self._timeline = Timeline(events)
        elif events:
            self._timeline = self._timeline.extended(events)
        return self._timeline

    @property
    def timeline(self) -> Timeline:
        """The timeline as last read (call :meth:`refresh` for the newest)."""
        return self._timeline if self._timeline is not None else self.refresh()

    def append(
        self,
        action: Action,
        state: State,
        payload: Mapping[str, Any] | None = None,
        instant: int | None = None,
        check: AppendCheck | None = None,
    ) -> Event:
        """Append the event that moves ``instant`` to ``state``.

        Args:
            action: the instant's action.
            state: the state to move to.
            payload: plan (requested), progress (inflight) or metadata (completed).
            instant: the instant to move; ``None`` starts a new one (state must be
                ``REQUESTED``), whose id becomes the slot it wins.
            check: run against the fresh timeline before every attempt; raise to refuse.

        Returns:
            The event as written.

        Raises:
            InvalidTransitionError: the move is illegal from the instant's current state
                (e.g. completing an instant that was rolled back meanwhile).
            CommitOutcomeUnknownError: the store failed and re-reading cannot tell whether
                the event landed.
            Whatever ``check`` raises.
        """
        if (instant is None) != (state is State.REQUESTED):
            raise InvalidTransitionError("only a new instant is requested, and a new instant is requested")
        token = uuid.uuid4().hex

        def validate(tl: Timeline) -> None:
            if instant is not None:
                cur = tl.find(instant)
                if cur is None:
                    check_transition(instant, None, state)
                else:
                    if cur.action is not action:
                        raise InvalidTransitionError(f"instant {instant} is a {cur.action}, not a {action.value}")
                    check_transition(instant, cur.state, state)
            if check is not None:
                check(tl)

        for attempt in range(_MAX_SLOT_RETRIES):
            # The first attempt puts at the slot after the timeline this log last read,
            # without reading again: winning that slot proves no event came in between
            # (every writer puts right after the last event it saw, and a slot archival
            # freed is refused by the store), so the checks held on the timeline the
            # event lands on. A lost slot costs a read, as before. A refusal is only
            # trusted from a fresh read.
            known = self._timeline if attempt == 0 else None
            tl = known if known is not None else self.refresh()
            try:
                validate(tl)
            except Exception:  # noqa: BLE001 - re-raised below unless the read was old
                if known is None:
                    raise
                tl = self.refresh()
                validate(tl)
            seq = tl.last_seq + 1
            event = Event(
                seq=seq,
                ts_us=max(self._clock(), tl.last_ts_us + 1),
                instant=seq if instant is None else instant,
                action=action,
                state=state,
                payload=dict(payload or {}),
                token=token,
            )
            faults.point(f"log.before_append.{state.value}")
            try:
                self.store.put_if_absent(event)
                faults.point("log.after_put")
            except SlotTakenError:
                continue
            except (UnsafeStorageError, TimelineGapError):
                raise  # the store lost or would lose an event: never retried on it (object_store.py)
            except Exception as e:  # noqa: BLE001 - the slot may have been won: read back
                found = self._find_token(token, seq)
                if found is _TAKEN:
                    continue  # another event holds the slot: ours did not land; next slot
                if isinstance(found, Event):
                    return found
                if found is _ABSENT and isinstance(e, LakelineError) and not isinstance(e, CommitOutcomeUnknownError):
                    raise  # a typed failure, and the log confirms the event is not in
                raise CommitOutcomeUnknownError(
                    f"store failed while appending {action.value}.{state.value}: {e!r}"
                ) from e
            faults.point(f"log.after_append.{state.value}")
            self._timeline = self.timeline.extended([event])
            return event
        raise CommitOutcomeUnknownError("gave up after too many taken slots")

    def _find_token(self, token: str, seq: int) -> Event | object:
        """Re-read the log after a failed put: our event if it landed, ``_TAKEN`` when
        another event holds the slot (ours cannot land any more), ``_ABSENT`` when the
        slot is empty, ``_UNKNOWN`` when the log cannot be read."""
        for _ in range(3):
            try:
                tl = self.refresh()
            except Exception:  # noqa: BLE001 - the store may still be down; try again
                time.sleep(0.2)
                continue
            at = [ev for ev in tl.events_after(seq - 1) if ev.seq == seq]
            if at and at[0].token == token:
                return at[0]
            return _TAKEN if at else _ABSENT
        return _UNKNOWN
