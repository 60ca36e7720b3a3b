"""The event log as files on a local filesystem.

Each event is one small JSON file ``.lakeline/timeline/<seq, 20 digits>.json``. The
put-if-absent step is ``link(2)`` of a fully written and fsynced temporary file onto the
slot's name: the link is atomic and fails when the name exists, so a slot is either
free or holds a complete event, never half of one, even when the process dies midway.
The directory is fsynced after the link so the event survives a power cut.

Archival removes a prefix of the log (:meth:`FileSystemStore.delete_through`). It first
records the last removed sequence number in ``timeline/archived_through`` (replaced
atomically, only ever raised), then unlinks the event files. Removing a file frees its
name, so a put re-reads that mark after its link: a slot at or below it belongs to an
archived event and the put is undone and refused. Readers ignore files at or below the
mark (left by an archival that died midway) and accept a log that starts after it.

Only local paths are accepted: object stores reached through ``pyarrow.fs`` (plain S3)
cannot put-if-absent, so such tables keep their timeline in PostgreSQL.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from ...diagnostics import faults
from ...errors import CorruptEventError, EventsArchivedError, SlotTakenError, TimelineGapError
from ...instant import Event
from ...lock import FileLock, Lock
from .protocol import TimelineStore

_EVENT_NAME = re.compile(r"^(\d{20})\.json$")
#: ``<instant>.hb`` (a writer's beat) or ``<instant>@<attempt>.hb`` (a service attempt's).
_BEAT_NAME = re.compile(r"^(\d+)(?:@([0-9a-zA-Z_-]+))?\.hb$")
_ATTEMPT = re.compile(r"^[0-9a-zA-Z_-]+$")
SEQ_DIGITS = 20
#: Name (in ``timeline/``) of the file holding the last archived sequence number.
ARCHIVED_THROUGH = "archived_through"


def mark_value(text: bytes, where: object) -> int:
    """The sequence number an ``archived_through`` mark holds.

    Raises:
        CorruptEventError: it holds anything else.
    """
    try:
        return int(text)
    except ValueError:
        raise CorruptEventError(f"{where} does not hold a sequence number: {text[:40]!r}") from None


def event_file_name(seq: int) -> str:
    return f"{seq:0{SEQ_DIGITS}d}.json"


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSystemStore(TimelineStore):
    """Events, heartbeats and locks under ``<base>/.lakeline`` on a local filesystem."""

    kind = "filesystem"

    def __init__(self, meta_dir: str | os.PathLike[str]) -> None:
        self.meta_dir = Path(meta_dir)
        self.events_dir = self.meta_dir / "timeline"
        self.beats_dir = self.meta_dir / "heartbeats"
        self.locks_dir = self.meta_dir / "locks"
        self._events_prefix = f"{self.events_dir}{os.sep}"
        self._mark = self.events_dir / ARCHIVED_THROUGH

    # -- events ------------------------------------------------------------------

    def put_if_absent(self, event: Event) -> None:
        self.events_dir.mkdir(parents=True, exist_ok=True)
        final = self.events_dir / event_file_name(event.seq)
        if final.exists():
            raise SlotTakenError(f"slot {event.seq} is taken")
        tmp = self.events_dir / f".tmp-{event.seq}-{uuid.uuid4().hex}"
        data = event.to_json().encode()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            faults.point("log.store.before_write")
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            faults.point("log.store.before_link")
            os.link(tmp, final)
        except FileExistsError:
            raise SlotTakenError(f"slot {event.seq} is taken") from None
        finally:
            # A crash here leaves only a temporary file, which readers ignore.
            try:
                os.unlink(tmp)
            except FileNotFoundError:
                pass
        if event.seq <= self.archived_through():
            # The name was free because archival removed that event (the mark is written
            # before any removal): the slot is an archived event's. Readers ignore names
            # at or below the mark, so undoing the link is invisible.
            try:
                os.unlink(final)
            except FileNotFoundError:
                pass
            raise SlotTakenError(f"slot {event.seq} was archived")
        faults.point("log.store.before_dir_fsync")
        _fsync_dir(self.events_dir)

    def read_from(self, seq: int) -> list[Event]:
        if seq > 0:
            # Incremental read of the tail: probe slot by slot, no directory listing.
            # A slot is only ever written after the one before it, so the first free
            # slot ends the log, unless archival removed it meanwhile (probe_from checks).
            if seq <= self.archived_through():
                raise EventsArchivedError(f"events from {seq} of {self.events_dir} were archived")
            return self._probe_from(seq)
        try:
            names = os.listdir(self.events_dir)
        except FileNotFoundError:
            return []
        # The mark is read after listing: every file removed before the listing is at or
        # below it, so the names above it are the whole active log.
        floor = self.archived_through()
        seqs = sorted(s for n in names if (m := _EVENT_NAME.match(n)) and (s := int(m.group(1))) > floor)
        if floor >= 0 and seqs and seqs[0] != floor + 1:
            raise TimelineGapError(f"event log {self.events_dir} has no event {floor + 1} (archived through {floor})")
        for prev, cur in zip(seqs, seqs[1:]):
            if cur != prev + 1:
                raise TimelineGapError(f"event log {self.events_dir} has no event {prev + 1}")
        try:
            events = [self._read_one(s) for s in seqs]
        except FileNotFoundError:
            raise EventsArchivedError(f"events of {self.events_dir} were archived while being read") from None
        # Events appended while we listed are picked up by the probe.
        return events + self._probe_from(seqs[-1] + 1 if seqs else floor + 1)

    def _probe_from(self, seq: int) -> list[Event]:
        events: list[Event] = []
        while True:
            try:
                events.append(self._read_one(seq))
            except FileNotFoundError:
                # A free slot ends the log, unless archival just removed it (removals go
                # oldest first, after the mark): then the caller must read the archive.
                if seq <= self.archived_through():
                    raise EventsArchivedError(f"event {seq} of {self.events_dir} was archived") from None
                return events
            seq += 1

    def _read_one(self, seq: int) -> Event:
        # Plain string paths: pathlib's parsing cost more than the read on a 10k-event load.
        path = f"{self._events_prefix}{seq:0{SEQ_DIGITS}d}.json"
        fd = os.open(path, os.O_RDONLY)  # raw fd: a buffered file object costs more than the read
        try:
            chunks = [os.read(fd, 1 << 16)]
            while len(chunks[-1]) == 1 << 16:
                chunks.append(os.read(fd, 1 << 16))
        finally:
            os.close(fd)
        event = Event.from_json(b"".join(chunks), path)
        if event.seq != seq:
            raise CorruptEventError(f"event {path} says seq {event.seq}")
        return event

    def has_events(self) -> bool:
        try:
            return any(_EVENT_NAME.match(n) for n in os.listdir(self.events_dir)) or self.archived_through() >= 0
        except FileNotFoundError:
            return False

    # -- archival ------------------------------------------------------------------------

    def archived_through(self) -> int:
        try:
            with open(self._mark, "rb") as f:
                text = f.read()
        except FileNotFoundError:
            return -1
        return mark_value(text, self._mark)

    def delete_through(self, seq: int) -> None:
        if seq > self.archived_through():
            self.events_dir.mkdir(parents=True, exist_ok=True)
            tmp = self.events_dir / f".tmp-mark-{uuid.uuid4().hex}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                os.write(fd, str(seq).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self._mark)  # atomic: readers see the old mark or the new one
            _fsync_dir(self.events_dir)
        try:
            names = os.listdir(self.events_dir)
        except FileNotFoundError:
            return
        # Oldest first, so a prober never finds a hole below an event that is still there.
        for s in sorted(s for n in names if (m := _EVENT_NAME.match(n)) and (s := int(m.group(1))) <= seq):
            try:
                os.unlink(f"{self._events_prefix}{s:0{SEQ_DIGITS}d}.json")
            except FileNotFoundError:
                pass
        _fsync_dir(self.events_dir)

    # -- heartbeats ------------------------------------------------------------------

    def _beat_path(self, instant: int, attempt: str) -> Path:
        if attempt and not _ATTEMPT.match(attempt):
            raise ValueError(f"invalid attempt id {attempt!r}")
        return self.beats_dir / (f"{instant}@{attempt}.hb" if attempt else f"{instant}.hb")

    def beat(self, instant: int, ts_us: int, attempt: str = "") -> None:
        final = self._beat_path(instant, attempt)
        self.beats_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.beats_dir / f".tmp-{instant}-{uuid.uuid4().hex}"
        tmp.write_text(str(ts_us))
        # rename is atomic: a reader sees the old beat or the new one, never a blank.
        os.replace(tmp, final)

    def beats(self) -> dict[tuple[int, str], int]:
        beats: dict[tuple[int, str], int] = {}
        try:
            names = os.listdir(self.beats_dir)
        except FileNotFoundError:
            return beats
        for name in names:
            m = _BEAT_NAME.match(name)
            if m is None:
                continue
            try:
                beats[(int(m.group(1)), m.group(2) or "")] = int((self.beats_dir / name).read_text())
            except (FileNotFoundError, ValueError):
                continue  # cleared or being replaced right now
        return beats

    def clear_beat(self, instant: int, attempt: str = "") -> None:
        try:
            os.unlink(self._beat_path(instant, attempt))
        except FileNotFoundError:
            pass

    def lock(self, name: str, lease_ms: int) -> Lock:
        return FileLock(self.locks_dir / f"{name}.lock", lease_ms)
