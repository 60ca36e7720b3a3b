"""What only the PostgreSQL store does: the catalog, schema creation, connections.

Why: one database holds the timelines of many tables (a catalog), many processes may
meet an empty database at once, and a network connection can break or be inherited
across a fork. The contract suite covers the events themselves; this covers the rest.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from lakeline.timeline.errors import CommitOutcomeUnknownError, SlotTakenError, StoreUnavailableError, TimelineError
from lakeline.timeline.heartbeat import Heartbeat
from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.log import EventLog
from lakeline.timeline.storage.event_log.postgresql import PostgresStore, safe_dsn
from lakeline.timeline.storage.event_log.postgresql_schema import ensure_schema

# Nothing listens on port 1; a refused connection fails at once.
DEAD_DSN = "postgresql://lakeline:sekrit@127.0.0.1:1/nowhere?connect_timeout=3"


@pytest.fixture
def store(pg_url: str, tmp_path: Path) -> Iterator[PostgresStore]:
    s = PostgresStore(pg_url, uuid.uuid4().hex, str(tmp_path / "table"))
    yield s
    s.close()


def _event(seq: int, token: str) -> Event:
    return Event(seq, 1_000 + seq, seq, Action.COMMIT, State.REQUESTED, {"seq": seq}, token)


def test_catalog_row_written_on_first_put(store: PostgresStore, pg_url: str) -> None:
    store.read_from(0)
    store.has_events()
    assert store.table_id not in dict(PostgresStore.list_tables(pg_url))  # reading registers nothing
    EventLog(store).append(Action.SCHEMA, State.REQUESTED, {"change": "create"})
    assert dict(PostgresStore.list_tables(pg_url))[store.table_id] == store.location
    # Later puts, by this or another store object, leave the one row as it is.
    EventLog(PostgresStore(pg_url, store.table_id, "elsewhere")).append(Action.COMMIT, State.REQUESTED)
    assert dict(PostgresStore.list_tables(pg_url))[store.table_id] == store.location


def test_many_tables_in_one_database(pg_url: str, tmp_path: Path) -> None:
    stores = [PostgresStore(pg_url, uuid.uuid4().hex, str(tmp_path / f"t{k}")) for k in range(3)]
    for k, s in enumerate(stores):
        for _ in range(k + 1):
            EventLog(s).append(Action.COMMIT, State.REQUESTED, {"table": k})
    for k, s in enumerate(stores):
        assert [e.payload["table"] for e in s.read_from(0)] == [k] * (k + 1)
        s.close()
    catalog = dict(PostgresStore.list_tables(pg_url))
    assert all(catalog[s.table_id] == s.location for s in stores)


def test_put_is_idempotent_for_its_own_token(store: PostgresStore) -> None:
    # A retry after a lost answer finds its own event in the slot: that is a success.
    store.put_if_absent(_event(0, "mine"))
    store.put_if_absent(_event(0, "mine"))
    with pytest.raises(SlotTakenError):
        store.put_if_absent(_event(0, "someone-else"))
    assert [e.token for e in store.read_from(0)] == ["mine"]


def test_read_from_a_missing_slot_before_present_ones_is_a_gap(store: PostgresStore) -> None:
    for seq in (0, 1, 3):
        store.put_if_absent(_event(seq, f"t{seq}"))
    from lakeline.timeline.errors import TimelineGapError

    with pytest.raises(TimelineGapError, match="no event 2"):
        store.read_from(2)
    assert [e.seq for e in store.read_from(3)] == [3]


def test_reconnects_after_the_connection_is_killed(store: PostgresStore, pg_url: str) -> None:
    log = EventLog(store)
    log.append(Action.COMMIT, State.REQUESTED)
    _, [(pid,)] = store.execute("SELECT pg_backend_pid()", (), "pid")
    killer = PostgresStore(pg_url, "killer", "")
    try:
        _, [(ok,)] = killer.execute("SELECT pg_terminate_backend(%s)", (pid,), "kill")
        assert ok
    finally:
        killer.close()
    # Every operation finds the dead connection and quietly opens a new one.
    assert len(store.read_from(0)) == 1
    killer2 = PostgresStore(pg_url, "killer", "")
    _, [(pid2,)] = store.execute("SELECT pg_backend_pid()", (), "pid")
    assert pid2 != pid
    killer2.execute("SELECT pg_terminate_backend(%s)", (pid2,), "kill")
    killer2.close()
    log.append(Action.COMMIT, State.REQUESTED)  # an append across the break
    assert [e.seq for e in store.read_from(0)] == [0, 1]
    lock = store.lock("table", 10_000)
    assert lock.try_acquire()


def test_unreachable_server_gives_typed_errors_without_the_password(tmp_path: Path) -> None:
    store = PostgresStore(DEAD_DSN, "t", str(tmp_path))
    assert "sekrit" not in repr(store) and "sekrit" not in safe_dsn(DEAD_DSN)
    with pytest.raises(StoreUnavailableError) as info:
        store.read_from(0)
    assert isinstance(info.value, TimelineError) and isinstance(info.value, ConnectionError)
    assert "sekrit" not in str(info.value)
    with pytest.raises(CommitOutcomeUnknownError):
        store.put_if_absent(_event(0, "x"))
    with pytest.raises(StoreUnavailableError):
        EventLog(store).append(Action.COMMIT, State.REQUESTED)
    with pytest.raises(StoreUnavailableError):
        store.lock("table", 1_000).try_acquire()
    store.close()


def test_forked_child_gets_its_own_connection(store: PostgresStore) -> None:
    log = EventLog(store)
    log.append(Action.COMMIT, State.REQUESTED, {"by": "parent"})
    pid = os.fork()
    if pid == 0:  # the child: use the inherited store, then leave without cleanup
        code = 1
        try:
            EventLog(store).append(Action.COMMIT, State.REQUESTED, {"by": "child"})
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    # The parent's connection was not touched by the child.
    log.append(Action.COMMIT, State.REQUESTED, {"by": "parent"})
    assert [e.payload["by"] for e in store.read_from(0)] == ["parent", "child", "parent"]


def test_heartbeat_thread_shares_the_store_with_the_writer(store: PostgresStore) -> None:
    log = EventLog(store)
    inst = log.append(Action.COMMIT, State.REQUESTED).instant
    log.append(Action.COMMIT, State.INFLIGHT, instant=inst)
    errors: list[BaseException] = []
    with Heartbeat(store, inst, interval_ms=2):
        for _ in range(100):
            try:
                log.append(Action.CLEAN, State.REQUESTED)
            except BaseException as e:  # noqa: BLE001 - collect, assert below
                errors.append(e)
        assert inst in store.last_beats()
    assert errors == []
    assert inst not in store.last_beats()
    assert threading.active_count() >= 1


def test_schema_created_once_when_many_race_on_an_empty_database(pg_url: str, tmp_path: Path) -> None:
    admin = PostgresStore(pg_url, "admin", "")
    db = f"lakeline_schema_race_{uuid.uuid4().hex[:8]}"
    admin.execute(f"CREATE DATABASE {db}", (), "create db")
    url = pg_url.rsplit("/", 1)[0] + "/" + db
    conns = [psycopg.connect(url, autocommit=True) for _ in range(6)]
    try:
        # Plain CREATE TABLE IF NOT EXISTS from several sessions at once collides on the
        # catalog (UniqueViolation on pg_type); the creators must queue instead.
        start = threading.Barrier(len(conns))
        errors: list[BaseException] = []

        def create(conn: psycopg.Connection) -> None:  # type: ignore[type-arg]
            start.wait()
            try:
                ensure_schema(conn)
            except BaseException as e:  # noqa: BLE001 - collect, assert below
                errors.append(e)

        threads = [threading.Thread(target=create, args=(c,)) for c in conns]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        # And stores meeting the database together append as usual.
        table_id = uuid.uuid4().hex
        stores = [PostgresStore(url, table_id, str(tmp_path)) for _ in range(3)]

        def append_ten(store: PostgresStore) -> None:
            log = EventLog(store)
            for _ in range(10):
                log.append(Action.COMMIT, State.REQUESTED)

        appenders = [threading.Thread(target=append_ten, args=(s,)) for s in stores]
        for t in appenders:
            t.start()
        for t in appenders:
            t.join()
        assert [e.seq for e in stores[0].read_from(0)] == list(range(30))
        for s in stores:
            s.close()
    finally:
        for c in conns:
            c.close()
        admin.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)", (), "drop db")
        admin.close()


def test_table_keeps_its_timeline_in_postgresql(pg_url: str, tmp_path: Path) -> None:
    # The path Table.create/open take through stores.open_store to this store.
    import pyarrow as pa
    from lakeline.table import Table
    from lakeline.timeline.errors import TimelineConfigError

    path = tmp_path / "events"
    table = Table.create(path, pa.schema([("id", pa.int64())]), record_key="id", timeline=pg_url)
    store = table.log.store
    assert isinstance(store, PostgresStore) and store.kind == "postgresql"
    assert dict(PostgresStore.list_tables(pg_url))[store.table_id] == table.path
    assert not (path / ".lakeline" / "timeline").exists()  # no events on the filesystem
    again = Table.open(path, timeline=pg_url)
    assert [i.action for i in again.timeline.completed()] == ["schema"]
    with pytest.raises(TimelineConfigError):
        Table.open(path)
