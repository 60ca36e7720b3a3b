"""What a process keeps of the merge-on-read logs it read: decoded logs, and a slice's
prepared merge (:class:`~lakeline.table.merge.PositionMerge`).

A merge-on-read read decodes every log of every slice it reads and folds them. Between
compactions the logs pile up (a delete writes one per file group it touches), so a table
read again and again in one process (a dashboard, a notebook, the service runner, a
Spark executor) would redo that work on every read, and its reads would slow down round
after round. A log never changes once written: a writer creates each under a new name,
and a rollback or a clean only removes it. So what is worked out from logs alone stays
right for as long as the files exist, and this cache keeps it by their identity. A slice
read again costs its base's decode and the drop of the touched rows; a read after a
write decodes only the new logs.

The cache is bounded by bytes (``LAKELINE_LOG_CACHE_BYTES``, default 128 MiB; 0 turns it
off), drops the least recently used value first, and keeps none larger than a quarter of
it (a large upsert's log is read once, by the compaction that folds it). A local file is
stat'ed on every read, so a file replaced in place (damaged, restored from a backup) is
read again and a removed one raises as it would without the cache. An object store's
file is known by its name and recorded size (a stat there is a request, and names are
never reused). Iceberg's Spark executors keep delete files the same way (its executor
cache).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

import pyarrow as pa

from ...timeline.storage.filesystem import Storage
from ..files import FileRead, read_snapshot_file

#: The default budget, in bytes of decoded Arrow data.
DEFAULT_BYTES = 128 * 1024 * 1024


class LogCache:
    """Values worked out from log files alone (decoded logs, a slice's prepared merge),
    by the files' identity, least recently used out first, within ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def read(self, task: FileRead, recorded_bytes: int) -> pa.Table:
        """The rows :func:`~lakeline.table.files.read_snapshot_file` returns for ``task``
        (a log file whose commit recorded ``recorded_bytes``), decoded at most once while
        they stay cached. Raises what that function raises."""
        if self.max_bytes <= 0:
            return read_snapshot_file(task)
        try:
            key = ("log", identity(task.storage, task.rel_path, recorded_bytes), task.columns, task.schema)
        except OSError:  # gone (or unreadable): the read says which, with its typed error
            return read_snapshot_file(task)
        rows = self.get(key)
        if rows is None:
            # Decoded outside the lock: the slices of a read are decoded in parallel (two
            # threads may decode one log at once; both keep the same rows).
            rows = read_snapshot_file(task)
            self.keep(key, rows, rows.nbytes)
        return rows

    def get(self, key: Hashable) -> Any:
        """The value kept under ``key`` (None: none is)."""
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def keep(self, key: Hashable, value: Any, size: int) -> None:
        """Keep ``value`` (``size`` bytes) under ``key``: a key must name the log files'
        identities (:func:`identity`) and everything else the value depends on."""
        if self.max_bytes <= 0 or size > self.max_bytes // 4:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, old) = self._entries.popitem(last=False)
                self._bytes -= old

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self.hits = self.misses = 0

    @property
    def bytes(self) -> int:
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)


def identity(storage: Storage, rel_path: str, recorded_bytes: int) -> tuple[Hashable, ...]:
    """What tells one file from another at ``rel_path``: on a local disk its inode, size
    and change times; elsewhere the size its commit recorded (names are never reused).

    Raises:
        OSError: a local file is gone or unreadable.
    """
    if storage.is_local:
        st = os.stat(storage.path(rel_path))
        return storage.uri, rel_path, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns
    return storage.uri, rel_path, recorded_bytes


def _budget() -> int:
    value = os.environ.get("LAKELINE_LOG_CACHE_BYTES", "")
    try:
        return int(value) if value.strip() else DEFAULT_BYTES
    except ValueError:
        # Read at import: raising would break every import of lakeline over a tuning knob.
        warnings.warn(f"LAKELINE_LOG_CACHE_BYTES={value!r} is not a byte count; using {DEFAULT_BYTES}", stacklevel=2)
        return DEFAULT_BYTES


#: The process's cache: every merge-on-read read in this process shares it.
LOGS = LogCache(_budget())


def _forget_in_child() -> None:
    # A fork copies the lock as it was: held by a thread the child does not have, it
    # would never be released (and the entries might be half-updated). The child starts
    # empty, with a fresh lock.
    LOGS._lock = threading.Lock()
    LOGS._entries = OrderedDict()
    LOGS._bytes = 0


os.register_at_fork(after_in_child=_forget_in_child)
