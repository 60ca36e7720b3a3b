"""The timeline archive: old events, moved out of the active log into Parquet.

Why: the active log is read event by event (one file or row each) by every process that
opens the table, so it must stay short however long the table lives. Archival
(:mod:`lakeline.services.archival`) moves a prefix of it here; the event log
(:mod:`.log`) reads the archive first and the active log after it, so the timeline a
reader sees is the same whole history either way.

Layout: ``<base>/.lakeline/archive/<first seq>-<last seq>.parquet`` (both 20-digit,
zero-padded, so names sort as numbers), one file per archival run, each holding the
consecutive events ``first..last`` with every field of the event (:data:`ARCHIVE_SCHEMA`;
``payload`` is the event's JSON text, exactly as the active log held it). A file is
written under a temporary name and moved in place (or written whole on object stores,
where a put is atomic), and it is written *before* its events leave the active log, so
an archival that dies in between leaves the events in both places: readers take each
sequence number once. The archive lives in the table's storage for both timeline stores.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import CorruptArchiveError, TimelineGapError
from .instant import EVENT_FORMAT_VERSION, Action, Event, State
from .storage.data_integrity import PARQUET_READ, PARQUET_WRITE
from .storage.filesystem import Storage

#: Folder of the archive, under the table's base path.
ARCHIVE_DIR = ".lakeline/archive"
#: Version of the archive file layout, in each file's Parquet key-value metadata.
ARCHIVE_FORMAT_VERSION = 1
_FORMAT_KEY = b"lakeline.archive.format"

_NAME = re.compile(r"^(\d{20})-(\d{20})\.parquet$")

ARCHIVE_SCHEMA = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("ts_us", pa.int64(), nullable=False),
        pa.field("instant", pa.int64(), nullable=False),
        pa.field("action", pa.string(), nullable=False),
        pa.field("state", pa.string(), nullable=False),
        pa.field("token", pa.string(), nullable=False),
        pa.field("format", pa.int16(), nullable=False),
        pa.field("payload", pa.string(), nullable=False),
    ],
    metadata={_FORMAT_KEY: str(ARCHIVE_FORMAT_VERSION).encode()},
)


@dataclass(frozen=True)
class ArchiveFile:
    """One archive file: the events ``first_seq..last_seq`` (path relative to the base)."""

    first_seq: int
    last_seq: int
    path: str


def archive_file_name(first_seq: int, last_seq: int) -> str:
    return f"{first_seq:020d}-{last_seq:020d}.parquet"


_ACTIONS = {a.value: a for a in Action}
_STATES = {s.value: s for s in State}


class LazyPayload(Mapping[str, Any]):
    """An archived event's payload, decoded from its JSON text on first use.

    Opening a table reads every archived event, but uses the payloads of very few (the
    latest schema instant's, the commits after the newest files-index checkpoint):
    decoding them all was most of the cost of reading the archive.
    """

    __slots__ = ("_text", "_where", "_data")

    def __init__(self, text: str, where: str) -> None:
        self._text = text
        self._where = where
        self._data: dict[str, Any] | None = None

    def _decoded(self) -> dict[str, Any]:
        if self._data is None:
            try:
                data = json.loads(self._text)
            except ValueError as e:
                raise CorruptArchiveError(f"{self._where} has a payload that is not JSON: {e}") from None
            if not isinstance(data, dict):
                raise CorruptArchiveError(f"{self._where} has a payload that is not a JSON object")
            self._data = data
        return self._data

    def __getitem__(self, key: str) -> Any:
        return self._decoded()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._decoded())

    def __len__(self) -> int:
        return len(self._decoded())

    def __repr__(self) -> str:
        return repr(self._decoded())

    def __reduce__(self) -> tuple[Any, ...]:
        return (LazyPayload, (self._text, self._where))


class EventArchive:
    """The archive of one table (read and append; files are never changed)."""

    def __init__(self, storage: Storage) -> None:
        self.storage = storage

    def files(self) -> list[ArchiveFile]:
        """Every archive file, by first sequence number (temporary files are ignored)."""
        out = []
        for info in self.storage.list_files(self.storage.path(ARCHIVE_DIR)):
            m = _NAME.match(info.base_name)
            if m:
                out.append(ArchiveFile(int(m.group(1)), int(m.group(2)), posixpath.join(ARCHIVE_DIR, info.base_name)))
        return sorted(out, key=lambda f: (f.first_seq, f.last_seq))

    def last_seq(self) -> int:
        """The last archived sequence number; -1 for an empty archive."""
        return max((f.last_seq for f in self.files()), default=-1)

    def write(self, events: Sequence[Event]) -> ArchiveFile:
        """Archive consecutive ``events`` as one file, whole or not at all.

        Raises:
            TimelineGapError: the events are not consecutive.
        """
        if not events:
            raise ValueError("nothing to archive")
        for prev, cur in zip(events, events[1:]):
            if cur.seq != prev.seq + 1:
                raise TimelineGapError(f"events to archive skip from {prev.seq} to {cur.seq}")
        table = pa.table(
            {
                "seq": [e.seq for e in events],
                "ts_us": [e.ts_us for e in events],
                "instant": [e.instant for e in events],
                "action": [e.action.value for e in events],
                "state": [e.state.value for e in events],
                "token": [e.token for e in events],
                "format": [EVENT_FORMAT_VERSION] * len(events),
                # The same JSON text the stores write, so an archived event reads back equal.
                "payload": [json.dumps(dict(e.payload), separators=(",", ":"), sort_keys=True) for e in events],
            },
            schema=ARCHIVE_SCHEMA,
        )
        name = archive_file_name(events[0].seq, events[-1].seq)
        final = self.storage.path(ARCHIVE_DIR, name)
        self.storage.mkdirs(self.storage.path(ARCHIVE_DIR))
        with self.storage.written_whole(final) as target:  # readers never see half a file
            pq.write_table(table, target, filesystem=self.storage.fs, compression="zstd", **PARQUET_WRITE)
        return ArchiveFile(events[0].seq, events[-1].seq, posixpath.join(ARCHIVE_DIR, name))

    def read(self, after: int = -1) -> list[Event]:
        """The archived events with a sequence number ``> after``, each once, in order.

        Raises:
            CorruptArchiveError: a file cannot be read or disagrees with its name.
            TimelineGapError: the files leave a hole between two archived events.
        """
        events: list[Event] = []
        last = after
        for f in self.files():
            if f.last_seq <= last:
                continue  # all seen (an archival that ran twice over the same events)
            if f.first_seq > last + 1:
                raise TimelineGapError(f"the timeline archive has no event {last + 1} (next file: {f.path})")
            for ev in self._read_file(f):
                if ev.seq > last:
                    events.append(ev)
                    last = ev.seq
        return events

    def _read_file(self, f: ArchiveFile) -> list[Event]:
        where = f"archive file {self.storage.path(f.path)}"
        try:
            # Page CRCs verified: a flipped byte is CorruptArchiveError, never another event.
            table = pq.read_table(self.storage.path(f.path), filesystem=self.storage.fs, **PARQUET_READ)
        except (OSError, pa.ArrowException) as e:
            raise CorruptArchiveError(f"{where} cannot be read: {e}") from None
        version = (table.schema.metadata or {}).get(_FORMAT_KEY)
        if version != str(ARCHIVE_FORMAT_VERSION).encode():
            raise CorruptArchiveError(f"{where} has unknown archive format {version!r}")
        missing = [n for n in ARCHIVE_SCHEMA.names if n not in table.column_names]
        if missing:
            raise CorruptArchiveError(f"{where} lacks columns {missing}")
        cols = {n: table.column(n).to_pylist() for n in ARCHIVE_SCHEMA.names}
        bad = [f for f in cols["format"] if f != EVENT_FORMAT_VERSION]
        if bad:
            raise CorruptArchiveError(f"{where} holds events of unknown format {bad[0]}")
        try:
            out = [
                Event(
                    seq,
                    ts,
                    inst,
                    _ACTIONS[action],
                    _STATES[state],
                    LazyPayload(payload, f"event {seq} of {where}"),
                    token,
                )
                for seq, ts, inst, action, state, token, payload in zip(
                    cols["seq"],
                    cols["ts_us"],
                    cols["instant"],
                    cols["action"],
                    cols["state"],
                    cols["token"],
                    cols["payload"],
                )
            ]
        except KeyError as e:
            raise CorruptArchiveError(f"{where} holds an event of unknown action or state {e}") from None
        seqs = [e.seq for e in out]
        if seqs != list(range(f.first_seq, f.last_seq + 1)):
            raise CorruptArchiveError(f"{where} does not hold exactly the events {f.first_seq}..{f.last_seq}")
        return out
