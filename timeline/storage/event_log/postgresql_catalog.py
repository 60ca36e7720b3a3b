"""The catalog's rows in PostgreSQL: names of tables whose timeline is in the same database.

``lakeline_catalog(namespace, name, location, table_id, created_at)`` (created with the
store's other tables, :mod:`.postgresql_schema`) maps a name to a table. Its three unique
constraints carry the catalog's rules, so they hold however many processes race: a name
is one table (primary key), a location is one table, and a timeline (``table_id``) has
one name. :class:`lakeline.table.Catalog` builds the user-facing API on this module;
only this module (and the store and its lock) touches psycopg.

Creating a table under a name (:meth:`CatalogRows.reserving`) inserts the row first, in a
transaction of its own connection that stays open while the table is created, and sets
``table_id`` and commits only once the table exists. A second creator of the same name
(or location) blocks on the unique index until the first commits, then fails with the
matching error, having written nothing; if the first creator fails, or dies, its
transaction is rolled back (by the server, when the connection drops) and the name is
free again. No half-created name is ever visible and none can be left behind.

Statements that change rows are not retried after a broken connection (a rename or a
drop that landed would then report a missing name); reads are retried once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors

from ...diagnostics.redact import redact, secrets_in
from ...errors import CatalogError, LocationInUseError, LockTimeoutError, StoreUnavailableError, TableExistsError
from .postgresql import safe_dsn
from .postgresql_connection import SharedConnection
from .postgresql_schema import ensure_schema

T = TypeVar("T")

_COLUMNS = "namespace, name, location, table_id, created_at"
#: Every row of one table's timeline, removed by a purge (one transaction).
_TIMELINE_TABLES = ("lakeline_events", "lakeline_beats", "lakeline_locks", "lakeline_archived", "lakeline_tables")


@dataclass(frozen=True)
class CatalogRow:
    """One name of the catalog."""

    namespace: str
    name: str
    location: str
    table_id: str
    created_at: datetime


@dataclass
class Reservation:
    """A name being created: the creator sets ``table_id`` once the table exists."""

    table_id: str | None = None


def _row(raw: tuple[Any, ...]) -> CatalogRow:
    ns, name, location, table_id, created_at = raw
    return CatalogRow(str(ns), str(name), str(location), str(table_id or ""), created_at)


class CatalogRows:
    """The rows of ``lakeline_catalog`` in the database at ``dsn``.

    One autocommit connection, opened lazily and shared by threads under a mutex, for
    reads and single-statement changes; creations take a connection of their own.
    """

    def __init__(self, dsn: str, lock_timeout_s: float) -> None:
        self.dsn = dsn
        self.lock_timeout_s = lock_timeout_s
        self._shared = SharedConnection(lambda: self._connect(autocommit=True), self._failed)

    # -- connections ---------------------------------------------------------------------

    def _connect(self, autocommit: bool) -> psycopg.Connection[Any]:
        kwargs: dict[str, Any] = {"autocommit": autocommit, "application_name": "lakeline-catalog"}
        if "connect_timeout" not in self.dsn:
            kwargs["connect_timeout"] = 10
        conn = psycopg.connect(self.dsn, **kwargs)
        try:
            ensure_schema(conn)
            if not autocommit:
                conn.commit()  # ensure_schema's reads opened a transaction; start afresh
        except BaseException:
            conn.close()
            raise
        return conn

    def _failed(self, what: str, e: psycopg.Error) -> StoreUnavailableError:
        return StoreUnavailableError(
            redact(f"{what} failed on catalog {safe_dsn(self.dsn)}: {e}", known=secrets_in(self.dsn))
        )

    def _run(self, fn: Callable[[psycopg.Connection[Any]], T], what: str, retry: bool) -> T:
        """``fn`` on the shared connection; with ``retry``, once more on a fresh
        connection if the link broke (only for reads).

        Raises:
            StoreUnavailableError: the server cannot be reached, or the statement failed.
        """
        return self._shared.run(fn, what, retry)

    def close(self) -> None:
        self._shared.close()

    def _conflict(
        self, e: pg_errors.UniqueViolation, full_name: str, location: str
    ) -> TableExistsError | LocationInUseError:
        constraint = e.diag.constraint_name or ""
        if constraint.endswith("_location_key"):
            return LocationInUseError(f"location {location} already belongs to another table of the catalog")
        if constraint.endswith("_table_key"):
            return TableExistsError(f"the table at {location} is already in the catalog under another name")
        return TableExistsError(f"a table named {full_name} already exists in the catalog")

    # -- reads -------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> CatalogRow | None:
        def go(conn: psycopg.Connection[Any]) -> CatalogRow | None:
            raw = conn.execute(
                f"SELECT {_COLUMNS} FROM lakeline_catalog WHERE namespace = %s AND name = %s", (namespace, name)
            ).fetchone()
            return _row(raw) if raw is not None else None

        return self._run(go, f"looking up {namespace}.{name}", retry=True)

    def rows(self, namespace: str | None) -> list[CatalogRow]:
        """Every name (of ``namespace``), in no particular order."""
        sql = f"SELECT {_COLUMNS} FROM lakeline_catalog WHERE table_id IS NOT NULL"
        params: tuple[Any, ...] = ()
        if namespace is not None:
            sql, params = sql + " AND namespace = %s", (namespace,)
        return self._run(
            lambda conn: [_row(r) for r in conn.execute(sql, params).fetchall()], "listing tables", retry=True
        )

    def namespaces(self) -> list[str]:
        sql = "SELECT DISTINCT namespace FROM lakeline_catalog"
        return self._run(
            lambda conn: [str(r[0]) for r in conn.execute(sql).fetchall()], "listing namespaces", retry=True
        )

    # -- changes -----------------------------------------------------------------------

    @contextmanager
    def reserving(self, namespace: str, name: str, location: str) -> Iterator[Reservation]:
        """Hold ``namespace.name`` and ``location`` while the body creates the table; the
        body sets ``table_id`` on the reservation, and the name is committed after it.

        Waits up to ``lock_timeout_s`` for another creator of the same name or location.

        Raises:
            TableExistsError, LocationInUseError: the name or the location is taken
                (nothing was written).
            LockTimeoutError: another creator held the name or location too long.
            StoreUnavailableError: the server failed; when it failed after the body
                created the table, the message says so (``register_table`` adopts it).
        """
        full = f"{namespace}.{name}"
        try:
            conn = self._connect(autocommit=False)
        except psycopg.Error as e:
            raise self._failed(f"reserving {full}", e) from None  # its text may hold the password
        try:
            try:
                conn.execute(f"SET LOCAL lock_timeout = {max(1, int(self.lock_timeout_s * 1000))}")
                conn.execute(
                    "INSERT INTO lakeline_catalog (namespace, name, location) VALUES (%s, %s, %s)",
                    (namespace, name, location),
                )
            except pg_errors.UniqueViolation as e:
                raise self._conflict(e, full, location) from None
            except pg_errors.LockNotAvailable:
                raise LockTimeoutError(
                    f"another process has been creating {full} or a table at {location} "
                    f"for over {self.lock_timeout_s:g}s"
                ) from None
            except psycopg.Error as e:
                raise self._failed(f"reserving {full}", e) from None  # its text may hold the password
            reservation = Reservation()
            yield reservation  # an error in the body propagates; closing rolls back
            if reservation.table_id is None:
                raise CatalogError(f"the creation of {full} did not say which table it created")
            try:
                conn.execute(
                    "UPDATE lakeline_catalog SET table_id = %s WHERE namespace = %s AND name = %s",
                    (reservation.table_id, namespace, name),
                )
                conn.commit()
            except pg_errors.UniqueViolation as e:
                raise self._conflict(e, full, location) from None
            except psycopg.Error as e:
                raise StoreUnavailableError(
                    redact(
                        f"the table at {location} was created but the name {full} could not be recorded "
                        f"on {safe_dsn(self.dsn)} ({e}); Catalog.register_table adopts it",
                        known=secrets_in(self.dsn),
                    )
                ) from None
        finally:
            conn.close()  # an open transaction is rolled back: the name is free again

    def insert(self, namespace: str, name: str, location: str, table_id: str) -> None:
        """Name an existing table.

        Raises:
            TableExistsError, LocationInUseError: name, location or table already named.
        """

        def go(conn: psycopg.Connection[Any]) -> None:
            try:
                conn.execute(
                    "INSERT INTO lakeline_catalog (namespace, name, location, table_id) VALUES (%s, %s, %s, %s)",
                    (namespace, name, location, table_id),
                )
            except pg_errors.UniqueViolation as e:
                raise self._conflict(e, f"{namespace}.{name}", location) from None

        self._run(go, f"registering {namespace}.{name}", retry=False)

    def rename(self, old: tuple[str, str], new: tuple[str, str]) -> bool:
        """Move a name, in one statement; False if ``old`` does not exist.

        Raises:
            TableExistsError: ``new`` is taken.
        """

        def go(conn: psycopg.Connection[Any]) -> bool:
            try:
                cur = conn.execute(
                    """UPDATE lakeline_catalog SET namespace = %s, name = %s
                       WHERE namespace = %s AND name = %s AND table_id IS NOT NULL""",
                    (*new, *old),
                )
            except pg_errors.UniqueViolation:
                raise TableExistsError(f"a table named {new[0]}.{new[1]} already exists in the catalog") from None
            return cur.rowcount == 1

        return self._run(go, f"renaming {old[0]}.{old[1]}", retry=False)

    def delete(self, namespace: str, name: str) -> CatalogRow | None:
        """Remove a name; returns what it named (None: no such name)."""

        def go(conn: psycopg.Connection[Any]) -> CatalogRow | None:
            raw = conn.execute(
                f"""DELETE FROM lakeline_catalog WHERE namespace = %s AND name = %s AND table_id IS NOT NULL
                    RETURNING {_COLUMNS}""",
                (namespace, name),
            ).fetchone()
            return _row(raw) if raw is not None else None

        return self._run(go, f"dropping {namespace}.{name}", retry=False)

    def purge_timeline(self, table_id: str) -> None:
        """Delete every row of one table's timeline (events, heartbeats, locks, archival
        mark, registration) in one transaction; idempotent."""

        def go(conn: psycopg.Connection[Any]) -> None:
            with conn.transaction():
                for table in _TIMELINE_TABLES:
                    conn.execute(f"DELETE FROM {table} WHERE table_id = %s", (table_id,))

        self._run(go, f"purging the timeline of table {table_id}", retry=True)
