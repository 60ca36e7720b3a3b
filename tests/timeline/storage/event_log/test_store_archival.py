"""The store contract for archival (both backends), the archive file, and the event log
reading across the two.

Why: archival removes a prefix of the active log. Every store must then read a log that
starts after the removed prefix, refuse a put at a removed slot (an appender that read
the log before the removal must not win it again), keep put-if-absent at the tail, and
the event log must see every event exactly once, from the archive or the active log,
even when archival moves events while it reads.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from lakeline.timeline.archive import ARCHIVE_DIR, EventArchive
from lakeline.timeline.errors import CorruptArchiveError, EventsArchivedError, SlotTakenError, TimelineGapError
from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.log import EventLog
from lakeline.timeline.storage.event_log.protocol import TimelineStore
from lakeline.timeline.storage.filesystem import Storage

from tests.helpers import StoreFactory


def fill(store: TimelineStore, n: int) -> list[Event]:
    """``n`` instants, each requested -> inflight -> completed (3n events)."""
    log = EventLog(store)
    for i in range(n):
        req = log.append(Action.COMMIT, State.REQUESTED, {"i": i})
        log.append(Action.COMMIT, State.INFLIGHT, {}, instant=req.instant)
        log.append(Action.COMMIT, State.COMPLETED, {"i": i, "nan": float("inf")}, instant=req.instant)
    return store.read_from(0)


def test_delete_through_removes_a_prefix(store_factory: StoreFactory) -> None:
    store = store_factory()
    events = fill(store, 5)
    assert store.archived_through() == -1
    store.delete_through(5)
    assert store.archived_through() == 5
    assert store.read_from(0) == events[6:]
    assert store.read_from(6) == events[6:]
    assert store.read_from(9) == events[9:]
    assert store.has_events()
    other = store_factory.reopen(store)
    assert other.archived_through() == 5 and other.read_from(0) == events[6:]
    store.delete_through(5)  # idempotent
    store.delete_through(2)  # the mark never goes back
    assert store.archived_through() == 5 and store.read_from(0) == events[6:]


def test_reading_an_archived_range_says_so(store_factory: StoreFactory) -> None:
    store = store_factory()
    fill(store, 3)
    store.delete_through(4)
    for seq in (1, 4):
        with pytest.raises(EventsArchivedError):
            store.read_from(seq)


def test_a_removed_slot_cannot_be_won_again(store_factory: StoreFactory) -> None:
    store = store_factory()
    events = fill(store, 3)
    store.delete_through(5)
    stale = Event(3, 99, 3, Action.CLEAN, State.REQUESTED, {"stale": True}, "stale-token")
    with pytest.raises(SlotTakenError):
        store.put_if_absent(stale)
    with pytest.raises(SlotTakenError):
        store_factory.reopen(store).put_if_absent(stale)
    assert store.read_from(0) == events[6:]
    # The tail is unaffected: the next slot after the active log is free.
    tail = Event(9, 10**9, 9, Action.COMMIT, State.REQUESTED, {}, "tail")
    store.put_if_absent(tail)
    assert store.read_from(0) == events[6:] + [tail]


def test_gap_after_the_archived_prefix_is_still_an_error(store_factory: StoreFactory) -> None:
    store = store_factory()
    fill(store, 2)
    store.delete_through(1)
    store.put_if_absent(Event(7, 10**9, 7, Action.COMMIT, State.REQUESTED, {}, "x"))
    with pytest.raises(TimelineGapError):
        store.read_from(0)


def test_everything_archived_leaves_an_empty_active_log(store_factory: StoreFactory) -> None:
    store = store_factory()
    events = fill(store, 2)
    store.delete_through(events[-1].seq)
    assert store.read_from(0) == []
    assert store.has_events()
    log = EventLog(store)
    assert log.refresh().last_seq == -1  # without the archive nothing is left to read
    nxt = Event(6, 10**9, 6, Action.COMMIT, State.REQUESTED, {}, "next")
    store.put_if_absent(nxt)
    assert store.read_from(0) == [nxt]


def test_event_log_reads_archive_then_active(store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory()
    events = fill(store, 6)
    archive = EventArchive(Storage.for_uri(str(tmp_path / "base")))
    stale = EventLog(store, archive=archive)
    assert stale.refresh().events == tuple(events)
    archive.write(events[:9])
    store.delete_through(8)
    fresh = EventLog(store, archive=archive)
    assert fresh.refresh().events == tuple(events)
    # A log that read only the first events catches up across the archive.
    partial = EventLog(store, archive=archive)
    partial._extend(events[:2])
    assert partial.refresh().events == tuple(events)
    # Appends by a log that read everything before the archival land at the tail.
    ev = stale.append(Action.COMMIT, State.REQUESTED, {"after": True})
    assert ev.seq == len(events)
    assert fresh.refresh().events == tuple(events) + (ev,)
    # Archived events keep every field.
    assert fresh.timeline.get(0).metadata == {"i": 0, "nan": float("inf")}


class CountingArchive(EventArchive):
    """An archive that counts its reads."""

    reads = 0

    def read(self, after: int = -1) -> list[Event]:
        self.reads += 1
        return super().read(after)


def test_a_first_read_takes_the_archive_only_when_the_log_lost_events(
    store_factory: StoreFactory, tmp_path: Path
) -> None:
    """Nothing is archived while the active log still starts at event 0 (the archive is
    written before any event is removed, oldest first), so a first read takes the active
    log alone, even past an archive file of a run that died before removing anything;
    once events were removed it reads the archive, once, and the active log once."""
    store = store_factory()
    events = fill(store, 4)
    archive = CountingArchive(Storage.for_uri(str(tmp_path / "base")))
    assert EventLog(store, archive=archive).refresh().events == tuple(events)
    archive.write(events[:6])  # a run that died before removing anything
    assert EventLog(store, archive=archive).refresh().events == tuple(events)
    assert archive.reads == 0
    store.delete_through(5)
    assert EventLog(store, archive=archive).refresh().events == tuple(events)
    assert archive.reads == 1


def test_an_empty_log_is_read_once_on_a_first_read(
    store_factory: StoreFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new table's first read: the active log is empty and the archive, read after it,
    too, so the log was empty then and is not read a second time; when the archive has
    events (all of them archived meanwhile), the active log is read again after them."""
    store = store_factory()
    reads: list[int] = []
    real = store.read_from
    monkeypatch.setattr(store, "read_from", lambda seq: reads.append(seq) or real(seq))
    archive = CountingArchive(Storage.for_uri(str(tmp_path / "base")))
    assert EventLog(store, archive=archive).refresh().events == ()
    assert (reads, archive.reads) == ([0], 1)
    archived = [Event(s, 100 + s, s, Action.COMMIT, State.REQUESTED, {"s": s}, f"t{s}") for s in range(3)]
    archive.write(archived)
    reads.clear()
    assert EventLog(store, archive=archive).refresh().events == tuple(archived)
    assert reads == [0, 3]


def test_crash_between_archive_write_and_removal(store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory()
    events = fill(store, 4)
    archive = EventArchive(Storage.for_uri(str(tmp_path / "base")))
    archive.write(events[:6])  # written; the active log still has them
    assert EventLog(store, archive=archive).refresh().events == tuple(events)
    store.delete_through(2)  # died after removing half of them
    assert EventLog(store, archive=archive).refresh().events == tuple(events)
    # A second archive file overlapping the first (a re-run that wrote again).
    archive.write(events[3:9])
    store.delete_through(8)
    assert EventLog(store, archive=archive).refresh().events == tuple(events)


def test_lost_archive_is_a_gap_not_a_short_log(store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory()
    fill(store, 3)
    store.delete_through(4)
    archive = EventArchive(Storage.for_uri(str(tmp_path / "empty")))
    with pytest.raises(TimelineGapError):
        EventLog(store, archive=archive).refresh()


def test_archive_file_is_checked(tmp_path: Path) -> None:
    storage = Storage.for_uri(str(tmp_path))
    archive = EventArchive(storage)
    events = [Event(s, 100 + s, s, Action.COMMIT, State.REQUESTED, {"s": s}, f"t{s}") for s in range(4)]
    f = archive.write(events)
    assert archive.read() == events and archive.read(after=1) == events[2:]
    assert archive.last_seq() == 3 and f.path == f"{ARCHIVE_DIR}/{0:020d}-{3:020d}.parquet"
    table = pq.read_table(storage.path(f.path))
    pq.write_table(table.slice(0, 3), storage.path(ARCHIVE_DIR, f"{4:020d}-{7:020d}.parquet"))
    with pytest.raises(CorruptArchiveError):
        archive.read()
    storage.delete(storage.path(ARCHIVE_DIR, f"{4:020d}-{7:020d}.parquet"))
    archive.write([Event(s, 100 + s, s, Action.COMMIT, State.REQUESTED, {}, "") for s in range(6, 8)])
    with pytest.raises(TimelineGapError):
        archive.read()
    with pytest.raises(TimelineGapError):
        archive.write([events[0], events[2]])
