"""An object store shown to pyarrow as a file system, so Parquet I/O goes through obstore.

Every reader and writer of Parquet in lakeline (and DuckDB, Polars or pandas through
``Table.to_pyarrow_dataset``) takes a ``pyarrow.fs.FileSystem``. Wrapping
:class:`~.object_store.ObjectStore` in a :class:`pyarrow.fs.PyFileSystem` gives them one
without a second client: reads are ranged GETs through obstore's buffered reader (so a
pruned row group is never fetched), writes stream through its multipart writer and
appear whole when closed. pyarrow's own S3 file system was not used: it writes
``aws-chunked`` bodies that an S3 look-alike (SeaweedFS, unsigned) stored verbatim, and
it has no conditional put anyway (docs/decisions.md).

Folders do not exist on an object store: creating one does nothing, deleting one
removes the objects under it, and a path is a file when an object has that key.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.fs as pafs
from obstore.exceptions import BaseError

from .data_integrity import check_opened
from .object_store import ObjectStore, translate

T = TypeVar("T")
_POOL = ThreadPoolExecutor(16, thread_name_prefix="lakeline-head")


def _forget_pool_in_child() -> None:
    # A forked child has none of the pool's threads, yet the pool thinks they idle and
    # hands them work nobody runs: the child's first HEAD of many paths would hang.
    global _POOL
    _POOL = ThreadPoolExecutor(16, thread_name_prefix="lakeline-head")


os.register_at_fork(after_in_child=_forget_pool_in_child)


def _typed(what: str, fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` on obstore's reader or writer, its errors typed as
    :meth:`ObjectStore._call <.object_store.ObjectStore>` types them: a refused or lost
    upload is a ``StorageAccessError`` (a subclass says which), never a bare ``OSError``."""
    try:
        return fn(*args)
    except (BaseError, OSError) as e:
        raise translate(e, what) from None


class _Reader:
    """obstore's buffered reader as the file object ``pyarrow.PythonFile`` expects."""

    def __init__(self, inner: Any, what: str) -> None:
        self._inner = inner
        self._what = what
        self.closed = False

    def read(self, n: int | None = -1) -> bytes:
        return bytes(_typed(self._what, self._inner.read, None if n is None or n < 0 else n))

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(_typed(self._what, self._inner.seek, offset, whence))

    def tell(self) -> int:
        return int(self._inner.tell())

    def size(self) -> int:
        return int(self._inner.size)

    def close(self) -> None:
        if not self.closed:
            self._inner.close()
            self.closed = True

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False


class _Writer:
    """obstore's multipart writer as a write-only file object; the object appears on close."""

    def __init__(self, inner: Any, what: str) -> None:
        self._inner = inner
        self._what = what
        self._written = 0
        self.closed = False

    def write(self, data: bytes) -> int:
        _typed(self._what, self._inner.write, memoryview(data).cast("B"))  # pyarrow hands buffers of any format
        self._written += len(data)
        return len(data)

    def tell(self) -> int:
        return self._written

    def flush(self) -> None:
        """Buffered until close: a part is sent when the buffer fills."""

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _typed(self._what, self._inner.close)

    def readable(self) -> bool:
        return False

    def seekable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True


class ObjectFilesHandler(pafs.FileSystemHandler):
    """The ``pyarrow.fs`` handler of one bucket; paths are ``bucket/key``."""

    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectFilesHandler) and other.objects == self.objects

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __reduce__(self) -> tuple[Any, ...]:
        return (ObjectFilesHandler, (self.objects,))

    def get_type_name(self) -> str:
        return self.objects.location.scheme

    def normalize_path(self, path: str) -> str:
        return path.strip("/")

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        # One HEAD per path: many paths (a time-travel read checking its files) at once.
        if len(paths) > 2:
            return list(_POOL.map(self._info, paths))
        return [self._info(p) for p in paths]

    def _info(self, path: str) -> pafs.FileInfo:
        info = self.objects.head(path) if "/" in path.strip("/") else None
        if info is not None:
            return pafs.FileInfo(path, pafs.FileType.File, mtime=info.modified, size=info.size)
        if self._first(path):
            return pafs.FileInfo(path, pafs.FileType.Directory)
        return pafs.FileInfo(path, pafs.FileType.NotFound)

    def _first(self, folder: str) -> list[str]:
        if "/" not in folder.strip("/"):
            return [""]  # the bucket itself
        for item in self.objects.list(folder):
            return [item.path]
        return []

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        base = selector.base_dir.strip("/")
        infos: list[pafs.FileInfo] = []
        folders: set[str] = set()
        for item in self.objects.list(base):
            path = item.path
            rest = path[len(base) + 1 :]
            if not selector.recursive and "/" in rest:
                folders.add(f"{base}/{rest.split('/', 1)[0]}")
                continue
            if selector.recursive:
                parts = rest.split("/")[:-1]
                folders.update(f"{base}/{'/'.join(parts[: i + 1])}" for i in range(len(parts)))
            infos.append(pafs.FileInfo(path, pafs.FileType.File, mtime=item.modified, size=item.size))
        infos += [pafs.FileInfo(f, pafs.FileType.Directory) for f in sorted(folders)]
        return infos

    def create_dir(self, path: str, recursive: bool) -> None:
        """Nothing to do: a folder exists as soon as an object is under it."""

    def delete_dir(self, path: str) -> None:
        self.delete_dir_contents(path, missing_dir_ok=True)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        for item in list(self.objects.list(path)):
            self.objects.delete(item.path)

    def delete_root_dir_contents(self) -> None:
        raise PermissionError("lakeline never empties a whole bucket")

    def delete_file(self, path: str) -> None:
        if self.objects.head(path) is None:
            raise FileNotFoundError(path)
        self.objects.delete(path)

    def move(self, src: str, dest: str) -> None:
        # Nothing in lakeline renames on an object store (a copy and a delete is not
        # atomic): a caller that gets here has a bug.
        raise NotImplementedError(f"no rename on an object store ({src} -> {dest})")

    def copy_file(self, src: str, dest: str) -> None:
        self.objects.put(dest, self.objects.get(src))

    def open_input_stream(self, path: str) -> pa.NativeFile:
        return pa.BufferReader(self.objects.get(path))

    def open_input_file(self, path: str) -> pa.NativeFile:
        reader = self.objects.open_reader(path)
        try:
            # A data file whose commit recorded another size was swapped or cut short: the
            # size is the one of the HEAD the reader sent anyway (lakeline.timeline.storage.data_integrity).
            check_opened(path, int(reader.size))
        except BaseException:
            reader.close()
            raise
        return pa.PythonFile(_Reader(reader, f"GET {path}"), mode="r")

    def open_output_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        return pa.PythonFile(_Writer(self.objects.open_writer(path), f"PUT {path}"), mode="w")

    def open_append_stream(self, path: str, metadata: Any) -> pa.NativeFile:
        raise NotImplementedError("objects cannot be appended to")


def object_file_system(objects: ObjectStore) -> pafs.PyFileSystem:
    """A ``pyarrow.fs`` file system over ``objects``."""
    return pafs.PyFileSystem(ObjectFilesHandler(objects))


__all__ = ["ObjectFilesHandler", "object_file_system"]
