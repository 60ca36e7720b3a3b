"""A lease-based lock kept as a row of ``lakeline_locks`` in PostgreSQL.

Why a row and not ``pg_advisory_lock``: an advisory lock lives as long as a session,
so it would tie the lock to one connection (lost on any reconnect, held forever by a
hung client), while the lock here must behave like :class:`~.lock.FileLock`: a lease
that a crashed or paused holder loses after ``lease_ms`` and that survives reconnects.

Each operation is one atomic statement on the owning store's connection:

* acquire: insert our lease, or take over the row if its lease expired (or is ours) —
  ``INSERT ... ON CONFLICT DO UPDATE ... WHERE expired``; the row lock taken by
  ``ON CONFLICT`` makes concurrent takers queue, and each re-checks the condition on
  the row as the previous one left it, so only one can win;
* renew: extend the lease only where the row is still ours, else :class:`LockLostError`;
* release: delete the row only where it is ours.

Lease times come from the server's clock (``clock_timestamp()``), so holders on
machines whose clocks disagree still agree on when a lease ends. Like every lakeline
lock it is a liveness aid; safety never depends on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import LockLostError
from ...lock import Lock

if TYPE_CHECKING:
    from .postgresql import PostgresStore

# Server time in microseconds since the epoch.
_NOW_US = "(extract(epoch FROM clock_timestamp()) * 1000000)::bigint"

_ACQUIRE = f"""
    INSERT INTO lakeline_locks AS l (table_id, name, owner, expires_us)
    VALUES (%(t)s, %(name)s, %(owner)s, {_NOW_US} + %(lease_us)s)
    ON CONFLICT (table_id, name) DO UPDATE
        SET owner = EXCLUDED.owner, expires_us = EXCLUDED.expires_us
        WHERE l.expires_us < {_NOW_US} OR l.owner = EXCLUDED.owner
    RETURNING l.owner"""

_RENEW = f"""
    UPDATE lakeline_locks SET expires_us = {_NOW_US} + %(lease_us)s
    WHERE table_id = %(t)s AND name = %(name)s AND owner = %(owner)s"""

_RELEASE = """
    DELETE FROM lakeline_locks WHERE table_id = %(t)s AND name = %(name)s AND owner = %(owner)s"""


class PostgresLock(Lock):
    """The lock ``name`` of the table of ``store``, leased for ``lease_ms`` at a time.

    Statements run on the store's connection (one connection per store object), so a
    lock costs no extra connection and reconnects with its store.
    """

    def __init__(self, store: PostgresStore, name: str, lease_ms: int) -> None:
        super().__init__(lease_ms)
        self.store = store
        self.name = name

    def __repr__(self) -> str:
        return f"PostgresLock(table_id={self.store.table_id!r}, name={self.name!r})"

    def _params(self) -> dict[str, object]:
        return {"t": self.store.table_id, "name": self.name, "owner": self.owner, "lease_us": self.lease_ms * 1000}

    def try_acquire(self) -> bool:
        # Taking over our own row too makes a retry after a lost connection harmless.
        _, rows = self.store.execute(_ACQUIRE, self._params(), f"acquiring {self!r}")
        return bool(rows)

    def renew(self) -> None:
        count, _ = self.store.execute(_RENEW, self._params(), f"renewing {self!r}")
        if count != 1:
            raise LockLostError(f"{self!r} is no longer held by this owner")

    def release(self) -> None:
        self.store.execute(_RELEASE, self._params(), f"releasing {self!r}")
