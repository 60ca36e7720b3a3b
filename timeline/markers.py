"""Markers: the list of files an instant is writing, kept so it can be rolled back.

A marker is written *before* its data file, so after any crash every file an instant
may have created is named by a marker (the file itself may or may not exist). Rollback
deletes what the markers name; a completed instant's markers are removed.

A marker must say what it covers even when the process died while writing it: the
marker's *path* is the record. The marker for ``day=x/<file>`` is
``.lakeline/markers/<instant>/day=x/<file>.marker`` (the relative path mirrored under
the instant's folder), so an empty marker left by a kill between creating and
writing it still names its file. The content repeats the path, for readers of the
older format.

Older markers lie flat in the instant's folder (``<file>.marker``, the relative path
as their only content); they are still read. An empty old-format marker of a
partitioned table cannot say its partition: it yields the bare file name, which
rollback does not find, and the file is left for the cleaner (it removes files of
rolled-back instants).

Rollback deletes only what :func:`is_instant_file` accepts, so a damaged marker can
never make it delete anything but a file that instant wrote.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

from .diagnostics import faults
from .storage.filesystem import META_DIR, Storage
from .view.file_group import parse_data_file_name

MARKER_SUFFIX = ".marker"
#: Metadata-table deltas an instant writes behind its markers
#: (``.lakeline/metadata/<index>/delta_<instant>_<token>.parquet``).
_DELTA = re.compile(r"^delta_(?P<instant>\d+)_[0-9a-f]+\.parquet$")


def marker_dir(storage: Storage, instant: int) -> str:
    return storage.path(META_DIR, "markers", str(instant))


def marker_path(storage: Storage, instant: int, rel_path: str) -> str:
    """Where the marker of ``rel_path`` lives: its relative path under the instant's folder."""
    return posixpath.join(marker_dir(storage, instant), rel_path + MARKER_SUFFIX)


def write_marker(storage: Storage, instant: int, rel_path: str) -> None:
    """Record that ``rel_path`` is about to be written by ``instant``.

    The marker exists from the moment its file is created; the fault point
    ``marker.after_create`` sits between creating it and writing its content.
    """
    path = marker_path(storage, instant, rel_path)
    storage.fs.create_dir(posixpath.dirname(path), recursive=True)
    with storage.fs.open_output_stream(path) as f:
        faults.point("marker.after_create")
        f.write(rel_path.encode())


def _covered(storage: Storage, folder: str, path: str) -> str:
    """The relative path one marker file covers (see the module docstring)."""
    named = posixpath.relpath(path, folder)[: -len(MARKER_SUFFIX)]
    if "/" in named:
        return named  # the current format: the path is the record
    try:
        text = storage.read_bytes(path).decode()
    except (FileNotFoundError, UnicodeDecodeError):
        return named
    # A flat marker: an old one names its partitioned path in its content; anything
    # else (empty, torn, the same bare name) falls back to the name.
    if text != named and posixpath.basename(text) == named:
        return text
    return named


def list_markers(storage: Storage, instant: int) -> list[str]:
    """Relative paths of every file the instant started writing."""
    folder = marker_dir(storage, instant)
    out = set()
    for info in storage.list_files(folder, recursive=True):
        if info.path.endswith(MARKER_SUFFIX):
            out.add(_covered(storage, folder, info.path))
    return sorted(out)


def is_instant_file(rel_path: str, instant: int) -> bool:
    """Whether ``rel_path`` may be a file ``instant`` wrote: a data file inside the table
    (not under ``.lakeline/``) whose name carries the instant's id, or a metadata-table
    delta of that instant. Rollback deletes nothing else, whatever a marker says."""
    if not rel_path or rel_path.startswith("/") or posixpath.normpath(rel_path) != rel_path:
        return False
    parts = rel_path.split("/")
    if ".." in parts:
        return False
    if parts[0] == META_DIR:
        delta = _DELTA.match(parts[-1])
        return (
            len(parts) == 4 and parts[1] == "metadata" and delta is not None and int(delta.group("instant")) == instant
        )
    parsed = parse_data_file_name(rel_path)
    return parsed is not None and parsed.instant == instant


def instants_with_markers(storage: Storage) -> list[int]:
    """Instants that still have a marker folder (written, or being rolled back)."""
    root = storage.path(META_DIR, "markers")
    from pyarrow.fs import FileType

    infos = storage.list_entries(root)
    return sorted(
        int(posixpath.basename(i.path))
        for i in infos
        if i.type == FileType.Directory and posixpath.basename(i.path).isdigit()
    )


def delete_markers(storage: Storage, instant: int, covered: Iterable[str] | None = None) -> None:
    """Remove the instant's markers.

    ``covered``: every file the instant wrote, when the caller knows them (a commit that
    completed). On an object store their markers are then deleted by name: there are no
    folders to remove, and a folder delete would first list the prefix (a round trip per
    commit). A marker the caller did not know of stays, harmless, for ``rollback_failed``
    (it clears the markers of completed instants). Elsewhere the folder goes whole.
    """
    if covered is not None and storage.is_object_store:
        storage.delete_objects([marker_path(storage, instant, rel) for rel in sorted(set(covered))])
        return
    storage.delete_dir(marker_dir(storage, instant))


def reconcile_markers(storage: Storage, instant: int, keep: set[str]) -> list[str]:
    """Delete the files ``instant``'s markers name that are not in ``keep``, with their
    markers, and return them.

    A distributed write calls this before it completes: a failed or speculative task
    attempt may have written a file that no result names. No reader would ever see it
    (a snapshot reads only the files of commit metadata), but it is garbage. Removing
    the marker also stops an attempt still running: a file task re-checks its marker
    after writing and deletes its own file when the marker is gone.
    """
    orphans = [rel for rel in list_markers(storage, instant) if rel not in keep and is_instant_file(rel, instant)]
    for rel in orphans:
        storage.delete(storage.path(rel))
        storage.delete(marker_path(storage, instant, rel))
    return orphans
