"""The event log on an object store itself: no PostgreSQL, no lock service, no rename.

Each event is one object ``.lakeline/timeline/<seq, 20 digits>.json`` written with a
create-only put (``If-None-Match: *``): the store lets exactly one of several racing
writers create a key, so a slot is won once, and an object appears whole or not at
all. That is the same put-if-absent the file-system store gets from ``link(2)``; the
conformance probe (:mod:`..probe`) checks a store really gives it before a table trusts it.

Nothing depends on a listing. The log is gapless (slot ``n + 1`` is only written after
``n``), so the first free slot ends it: a reader probes slots forward, two and then
doubling windows of them at a time, in parallel. So that opening a table does not cost one request per event, the
appender of every :data:`CHECKPOINT_EVERY`-th event also writes a checkpoint object, the
whole active log up to that slot in one object (create-only, so racing writers of the
same checkpoint agree), and records its slot in ``_last_checkpoint`` (a hint: stale is
harmless, a reader probes forward from it). Opening reads the hint, the newest
checkpoint and the events after it: a bounded number of requests however long the
history, since archival keeps the active log short.

A put whose response was lost is retried by the client and then finds its own event in
the slot: the store reads the slot back and compares the event's token, so a landed
event is never reported as lost (and the log's read-back by token covers the rest).

A store that stops honouring the conditional headers (a proxy in front of it, issue 45
D7) must not lose commits silently. The process checks the store's conditional puts
where it first writes to a table (:func:`~..probe.check_conditional_puts`), and every
event put is guarded on top (:mod:`.chain`): the slot and its predecessor are read
first (a taken slot is never put to; a predecessor other than the one this writer built
on is a :class:`TimelineGapError` before anything is put), the event names its
predecessor's token, and the slot is read back after the put, at once with the
archival mark: another token there means another writer's put overwrote ours, and the
write fails with :class:`UnsafeStorageError` instead of reporting a commit the log does
not hold. A reader checks each event against its predecessor. On a conformant store
this costs three GETs per event (two of them beside a request made anyway) and one
round trip.

Archival's mark ``archived_through`` only moves forward (a put that names the ETag it
read); a put at a slot at or below it is undone and refused, as on the file system.
Heartbeats are small objects overwritten in place; the table lock is a lease object
moved by ETag compare-and-swap (:class:`~...lock.ObjectLock`).
"""

from __future__ import annotations

import logging
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from ...diagnostics import faults
from ...errors import (
    CorruptEventError,
    EventsArchivedError,
    ObjectChangedError,
    SlotTakenError,
    TimelineGapError,
    UnsafeStorageError,
)
from ...instant import Event
from ...lock import Lock, ObjectLock
from ..probe import check_conditional_puts, forget_check
from .chain import EventChain, decode, encode
from .filesystem import ARCHIVED_THROUGH, SEQ_DIGITS, event_file_name, mark_value
from .protocol import TimelineStore

if TYPE_CHECKING:
    from ..filesystem import Storage

log = logging.getLogger(__name__)

#: Every this many events the appender writes a checkpoint of the active log.
CHECKPOINT_EVERY = 100
#: How many slots a reader asks for at once while probing forward.
PROBE_WINDOW = 16
_HINT = "_last_checkpoint"
_BEAT_NAME = re.compile(r"^(\d+)(?:@([0-9a-zA-Z_-]+))?\.hb$")
_ATTEMPT = re.compile(r"^[0-9a-zA-Z_-]+$")
_POOL = ThreadPoolExecutor(PROBE_WINDOW, thread_name_prefix="lakeline-probe")


def _forget_pool_in_child() -> None:
    # A forked child (a multiprocessing worker, a server's pre-forked process) has none
    # of the pool's threads, but the pool believes they idle and queues work for them
    # that no thread runs: the child's first read of the log would wait forever.
    global _POOL
    _POOL = ThreadPoolExecutor(PROBE_WINDOW, thread_name_prefix="lakeline-probe")


os.register_at_fork(after_in_child=_forget_pool_in_child)


class ObjectStoreLog(TimelineStore):
    """Events, checkpoints, heartbeats and locks under ``<base>/.lakeline`` on an object store."""

    kind = "object_store"

    def __init__(self, storage: Storage, meta_dir: str) -> None:
        assert storage.objects is not None, "an object store's storage"
        self.objects = storage.objects
        self.events_dir = f"{meta_dir}/timeline"
        self.checkpoints_dir = f"{meta_dir}/timeline/checkpoints"
        self.beats_dir = f"{meta_dir}/heartbeats"
        self.locks_dir = f"{meta_dir}/locks"
        self._mark = f"{self.events_dir}/{ARCHIVED_THROUGH}"
        self._base = storage.base
        self._chain = EventChain(self.events_dir)

    def __repr__(self) -> str:
        return f"ObjectStoreLog({self.events_dir!r})"

    def _event_path(self, seq: int) -> str:
        return f"{self.events_dir}/{event_file_name(seq)}"

    def _checkpoint_path(self, seq: int) -> str:
        return f"{self.checkpoints_dir}/{seq:0{SEQ_DIGITS}d}.jsonl"

    # -- events ----------------------------------------------------------------------

    def put_if_absent(self, event: Event) -> None:
        seq, path = event.seq, self._event_path(event.seq)
        check_conditional_puts(self.objects, self._base)  # once per process and endpoint
        faults.point("log.store.before_write")
        prev = self._chain.token(seq - 1)
        # The slot and the predecessor at once: a put never goes to a slot this writer
        # has not just seen free, nor after an event other than the one it built on.
        before_f = _POOL.submit(self._read_linked, seq - 1) if prev else None
        held = self._read_slot(seq)
        before = before_f.result() if before_f is not None else None
        if before is not None and before[0].token != prev:
            self._overwritten(f"event {seq - 1}, which this write follows, was overwritten", TimelineGapError)
        if held is None:
            try:
                self.objects.create(path, encode(event, prev))
            except FileExistsError:
                held = self._read_slot(seq)  # ours, if the client retried a put whose response was lost
                if held is None or held.token != event.token:
                    raise SlotTakenError(f"slot {seq} is taken") from None
        elif held.token != event.token:
            raise SlotTakenError(f"slot {seq} is taken")
        faults.point("log.store.after_write")
        # Read the slot back beside the mark (asked for anyway): ours must be there.
        mine_f = _POOL.submit(self._read_slot, seq)
        floor = self.archived_through()
        mine = mine_f.result()
        if seq <= floor:
            # The key was free because archival removed that event (the mark moves
            # before any removal): undo, as readers ignore slots at or below the mark.
            self.objects.delete(path)
            self._chain.forget(seq)
            raise SlotTakenError(f"slot {seq} was archived")
        if mine is None or mine.token != event.token:
            self._overwritten(f"event {seq} was overwritten right after it was put; this write did not commit")
        self._chain.seen(event)
        if seq > 0 and seq % CHECKPOINT_EVERY == 0:
            self._checkpoint(seq)

    def _overwritten(self, what: str, error: type[Exception] = UnsafeStorageError) -> None:
        """Raise ``error`` for an event another writer's put overwrote, and check the
        store's conditional puts again before this process writes to it again."""
        forget_check(self.objects)
        raise error(
            f"{what} ({self.events_dir}): the object store at {self.objects.endpoint} did not honour a "
            "create-only put. Check for a proxy or load balancer that drops If-None-Match/If-Match, or keep "
            "the timeline in PostgreSQL (timeline='postgresql://...')"
        )

    def _read_linked(self, seq: int) -> tuple[Event, str] | None:
        """The event at ``seq`` and the predecessor token it names, None when free."""
        path = self._event_path(seq)
        try:
            raw = self.objects.get(path)
        except FileNotFoundError:
            return None
        event, prev = decode(raw, path)
        if event.seq != seq:
            raise CorruptEventError(f"event {path} says seq {event.seq}")
        return event, prev

    def _read_slot(self, seq: int) -> Event | None:
        found = self._read_linked(seq)
        return found[0] if found is not None else None

    def read_from(self, seq: int) -> list[Event]:
        if seq > 0:
            # No request for the mark up front: archival removes events oldest first,
            # so a slot it took is missing, and the probe checks the mark at a missing slot.
            return self._probe_from(seq)
        # The mark and the checkpoint hint at once: one round trip, not two.
        floor_f = _POOL.submit(self.archived_through)
        checkpoint = self._newest_checkpoint()
        floor = floor_f.result()
        events = [e for e in checkpoint if e.seq > floor]
        for e in events:
            self._chain.seen(e)
        start = events[-1].seq + 1 if events else floor + 1
        # A whole read expects up to a checkpoint's worth of events: wide windows at once.
        tail = self._probe_from(start, PROBE_WINDOW)
        if len(tail) > 2 * CHECKPOINT_EVERY:  # no appender wrote one (it died): heal
            self._checkpoint(tail[-1].seq - tail[-1].seq % CHECKPOINT_EVERY, events + tail)
        return events + tail

    def _probe_from(self, seq: int, size: int = 2) -> list[Event]:
        """The events from ``seq`` to the first free slot, a window of GETs at a time:
        ``size`` slots first (two for a refresh, which usually finds none or a few new
        events; the second shows a hole after a missing one), then windows doubling up to
        :data:`PROBE_WINDOW` (a long tail is read in parallel)."""
        events: list[Event] = []
        while True:
            window = list(_POOL.map(self._read_linked, range(seq, seq + size)))
            size = min(2 * size, PROBE_WINDOW)
            for i, found in enumerate(window):
                if found is None and any(later is not None for later in window[i + 1 :]):
                    # A later slot is taken: this one was written after we asked (the
                    # GETs ran at once), or the log has a hole. Asking again tells which.
                    found = self._read_linked(seq)
                    if found is None and seq > self.archived_through():
                        raise TimelineGapError(f"event log {self.events_dir} has no event {seq}")
                if found is None:
                    # A free slot ends the log, unless archival just removed it.
                    if seq <= self.archived_through():
                        raise EventsArchivedError(f"event {seq} of {self.events_dir} was archived")
                    return events
                self._chain.seen(*found)  # in order: each against the one before
                events.append(found[0])
                seq += 1

    def _newest_checkpoint(self) -> list[Event]:
        """The events of the newest checkpoint (from the hint forward), or none."""
        try:
            hint = int(self.objects.get(f"{self.checkpoints_dir}/{_HINT}"))
        except (FileNotFoundError, ValueError):
            return []
        best: list[Event] = []
        at = hint
        while True:
            try:
                raw = self.objects.get(self._checkpoint_path(at))
            except FileNotFoundError:
                return best
            path = self._checkpoint_path(at)
            best = [Event.from_json(line, path) for line in raw.splitlines() if line]
            at += CHECKPOINT_EVERY

    def _checkpoint(self, seq: int, events: list[Event] | None = None) -> None:
        """Write the checkpoint at ``seq`` and point the hint at it. Best effort: the
        event is in; a checkpoint that fails to land costs readers requests, not data."""
        try:
            if events is None:
                events = self.read_from(0)
            kept = [e for e in events if e.seq <= seq]
            if not kept or kept[-1].seq != seq:
                return
            body = b"\n".join(e.to_json().encode() for e in kept)
            try:
                self.objects.create(self._checkpoint_path(seq), body)
            except FileExistsError:
                pass  # a racing writer of the same checkpoint: the same events
            self.objects.put(f"{self.checkpoints_dir}/{_HINT}", str(seq).encode())
        except Exception as e:  # noqa: BLE001 - never fail an append that landed
            log.warning("checkpoint at %d of %s not written: %s", seq, self.events_dir, e)

    def has_events(self) -> bool:
        return self.archived_through() >= 0 or self._read_slot(0) is not None

    # -- archival ------------------------------------------------------------------------

    def archived_through(self) -> int:
        try:
            text = self.objects.get(self._mark)
        except FileNotFoundError:
            return -1
        return mark_value(text, self._mark)

    def delete_through(self, seq: int) -> None:
        check_conditional_puts(self.objects, self._base)  # the mark moves by compare-and-swap
        while True:  # move the mark forward by compare-and-swap; it never moves back
            held = self.objects.get_tagged(self._mark)
            floor = mark_value(held[0], self._mark) if held else -1
            if floor >= seq:
                break
            try:
                if held is None:
                    self.objects.create(self._mark, str(seq).encode())
                else:
                    self.objects.replace(self._mark, str(seq).encode(), held[1])
                break
            except (FileExistsError, ObjectChangedError):
                continue
        # Oldest first, so a prober never finds a hole below an event that is still there.
        first = max(floor + 1, 0)
        for s in range(first, seq + 1):
            self.objects.delete(self._event_path(s))
        for c in range(first - first % CHECKPOINT_EVERY, seq + 1, CHECKPOINT_EVERY):
            if c <= seq - CHECKPOINT_EVERY:  # keep the newest one at or below the mark
                self.objects.delete(self._checkpoint_path(c))

    # -- heartbeats ------------------------------------------------------------------

    def _beat_path(self, instant: int, attempt: str) -> str:
        if attempt and not _ATTEMPT.match(attempt):
            raise ValueError(f"invalid attempt id {attempt!r}")
        return f"{self.beats_dir}/{instant}@{attempt}.hb" if attempt else f"{self.beats_dir}/{instant}.hb"

    def beat(self, instant: int, ts_us: int, attempt: str = "") -> None:
        self.objects.put(self._beat_path(instant, attempt), str(ts_us).encode())  # a put is atomic

    def beats(self) -> dict[tuple[int, str], int]:
        # A listing finds the beats; a beat it missed reads as none, and an instant with
        # none is judged by its requested time (heartbeat.is_expired): never younger.
        beats: dict[tuple[int, str], int] = {}
        for item in self.objects.list(self.beats_dir):
            path = item.path
            m = _BEAT_NAME.match(path.rsplit("/", 1)[-1])
            if m is None:
                continue
            try:
                beats[(int(m.group(1)), m.group(2) or "")] = int(self.objects.get(path))
            except (FileNotFoundError, ValueError):
                continue  # cleared right now
        return beats

    def clear_beat(self, instant: int, attempt: str = "") -> None:
        self.objects.delete(self._beat_path(instant, attempt))

    def lock(self, name: str, lease_ms: int) -> Lock:
        return ObjectLock(self.objects, f"{self.locks_dir}/{name}.lock", lease_ms)


__all__ = ["CHECKPOINT_EVERY", "ObjectStoreLog"]
