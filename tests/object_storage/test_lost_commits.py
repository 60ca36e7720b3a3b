"""No commit lost silently to a store that stops honouring conditional puts (issue 45, D7).

The audit's case (AC14): on an existing table, a proxy that strips ``If-None-Match`` and
``If-Match`` made 15 of 24 reported commits vanish, as event puts overwrote each other's
slots. Here on the real server (an unauthenticated SeaweedFS, ``open_s3``, as stripped
signed headers would be refused), with writers in separate processes:

* a writer process checks the store's conditional puts where it first writes, whatever
  verdict this machine remembers, and is refused before it writes anything;
* a put is guarded on its own: a slot already taken is never put to (a stale writer
  behind a stripping proxy would overwrite a commit), an event overwritten right after
  its put fails its writer, and a reader finds an overwritten event by the predecessor
  its successor names; the racing writer's stripped put is done for real on the store,
  at the exact step, through a fault point;
* events written before the predecessor field existed still read and append.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import TimelineGapError, UnsafeStorageError
from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.log import EventLog
from lakeline.timeline.storage.event_log.chain import encode
from lakeline.timeline.storage.event_log.object_store import ObjectStoreLog
from lakeline.timeline.storage.filesystem import META_DIR, Storage
from lakeline.timeline.storage.probe import CHECK_REQUESTS, VERDICT_FILE

from tests.object_storage.proxy import Fault, FaultProxy
from tests.object_storage.s3_tables import SCHEMA
from tests.object_storage.writers import run_writers, seed_row
from tests.seaweedfs import SeaweedServer


def log_at(uri: str, options: dict[str, str]) -> EventLog:
    storage = Storage.for_uri(uri, options)
    return EventLog(ObjectStoreLog(storage, storage.path(META_DIR)))


def objects_of(uri: str, options: dict[str, str]) -> set[str]:
    """The table's objects, but its lock and heartbeats (liveness, not data)."""
    st = Storage.for_uri(uri, options)
    assert st.objects is not None
    return {o.path for o in st.objects.list(st.base) if "/locks/" not in o.path and "/heartbeats/" not in o.path}


def test_writer_processes_behind_a_stripping_proxy_are_refused_before_writing(
    open_s3: SeaweedServer, tmp_path: Path
) -> None:
    t = Table.create(open_s3.uri(), SCHEMA, record_key="id", ordering_field="ts", storage_options=open_s3.options())
    t.upsert(seed_row())
    before = objects_of(t.path, open_s3.options())
    proxy = FaultProxy(open_s3.endpoint, drop_conditions=True)
    try:
        options = open_s3.options(AWS_ENDPOINT_URL=proxy.endpoint)
        # This machine remembers a safe verdict on the proxy's endpoint (from before the
        # proxy misbehaved): a write does not trust it.
        entry = f"s3 {proxy.endpoint} {open_s3.bucket}"
        (tmp_path / VERDICT_FILE).write_text(json.dumps({entry: {"safe": True, "checked_at": time.time()}}))
        outcomes = run_writers(t.path, [options] * 3, "upsert", 4, env={"LAKELINE_CACHE_DIR": str(tmp_path)})
    finally:
        proxy.stop()
    assert len(outcomes) == 12
    assert all(o.outcome == "failed" and o.error.startswith("UnsafeStorageError") for o in outcomes), outcomes
    assert "does not honour conditional puts" in outcomes[0].error and "Nothing was written" in outcomes[0].error
    assert objects_of(t.path, open_s3.options()) == before  # not an event, not a data file
    assert Table.open(t.path, storage_options=open_s3.options()).to_arrow()["id"].to_pylist() == ["seed"]
    assert entry not in json.loads((tmp_path / VERDICT_FILE).read_text())  # the next create probes in full


def test_the_store_is_checked_once_per_process_where_it_first_writes(s3: SeaweedServer) -> None:
    wire: list[str] = []

    def record(method: str, path: str, conditional: bool) -> None:
        wire.append(f"{method} {path.split('?')[0]}")

    proxy = FaultProxy(s3.endpoint, fault=record)  # a new endpoint: this process has not checked it
    try:
        t = Table.create(s3.uri(), SCHEMA, record_key="id", ordering_field="ts", storage_options=s3.options())
        t = Table.open(t.path, storage_options=s3.options(AWS_ENDPOINT_URL=proxy.endpoint))
        per_upsert = []
        for n in range(4):
            seen = len(wire)
            t.upsert(seed_row().set_column(0, "id", [[f"k{n}"]]))
            per_upsert.append(wire[seen:])
    finally:
        proxy.stop()
    checks = [i for i, r in enumerate(per_upsert[0]) if "/.lakeline-probe/" in r]
    # Three puts, then their removal (a bulk delete, POST to the bucket).
    assert len(checks) == CHECK_REQUESTS - 1 and per_upsert[0][max(checks) + 1].startswith("POST"), per_upsert[0]
    assert not any("/.lakeline-probe/" in r for u in per_upsert[1:] for r in u)
    first_event = next(i for i, r in enumerate(per_upsert[0]) if r.startswith("PUT") and "/timeline/" in r)
    assert max(checks) < first_event  # checked before the first event is put
    print(f"requests per upsert on the wire: {[len(u) for u in per_upsert]}")
    print(f"event GETs/PUTs per upsert: {[sum('/timeline/0' in r for r in u) for u in per_upsert]}")


@pytest.fixture
def strip_switch(open_s3: SeaweedServer) -> tuple[FaultProxy, dict[str, bool]]:
    """A proxy in front of ``open_s3`` that strips the conditional headers while ``on``."""
    switch = {"on": False}
    proxy = FaultProxy(open_s3.endpoint, fault=lambda m, p, c: Fault("strip") if switch["on"] else None)
    return proxy, switch


def event(seq: int, token: str, instant: int | None = None) -> Event:
    state = State.REQUESTED if instant is None else State.COMPLETED
    return Event(seq, 10**9 + seq, seq if instant is None else instant, Action.COMMIT, state, {}, token)


def test_a_stale_writer_never_puts_to_a_taken_slot(
    open_s3: SeaweedServer, strip_switch: tuple[FaultProxy, dict[str, bool]]
) -> None:
    proxy, switch = strip_switch
    try:
        uri, options = open_s3.uri(), open_s3.options(AWS_ENDPOINT_URL=proxy.endpoint)
        a, b = log_at(uri, options), log_at(uri, options)
        a.append(Action.COMMIT, State.REQUESTED)  # checks the store (headers honoured)
        b.refresh()
        landed = b.append(Action.COMMIT, State.REQUESTED)  # slot 1; a's view ends at 0
        switch["on"] = True  # the proxy starts stripping the conditional headers
        mine = a.append(Action.COMMIT, State.REQUESTED)
    finally:
        proxy.stop()
    # a saw slot 1 taken before putting (a stripped put would have overwritten b's commit).
    assert mine.seq == 2
    events = log_at(uri, open_s3.options()).refresh().events_after(-1)
    assert [(e.seq, e.token) for e in events][1:] == [(1, landed.token), (2, mine.token)]


def test_an_event_overwritten_right_after_its_put_fails_its_writer(s3: SeaweedServer) -> None:
    uri = s3.uri()
    writer = log_at(uri, s3.options())
    first = writer.append(Action.COMMIT, State.REQUESTED)
    objects = Storage.for_uri(uri, s3.options()).objects
    assert objects is not None
    slot = f"{Storage.for_uri(uri, s3.options()).path(META_DIR)}/timeline/{1:020d}.json"
    racer = event(1, "racer")

    def racing_stripped_put() -> None:
        # Another writer's create-only put at the same slot, its header stripped: it
        # overwrites the event just put.
        objects.put(slot, encode(racer, first.token))

    faults.on("log.store.after_write", racing_stripped_put)
    try:
        with pytest.raises(UnsafeStorageError, match="overwritten right after it was put; this write did not commit"):
            writer.append(Action.COMMIT, State.INFLIGHT, instant=first.seq)
    finally:
        faults.disarm_all()
    events = log_at(uri, s3.options()).refresh().events_after(-1)
    assert [e.token for e in events] == [first.token, "racer"]  # the writer's event is not there


def test_a_reader_finds_an_overwritten_event_by_its_successor(s3: SeaweedServer) -> None:
    uri = s3.uri()
    writer = log_at(uri, s3.options())
    done = [writer.append(Action.COMMIT, State.REQUESTED) for _ in range(3)]
    storage = Storage.for_uri(uri, s3.options())
    assert storage.objects is not None
    # A stripped put of a stale writer overwrote event 1 (before the guards existed,
    # or by another client): event 2 names event 1's token, which is gone.
    storage.objects.put(f"{storage.path(META_DIR)}/timeline/{1:020d}.json", encode(event(1, "stale"), done[0].token))
    with pytest.raises(TimelineGapError, match=f"follows event token {done[1].token}, but slot 1 holds token stale"):
        log_at(uri, s3.options()).refresh()
    # The writer's own last event overwritten: its next append is refused before it
    # puts anything (it would follow an event the log no longer holds).
    storage.objects.put(f"{storage.path(META_DIR)}/timeline/{2:020d}.json", encode(event(2, "stale2"), "stale"))
    with pytest.raises(TimelineGapError, match="event 2, which this write follows, was overwritten"):
        writer.append(Action.COMMIT, State.REQUESTED)
    assert storage.objects.head(f"{storage.path(META_DIR)}/timeline/{3:020d}.json") is None


def test_events_without_a_predecessor_still_read_and_append(s3: SeaweedServer) -> None:
    uri = s3.uri()
    storage = Storage.for_uri(uri, s3.options())
    assert storage.objects is not None
    old = [event(0, "t0"), event(1, "t1"), event(2, "t2", instant=1)]
    for e in old:  # as written before events named their predecessor
        storage.objects.create(f"{storage.path(META_DIR)}/timeline/{e.seq:020d}.json", e.to_json().encode())
    writer = log_at(uri, s3.options())
    new = writer.append(Action.COMMIT, State.REQUESTED)
    raw = json.loads(storage.objects.get(f"{storage.path(META_DIR)}/timeline/{3:020d}.json"))
    assert new.seq == 3 and raw["prev"] == "t2"
    assert [e.token for e in log_at(uri, s3.options()).refresh().events_after(-1)] == ["t0", "t1", "t2", new.token]
