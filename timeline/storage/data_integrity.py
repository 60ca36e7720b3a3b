"""How a data file is checked as it is read: page CRCs, and the size its commit recorded.

One place for both, imported by every writer and reader of data files (and by the
timeline archive, which cannot import the readers' module).

**Page CRCs.** Every data file lakeline writes carries a CRC-32 in each Parquet page
header (:data:`PARQUET_WRITE`, 4 bytes a page), and every read verifies them
(:data:`PARQUET_READ` for ``pq.ParquetFile`` and ``pq.read_table``,
:data:`PARQUET_FORMAT` for datasets and fragments): a flipped byte in a page is an
``OSError`` from Arrow, which :func:`lakeline.timeline.storage.data_reads.reading`
types as ``CorruptFileError`` naming the file, never wrong values. A file written
before page CRCs has none to verify and reads as before. What the CRCs do not cover
(page headers, the footer) mostly fails to decode when damaged; a footer altered into
another valid one is not caught here.

**Recorded sizes.** A data file replaced by another valid Parquet file (a swap with
another file of the table, a restore from the wrong backup) or cut short reads as if
it were the right one unless something recorded says otherwise: its page CRCs are its
own and still hold. Every commit records each file's size (``WriteStat.bytes``, carried
by the view's ``DataFile.bytes``), as Iceberg and Delta record theirs, so a reader
compares the size it finds with the recorded one before it trusts the file
(:func:`size_error`). Where it is compared costs nothing extra:

* a file lakeline opens itself (:func:`lakeline.timeline.storage.data_reads.open_data_file`)
  is compared with the size the open learned (an ``fstat`` on a local disk, the HEAD
  obstore sends before any ranged GET on an object store);
* a file handed by path to pyarrow's dataset scan (a read of plain bases, a dataset
  given to DuckDB or Polars) is opened by Arrow; on a local disk it is stat'ed first
  (microseconds); on an object store the path and its recorded size are registered here
  (:func:`expect`) and the object store's file system compares them when Arrow opens
  the file (:meth:`lakeline.timeline.storage.object_files.ObjectFilesHandler.open_input_file`),
  with the size of the HEAD it sends anyway: no request is added.

The registry maps an absolute path to its relative path and recorded size; data file
names are never reused (a path names one content for good), so an entry never goes
stale. It keeps the newest :data:`REMEMBERED` paths (an entry is two short strings and
an int); a path that fell out is simply not compared by that open.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import pyarrow.dataset as ds

from ..errors import CorruptFileError

#: ``pq.write_table``'s option of every data file: a CRC-32 in each page's header (4
#: bytes a page), checked by every read (:data:`PARQUET_READ`).
PARQUET_WRITE: Mapping[str, Any] = MappingProxyType({"write_page_checksum": True})
#: ``pq.ParquetFile``'s and ``pq.read_table``'s option of every read of a data file: each
#: page's CRC is verified before it is decoded (a page without one, from a file written
#: before CRCs, is read as it is).
PARQUET_READ: Mapping[str, Any] = MappingProxyType({"page_checksum_verification": True})
#: The Parquet format of every dataset or fragment over data files: pages verified as
#: :data:`PARQUET_READ` says.
PARQUET_FORMAT = ds.ParquetFileFormat(
    default_fragment_scan_options=ds.ParquetFragmentScanOptions(page_checksum_verification=True)
)

#: Paths whose recorded size the registry keeps at most.
REMEMBERED = 200_000

# path (as the object store's file system sees it: no leading or trailing "/") ->
# (path relative to the table, recorded size). Each dict operation is atomic under the
# GIL, and an entry is only ever added with the same value, so no lock is needed (nor
# one a fork could copy held).
_EXPECTED: dict[str, tuple[str, int]] = {}


def _key(path: str) -> str:
    return path.strip("/")


def size_error(rel_path: str, actual: int, recorded: int) -> CorruptFileError:
    """The typed error for the data file ``rel_path`` found ``actual`` bytes long where its
    commit recorded ``recorded``."""
    what = "cut short" if actual < recorded else "longer than written"
    return CorruptFileError(
        f"data file {rel_path} is damaged or was replaced: it is {actual} bytes, its commit recorded "
        f"{recorded} ({what}; restored or copied over outside lakeline?)"
    )


def check_size(rel_path: str, actual: int, recorded: int | None) -> None:
    """Raise :func:`size_error` when ``actual`` is not ``recorded`` (None or 0: not known,
    nothing compared)."""
    if recorded and actual != recorded:
        raise size_error(rel_path, actual, recorded)


def expect(path: str, rel_path: str, recorded: int | None) -> None:
    """Register the recorded size of the data file at ``path`` (absolute) for
    :func:`check_opened` (None or 0: not known, nothing registered)."""
    if not recorded:
        return
    key = _key(path)
    if key not in _EXPECTED and len(_EXPECTED) >= REMEMBERED:
        try:
            _EXPECTED.pop(next(iter(_EXPECTED)), None)  # the oldest
        except (StopIteration, RuntimeError):  # emptied or changed by another thread meanwhile
            pass
    _EXPECTED[key] = (rel_path, recorded)


def check_opened(path: str, actual: int) -> None:
    """Compare the size of the file just opened at ``path`` with the one registered for it
    (nothing registered: nothing to compare).

    Raises:
        CorruptFileError: the sizes differ, naming the file and both sizes.
    """
    entry = _EXPECTED.get(_key(path))
    if entry is not None:
        check_size(entry[0], actual, entry[1])


def forget() -> None:
    """Drop every registered size (tests)."""
    _EXPECTED.clear()
