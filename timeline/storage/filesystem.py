"""Storage access for data files, markers and pointers, through ``pyarrow.fs``.

A table's base path is a local path or an object-store URI (``s3://bucket/prefix``,
``gs://``, ``az://``). All data I/O goes through one :class:`Storage` so the rest of the
code never branches on the kind of storage: on an object store its file system is
obstore's (:mod:`.object_files`) and :attr:`Storage.objects` adds the conditional puts
the event log, locks and pointer need (:mod:`.object_store`). Nothing renames on an
object store: :meth:`Storage.written_whole` writes aside and renames on a local disk and
writes in place on a store, where a put appears whole.

Deleting is where a table could harm what it does not own, so :meth:`Storage.delete` and
:meth:`Storage.delete_dir` refuse any path that is not strictly below the base path or
that is reached through a symbolic link (docs/safety.md); they log and skip it rather
than raise, so a hostile link cannot wedge a rollback either.
"""

from __future__ import annotations

import errno
import logging
import os
import posixpath
import stat
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.fs as pafs

from ..errors import StorageConfigError, UnsafeLocationError

if TYPE_CHECKING:
    from .object_store import ObjectStore

#: URI schemes of object stores (obstore's, imported only when a table lives on one).
OBJECT_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"})

log = logging.getLogger(__name__)

#: The folder under a table's base path that holds lakeline's own files (the pointer,
#: the filesystem event log, markers, heartbeats, the metadata table).
META_DIR = ".lakeline"


@dataclass(frozen=True)
class Storage:
    """A filesystem plus the table's base path inside it (``bucket/prefix`` on an object
    store, whose client :attr:`objects` then is)."""

    fs: pafs.FileSystem
    base: str
    objects: ObjectStore | None = field(default=None, repr=False)

    @classmethod
    def for_uri(cls, uri: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None) -> Storage:
        """Resolve a local path or URI to a filesystem and a normalised base path.

        ``storage_options`` configure an object store (deltalake's keys, docs/object-storage.md);
        a local path ignores them.

        Raises:
            UnsafeLocationError: the empty path (it would silently mean the current folder).
            StorageConfigError: a scheme lakeline does not reach, or a bad storage option.
        """
        text = os.fspath(uri)
        if not str(text).strip():
            raise UnsafeLocationError("a table location may not be empty (it would be the current folder)")
        if "://" not in text:
            return cls(pafs.LocalFileSystem(), os.path.realpath(os.path.abspath(text)))
        if text.split("://", 1)[0].lower() in OBJECT_SCHEMES:
            from .object_files import object_file_system
            from .object_store import Location, ObjectStore

            location = Location.parse(text)
            objects = ObjectStore(location, storage_options)
            base = f"{location.bucket}/{location.prefix}".rstrip("/")
            return cls(object_file_system(objects), base, objects)
        if not text.lower().startswith("file://"):
            raise StorageConfigError(
                f"lakeline cannot reach {text.split('://', 1)[0]}:// locations; "
                "use a local path or s3://, gs://, az:// (abfs://)"
            )
        fs, path = pafs.FileSystem.from_uri(text)
        return cls(fs, os.path.realpath(path).rstrip("/"))

    @property
    def is_object_store(self) -> bool:
        return self.objects is not None

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    @property
    def uri(self) -> str:
        """A string that names the table everywhere (used as the location in catalogs)."""
        if self.objects is not None:
            return f"{self.objects.location.scheme}://{self.base}"
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
        if self.objects is not None:
            self.objects.put(path, data)
            return
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        with self.fs.open_output_stream(path) as f:
            f.write(data)

    @contextmanager
    def written_whole(self, path: str) -> Iterator[str]:
        """A path to write ``path``'s new content at; when the block ends without an
        error the content is at ``path``, and a reader never saw half of it. On a local
        disk it is written aside and renamed; on an object store a put is atomic, so it
        is written in place (nothing renames there). The folder must exist."""
        if self.objects is not None:
            yield path
            return
        # No folder is made here: a caller that writes into a folder someone removed
        # (a late beat of a finished write) must fail, not bring the folder back.
        aside = f"{path}.{uuid.uuid4().hex}.tmp"
        try:
            yield aside
            self.fs.move(aside, path)
        finally:
            if self.exists(aside):
                self.fs.delete_file(aside)

    def replace_bytes(self, path: str, data: bytes) -> None:
        """Write ``path`` whole: a reader sees the old content or the new one."""
        with self.written_whole(path) as target:
            with self.fs.open_output_stream(target) as f:
                f.write(data)

    def create_bytes(self, path: str, data: bytes) -> None:
        """Write ``path`` only if nothing is there, whole (the put-if-absent of a pointer or a
        claim): link(2) of a finished file on a local disk, a create-only put on a store.

        Raises:
            FileExistsError: something is at ``path``.
        """
        if self.objects is not None:
            self.objects.create(path, data)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{uuid.uuid4().hex}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.link(tmp, path)
        finally:
            os.unlink(tmp)

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

    def delete_objects(self, paths: Sequence[str]) -> None:
        """Delete objects of an object store by name (no error for one that is gone), in
        bulk requests; a path outside the table is logged and left, as by :meth:`delete`."""
        assert self.objects is not None, "only an object store deletes by name alone"
        inside = [p for p in paths if self.contains(p)]
        for p in set(paths) - set(inside):
            log.warning("not deleting %s: outside the table at %s", p, self.uri)
        self.objects.delete_many(inside)

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
        for attempt in range(5):
            try:
                self.fs.delete_dir(path)
                return
            except FileNotFoundError:
                return
            except OSError as e:
                # A file landed while the tree was being removed (a late metadata-table
                # write into a dropped index's folder): remove again. What lands after the
                # last try is a leftover the cleaner finds.
                not_empty = e.errno == errno.ENOTEMPTY or "Directory not empty" in str(e)
                if not not_empty or attempt == 4:
                    raise
                time.sleep(0.01 * (attempt + 1))

    def list_entries(self, path: str, recursive: bool = False) -> list[pafs.FileInfo]:
        """What a folder holds; nothing when it is not there.

        pyarrow's local listing is not atomic against another process: it opens the folder,
        and when that fails it asks whether the folder exists. A folder made (or a subfolder
        removed) between the two is reported as ENOENT although the listing is well defined
        either way. On a local disk the listing is then taken with ``os.scandir``, which
        treats a folder or entry that vanished mid-listing as absent; a retry alone lost
        five races in a row in CI against a process making and removing the folder."""
        selector = pafs.FileSelector(path, allow_not_found=True, recursive=recursive)
        try:
            return self.fs.get_file_info(selector)
        except FileNotFoundError:
            if not self.is_local:
                raise
        return _scan_local(path, recursive)

    def list_files(self, path: str, recursive: bool = False) -> list[pafs.FileInfo]:
        return [i for i in self.list_entries(path, recursive) if i.type == pafs.FileType.File]


def _scan_local(path: str, recursive: bool) -> list[pafs.FileInfo]:
    """A local folder's entries as ``FileInfo``s; what vanishes while it is read is left out.

    Types follow symbolic links as pyarrow's listing does, but the walk does not descend
    through one (a link cannot make a table's listing reach outside it)."""
    infos: list[pafs.FileInfo] = []
    folders = [path]
    while folders:
        folder = folders.pop()
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            try:
                st = entry.stat()
            except FileNotFoundError:
                continue
            child = posixpath.join(folder, entry.name)
            if stat.S_ISDIR(st.st_mode):
                infos.append(pafs.FileInfo(child, pafs.FileType.Directory, mtime_ns=st.st_mtime_ns))
                if recursive and not entry.is_symlink():
                    folders.append(child)
            else:
                infos.append(pafs.FileInfo(child, pafs.FileType.File, size=st.st_size, mtime_ns=st.st_mtime_ns))
    return infos
