"""The event log as rows in PostgreSQL: the timeline of many tables in one database.

Why PostgreSQL: object stores reached through ``pyarrow.fs`` (plain S3) cannot
put-if-absent, so their tables keep the event log here; and because every table is a
row in ``lakeline_tables`` keyed by its uuid, one database is a catalog of tables.

Layout (created on first use, see :data:`_DDL`)::

    lakeline_tables(table_id PK, location, created_at)           -- the catalog
    lakeline_events(table_id, seq, ts_us, instant, action, state,
                    token, format, payload, PRIMARY KEY (table_id, seq))
    lakeline_beats(table_id, instant, attempt, ts_us,
                   PRIMARY KEY (table_id, instant, attempt))     -- heartbeats per attempt
    lakeline_locks(table_id, name, owner, expires_us, PRIMARY KEY (table_id, name))
    lakeline_archived(table_id PK, seq)       -- last event archival removed, per table

The put-if-absent step is ``INSERT ... ON CONFLICT (table_id, seq) DO NOTHING``: the
primary key lets exactly one appender win a slot, and a row is inserted whole or not at
all. ``payload`` is ``text`` holding the exact JSON the event encoder wrote, not
``jsonb``: jsonb refuses ``NaN`` and ``\\u0000`` (both can appear in column statistics)
and would not give back the bytes that were written. ``format`` is the event encoding
version, so an old reader refuses a newer row instead of misreading it. Rows are decoded
by rebuilding the event's JSON and calling :meth:`Event.from_json`, so the filesystem
and the PostgreSQL store share one validation (the payload is parsed on its own).

Connections: one per store object, in autocommit (each statement is its own
transaction, which is all put-if-absent needs), opened lazily on first use. A store
that crossed a fork or a pickle connects afresh in its new process; a broken
connection is replaced and the statement retried once, which is safe because every
statement here is idempotent (an event insert that may have landed is recognised by its
token). psycopg is imported only here and in :mod:`.postgresql_lock`.

Archival removes a prefix of a table's rows (:meth:`PostgresStore.delete_through`): the
mark in ``lakeline_archived`` is committed first, then the rows are deleted. A deleted
row frees its primary key, so a put that won a slot at or below the mark (an appender
that read the log before the removal) removes its row again and is refused; reads take
the mark and the rows in one statement, so they see one consistent state.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo as pg_conninfo

from ...diagnostics import faults
from ...diagnostics.redact import redact, secrets_in
from ...errors import (
    CommitOutcomeUnknownError,
    CorruptEventError,
    EventsArchivedError,
    SlotTakenError,
    StoreUnavailableError,
    TimelineGapError,
)
from ...instant import EVENT_FORMAT_VERSION, Event
from ...lock import Lock
from .postgresql_connection import SharedConnection
from .postgresql_schema import ensure_schema
from .protocol import TimelineStore

T = TypeVar("T")

# The catalog row is written in the same statement as the event, so a table is never
# registered without its first event having been attempted, and later puts skip it.
_INSERT_EVENT = """
    INSERT INTO lakeline_events (table_id, seq, ts_us, instant, action, state, token, format, payload)
    VALUES (%(t)s, %(seq)s, %(ts)s, %(instant)s, %(action)s, %(state)s, %(token)s, %(format)s, %(payload)s)
    ON CONFLICT (table_id, seq) DO NOTHING"""
_REGISTER_AND_INSERT_EVENT = (
    """
    WITH registered AS (
        INSERT INTO lakeline_tables (table_id, location) VALUES (%(t)s, %(location)s)
        ON CONFLICT (table_id) DO NOTHING)"""
    + _INSERT_EVENT
)
# The archival mark comes with the rows, from one snapshot: rows at or below it (left by
# an archival that died between its two statements) are not part of the active log.
_READ_EVENTS = """
    WITH mark AS (SELECT COALESCE(max(seq), -1) AS floor FROM lakeline_archived WHERE table_id = %(t)s)
    SELECT mark.floor, e.seq, e.ts_us, e.instant, e.action, e.state, e.token, e.format, e.payload
    FROM mark LEFT JOIN lakeline_events e
      ON e.table_id = %(t)s AND e.seq >= %(seq)s AND e.seq > mark.floor
    ORDER BY e.seq"""
_READ_MARK = "SELECT COALESCE(max(seq), -1) FROM lakeline_archived WHERE table_id = %s"


def safe_dsn(dsn: str) -> str:
    """The connection string without its password, fit for messages and reprs: normalised
    to ``postgresql://user@host:port/db`` when libpq can parse it (every other parameter
    dropped, a password given in any form included), else :func:`redact`'s masking of
    the text as given (still a hint of what was wrong with it)."""
    if not isinstance(dsn, str):
        return redact(dsn)
    try:
        params = pg_conninfo.conninfo_to_dict(dsn)
    except (psycopg.Error, ValueError):
        return redact(dsn)
    params.pop("password", None)
    host, port, db = params.get("host", ""), params.get("port", ""), params.get("dbname", "")
    return f"postgresql://{params.get('user', '')}@{host}{':' if port else ''}{port}/{db}"


class PostgresStore(TimelineStore):
    """Events, heartbeats and locks of one table (``table_id``) in a PostgreSQL database.

    Args:
        dsn: a libpq connection string or ``postgresql://`` URL.
        table_id: the table's uuid; the key of all its rows.
        location: the table's base path, recorded in the catalog on the first put.
    """

    kind = "postgresql"

    def __init__(self, dsn: str, table_id: str, location: str) -> None:
        self.dsn = dsn
        self.table_id = table_id
        self.location = location
        self._init_runtime()

    def _init_runtime(self) -> None:
        self._shared = SharedConnection(self._open, self._failed)
        self._registered = False

    def __repr__(self) -> str:
        return f"PostgresStore({safe_dsn(self.dsn)!r}, table_id={self.table_id!r})"

    # A store may be pickled into a worker process: ship the settings, not the socket.
    def __getstate__(self) -> dict[str, Any]:
        return {"dsn": self.dsn, "table_id": self.table_id, "location": self.location}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._init_runtime()

    # -- connection ------------------------------------------------------------------

    def _open(self) -> psycopg.Connection[Any]:
        kwargs: dict[str, Any] = {"autocommit": True, "application_name": "lakeline"}
        if "connect_timeout" not in self.dsn:
            kwargs["connect_timeout"] = 10
        conn = psycopg.connect(self.dsn, **kwargs)
        try:
            ensure_schema(conn)
        except BaseException:
            conn.close()
            raise
        return conn

    def run(self, fn: Callable[[psycopg.Connection[Any]], T], what: str) -> T:
        """Run ``fn`` on this store's connection; reconnect and retry once if it broke.

        Only for idempotent work: after a broken connection the first attempt may or may
        not have taken effect.

        Raises:
            StoreUnavailableError: the server cannot be reached, or the statement failed.
        """
        return self._shared.run(fn, what)

    def _failed(self, what: str, e: psycopg.Error) -> StoreUnavailableError:
        # redact(known=): libpq may quote the DSN's password back without its key.
        return StoreUnavailableError(
            redact(f"{what} failed on {safe_dsn(self.dsn)} (table {self.table_id}): {e}", known=secrets_in(self.dsn))
        )

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any], what: str) -> tuple[int, list[tuple[Any, ...]]]:
        """Run one idempotent statement; returns ``(rowcount, rows)`` (rows empty when
        the statement returns none). Used by :class:`~.postgresql_lock.PostgresLock` too."""

        def go(conn: psycopg.Connection[Any]) -> tuple[int, list[tuple[Any, ...]]]:
            cur = conn.execute(sql, params)
            return cur.rowcount, (cur.fetchall() if cur.description is not None else [])

        return self.run(go, what)

    def close(self) -> None:
        self._shared.close()

    # -- events ----------------------------------------------------------------------

    def put_if_absent(self, event: Event) -> None:
        params = {
            "t": self.table_id,
            "location": self.location,
            "seq": event.seq,
            "ts": event.ts_us,
            "instant": event.instant,
            "action": event.action.value,
            "state": event.state.value,
            "token": event.token,
            "format": EVENT_FORMAT_VERSION,
            "payload": json.dumps(dict(event.payload), separators=(",", ":"), sort_keys=True),
        }
        faults.point("log.store.before_write")

        def insert(conn: psycopg.Connection[Any]) -> bool:
            sql = _INSERT_EVENT if self._registered else _REGISTER_AND_INSERT_EVENT
            won = conn.execute(sql, params).rowcount == 1
            self._registered = True
            if won:
                return True
            # The slot is taken. If it holds our own token, an earlier attempt whose
            # answer was lost with the connection did land: that is a win, not a loss.
            row = conn.execute(
                "SELECT token FROM lakeline_events WHERE table_id = %s AND seq = %s", (self.table_id, event.seq)
            ).fetchone()
            return bool(event.token) and row is not None and row[0] == event.token

        try:
            won = self.run(insert, f"appending event {event.seq}")
        except StoreUnavailableError as e:
            raise CommitOutcomeUnknownError(
                f"could not learn whether event {event.seq} of table {self.table_id} landed: {e}"
            ) from e
        if not won:
            raise SlotTakenError(f"slot {event.seq} of table {self.table_id} is taken")
        if event.seq <= self.archived_through():
            # The key was free because archival deleted that row (its mark is committed
            # first): the slot is an archived event's. Readers skip rows at or below the
            # mark, so deleting ours again is invisible.
            self.execute(
                "DELETE FROM lakeline_events WHERE table_id = %s AND seq = %s AND token = %s",
                (self.table_id, event.seq, event.token),
                f"undoing event {event.seq}",
            )
            raise SlotTakenError(f"slot {event.seq} of table {self.table_id} was archived")
        faults.point("log.store.after_write")

    def read_from(self, seq: int) -> list[Event]:
        _, rows = self.execute(_READ_EVENTS, {"t": self.table_id, "seq": seq}, f"reading events from {seq}")
        floor = int(rows[0][0]) if rows else -1
        if 0 < seq <= floor:
            raise EventsArchivedError(f"events from {seq} of table {self.table_id} were archived")
        events = [self._decode(row[1:]) for row in rows if row[1] is not None]
        # A reader asking from seq > 0 has read everything before it, so the first row
        # must be exactly there; from 0 the log starts right after the archived prefix.
        expected = seq if seq > 0 else floor + 1
        for ev in events:
            if ev.seq != expected:
                raise TimelineGapError(
                    f"event log of table {self.table_id} in {safe_dsn(self.dsn)} has no event {expected}"
                )
            expected += 1
        return events

    def _decode(self, row: tuple[Any, ...]) -> Event:
        seq, ts_us, instant, action, state, token, fmt, payload = row
        where = f"row (table_id={self.table_id!r}, seq={seq}) of lakeline_events"
        # The columns go through the shared decoder as the event's JSON, so both stores
        # refuse the same things; the payload is parsed once, on its own, so a damaged
        # payload cannot pass for other fields of the event.
        head = json.dumps(
            {
                "format": fmt,
                "seq": seq,
                "ts_us": ts_us,
                "instant": instant,
                "action": action,
                "state": state,
                "token": token,
            },
            separators=(",", ":"),
        )
        event = Event.from_json(head, where)
        if not payload:
            raise CorruptEventError(f"event {where} has an empty payload")
        try:
            body = json.loads(payload)
        except ValueError as e:
            raise CorruptEventError(f"event {where} has a truncated or non-JSON payload: {e}") from None
        if not isinstance(body, dict):
            raise CorruptEventError(f"event {where} has a payload that is not a JSON object")
        return replace(event, payload=body)

    def has_events(self) -> bool:
        _, rows = self.execute(
            """SELECT EXISTS (SELECT 1 FROM lakeline_events WHERE table_id = %s)
                      OR EXISTS (SELECT 1 FROM lakeline_archived WHERE table_id = %s)""",
            (self.table_id, self.table_id),
            "checking for events",
        )
        return bool(rows[0][0])

    # -- archival ----------------------------------------------------------------------

    def archived_through(self) -> int:
        _, rows = self.execute(_READ_MARK, (self.table_id,), "reading the archival mark")
        return int(rows[0][0])

    def delete_through(self, seq: int) -> None:
        # Two statements, the mark committed first (see the module docstring); both are
        # idempotent, so a retry after a broken connection is safe.
        self.execute(
            """INSERT INTO lakeline_archived (table_id, seq) VALUES (%s, %s)
               ON CONFLICT (table_id) DO UPDATE SET seq = GREATEST(lakeline_archived.seq, EXCLUDED.seq)""",
            (self.table_id, seq),
            f"marking events through {seq} archived",
        )
        self.execute(
            "DELETE FROM lakeline_events WHERE table_id = %s AND seq <= %s",
            (self.table_id, seq),
            f"removing archived events through {seq}",
        )

    # -- heartbeats ------------------------------------------------------------------

    def beat(self, instant: int, ts_us: int, attempt: str = "") -> None:
        self.execute(
            """INSERT INTO lakeline_beats (table_id, instant, attempt, ts_us) VALUES (%s, %s, %s, %s)
               ON CONFLICT (table_id, instant, attempt) DO UPDATE SET ts_us = EXCLUDED.ts_us""",
            (self.table_id, instant, attempt, ts_us),
            f"heartbeat of instant {instant}",
        )

    def beats(self) -> dict[tuple[int, str], int]:
        _, rows = self.execute(
            "SELECT instant, attempt, ts_us FROM lakeline_beats WHERE table_id = %s",
            (self.table_id,),
            "reading heartbeats",
        )
        return {(int(i), str(a)): int(ts) for i, a, ts in rows}

    def clear_beat(self, instant: int, attempt: str = "") -> None:
        self.execute(
            "DELETE FROM lakeline_beats WHERE table_id = %s AND instant = %s AND attempt = %s",
            (self.table_id, instant, attempt),
            f"clearing the heartbeat of instant {instant}",
        )

    # -- locks and catalog -------------------------------------------------------------

    def lock(self, name: str, lease_ms: int) -> Lock:
        from .postgresql_lock import PostgresLock

        return PostgresLock(self, name, lease_ms)

    @staticmethod
    def list_tables(dsn: str) -> list[tuple[str, str]]:
        """``(table_id, location)`` of every table whose timeline is in this database.

        Raises:
            StoreUnavailableError: the server cannot be reached.
        """
        store = PostgresStore(dsn, "", "")
        try:
            _, rows = store.execute(
                "SELECT table_id, location FROM lakeline_tables ORDER BY created_at, table_id", (), "listing tables"
            )
        finally:
            store.close()
        return [(str(t), str(loc)) for t, loc in rows]
