"""One bucket of an object store (S3, GCS, Azure) through obstore, with typed errors.

pyarrow's object-store file systems cannot write conditionally (apache/arrow#44281), and
a table whose event log lives next to its data needs exactly that: a create-only put
(``If-None-Match: *``) appends an event, a put that names the ETag it read
(``If-Match``) moves a lock or a mark. obstore (object_store, the Rust crate delta-rs
commits with) has both, for S3, GCS and Azure alike, and is fast enough to carry the
data files too (:mod:`.object_files` shows it to pyarrow as a file system), so one
client reaches the whole table.

:class:`ObjectStore` is one bucket with its options. It is picklable (Spark executors
and worker processes rebuild the client from the options; nothing is ever written to
disk from them) and its repr names the bucket only. The options are the keys deltalake
takes (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_REGION``, ``AWS_ALLOW_HTTP``, ...), case-insensitive; a key that is absent comes
from the environment variable of that name, as every AWS tool reads it (and obstore
still finds what lakeline does not map, such as container or web-identity credentials);
:mod:`.store_options` reads and checks them, registering every credential with
:func:`~..diagnostics.redact.register_secret`. Every error
of the store is re-raised as a :class:`~..errors.StorageAccessError` (or the builtin a
caller expects: ``FileNotFoundError``, ``FileExistsError``) with its text redacted.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)

from ..diagnostics.redact import redact
from ..errors import (
    BucketNotFoundError,
    ObjectChangedError,
    StorageAccessError,
    StorageConfigError,
    StoragePermissionError,
    StorageUnreachableError,
)
from . import fork_guard
from .store_options import (
    SCHEMES,
    Location,
    check_credentials,
    environment_options,
    instance_credentials,
    is_instance_metadata_failure,
    no_instance_credentials,
    store_arguments,
)

#: Retries of one request (throttling, 5xx, a lost connection): obstore backs off
#: exponentially; the timeout bounds how long an unreachable endpoint holds a caller.
#: A file larger than this goes up in parts of this size while the rest is still being
#: written (S3's smallest part), so a Parquet file's upload overlaps its encoding instead
#: of starting at close.
PART_SIZE = 5 * 1024 * 1024
RETRY = {"max_retries": 5, "retry_timeout": datetime.timedelta(seconds=15)}


def _message(err: BaseException) -> str:
    # obstore's text ends in a multi-line debug dump; the first part says what happened.
    text = str(err).split("\n\nDebug source:", 1)[0]
    return redact(text[:600])


def translate(err: BaseException, what: str) -> BaseException:
    """The error a caller of :class:`ObjectStore` sees for an obstore error."""
    text = str(err)
    if isinstance(err, NotFoundError | FileNotFoundError):
        if "NoSuchBucket" in text:
            return BucketNotFoundError(f"{what}: the bucket does not exist ({_message(err)})")
        return FileNotFoundError(what)
    if isinstance(err, AlreadyExistsError | FileExistsError):
        return FileExistsError(what)
    if isinstance(err, PermissionDeniedError | UnauthenticatedError) or "403 Forbidden" in text:
        return StoragePermissionError(f"{what}: the store refused the credentials or the request ({_message(err)})")
    if "NoSuchBucket" in text:
        return BucketNotFoundError(f"{what}: the bucket does not exist ({_message(err)})")
    if "error sending request" in text or "Connection refused" in text or "timed out" in text:
        return StorageUnreachableError(f"{what}: the store does not answer ({_message(err)})")
    return StorageAccessError(f"{what}: {_message(err)}")


def is_panic(err: BaseException) -> bool:
    """Whether ``err`` is a Rust panic of obstore (``pyo3_runtime.PanicException``, a
    ``BaseException``): never a reason to stop the process, always a bug or a bad option."""
    return type(err).__name__ == "PanicException" and type(err).__module__ == "pyo3_runtime"


@dataclass(frozen=True)
class ObjectInfo:
    """An object's path (``bucket/key``), size and last modification."""

    path: str
    size: int
    modified: datetime.datetime


class ObjectStore:
    """One bucket of an object store, reached through obstore."""

    def __init__(self, location: Location, options: Mapping[str, Any] | None = None) -> None:
        self.location = location
        given = {str(k).strip().lower(): v for k, v in (options or {}).items()}
        env = {k: v for k, v in environment_options(location.kind).items() if k.lower() not in given}
        self._options = env | dict(options or {})
        self._config, self._client = store_arguments(location.kind, self._options)
        check_credentials(self._uri, location.kind, self._config)
        # No credentials given: obstore asks the EC2 instance metadata service, whose
        # failure is then said as what it is (the options to set), not as a refusal.
        self._instance_credentials = instance_credentials(location.kind, self._config)
        self._client_obj: Any = None
        self._lock = threading.Lock()

    @property
    def _uri(self) -> str:
        return f"{self.location.scheme}://{self.location.bucket}"

    def __repr__(self) -> str:
        return f"ObjectStore({self._uri})"

    def __copy__(self) -> ObjectStore:
        """The same bucket and options with a client of its own."""
        return ObjectStore(self.location, self._options)

    def __getstate__(self) -> dict[str, Any]:
        return {"location": self.location, "options": self._options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["location"], state["options"])  # type: ignore[misc]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectStore) and (other.location, other._options) == (self.location, self._options)

    def __hash__(self) -> int:
        return hash(self.location)

    @property
    def endpoint(self) -> str:
        """Where requests go (the configured endpoint, or the cloud's default)."""
        return str(self._config.get("endpoint", f"{self.location.kind} default endpoint"))

    @property
    def client(self) -> Any:
        """The obstore client, built on first use and shared by every thread: it is
        thread-safe and keeps a pool of connections, so parallel requests (a probe's
        window of slots) reuse warm connections instead of each thread opening its own."""
        fork_guard.reach(repr(self))
        client = self._client_obj
        if client is None:
            with self._lock:
                if self._client_obj is None:
                    self._client_obj = self._build()
                client = self._client_obj
        return client

    def _build(self) -> Any:
        from obstore.store import AzureStore, GCSStore, S3Store

        cls = {"s3": S3Store, "gcs": GCSStore, "azure": AzureStore}[self.location.kind]
        try:
            return cls(self.location.bucket, config=self._config, client_options=self._client, retry_config=RETRY)
        except BaseError as e:
            raise StorageConfigError(f"cannot configure {self!r}: {_message(e)}") from None

    def _key(self, path: str) -> str:
        """The object key of a ``bucket/key`` path (pyarrow's convention for object stores)."""
        bucket, _, key = path.partition("/")
        if bucket != self.location.bucket or not key:
            raise StorageConfigError(f"{path!r} is not in bucket {self.location.bucket!r}")
        return key

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(self.client, *args, **kwargs)
        except PreconditionError:
            raise ObjectChangedError(f"{what}: the object changed since it was read") from None
        except (BaseError, OSError) as e:
            if self._instance_credentials and is_instance_metadata_failure(str(e)):
                raise no_instance_credentials(self._uri, self._config, _message(e)) from None
            raise translate(e, what) from None
        except ValueError as e:  # obstore refuses a key it cannot parse (Location.parse refuses most first)
            raise StorageConfigError(f"{what}: {_message(e)}") from None
        except BaseException as e:
            if not is_panic(e):
                raise
            raise StorageConfigError(f"{what}: the object-store client failed on its options ({_message(e)})") from None

    # -- the operations lakeline needs; paths are ``bucket/key`` -------------------

    def get(self, path: str) -> bytes:
        """Raises: FileNotFoundError: no such object."""
        return bytes(self._call(f"GET {path}", obstore.get, self._key(path)).bytes())

    def get_tagged(self, path: str) -> tuple[bytes, str] | None:
        """The object's bytes and its ETag, or None when there is none."""
        try:
            result = self._call(f"GET {path}", obstore.get, self._key(path))
        except FileNotFoundError:
            return None
        return bytes(result.bytes()), str(result.meta["e_tag"])

    def head(self, path: str) -> ObjectInfo | None:
        """The object's size and time, or None when there is none."""
        try:
            meta = self._call(f"HEAD {path}", obstore.head, self._key(path))
        except FileNotFoundError:
            return None
        return ObjectInfo(path, int(meta["size"]), meta["last_modified"])

    def put(self, path: str, data: bytes) -> str:
        """Write the object whole (readers see the old one or the new one); its ETag."""
        return str(self._call(f"PUT {path}", obstore.put, self._key(path), data)["e_tag"])

    def create(self, path: str, data: bytes) -> str:
        """Write the object only if there is none (``If-None-Match: *``); its ETag.

        Raises:
            FileExistsError: the object exists.
        """
        try:
            return str(self._call(f"PUT {path}", obstore.put, self._key(path), data, mode="create")["e_tag"])
        except ObjectChangedError:  # some stores answer 412 rather than 409
            raise FileExistsError(path) from None

    def replace(self, path: str, data: bytes, etag: str) -> str:
        """Overwrite the object only if its ETag is still ``etag``; the new ETag.

        Raises:
            ObjectChangedError: someone wrote (or removed) it since.
        """
        try:
            return str(self._call(f"PUT {path}", obstore.put, self._key(path), data, mode={"e_tag": etag})["e_tag"])
        except FileNotFoundError:
            raise ObjectChangedError(f"PUT {path}: the object was removed since it was read") from None

    def delete(self, path: str) -> None:
        """Remove the object (no error when it is gone)."""
        self._call(f"DELETE {path}", obstore.delete, self._key(path))

    def delete_many(self, paths: Sequence[str]) -> None:
        """Remove the objects (none an error when gone): one DELETE for one, a bulk
        delete (up to 1,000 keys a request) for more."""
        if len(paths) == 1:
            self.delete(paths[0])
        elif paths:
            self._call(f"DELETE {len(paths)} objects", obstore.delete, [self._key(p) for p in paths])

    def list(self, prefix_path: str) -> Iterator[ObjectInfo]:
        """Every object under ``prefix_path`` (a folder; the bucket itself lists the whole bucket)."""
        root = prefix_path.strip("/") == self.location.bucket
        prefix = None if root else self._key(prefix_path.rstrip("/") + "/")
        pages = self._call(f"LIST {prefix_path}", lambda c: list(obstore.list(c, prefix=prefix)))
        for page in pages:
            for meta in page:
                yield ObjectInfo(f"{self.location.bucket}/{meta['path']}", int(meta["size"]), meta["last_modified"])

    def open_reader(self, path: str, size: int | None = None) -> Any:
        return self._call(f"GET {path}", obstore.open_reader, self._key(path), buffer_size=1 << 20)

    def open_writer(self, path: str) -> Any:
        return self._call(f"PUT {path}", obstore.open_writer, self._key(path), buffer_size=PART_SIZE)


__all__ = ["SCHEMES", "Location", "ObjectInfo", "ObjectStore", "store_arguments", "translate"]
