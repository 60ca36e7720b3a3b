"""The event log as files on a local filesystem.

Each event is one small JSON file ``.lakeline/timeline/<seq, 20 digits>.json``. The
put-if-absent step is ``link(2)`` of a fully written and fsynced temporary file onto the
slot's name: the link is atomic and fails when the name exists, so a slot is either
free or holds a complete event, never half of one, even when the process dies midway.
The directory is fsynced after the link so the event survives a power cut.

Only local paths are accepted: object stores reached through ``pyarrow.fs`` (plain S3)
cannot put-if-absent, so such tables keep their timeline in PostgreSQL.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from . import faults
from .errors import CorruptEventError, SlotTakenError, TimelineGapError
from .instant import Event
from .lock import FileLock, Lock
from .store import TimelineStore

_EVENT_NAME = re.compile(r"^(\d{20})\.json$")
SEQ_DIGITS = 20


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
        faults.point("log.store.before_dir_fsync")
        _fsync_dir(self.events_dir)

    def read_from(self, seq: int) -> list[Event]:
        if seq > 0:
            # Incremental read of the tail: probe slot by slot, no directory listing.
            # A slot is only ever written after the one before it, so the first free
            # slot ends the log.
            return self._probe_from(seq)
        try:
            names = os.listdir(self.events_dir)
        except FileNotFoundError:
            return []
        seqs = sorted(int(m.group(1)) for n in names if (m := _EVENT_NAME.match(n)))
        events = [self._read_one(s) for s in seqs]
        for prev, cur in zip(seqs, seqs[1:]):
            if cur != prev + 1:
                raise TimelineGapError(f"event log {self.events_dir} has no event {prev + 1}")
        # Events appended while we listed are picked up by the probe.
        return events + self._probe_from(seqs[-1] + 1 if seqs else 0)

    def _probe_from(self, seq: int) -> list[Event]:
        events: list[Event] = []
        while True:
            try:
                events.append(self._read_one(seq))
            except FileNotFoundError:
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
            return any(_EVENT_NAME.match(n) for n in os.listdir(self.events_dir))
        except FileNotFoundError:
            return False

    # -- heartbeats ------------------------------------------------------------------

    def beat(self, instant: int, ts_us: int) -> None:
        self.beats_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.beats_dir / f".tmp-{instant}-{uuid.uuid4().hex}"
        tmp.write_text(str(ts_us))
        # rename is atomic: a reader sees the old beat or the new one, never a blank.
        os.replace(tmp, self.beats_dir / f"{instant}.hb")

    def last_beats(self) -> dict[int, int]:
        beats: dict[int, int] = {}
        try:
            names = os.listdir(self.beats_dir)
        except FileNotFoundError:
            return beats
        for name in names:
            if not name.endswith(".hb"):
                continue
            try:
                beats[int(name[:-3])] = int((self.beats_dir / name).read_text())
            except (FileNotFoundError, ValueError):
                continue  # cleared or being replaced right now
        return beats

    def clear_beat(self, instant: int) -> None:
        try:
            os.unlink(self.beats_dir / f"{instant}.hb")
        except FileNotFoundError:
            pass

    def lock(self, name: str, lease_ms: int) -> Lock:
        return FileLock(self.locks_dir / f"{name}.lock", lease_ms)
