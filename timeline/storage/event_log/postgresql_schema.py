"""The PostgreSQL store's tables: their definitions and their creation.

One database holds the timelines of many tables, keyed by table uuid: the catalog of
tables, their events, heartbeats (one row per instant and execution attempt), lease
locks and archival marks. The tables are created on first use by whichever process
connects first; creation is serialised by an advisory lock, because ``CREATE TABLE IF
NOT EXISTS`` alone races.
"""

from __future__ import annotations

from typing import Any

import psycopg

#: Key of the advisory lock that serialises schema creation across processes:
#: ``CREATE TABLE IF NOT EXISTS`` alone races (two creators collide on the catalog's
#: unique index of type names). Arbitrary but fixed: "lakeline" in ASCII.
_SCHEMA_LOCK_KEY = 0x6C616B656C696E65

# Heartbeats live in ``lakeline_beats``, keyed by attempt too; the older
# ``lakeline_heartbeats`` (one beat per instant) is no longer read or written.
_TABLES = (
    "lakeline_tables",
    "lakeline_events",
    "lakeline_beats",
    "lakeline_locks",
    "lakeline_archived",
    "lakeline_catalog",
)

_DDL = (
    """CREATE TABLE IF NOT EXISTS lakeline_tables (
        table_id   text PRIMARY KEY,
        location   text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now())""",
    """CREATE TABLE IF NOT EXISTS lakeline_events (
        table_id text     NOT NULL,
        seq      bigint   NOT NULL,
        ts_us    bigint   NOT NULL,
        instant  bigint   NOT NULL,
        action   text     NOT NULL,
        state    text     NOT NULL,
        token    text     NOT NULL DEFAULT '',
        format   smallint NOT NULL DEFAULT 1,
        payload  text     NOT NULL,
        PRIMARY KEY (table_id, seq))""",
    """CREATE TABLE IF NOT EXISTS lakeline_beats (
        table_id text   NOT NULL,
        instant  bigint NOT NULL,
        attempt  text   NOT NULL DEFAULT '',
        ts_us    bigint NOT NULL,
        PRIMARY KEY (table_id, instant, attempt))""",
    """CREATE TABLE IF NOT EXISTS lakeline_locks (
        table_id   text   NOT NULL,
        name       text   NOT NULL,
        owner      text   NOT NULL,
        expires_us bigint NOT NULL,
        PRIMARY KEY (table_id, name))""",
    """CREATE TABLE IF NOT EXISTS lakeline_archived (
        table_id text   PRIMARY KEY,
        seq      bigint NOT NULL)""",
    # Names of tables (lakeline.table.Catalog, see .postgresql_catalog): one row per name,
    # a location and a timeline belong to one name. table_id is null only inside the
    # creating transaction (the name is reserved before the table exists).
    """CREATE TABLE IF NOT EXISTS lakeline_catalog (
        namespace  text NOT NULL,
        name       text NOT NULL,
        location   text NOT NULL,
        table_id   text,
        created_at timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT lakeline_catalog_name_key PRIMARY KEY (namespace, name),
        CONSTRAINT lakeline_catalog_location_key UNIQUE (location),
        CONSTRAINT lakeline_catalog_table_key UNIQUE (table_id))""",
)


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Create the tables unless they all exist; safe when many processes race to it."""
    cur = conn.execute("SELECT count(to_regclass(t)) FROM unnest(%s::text[]) AS t", (list(_TABLES),))
    row = cur.fetchone()
    if row is not None and row[0] == len(_TABLES):
        return
    with conn.transaction():
        # Held to the end of this transaction: the first creator makes the tables, the
        # others wait and then find them (IF NOT EXISTS).
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_KEY,))
        for ddl in _DDL:
            conn.execute(ddl)
