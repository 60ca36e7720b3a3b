"""Who owns a staging folder, and whether that write is still alive.

A Spark write keeps its staged input under ``.lakeline/staging/<write id>/``. It stages
*before* its instant is requested, so a folder may exist with no instant at all, and a
driver killed mid-write leaves it behind for good unless something else removes it. This
module is what rollback and cleaning need to do that safely (they sit below
``lakeline.spark`` and cannot import it):

* The write's driver puts an *owner file* (:data:`OWNER_FILE`) into the folder before
  anything else and refreshes it every ``heartbeat.interval-ms`` (:class:`OwnerBeat`)
  until the write ends: the write id, the time of the last beat, and, once an attempt
  has begun, the instant ids of its attempts.
* A folder is **alive** when its owner beat within the heartbeat tolerance
  (``interval × (tolerable-misses + 1)``, as for instants), or when an instant it names
  is pending with a live heartbeat. Otherwise the owner is dead: its instants completed
  or were rolled back and it stopped beating, or it died before beginning one.
  A rolled-back instant alone never makes a folder dead: a live write replays from the
  same folder after a conflict.
* A folder with **no owner file** (a write of an older lakeline, the data source's
  staging before its commit, an owner file that could not be read) is judged by age:
  dead once its newest file is older than ``clean.orphan-age-ms``, the cleaner's rule
  for any file nobody claims.

Only folder names a write id can have (32 hex digits) are ever touched, and removal
goes through :meth:`Storage.delete_dir`, which unlinks symbolic links instead of
following them.
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import re
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

import pyarrow.fs as pafs

from ...config import TableProperties
from ..errors import ObjectChangedError
from ..heartbeat import expiry_us, is_expired
from ..log import now_us
from ..timeline import Timeline
from .filesystem import META_DIR, Storage

_log = logging.getLogger(__name__)

#: The folder of every write's staging folder, relative to the table.
STAGING_DIR = posixpath.join(META_DIR, "staging")
#: The owner file inside a staging folder (no Spark task writes a name like it).
OWNER_FILE = "_owner.json"
#: What a write id looks like (``uuid4().hex``): nothing else under the staging
#: folder is ever judged or removed.
_WRITE_ID = re.compile(r"[0-9a-f]{32}")


def folder_of(write_id: str) -> str:
    """The staging folder of ``write_id``, relative to the table."""
    return posixpath.join(STAGING_DIR, write_id)


@dataclass(frozen=True)
class Owner:
    """What an owner file says."""

    write: str
    beat_us: int  # the last beat, micros since the epoch
    instants: tuple[int, ...] = ()  # the write's begun attempts, oldest first
    host: str = ""  # for a human reading the file: which driver
    pid: int = 0

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "write": self.write,
                "beat_us": self.beat_us,
                "instants": list(self.instants),
                "host": self.host,
                "pid": self.pid,
            }
        ).encode()

    @classmethod
    def from_json(cls, raw: bytes) -> Owner:
        d = json.loads(raw)
        return cls(
            str(d["write"]),
            int(d["beat_us"]),
            tuple(int(i) for i in d.get("instants") or ()),
            str(d.get("host", "")),
            int(d.get("pid", 0)),
        )


def write_owner(storage: Storage, owner: Owner, create: bool = False) -> None:
    """Store ``owner`` in its folder, written whole (aside and renamed on a local disk, one
    put on an object store), so a reader sees the old file or the new one, never half of
    one. Only ``create`` makes the folder: a late beat of a write whose folder was
    removed must not bring it back."""
    folder = storage.path(folder_of(owner.write))
    path = posixpath.join(folder, OWNER_FILE)
    if create:
        storage.mkdirs(folder)
    elif storage.objects is not None:
        # No folders on a store: a beat replaces the owner object only while it is there
        # (a put naming the ETag it read), so a removed folder stays removed.
        held = storage.objects.get_tagged(path)
        if held is not None:
            try:
                storage.objects.replace(path, owner.to_json(), held[1])
            except ObjectChangedError:
                pass  # removed meanwhile
        return
    storage.replace_bytes(path, owner.to_json())


def read_owner(storage: Storage, write_id: str) -> Owner | None:
    """The owner file of ``write_id``'s folder; None when there is none or it cannot be read."""
    try:
        return Owner.from_json(storage.read_bytes(storage.path(folder_of(write_id), OWNER_FILE)))
    except (FileNotFoundError, OSError, ValueError, KeyError, TypeError):
        return None


class OwnerBeat:
    """The driver's side: owns one staging folder from :meth:`start` to :meth:`stop`,
    refreshing its owner file from a daemon thread every ``interval_ms``.

    :meth:`begun` names an attempt's instant at once (not at the next beat), so a
    rollback of that instant finds the folder. Stop it *before* removing the folder.
    """

    def __init__(self, storage: Storage, write_id: str, interval_ms: int) -> None:
        self.storage = storage
        self.owner = Owner(write_id, now_us(), (), socket.gethostname(), os.getpid())
        self.interval_s = interval_ms / 1000.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> OwnerBeat:
        write_owner(self.storage, self.owner, create=True)
        self._thread = threading.Thread(target=self._run, name=f"staging-owner-{self.owner.write[:8]}", daemon=True)
        self._thread.start()
        return self

    def begun(self, instant: int) -> None:
        """Record that an attempt of the write began as ``instant``. A failure is only
        logged: the beat alone keeps the folder alive, the instant ids only tell a
        reader which instants the folder served."""
        with self._lock:
            if instant in self.owner.instants:
                return
            try:
                self._beat(instants=(*self.owner.instants, instant))
            except Exception as e:  # noqa: BLE001 - see above
                _log.warning(
                    "could not name instant %d in the owner file of staging folder %s: %r", instant, self.owner.write, e
                )

    def _beat(self, instants: tuple[int, ...] | None = None) -> None:
        owner = replace(self.owner, beat_us=now_us(), instants=self.owner.instants if instants is None else instants)
        write_owner(self.storage, owner)
        self.owner = owner

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                with self._lock:
                    self._beat()
            except Exception:  # noqa: BLE001 - a missed beat is tolerated; the next may land
                continue

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> OwnerBeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass(frozen=True)
class Rules:
    """The limits a verdict uses (a table's ``heartbeat.*`` and ``clean.orphan-age-ms``)."""

    interval_ms: int
    tolerable_misses: int
    orphan_age_ms: int

    @classmethod
    def of(cls, props: TableProperties, orphan_age_ms: int | None = None) -> Rules:
        """From a table's typed properties (``table.config.props``); ``orphan_age_ms``
        overrides the table's (a cleaning run's own)."""
        age = props.clean_orphan_age_ms if orphan_age_ms is None else orphan_age_ms
        return cls(props.heartbeat_interval_ms, props.heartbeat_tolerable_misses, int(age))


@dataclass(frozen=True)
class Verdict:
    """Whether one staging folder's write is alive, and why."""

    write: str
    alive: bool
    why: str
    instants: tuple[int, ...] = field(default=())


#: Reads the timeline and the last beat of each instant: ``() -> (timeline, beats)``.
TimelineReader = Callable[[], tuple[Timeline, Mapping[int, int]]]


def judge(
    storage: Storage,
    write_id: str,
    owner: Owner | None,
    timeline: Timeline,
    beats: Mapping[int, int],
    rules: Rules,
    now: int | None = None,
) -> Verdict:
    """The verdict on ``write_id``'s folder, whose owner file said ``owner`` (the
    module docstring's rules).

    Read ``timeline`` and ``beats`` *after* the owner file (as :func:`verdicts` does):
    an instant the timeline does not know then is newer than the owner file, and the
    owner's own beat decides."""
    now = now if now is not None else now_us()
    if owner is None:
        newest = _newest_mtime_us(storage, write_id)
        if newest is None or now - newest <= rules.orphan_age_ms * 1000:
            return Verdict(write_id, True, "no owner file; younger than clean.orphan-age-ms")
        return Verdict(write_id, False, "no owner file; older than clean.orphan-age-ms")
    if now - owner.beat_us <= expiry_us(rules.interval_ms, rules.tolerable_misses):
        return Verdict(write_id, True, "the owner beats", owner.instants)
    for i in owner.instants:
        inst = timeline.find(i)
        if (
            inst is not None
            and inst.is_pending
            and not is_expired(inst, dict(beats), rules.interval_ms, rules.tolerable_misses, now)
        ):
            return Verdict(write_id, True, f"instant {i} is pending and beats", owner.instants)
    return Verdict(write_id, False, "the owner stopped beating and no instant of it is alive", owner.instants)


def write_ids(storage: Storage) -> list[str]:
    """The write ids that have a staging folder, sorted."""
    return sorted(
        posixpath.basename(i.path)
        for i in storage.list_entries(storage.path(STAGING_DIR))
        if i.type == pafs.FileType.Directory and _WRITE_ID.fullmatch(posixpath.basename(i.path))
    )


def verdicts(
    storage: Storage,
    read_timeline: TimelineReader,
    rules: Rules,
    now: int | None = None,
    only: Iterable[str] | None = None,
) -> list[Verdict]:
    """The verdict on every staging folder (or on those of ``only`` that exist). The
    owner files are read first, then ``read_timeline()``, then the clock."""
    ids = write_ids(storage)
    if only is not None:
        wanted = set(only)
        ids = [w for w in ids if w in wanted]
    if not ids:
        return []
    owners = {w: read_owner(storage, w) for w in ids}
    timeline, beats = read_timeline()
    return [judge(storage, w, owners[w], timeline, beats, rules, now) for w in ids]


def dead_writes(
    storage: Storage,
    read_timeline: TimelineReader,
    rules: Rules,
    now: int | None = None,
    only: Iterable[str] | None = None,
) -> list[str]:
    """The write ids whose staging folder may be removed now."""
    return [v.write for v in verdicts(storage, read_timeline, rules, now, only) if not v.alive]


def naming(storage: Storage, instant: int) -> list[str]:
    """The write ids whose owner file names ``instant`` among its attempts."""
    return [w for w in write_ids(storage) if (o := read_owner(storage, w)) is not None and instant in o.instants]


def remove(storage: Storage, write_ids_: Iterable[str]) -> list[str]:
    """Remove these staging folders (a missing one is fine); the ids removed. A name
    that is not a write id is refused, so no caller can reach outside the folder."""
    done = []
    for w in write_ids_:
        if not _WRITE_ID.fullmatch(w):
            continue
        # A file landing while the folder goes (a late beat of a driver that was only
        # paused) makes the delete fail: try again, then leave it to the next run.
        for tries in range(3):
            try:
                storage.delete_dir(storage.path(folder_of(w)))
            except OSError as e:
                if tries == 2:
                    _log.warning("could not remove staging folder %s yet: %r", w, e)
                continue
            done.append(w)
            break
    return done


def _newest_mtime_us(storage: Storage, write_id: str) -> int | None:
    """The newest modification time in the folder (its files', else its own)."""
    path = storage.path(folder_of(write_id))
    infos = storage.list_files(path, recursive=True) or [storage.fs.get_file_info(path)]
    times = [i.mtime_ns for i in infos if i.mtime_ns is not None]
    return max(times) // 1000 if times else None
