"""One PostgreSQL connection shared by the threads of a process: what the timeline store
and the catalog store both need from theirs.

A connection inherited across ``fork`` belongs to the parent, so it is forgotten (never
closed: that would end the parent's session) and the child connects afresh. A broken
link is replaced on the next use; work that is safe to repeat is retried once on the
fresh connection, while a statement that failed on a healthy link fails at once.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg

T = TypeVar("T")


class SharedConnection:
    """A lazily opened connection, its reconnection and its one retry.

    Args:
        connect: opens a ready connection (schema ensured, settings made).
        failed: the error to raise for ``(what, psycopg error)``.
    """

    def __init__(
        self, connect: Callable[[], psycopg.Connection[Any]], failed: Callable[[str, psycopg.Error], Exception]
    ) -> None:
        self._connect = connect
        self._failed = failed
        self._conn: psycopg.Connection[Any] | None = None
        self._pid = os.getpid()
        # psycopg serialises statements on one connection; the mutex also covers
        # reconnecting (a heartbeat thread and a writer may share a store).
        self.mutex = threading.RLock()

    def get(self) -> psycopg.Connection[Any]:
        """The open connection, connecting first when there is none (or only the parent's)."""
        if self._pid != os.getpid():
            self._conn, self._pid = None, os.getpid()
        conn = self._conn
        if conn is None or conn.closed or conn.broken:
            self._conn = None
            conn = self._conn = self._connect()
        return conn

    def run(self, fn: Callable[[psycopg.Connection[Any]], T], what: str, retry: bool = True) -> T:
        """``fn`` on the connection; with ``retry``, once more on a fresh connection if
        the link broke (only for idempotent work: the first attempt may or may not have
        taken effect).

        Raises:
            the ``failed`` error: the server cannot be reached, or the statement failed.
        """
        with self.mutex:
            try:
                return fn(self.get())
            except psycopg.Error as e:
                conn = self._conn
                if not retry or (conn is not None and not conn.closed and not conn.broken):
                    # from None: the psycopg error may quote the password back; the
                    # failed error carries its text, redacted.
                    raise self._failed(what, e) from None  # the statement failed, not the link
                self._conn = None
            try:
                return fn(self.get())
            except psycopg.Error as e:
                raise self._failed(what, e) from None

    def close(self) -> None:
        with self.mutex:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()
