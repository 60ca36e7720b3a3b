"""Index files carry their size and a checksum where they are referenced; a read verifies.

An index file that is damaged but still well-formed (a bucket file replaced by another
bucket's, a bloom filter's bits zeroed, bytes flipped inside a page) used to be read as
if it were sound: an upsert then took keys the table holds for new ones and inserted
them again. So every index file is *sealed*: its size and a CRC-32 are recorded where it
is referenced, and a reader compares them before it trusts a byte of it.

* What references a file: a record index generation's manifest names its bucket files
  (:func:`lakeline.indexes.record_index.store.publish` records each one's seal) and
  carries a checksum of itself; a metadata-table delta or base is found by listing its
  folder, so its name is its reference: the token of ``delta_<instant>_<token>.parquet``
  (and of ``base_<seq>_<token>.parquet``) is 8 random hex digits, then the size (12) and
  the CRC (8) (:func:`sealed_token`). Files written before seals (an 8-digit token, a
  manifest entry without one) are read as before.
* What the CRC covers: an Arrow IPC bucket file whole (a lookup maps it; nothing inside
  it is checked otherwise); a Parquet file's footer (the last ``8 + footer length``
  bytes), its pages being written with Parquet's own page CRCs, which every read of an
  index file verifies (:data:`PARQUET_READ`). So a point lookup that reads one row group
  of a 22 MB delta checks the footer and that row group, not 22 MB; and a file rewritten
  by another writer (without page CRCs, or with other row groups) has another footer.
* Once per process: a verified (path, seal) is remembered (index files never change
  once written; a path names one content for good), so the check costs a file's first
  read in a process only.

A mismatch, or an Arrow or OS error while decoding an index file, is a
:class:`CorruptFileError` naming the file (relative to the table): a write stops before
it commits, and ``validate`` reports it (:func:`damaged_file`).
"""

from __future__ import annotations

import posixpath
import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..timeline.errors import CorruptFileError, LakelineError
from ..timeline.storage.filesystem import Storage

#: Parquet writer and reader options of every index file: page CRCs written, and checked
#: on every page read.
PARQUET_WRITE: Mapping[str, Any] = {"write_page_checksum": True}
PARQUET_READ: Mapping[str, Any] = {"page_checksum_verification": True}

_SIZE_DIGITS = 12
_TOKEN = re.compile(r"^[0-9a-f]{8}(?P<size>[0-9a-f]{12})(?P<crc>[0-9a-f]{8})$")
#: Verified (path, seal) pairs remembered at most (an entry is a path and two ints).
_REMEMBERED = 65_536


@dataclass(frozen=True)
class Seal:
    """The size of an index file and the CRC-32 of its covered bytes (module docstring)."""

    size: int
    crc: int

    def to_json(self) -> list[int]:
        return [self.size, self.crc]

    @classmethod
    def from_json(cls, value: object) -> Seal:
        """From :meth:`to_json`.

        Raises:
            ValueError: not a pair of non-negative integers.
        """
        if not isinstance(value, list) or len(value) != 2 or not all(type(v) is int and v >= 0 for v in value):
            raise ValueError(f"not a seal: {value!r:.60}")
        return cls(value[0], value[1])


def is_parquet(path: str) -> bool:
    return path.endswith(".parquet")


def seal_bytes(path: str, data: pa.Buffer | bytes) -> Seal:
    """The seal of the file ``path`` whose content is ``data``."""
    view = memoryview(data)
    if is_parquet(path) and len(view) >= 12:
        footer = int.from_bytes(view[-8:-4], "little")
        view = view[max(0, len(view) - 8 - footer) :]
    return Seal(len(memoryview(data)), zlib.crc32(view))


def seal_of_written(storage: Storage, path: str) -> Seal:
    """The seal of a Parquet file just written at ``path`` on a local disk: its size and
    the CRC of its footer, read back from the page cache (a few KB), so the file could
    be written as it was encoded instead of whole in memory first."""
    with storage.fs.open_input_file(path) as f:
        size = f.size()
        footer = int.from_bytes(f.read_at(8, size - 8)[:4], "little") if size >= 12 else size
        start = max(0, size - 8 - footer)
        return Seal(size, zlib.crc32(f.read_at(size - start, start)))


def sealed_token(random8: str, seal: Seal) -> str:
    """A file name's token carrying ``seal`` (module docstring)."""
    return f"{random8}{seal.size:0{_SIZE_DIGITS}x}{seal.crc:08x}"


def seal_of_name(path: str) -> Seal | None:
    """The seal a metadata-table file's name carries (``<kind>_<n>_<token>.parquet``),
    None for a name of before seals."""
    stem = posixpath.basename(path).rsplit(".", 1)[0]
    m = _TOKEN.match(stem.rsplit("_", 1)[-1])
    return Seal(int(m.group("size"), 16), int(m.group("crc"), 16)) if m else None


def table_relative(storage: Storage, path: str) -> str:
    """``path`` relative to the table, as messages name files."""
    return storage.relative(path) if path.startswith(storage.base) else path


def damaged(storage: Storage, path: str, why: str) -> CorruptFileError:
    return CorruptFileError(f"index file {table_relative(storage, path)} is damaged: {why}")


def missing(storage: Storage, path: str, named_by: str) -> CorruptFileError:
    return CorruptFileError(
        f"index file {table_relative(storage, path)} is missing, though {named_by} names it (deleted outside lakeline?)"
    )


@contextmanager
def decoding(storage: Storage, path: str) -> Iterator[None]:
    """Decode the index file ``path`` inside this block: what Arrow or the OS raise for
    bytes that are not what they should be becomes :class:`CorruptFileError` naming it;
    a missing file stays ``FileNotFoundError`` (a fold may have removed it: the caller
    tells)."""
    try:
        yield
    except (FileNotFoundError, LakelineError):
        raise  # missing, or already typed: an unreachable store is not a damaged file
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OSError, IndexError, KeyError) as e:
        reason = " ".join(str(e).split()) or "(no message)"
        raise damaged(storage, path, f"{type(e).__name__}: {reason}") from e


class _Verified:
    """The (path, seal) pairs this process verified (thread-safe, oldest forgotten first)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: OrderedDict[tuple[str, Seal], None] = OrderedDict()

    def __contains__(self, key: tuple[str, Seal]) -> bool:
        with self._lock:
            return key in self._seen

    def add(self, key: tuple[str, Seal]) -> None:
        with self._lock:
            self._seen[key] = None
            while len(self._seen) > _REMEMBERED:
                self._seen.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._seen.clear()


VERIFIED = _Verified()


def verify(storage: Storage, path: str, seal: Seal | None, again: bool = False) -> None:
    """Check the index file ``path`` (absolute) against ``seal`` (None: a file of before
    seals, taken as it is), once per process (``again``: even if this process did).

    Raises:
        CorruptFileError: its size or checksum is not the recorded one, naming it.
        FileNotFoundError: it is missing (the caller knows whether that is damage).
    """
    if seal is None or (not again and (path, seal) in VERIFIED):
        return
    with decoding(storage, path):
        actual = _actual_seal(storage, path, seal.size)
    if actual != seal:
        what = "size" if actual.size != seal.size else "checksum"
        raise damaged(
            storage,
            path,
            f"its {what} is not the recorded one ({actual.size} bytes, crc {actual.crc:08x}; "
            f"recorded {seal.size} bytes, crc {seal.crc:08x})",
        )
    VERIFIED.add((path, seal))


def _actual_seal(storage: Storage, path: str, expected_size: int) -> Seal:
    if storage.is_local and not is_parquet(path):
        with pa.memory_map(path) as f:  # a bucket file: the pages a lookup maps next
            return seal_bytes(path, f.read_buffer())
    with storage.fs.open_input_file(path) as f:
        size = f.size()
        if size != expected_size or not is_parquet(path):
            return Seal(size, zlib.crc32(f.read_at(size, 0)) if size == expected_size else 0)
        if size < 12:
            return Seal(size, zlib.crc32(f.read_at(size, 0)))
        footer = int.from_bytes(f.read_at(8, size - 8)[:4], "little")
        start = max(0, size - 8 - footer)
        return Seal(size, zlib.crc32(f.read_at(size - start, start)))
