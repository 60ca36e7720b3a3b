"""What a table owns: where a new table may live, which files under it are its own.

A table owns one folder and, inside it, only its own files (docs/safety.md). Three rules
keep every deletion (cleaning, rollback, archival, index drop, purge) inside that:

* **Where a table may be created** (:func:`check_new_location`): not the empty path, not a
  file system root, not a home directory or one above it, not the temporary-files root,
  not a regular file, not a folder that holds anything but lakeline's own ``.lakeline/``,
  and not inside another table. So no table contains another one either.
  :func:`claim_location` runs it and writes the new table's pointer (or completes a
  create that died right after writing its pointer).
* **What a walk of the table sees** (:func:`walk_files`): files below the base path,
  never through a symbolic link, never inside a nested table's folder (one moved in by
  hand), never lakeline's own ``.lakeline/`` folder (its owners handle it).
* **What the table may delete without its timeline naming it** (:func:`is_own_orphan`):
  a data file whose name carries this table's tag (``file_group.table_tag``). Files the
  timeline or the markers name are the table's by definition; everything else is left.

:func:`purge` removes a table's files by those rules and keeps whatever else the folder
holds. :class:`~lakeline.timeline.storage.filesystem.Storage` adds the last guard: its deletes refuse
any path above the base path or behind a symbolic link.
"""

from __future__ import annotations

import os
import posixpath
import pwd
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache

import pyarrow.fs as pafs

from ..errors import TableExistsError, TableNotFoundError, TimelineConfigError, UnsafeLocationError
from ..view.file_group import parse_data_file_name
from .event_log import check_timeline_arg, open_store
from .event_log.pointer import POINTER, pointer_path, read_pointer, write_pointer
from .filesystem import META_DIR, Storage


def _is_table(storage: Storage, folder: str) -> bool:
    return storage.exists(posixpath.join(folder, META_DIR, POINTER))


@lru_cache(maxsize=1)
def _home_folders() -> frozenset[str]:
    """Every user's home folder (the password database and ``$HOME``), as real paths."""
    homes = {os.path.expanduser("~")}
    try:
        homes.update(p.pw_dir for p in pwd.getpwall() if p.pw_dir)
    except OSError:  # no password database (some containers): $HOME alone
        pass
    return frozenset(os.path.realpath(h) for h in homes if h and h != "/nonexistent")


def _protected_local(path: str) -> str | None:
    """Why a local folder may never be a table's folder, or None."""
    if os.path.dirname(path) == path:
        return "a file system root"
    for home in _home_folders():
        if home == path:
            return "a home folder"
        if home.startswith(path.rstrip("/") + "/") and home.count("/") > 1:
            return f"a folder above the home folder {home}"
    if path == os.path.realpath(tempfile.gettempdir()):
        return "the temporary-files folder"
    return None


def enclosing_table(storage: Storage) -> str | None:
    """The base path of a table whose folder holds ``storage``'s base path, or None."""
    folder = storage.base
    while True:
        parent = posixpath.dirname(folder)
        if parent == folder or not parent:
            return None
        folder = parent
        if _is_table(storage, folder):
            return folder


def check_new_location(storage: Storage) -> None:
    """Refuse a location a new table may not take (nothing is written).

    A folder holding only ``.lakeline/`` passes: it is a table whose creation did not
    finish, which creating it again completes (see ``Table.create``).

    Raises:
        UnsafeLocationError: the location and why.
    """
    where = storage.uri
    if storage.is_local:
        reason = _protected_local(storage.base)
        if reason is not None:
            raise UnsafeLocationError(f"a table may not be created at {where}: it is {reason}")
        existing = storage.base
        while not os.path.lexists(existing):
            existing = os.path.dirname(existing)
        if not os.path.isdir(existing):
            what = "it is a file" if existing == storage.base else f"{existing} is a file"
            raise UnsafeLocationError(f"a table may not be created at {where}: {what}")
    info = storage.fs.get_file_info(storage.base) if storage.base else None
    if info is not None and info.type == pafs.FileType.File:
        raise UnsafeLocationError(f"a table may not be created at {where}: it is a file")
    if info is not None and info.type == pafs.FileType.Directory:
        entries = storage.list_entries(storage.base)
        others = sorted(posixpath.basename(e.path) for e in entries if posixpath.basename(e.path) != META_DIR)
        if others:
            shown = ", ".join(others[:3]) + (", ..." if len(others) > 3 else "")
            raise UnsafeLocationError(
                f"a table may not be created at {where}: the folder is not empty ({shown}); "
                "a table owns its folder, so give it a new or empty one"
            )
    try:
        outer = enclosing_table(storage)
    except NotADirectoryError:
        raise UnsafeLocationError(f"a table may not be created at {where}: a parent is a file") from None
    if outer is not None:
        raise UnsafeLocationError(
            f"a table may not be created at {where}: it is inside the table at {outer}; "
            "tables never nest (the outer table's services would treat the inner one's files as its own)"
        )


def claim_location(storage: Storage, timeline: str | None, kind: str, table_uuid: str) -> str:
    """Check that a new table may live at ``storage`` and write its pointer, or adopt a
    pointer whose table was never created (a create that died between its pointer and
    its first event); the uuid the table gets.

    Adopting is safe against racing creators: they all read the same pointer (written
    whole, :func:`~.stores.pointer.write_pointer`), so they all append the schema instant
    to the same log, where put-if-absent lets one win and the others see a non-empty log.

    Raises:
        UnsafeLocationError: no table may live there (:func:`check_new_location`).
        TableExistsError: a table is there (its log has events, or another kind of timeline).
    """
    exists = TableExistsError(f"a table already exists at {storage.uri}")
    if not storage.exists(pointer_path(storage)):
        check_new_location(storage)
    try:
        write_pointer(storage, table_uuid, kind)
        return table_uuid
    except TableExistsError:
        pass
    try:
        pointer = read_pointer(storage)
        check_timeline_arg(pointer, timeline, storage.uri)
    except (TableNotFoundError, TimelineConfigError):  # not a pointer we may adopt
        raise exists from None
    probe = open_store(storage, timeline, pointer["table_uuid"])
    try:
        if probe.has_events():
            raise exists
    finally:
        probe.close()
    check_new_location(storage)  # adopted only where a new table may live
    return str(pointer["table_uuid"])


def walk_files(storage: Storage) -> Iterator[pafs.FileInfo]:
    """Files of the table's tree: symbolic links are neither followed nor returned,
    nested tables' folders are skipped, and ``.lakeline/`` is left out."""
    top = storage.base
    if storage.is_local:
        yield from _walk_local(storage)
        return
    infos = storage.list_entries(top, recursive=True)
    nested = {
        posixpath.dirname(posixpath.dirname(i.path))
        for i in infos
        if i.path.endswith(f"/{META_DIR}/{POINTER}") and posixpath.dirname(posixpath.dirname(i.path)) != top
    }
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        rel = storage.relative(info.path)
        if rel.split("/", 1)[0] == META_DIR:
            continue
        if any(info.path.startswith(n + "/") for n in nested):
            continue
        yield info


def _walk_local(storage: Storage) -> Iterator[pafs.FileInfo]:
    top = storage.base
    if os.path.islink(top) or not os.path.isdir(top):
        return
    for root, dirs, files in os.walk(top, followlinks=False):
        keep = []
        for d in dirs:
            full = os.path.join(root, d)
            if os.path.islink(full):
                continue
            if root == top and d == META_DIR:
                continue
            if os.path.exists(os.path.join(full, META_DIR, POINTER)):
                continue  # a table moved in by hand: never ours
            keep.append(d)
        dirs[:] = keep
        regular = [os.path.join(root, f) for f in files if not os.path.islink(os.path.join(root, f))]
        if regular:
            yield from (i for i in storage.fs.get_file_info(regular) if i.type == pafs.FileType.File)


def is_own_orphan(rel: str, tag: str) -> bool:
    """Whether ``rel`` is a data file whose name says this table (``tag``) wrote it."""
    parsed = parse_data_file_name(rel)
    return parsed is not None and bool(tag) and parsed.table_tag == tag


@dataclass(frozen=True)
class Purged:
    """What :func:`purge` did: files deleted, and what it left because it is not the table's."""

    deleted: int
    kept: tuple[str, ...]


def purge(storage: Storage, tag: str, referenced: Iterable[str]) -> Purged:
    """Delete a table's own files: ``.lakeline/``, the data files its timeline names
    (``referenced``, relative paths) or whose names carry its ``tag``; then its folders
    that became empty, the base folder included. Anything else stays where it is."""
    named = set(referenced)
    deleted, kept, emptied = 0, [], set()
    for info in walk_files(storage):
        rel = storage.relative(info.path)
        if rel in named or is_own_orphan(rel, tag):
            if storage.delete(info.path):
                deleted += 1
                emptied.add(posixpath.dirname(info.path))
        else:
            kept.append(rel)
    storage.delete_dir(storage.path(META_DIR))
    if storage.is_local:
        _remove_emptied_folders(storage, emptied)
    return Purged(deleted, tuple(sorted(kept)))


def _remove_emptied_folders(storage: Storage, folders: set[str]) -> None:
    """Remove the folders purge took files from, and their parents up to the base
    folder (included), while they are empty: a folder that was empty before, or holds
    anything else, is never touched (rmdir refuses one that is not empty)."""
    todo = set(folders) | {storage.base}
    for folder in sorted(todo, key=lambda f: f.count("/"), reverse=True):
        while folder == storage.base or storage.contains(folder):
            try:
                os.rmdir(folder)
            except OSError:
                break  # not empty: someone else's files, or a nested table, are in it
            if folder == storage.base:
                break
            folder = os.path.dirname(folder)


__all__ = ["Purged", "check_new_location", "claim_location", "enclosing_table", "is_own_orphan", "purge", "walk_files"]
