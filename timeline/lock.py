"""Lease-based locks: a liveness aid, never a safety mechanism.

The table lock keeps planners from stepping on each other and cuts retries, but every
completion is still a put-if-absent after validation, so a lock that is lost (its lease
ran out while the holder was paused) can cost a retry, never correctness. A lease that
is not renewed expires, so a crashed holder cannot block a table for longer than
``lock.lease-ms``.

:class:`FileLock` keeps the lease in a file created exclusively; an expired lease is
broken by renaming it away (only one breaker's rename can succeed) before taking it; a
breaker that finds it renamed a lease other than the expired one it read puts it back.
:class:`ObjectLock` keeps it in an object on an object store, which cannot rename: it
is created with a create-only put and every later change (renew, take over an expired
lease, release) is a put that names the ETag it read, so of two racing changes one wins.
A renewal refused as changed reads the lease back first: the refusal may be the client
retrying a put whose answer was lost, and a healthy holder is not told it lost the lock.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from abc import ABC, abstractmethod
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from .errors import LockLostError, LockTimeoutError, ObjectChangedError

if TYPE_CHECKING:
    from .storage.object_store import ObjectStore


class Lock(ABC):
    """A named, lease-based, non-reentrant lock."""

    def __init__(self, lease_ms: int) -> None:
        self.lease_ms = lease_ms
        self.owner = uuid.uuid4().hex

    @abstractmethod
    def try_acquire(self) -> bool:
        """Take the lock if it is free or its lease expired; return whether we hold it."""

    @abstractmethod
    def renew(self) -> None:
        """Extend our lease.

        Raises:
            LockLostError: the lease expired and someone else holds the lock.
        """

    @abstractmethod
    def release(self) -> None:
        """Give the lock up if we hold it."""

    def acquire(self, timeout_s: float = 60.0, poll_s: float = 0.005) -> Lock:
        """Block until the lock is ours.

        Raises:
            LockTimeoutError: not acquired within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        delay = poll_s
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                raise LockTimeoutError(f"lock {self!r} not acquired within {timeout_s:.1f}s")
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        return self

    def __enter__(self) -> Lock:
        return self.acquire()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


class FileLock(Lock):
    """A lease kept in a file: ``{"owner": ..., "expires_us": ...}``."""

    def __init__(self, path: str | os.PathLike[str], lease_ms: int) -> None:
        super().__init__(lease_ms)
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"FileLock({str(self.path)!r})"

    def _lease(self) -> bytes:
        expires = time.time_ns() // 1000 + self.lease_ms * 1000
        return json.dumps({"owner": self.owner, "expires_us": expires}).encode()

    def _read(self) -> dict[str, object] | None:
        return _lease_in(self.path, self.lease_ms)

    def try_acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            held = self._read()
            if held is None:
                return False  # released between our attempts; try again on the next poll
            expires = held.get("expires_us", 0) if held else 0
            if held and held.get("owner") == self.owner:
                return True
            if isinstance(expires, int) and expires > time.time_ns() // 1000:
                return False
            broken = self.path.with_name(f"{self.path.name}.broken-{uuid.uuid4().hex}")
            try:
                os.rename(self.path, broken)
            except FileNotFoundError:
                return False
            moved = _lease_in(broken, self.lease_ms)
            if moved != held:
                # Between our read and the rename another breaker replaced the expired
                # lease with a live one (or its owner renewed it): that is not ours to
                # break, so put it back, unless yet another lease already took its place.
                try:
                    os.link(broken, self.path)
                except FileExistsError:
                    pass
            os.unlink(broken)
            return False  # the next poll creates it afresh
        try:
            os.write(fd, self._lease())
        finally:
            os.close(fd)
        return True

    def renew(self) -> None:
        held = self._read()
        if not held or held.get("owner") != self.owner:
            raise LockLostError(f"{self!r} is no longer held by this owner")
        tmp = self.path.with_name(f"{self.path.name}.renew-{self.owner}")
        tmp.write_bytes(self._lease())
        os.replace(tmp, self.path)

    def release(self) -> None:
        held = self._read()
        if held and held.get("owner") == self.owner:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


def _lease_in(path: Path, lease_ms: int) -> dict[str, object] | None:
    """The lease a lock file holds, None when there is no file.

    A file that is empty or half-written was created by a holder that is writing it
    right now or died between creating and writing it (kill -9): its lease ends
    ``lease_ms`` after the file was made. (Read as "no lease", such a file used to wedge
    the lock for good.)
    """
    try:
        raw = path.read_bytes()
        made_us = path.stat().st_mtime_ns // 1000
    except FileNotFoundError:
        return None
    try:
        held = json.loads(raw)
    except ValueError:
        held = None
    if isinstance(held, dict):
        return held
    return {"expires_us": made_us + lease_ms * 1000}


class ObjectLock(Lock):
    """A lease kept in an object, ``{"owner": ..., "expires_us": ...}``, moved by ETag."""

    def __init__(self, objects: ObjectStore, path: str, lease_ms: int) -> None:
        super().__init__(lease_ms)
        self.objects = objects
        self.path = path

    def __repr__(self) -> str:
        return f"ObjectLock({self.path!r})"

    def _lease(self, expires_us: int | None = None) -> bytes:
        expires = time.time_ns() // 1000 + self.lease_ms * 1000 if expires_us is None else expires_us
        return json.dumps({"owner": self.owner, "expires_us": expires}).encode()

    def _read(self) -> tuple[dict[str, object], str] | None:
        held = self.objects.get_tagged(self.path)
        if held is None:
            return None
        try:
            lease = json.loads(held[0])
        except ValueError:
            lease = None
        # Unreadable: a put is whole, so only a foreign writer makes one; treat as expired.
        return (lease if isinstance(lease, dict) else {"expires_us": 0}), held[1]

    def try_acquire(self) -> bool:
        held = self._read()
        try:
            if held is None:
                self.objects.create(self.path, self._lease())
                return True
            lease, etag = held
            expires = lease.get("expires_us", 0)
            if lease.get("owner") != self.owner and isinstance(expires, int) and expires > time.time_ns() // 1000:
                return False
            self.objects.replace(self.path, self._lease(), etag)
            return True
        except (FileExistsError, ObjectChangedError):
            return False  # another process moved it first

    def renew(self) -> None:
        held = self._read()
        if held is None or held[0].get("owner") != self.owner:
            raise LockLostError(f"{self!r} is no longer held by this owner")
        lease = self._lease()
        try:
            self.objects.replace(self.path, lease, held[1])
        except ObjectChangedError:
            # The put may have landed and its answer been lost: the client's retry then
            # names the ETag our own put replaced and is refused. Read the lease back
            # before declaring it lost: our bytes there mean the renewal held.
            now = self.objects.get_tagged(self.path)
            if now is None or now[0] != lease:
                raise LockLostError(f"{self!r} was taken over while being renewed") from None

    def release(self) -> None:
        held = self._read()
        if held and held[0].get("owner") == self.owner:
            try:  # expire it rather than delete: a delete cannot name the ETag it read
                self.objects.replace(self.path, self._lease(expires_us=0), held[1])
            except ObjectChangedError:
                pass
