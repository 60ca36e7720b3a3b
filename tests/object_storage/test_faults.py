"""Faults on the wire between lakeline and the store: throttling and lost responses.

Through :class:`tests.object_storage.proxy.FaultProxy` in front of the real server:
a store that answers ``503 SlowDown`` to every few requests must cost retries (with
backoff), never a failed or doubled write; a create-only put of an event whose response
is lost (done on the server, the connection closed unanswered) must be found again by
its token, so the write commits exactly once; and a lease renewal that landed but whose
answer was lost (or replaced by a 409/412) leaves a healthy holder holding its lease
(issue 45 item 6): the client's retry is refused as changed, and the lease is read back
before it is declared lost.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator

import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.lock import ObjectLock
from lakeline.timeline.storage.filesystem import Storage

from tests.object_storage.proxy import Fault, FaultProxy
from tests.object_storage.s3_tables import SCHEMA, rows
from tests.seaweedfs import SeaweedServer

EVENT = re.compile(r"/\.lakeline/timeline/\d{20}\.json$")


@pytest.fixture
def throttled(s3: SeaweedServer) -> Iterator[FaultProxy]:
    proxy = FaultProxy(s3.endpoint, throttle_every=4)
    yield proxy
    proxy.stop()


def test_throttling_costs_retries_not_writes(s3: SeaweedServer, throttled: FaultProxy) -> None:
    options = s3.options(AWS_ENDPOINT_URL=throttled.endpoint)
    t = Table.create(s3.uri(), SCHEMA, record_key="id", ordering_field="ts", table_type="mor", storage_options=options)
    t.insert(rows(0, 300))
    t.upsert(rows(200, 400, ts=2, v=2.0))
    t.services.compact()
    got = Table.open(t.path, storage_options=options).to_arrow()
    assert got.num_rows == 400 and pc.sum(got["v"]).as_py() == 200 * 1.0 + 200 * 2.0
    assert throttled.counts["throttled"] >= 10, throttled.counts  # it really was throttled
    assert not t.timeline.pending() and all(i.state == "completed" for i in t.timeline.instants())


def test_a_lost_response_to_an_event_put_commits_once(s3: SeaweedServer) -> None:
    seen: Counter[str] = Counter()

    def lose(method: str, path: str) -> bool:
        # Every third event put of the table, done on the server but never answered.
        if method != "PUT" or not EVENT.search(path.split("?")[0]):
            return False
        seen["events"] += 1
        return seen["events"] % 3 == 0

    proxy = FaultProxy(s3.endpoint, lose_response=lose)
    try:
        options = s3.options(AWS_ENDPOINT_URL=proxy.endpoint)
        t = Table.create(s3.uri(), SCHEMA, record_key="id", ordering_field="ts", storage_options=options)
        for i in range(4):
            t.upsert(rows(i * 50, i * 50 + 100, ts=i + 1, v=float(i)))
        assert proxy.counts["lost"] >= 4, proxy.counts
    finally:
        proxy.stop()
    t = Table.open(t.path, storage_options=s3.options())
    tl = t.timeline
    writes = [i for i in tl.completed() if i.action.writes_data]
    assert len(writes) == 4 and not tl.pending(), "each upsert committed exactly once"
    assert all(i.state == "completed" for i in tl.instants())
    assert sorted(t.to_arrow()["id"].to_pylist()) == [f"k{i:07d}" for i in range(250)]


@pytest.mark.parametrize("fault", ["lose", "status"])
def test_a_lease_renewal_whose_answer_was_lost_keeps_the_lease(s3: SeaweedServer, fault: str) -> None:
    armed = {"on": False}

    def once(method: str, path: str, conditional: bool) -> Fault | None:
        # The next put of the lease: done on the server, its answer lost or a 412.
        if armed["on"] and method == "PUT" and path.split("?")[0].endswith(".lock"):
            armed["on"] = False
            return Fault(fault, status=412)
        return None

    proxy = FaultProxy(s3.endpoint, fault=once)
    try:
        st = Storage.for_uri(s3.uri(), s3.options(AWS_ENDPOINT_URL=proxy.endpoint))
        assert st.objects is not None
        path = f"{st.base}/.lakeline/locks/table.lock"
        lease = ObjectLock(st.objects, path, lease_ms=60_000)
        assert lease.try_acquire()
        first = json.loads(st.objects.get(path))["expires_us"]
        armed["on"] = True
        lease.renew()  # healthy: must not raise LockLostError
        assert not armed["on"] and proxy.counts["lost" if fault == "lose" else "status"] == 1, proxy.counts
        held = json.loads(st.objects.get(path))
        assert held["owner"] == lease.owner and held["expires_us"] > first
        assert not ObjectLock(st.objects, path, lease_ms=60_000).try_acquire()  # still ours
        lease.renew()  # and renewable again
    finally:
        proxy.stop()
