"""Markers: the list of files an instant is writing, kept so it can be rolled back.

A marker is written *before* its data file, so after any crash every file an instant
may have created is named by a marker (the file itself may or may not exist). Rollback
deletes what the markers name; a completed instant's markers are removed.
"""

from __future__ import annotations

import posixpath

from .storage import Storage
from .stores import META_DIR


def marker_dir(storage: Storage, instant: int) -> str:
    return storage.path(META_DIR, "markers", str(instant))


def write_marker(storage: Storage, instant: int, rel_path: str) -> None:
    """Record that ``rel_path`` is about to be written by ``instant``."""
    name = posixpath.basename(rel_path)
    storage.write_bytes(posixpath.join(marker_dir(storage, instant), name + ".marker"), rel_path.encode())


def list_markers(storage: Storage, instant: int) -> list[str]:
    """Relative paths of every file the instant started writing."""
    out = []
    for info in storage.list_files(marker_dir(storage, instant)):
        if info.path.endswith(".marker"):
            try:
                out.append(storage.read_bytes(info.path).decode())
            except FileNotFoundError:
                continue
    return sorted(out)


def instants_with_markers(storage: Storage) -> list[int]:
    """Instants that still have a marker folder (written, or being rolled back)."""
    root = storage.path(META_DIR, "markers")
    from pyarrow.fs import FileSelector, FileType

    infos = storage.fs.get_file_info(FileSelector(root, allow_not_found=True))
    return sorted(int(posixpath.basename(i.path)) for i in infos
                  if i.type == FileType.Directory and posixpath.basename(i.path).isdigit())


def delete_markers(storage: Storage, instant: int) -> None:
    storage.delete_dir(marker_dir(storage, instant))
