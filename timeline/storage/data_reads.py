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
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CorruptFileError, CorruptLogError, SnapshotExpiredError, TimelineError
from ..instant import Action
from ..log import EventLog
from ..timeline import Timeline
from ..view.file_group import LOG_SUFFIX
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
    except FileNotFoundError:
        raise
    except DAMAGED as e:
        raise damaged_error(rel_path, e, kind) from e


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


def unreadable(storage: Storage, rel_path: str) -> CorruptFileError | None:
    """Whether the data file ``rel_path`` reads whole: None, or the typed error naming
    it. For a caller that read it with more than a read (a hash, a merge) and met an
    Arrow error: only when the file itself cannot be read is the file to blame."""
    try:
        with reading(rel_path):
            pq.read_table(storage.path(rel_path), filesystem=storage.fs)
    except CorruptFileError as e:
        return e
    return None


def find_damaged(storage: Storage, rel_paths: Sequence[str], error: BaseException) -> CorruptFileError | None:
    """The typed error for a read of several files at once (one Parquet dataset) that
    raised ``error``: the file is the one whose path the message holds, else the first
    that does not read whole; None when every file reads (the error is not a file's:
    a filter that cannot be evaluated, a storage hiccup), and the caller re-raises it."""
    text = str(error)
    for rel in rel_paths:
        if storage.path(rel) in text:
            return damaged_error(rel, error)
    for rel in rel_paths:
        if (damaged := unreadable(storage, rel)) is not None:
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
