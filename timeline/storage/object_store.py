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
still finds what lakeline does not map, such as container or web-identity credentials). Every credential
given is registered with :func:`~..diagnostics.redact.register_secret`, and every error
of the store is re-raised as a :class:`~..errors.StorageAccessError` (or the builtin a
caller expects: ``FileNotFoundError``, ``FileExistsError``) with its text redacted.
"""

from __future__ import annotations

import datetime
import os
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import obstore
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    NotFoundError,
    PermissionDeniedError,
    PreconditionError,
    UnauthenticatedError,
)

from ..diagnostics.redact import redact, register_secret
from ..errors import (
    BucketNotFoundError,
    ObjectChangedError,
    StorageAccessError,
    StorageConfigError,
    StoragePermissionError,
    StorageUnreachableError,
)
from . import fork_guard

#: URI scheme -> the store kind obstore builds for it.
SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs", "az": "azure", "abfs": "azure", "abfss": "azure"}

# deltalake's S3 keys (and object_store's own names) -> obstore's S3Store arguments.
_S3_KEYS = {
    "aws_endpoint_url": "endpoint",
    "aws_endpoint": "endpoint",
    "endpoint": "endpoint",
    "aws_access_key_id": "access_key_id",
    "access_key_id": "access_key_id",
    "aws_secret_access_key": "secret_access_key",
    "secret_access_key": "secret_access_key",
    "aws_session_token": "session_token",
    "aws_token": "session_token",
    "session_token": "session_token",
    "aws_region": "region",
    "region": "region",
    "aws_default_region": "default_region",
    "aws_skip_signature": "skip_signature",
    "aws_virtual_hosted_style_request": "virtual_hosted_style_request",
    "aws_unsigned_payload": "unsigned_payload",
    "aws_request_payer": "request_payer",
    "aws_sts_endpoint": "sts_endpoint",
    "aws_role_arn": "role_arn",
    "aws_web_identity_token_file": "web_identity_token_file",
    "aws_server_side_encryption": "server_side_encryption",
    "aws_sse_kms_key_id": "sse_kms_key_id",
}
_GCS_KEYS = {
    "google_service_account": "service_account",
    "google_service_account_path": "service_account_path",
    "google_service_account_key": "service_account_key",
    "google_application_credentials": "application_credentials",
}
_AZURE_KEYS = {
    "azure_storage_account_name": "account_name",
    "azure_storage_account_key": "account_key",
    "azure_storage_sas_token": "sas_key",
    "azure_storage_token": "token",
    "azure_storage_client_id": "client_id",
    "azure_storage_client_secret": "client_secret",
    "azure_storage_tenant_id": "tenant_id",
    "azure_storage_use_emulator": "use_emulator",
    "azure_storage_endpoint": "endpoint",
}
_KEYS = {"s3": _S3_KEYS, "gcs": _GCS_KEYS, "azure": _AZURE_KEYS}
# Client options every store takes (deltalake spells the first with the AWS_ prefix).
_CLIENT_KEYS = {
    "aws_allow_http": "allow_http",
    "allow_http": "allow_http",
    "timeout": "timeout",
    "connect_timeout": "connect_timeout",
    "allow_invalid_certificates": "allow_invalid_certificates",
    "aws_allow_invalid_certificates": "allow_invalid_certificates",
}
_BOOLEAN = {"allow_http", "allow_invalid_certificates", "skip_signature", "virtual_hosted_style_request"}
_BOOLEAN |= {"unsigned_payload", "use_emulator"}
#: Options that are URLs (checked before obstore sees them, see :func:`_check_url`).
_URLS = {"endpoint", "sts_endpoint"}
# Blanks, controls and what a URL never holds unescaped: obstore's URI parser refuses them.
_BAD_URL_CHARS = re.compile(r"[\s\x00-\x1f\x7f<>\"{}|\\^`]")
_SECRETS = {"secret_access_key", "session_token", "service_account_key", "account_key", "sas_key", "token"}
_SECRETS |= {"client_secret"}
#: deltalake keys that name a lock service lakeline does not need (its commits are
#: conditional puts): accepted and ignored, so a deltalake configuration works unchanged.
_IGNORED = {"aws_s3_locking_provider", "dynamo_table_name", "aws_conditional_put", "conditional_put"}
#: Retries of one request (throttling, 5xx, a lost connection): obstore backs off
#: exponentially; the timeout bounds how long an unreachable endpoint holds a caller.
#: A file larger than this goes up in parts of this size while the rest is still being
#: written (S3's smallest part), so a Parquet file's upload overlaps its encoding instead
#: of starting at close.
PART_SIZE = 5 * 1024 * 1024
RETRY = {"max_retries": 5, "retry_timeout": datetime.timedelta(seconds=15)}


@dataclass(frozen=True)
class Location:
    """A parsed object-store URI: ``s3://bucket/prefix``."""

    scheme: str
    kind: str
    bucket: str
    prefix: str

    @classmethod
    def parse(cls, uri: str) -> Location:
        """Raises: StorageConfigError: a scheme lakeline does not reach, or no bucket."""
        scheme, _, rest = uri.partition("://")
        kind = SCHEMES.get(scheme.lower())
        if kind is None:
            raise StorageConfigError(
                f"lakeline cannot reach {scheme}:// locations; use a local path or s3://, gs://, az:// (abfs://)"
            )
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise StorageConfigError(f"{redact(uri)} names no bucket")
        if kind == "s3" and not _S3_BUCKET.fullmatch(bucket):
            raise StorageConfigError(
                f"{redact(uri)}: {bucket!r} is not a valid S3 bucket name (3 to 63 lowercase letters, digits, "
                "dots and hyphens, beginning and ending with a letter or digit)"
            )
        prefix = prefix.strip("/")
        _check_key_path(uri, prefix)
        return cls(scheme.lower(), kind, bucket, prefix)


#: S3's rule for bucket names (docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html).
#: A name outside it can only be refused by the store, and S3 answers that with 403, which
#: reads as a credentials problem; checked here, it is named for what it is.
_S3_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
#: Characters obstore refuses in a key (it parses every path it is given): controls.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _check_key_path(uri: str, prefix: str) -> None:
    """Refuse a location prefix obstore cannot hold as a key, before anything is written.

    Object keys are literal: ``a/../b`` is not ``b`` on a store (nothing there resolves
    ``..``), and obstore refuses ``.``, ``..`` and empty segments outright, so normalizing
    would make a second spelling of one table; a clear refusal keeps one name per table.

    Raises:
        StorageConfigError: a segment ``.`` or ``..``, an empty one (``//``), or a control character.
    """
    for segment in prefix.split("/") if prefix else ():
        if segment in ("", ".", ".."):
            shown = "an empty segment (//)" if not segment else f"the segment {segment!r}"
            raise StorageConfigError(
                f"{redact(uri)}: {shown} is not allowed in an object-store location "
                "(object keys are taken literally, never resolved); spell the path without it"
            )
        if _CONTROL.search(segment):
            raise StorageConfigError(f"{redact(uri)}: an object-store location may not hold a control character")


_ENV_PREFIXES = {"s3": ("AWS_",), "gcs": ("GOOGLE_",), "azure": ("AZURE_",)}


def environment_options(kind: str) -> dict[str, str]:
    """The options of ``kind`` set in the environment (``AWS_ENDPOINT_URL``, ...): what a
    location takes for the keys its ``storage_options`` leave out, as every AWS tool does."""
    known = _KEYS[kind].keys() | _CLIENT_KEYS.keys() | _IGNORED
    return {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES[kind]) and k.lower() in known and v != ""}


def _flag(key: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise StorageConfigError(f"storage option {key} must be true or false, not {redact(repr(value))}")


def _check_url(key: str, url: str) -> None:
    """Refuse an endpoint obstore cannot parse: it panics on one at the first request
    (a ``PanicException``, which is not an ``Exception``, with a Rust backtrace), so the
    URL is checked here, where a typed error can still name the option.

    Raises:
        StorageConfigError: not ``http(s)://host[:port]``, or a port outside 1-65535.
    """
    shown = redact(url)
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError for a port out of range or not a number
    except ValueError as e:  # "Port out of range 0-65535", "Port could not be cast to integer value"
        raise StorageConfigError(f"storage option {key} is not a valid URL ({e}): {shown!r}") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or _BAD_URL_CHARS.search(url):
        raise StorageConfigError(f"storage option {key} must be an http:// or https:// URL with a host, not {shown!r}")
    if port == 0:
        raise StorageConfigError(f"storage option {key} names port 0 in {shown!r}; a port is 1-65535")


def store_arguments(kind: str, options: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """obstore's (store config, client options) for deltalake-style ``options``.

    Raises:
        StorageConfigError: an unknown key (named, never its value) or a malformed flag.
    """
    config: dict[str, Any] = {}
    client: dict[str, Any] = {}
    names = _KEYS[kind]
    for key, value in (options or {}).items():
        low = str(key).strip().lower()
        if low in _IGNORED:
            continue
        if low in _CLIENT_KEYS:
            name = _CLIENT_KEYS[low]
            client[name] = _flag(key, value) if name in _BOOLEAN else str(value)
        elif low in names:
            name = names[low]
            config[name] = _flag(key, value) if name in _BOOLEAN else str(value)
            if name in _URLS:
                _check_url(key, config[name])
        else:
            raise StorageConfigError(f"unknown storage option {key!r} for a {kind} location (docs/object-storage.md)")
        if name in _SECRETS or name == "access_key_id":
            register_secret(str(value))
    return config, client


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
        self._client_obj: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"ObjectStore({self.location.scheme}://{self.location.bucket})"

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
