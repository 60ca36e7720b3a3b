"""Storage access for data files, markers and pointers, through ``pyarrow.fs``.

A table's base path is a local path or any URI ``pyarrow.fs`` understands. All data
I/O goes through one :class:`Storage` so the rest of the code never branches on the
kind of filesystem; only the filesystem event-log store needs a local path (it relies
on ``link(2)`` for put-if-absent).

Deleting is where a table could harm what it does not own, so :meth:`Storage.delete` and
:meth:`Storage.delete_dir` refuse any path that is not strictly below the base path or
that is reached through a symbolic link (docs/safety.md); they log and skip it rather
than raise, so a hostile link cannot wedge a rollback either.
"""

from __future__ import annotations

import logging
import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow.fs as pafs

from ..errors import UnsafeLocationError

log = logging.getLogger(__name__)

#: The folder under a table's base path that holds lakeline's own files (the pointer,
#: the filesystem event log, markers, heartbeats, the metadata table).
META_DIR = ".lakeline"


@dataclass(frozen=True)
class Storage:
    """A filesystem plus the table's base path inside it."""

    fs: pafs.FileSystem
    base: str

    @classmethod
    def for_uri(cls, uri: str | os.PathLike[str]) -> Storage:
        """Resolve a local path or URI to a filesystem and a normalised base path.

        Raises:
            UnsafeLocationError: the empty path (it would silently mean the current folder).
        """
        text = os.fspath(uri)
        if not str(text).strip():
            raise UnsafeLocationError("a table location may not be empty (it would be the current folder)")
        if "://" not in text:
            return cls(pafs.LocalFileSystem(), os.path.realpath(os.path.abspath(text)))
        fs, path = pafs.FileSystem.from_uri(text)
        if isinstance(fs, pafs.LocalFileSystem):
            path = os.path.realpath(path)
        return cls(fs, path.rstrip("/"))

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def uri(self) -> str:
        """A string that names the table everywhere (used as the location in catalogs)."""
        if self.is_local:
            return self.base
        return f"{self.fs.type_name}://{self.base}"

    def path(self, *parts: str) -> str:
        """Absolute path of ``parts`` joined under the base path."""
        return posixpath.join(self.base, *parts)

    def relative(self, path: str) -> str:
        return posixpath.relpath(path, self.base)

    def exists(self, path: str) -> bool:
        return self.fs.get_file_info(path).type != pafs.FileType.NotFound

    def missing(self, paths: Iterable[str]) -> list[str]:
        """Those of ``paths`` that do not exist (one batched metadata call)."""
        paths = list(paths)
        if not paths:
            return []
        infos = self.fs.get_file_info(paths)
        return [i.path for i in infos if i.type == pafs.FileType.NotFound]

    def read_bytes(self, path: str) -> bytes:
        with self.fs.open_input_stream(path) as f:
            return f.read()

    def write_bytes(self, path: str, data: bytes) -> None:
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        with self.fs.open_output_stream(path) as f:
            f.write(data)

    def mkdirs(self, path: str) -> None:
        self.fs.create_dir(path, recursive=True)

    def contains(self, path: str) -> bool:
        """Whether ``path`` lies strictly below the base path and, on a local file system,
        is reached without a symbolic link (its folder is its own real path). A path that
        is not in normal form (``.``, ``..``, ``//``) is refused outright: the system
        resolves ``link/..`` through the link, so its text proves nothing."""
        norm = posixpath.normpath(path)
        root = self.base.rstrip("/") + "/"
        if norm != path or not norm.startswith(root) or norm == root.rstrip("/"):
            return False
        if self.is_local:
            folder = os.path.dirname(norm)
            return os.path.realpath(folder) == folder
        return True

    def delete(self, path: str) -> bool:
        """Delete one file; return False when it was already gone (idempotent), or when
        the path is outside the table (see :meth:`contains`): that is logged, never done."""
        if not self.contains(path):
            log.warning("not deleting %s: outside the table at %s or reached through a symbolic link", path, self.uri)
            return False
        try:
            self.fs.delete_file(path)
            return True
        except FileNotFoundError:
            return False

    def delete_dir(self, path: str) -> None:
        """Delete a folder below the base path and everything in it (a symbolic link in it
        is removed, never followed); a path outside the table is logged and left."""
        if not self.contains(path):
            log.warning(
                "not deleting folder %s: outside the table at %s or reached through a symbolic link", path, self.uri
            )
            return
        if self.is_local and os.path.islink(path):
            os.unlink(path)
            return
        try:
            self.fs.delete_dir(path)
        except FileNotFoundError:
            pass

    def list_files(self, path: str, recursive: bool = False) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
        return [i for i in self.fs.get_file_info(selector) if i.type == pafs.FileType.File]
