"""Typed errors for reading a data file: the one place that names what went wrong.

A base or log file the timeline names can be damaged (truncated, overwritten with
something that is not Parquet, replaced outside lakeline) or unreadable (permissions);
pyarrow then raises ``ArrowInvalid`` or an ``OSError``, which say nothing of which file
of the table it was. Every read of a data file (``lakeline.table.files.read_file``, the
scan's one-dataset read of plain bases, ``index validate``) goes through
:func:`reading`, which turns those into :class:`CorruptFileError` naming the file's
path relative to the table. A *missing* file is left alone (``FileNotFoundError``):
whether that is a snapshot that left retention or a file deleted outside lakeline is
for the caller to tell, from the timeline (:func:`missing_message`).

How a data file is checked as it is read (page CRCs, the size its commit recorded) is
said in :mod:`.data_integrity`; :func:`open_data_file` compares the size on open, and
:func:`check_sizes` before a dataset scan opens files by path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from ..errors import CorruptFileError, CorruptLogError, LakelineError, SnapshotExpiredError, TimelineError
from ..instant import Action
from ..log import EventLog
from ..timeline import Timeline
from ..view.file_group import LOG_SUFFIX

# The page-CRC options, re-exported: every writer and reader of data files imports them here.
from .data_integrity import PARQUET_FORMAT as PARQUET_FORMAT
from .data_integrity import PARQUET_READ as PARQUET_READ
from .data_integrity import PARQUET_WRITE as PARQUET_WRITE
from .data_integrity import check_size, expect
from .filesystem import Storage

#: What pyarrow and the OS raise for a file that exists but cannot be read as Parquet
#: (``pa.ArrowIOError`` is ``OSError``). ``FileNotFoundError`` is one too and is passed on.
DAMAGED = (pa.ArrowInvalid, OSError)


def damaged_error(
    rel_path: str, error: BaseException, kind: type[CorruptFileError] = CorruptFileError
) -> CorruptFileError:
    """The typed error for the data file ``rel_path`` that raised ``error`` (one line)."""
    reason = " ".join(str(error).split()) or "(no message)"
    return kind(f"data file {rel_path} is damaged or unreadable: {type(error).__name__}: {reason}")


@contextmanager
def reading(rel_path: str, kind: type[CorruptFileError] = CorruptFileError) -> Iterator[None]:
    """Read the data file ``rel_path`` (relative to the table) inside this block: a
    damaged or unreadable file raises ``kind`` naming it; a missing one stays
    ``FileNotFoundError``."""
    try:
        yield
    except (FileNotFoundError, LakelineError):
        raise  # missing, or already typed: an unreachable store is not a damaged file
    except DAMAGED as e:
        raise damaged_error(rel_path, e, kind) from e


def open_data_file(storage: Storage, rel_path: str, recorded_size: int | None = None) -> pa.NativeFile:
    """The data file ``rel_path`` opened, its size compared with ``recorded_size`` (its
    commit's; None or 0: not known) at no cost: the size the open learned (an ``fstat``,
    or the HEAD an object store's reader sends). Call it inside :func:`reading`.

    Raises:
        CorruptFileError: the file is not the size its commit recorded (swapped, cut
            short), naming it and both sizes.
        FileNotFoundError: the file is missing.
    """
    source = storage.fs.open_input_file(storage.path(rel_path))
    try:
        check_size(rel_path, source.size(), recorded_size)
    except BaseException:
        source.close()
        raise
    return source


def open_parquet(storage: Storage, rel_path: str, recorded_size: int | None = None) -> pq.ParquetFile:
    """:func:`open_data_file` as a ``ParquetFile`` whose reads verify every page's CRC."""
    source = open_data_file(storage, rel_path, recorded_size)
    try:
        return pq.ParquetFile(source, **PARQUET_READ)
    except BaseException:
        source.close()
        raise


def check_sizes(storage: Storage, files: Iterable[tuple[str, int | None]]) -> None:
    """Before a dataset scan opens the data files ``files`` ((relative path, recorded size))
    by path: on a local disk a stat each (one batched call, microseconds a file) compared
    now; on an object store each recorded size registered for the open the scan makes
    (:mod:`.recorded_sizes`), so no request is added. A file missing here is left for the
    read to report.

    Raises:
        CorruptFileError: a local file is not the size its commit recorded.
    """
    known = [(rel, size) for rel, size in files if size]
    if not known:
        return
    if storage.is_object_store:
        for rel, size in known:
            expect(storage.path(rel), rel, size)
        return
    infos = storage.fs.get_file_info([storage.path(rel) for rel, _ in known])
    for (rel, size), info in zip(known, infos, strict=True):
        if info.type == pafs.FileType.File and info.size is not None:
            check_size(rel, info.size, size)


def check_log(rel_path: str, names: Sequence[str], required: Sequence[str]) -> None:
    """Refuse a log file (by its name) whose columns ``names`` lack a ``required`` one:
    a base or another Parquet file was put in its place outside lakeline, and folding it
    as changes would read (or later write) wrong rows.

    Raises:
        CorruptLogError: naming the file and the columns it lacks.
    """
    if not rel_path.endswith(LOG_SUFFIX):
        return
    lacking = [c for c in required if c not in names]
    if lacking:
        raise CorruptLogError(
            f"log {rel_path} has no {', '.join(lacking)} column: it is not a merge-on-read log "
            "(replaced outside lakeline?)"
        )


def cleaned_since(timeline: Timeline, snapshot_seq: int) -> list[int]:
    """Clean instants that may have deleted files live at ``snapshot_seq``: those
    requested after it (completed or still running). A clean planned before it only
    deletes files that were no longer live then, so never a file of the snapshot."""
    return [i.id for i in timeline.by_action(Action.CLEAN) if i.id > snapshot_seq]


def missing_message(rel_path: str, cleans: list[int]) -> str:
    """Why a file the snapshot names is missing, without guessing: a clean removed it
    only when one ran since the snapshot (``cleans``, from :func:`cleaned_since`)."""
    if cleans:
        return f"{rel_path} of the snapshot being read was cleaned (by clean {cleans[-1]}): the snapshot left retention"
    return (
        f"{rel_path} of the snapshot being read is missing, and no clean since the snapshot removed it "
        "(deleted outside lakeline?)"
    )


def unreadable(storage: Storage, rel_path: str, recorded_size: int | None = None) -> CorruptFileError | None:
    """Whether the data file ``rel_path`` reads whole (every page verified, the size
    compared with ``recorded_size`` when known): None, or the typed error naming it. For
    a caller that read it with more than a read (a hash, a merge) and met an Arrow
    error: only when the file itself cannot be read is the file to blame."""
    try:
        with reading(rel_path):
            parquet = open_parquet(storage, rel_path, recorded_size)
            for group in range(parquet.metadata.num_row_groups):  # one row group held at a time
                parquet.read_row_group(group, use_threads=False)
    except CorruptFileError as e:
        return e
    return None


def find_damaged(
    storage: Storage, rel_paths: Sequence[str], error: BaseException, sizes: Mapping[str, int] | None = None
) -> CorruptFileError | None:
    """The typed error for a read of several files at once (one Parquet dataset) that
    raised ``error``: the file is the one whose path the message holds, else the first
    that does not read whole (every page's CRC verified, its size compared with
    ``sizes`` where known: a CRC mismatch's message names no file); None when every
    file reads (the error is not a file's: a filter that cannot be evaluated, a storage
    hiccup), and the caller re-raises it."""
    if isinstance(error, LakelineError):
        return None  # already typed (a store that does not answer): no file's damage
    text = str(error)
    for rel in rel_paths:
        if storage.path(rel) in text:
            return damaged_error(rel, error)
    for rel in rel_paths:
        if (damaged := unreadable(storage, rel, (sizes or {}).get(rel))) is not None:
            return damaged
    return None


def missing_error(
    storage: Storage, log: EventLog, snapshot_seq: int, rel_paths: Sequence[str], error: BaseException
) -> SnapshotExpiredError:
    """The typed error for a read of a snapshot (its files ``rel_paths``) that found a
    file missing: which one, and whether a clean since the snapshot removed it."""
    by_path = {storage.path(rel): rel for rel in rel_paths}
    gone = [by_path.get(p, p) for p in storage.missing(by_path)]
    rel = gone[0] if gone else " ".join(str(error).split())
    try:
        cleans = cleaned_since(log.refresh(), snapshot_seq)
    except TimelineError:
        return SnapshotExpiredError(f"{rel} of the snapshot being read is missing")
    return SnapshotExpiredError(missing_message(rel, cleans))
