"""Faults on the wire between lakeline and the store: throttling and lost responses.

Through :class:`tests.object_storage.proxy.FaultProxy` in front of the real server:
a store that answers ``503 SlowDown`` to every few requests must cost retries (with
backoff), never a failed or doubled write; a create-only put of an event whose response
is lost (done on the server, the connection closed unanswered) must be found again by
its token, so the write commits exactly once.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator

import pyarrow.compute as pc
import pytest
from lakeline.table import Table

from tests.object_storage.proxy import FaultProxy
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
