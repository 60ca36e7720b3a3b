"""Events on an object store name their predecessor, so an overwritten event is seen.

A create-only put is the whole safety of the object-store log; a store (or a proxy in
front of it) that drops ``If-None-Match`` lets a second writer's put overwrite a slot
that already held an event, and that event, a commit reported done, vanishes without a
trace (issue 45, D7: 15 of 24 reported commits gone). A slot cannot say what it held
before, but its successor can: each event object carries ``prev``, the token of the
event the writer saw at the slot before (the field is ignored by
:meth:`~...instant.Event.from_json`, so older readers read it as before, and events
without it, from before this field, are simply not checked).

:class:`EventChain` remembers the token it saw at each recent slot (reads and the
writer's own puts) and checks every event it reads against it: a slot that now holds
another token than before, or an event naming a predecessor other than the one the
slot holds, means an event was overwritten, and reading on would trust a log that lost
a commit: :class:`~...errors.TimelineGapError`, naming both tokens.
"""

from __future__ import annotations

import json
import threading

from ...errors import TimelineGapError
from ...instant import Event

#: The field of an event object that names its predecessor's token.
PREV = "prev"
#: Slots whose tokens are remembered (the newest ones; a read goes forward from the end).
KEEP = 4096


def encode(event: Event, prev: str) -> bytes:
    """The event's object: its JSON, plus ``prev`` when the predecessor is known."""
    text = event.to_json()
    if prev:
        text = f"{text[:-1]},{json.dumps(PREV)}:{json.dumps(prev)}}}"  # to_json is one object
    return text.encode()


def decode(raw: bytes, path: str) -> tuple[Event, str]:
    """The event of an object and the predecessor it names ("" when none).

    Raises:
        CorruptEventError: see :meth:`Event.from_json`.
    """
    event = Event.from_json(raw, path)
    prev = json.loads(raw).get(PREV, "") if f'"{PREV}":'.encode() in raw else ""
    return event, prev if isinstance(prev, str) else ""


class EventChain:
    """The tokens one log handle saw at recent slots, checked against what it reads."""

    def __init__(self, where: str) -> None:
        self.where = where
        self._tokens: dict[int, str] = {}
        self._lock = threading.Lock()

    def __reduce__(self) -> tuple[type[EventChain], tuple[str]]:
        # A copy in another process (a pickled store) starts afresh: what it reads it checks.
        return (EventChain, (self.where,))

    def token(self, seq: int) -> str:
        """The token seen at ``seq`` ("" when not seen, or the event had none)."""
        return self._tokens.get(seq, "")

    def seen(self, event: Event, prev: str | None = None) -> None:
        """Record ``event``, read at its slot (``prev`` as its object names it; None
        when it came without one, from a checkpoint).

        Raises:
            TimelineGapError: the slot held another event before, or ``event`` names a
                predecessor other than the event seen at the slot before it.
        """
        with self._lock:
            before = self._tokens.get(event.seq)
            if before and event.token and before != event.token:
                raise TimelineGapError(
                    f"event {event.seq} of {self.where} was overwritten: it held token {before}, now {event.token}. "
                    "The store did not honour a create-only put, and a commit may be lost"
                )
            known = self._tokens.get(event.seq - 1)
            if prev and known and prev != known:
                raise TimelineGapError(
                    f"event {event.seq} of {self.where} follows event token {prev}, but slot {event.seq - 1} holds "
                    f"token {known}: an event was overwritten (the store did not honour a create-only put), "
                    "and a commit may be lost"
                )
            if event.token:
                self._tokens[event.seq] = event.token
            if len(self._tokens) > KEEP:
                for seq in sorted(self._tokens)[: KEEP // 2]:
                    del self._tokens[seq]

    def forget(self, seq: int) -> None:
        """Drop the slot's token (an event put there was undone: archival had the slot)."""
        with self._lock:
            self._tokens.pop(seq, None)


__all__ = ["KEEP", "PREV", "EventChain", "decode", "encode"]
