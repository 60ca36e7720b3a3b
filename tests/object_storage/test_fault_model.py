"""The completion-order model under faults between client and store, several writer
processes at once (issue 45 item 5).

A loopback proxy (:class:`tests.object_storage.proxy.FaultProxy`) stands between the
writers and the real server and, at moments picked at random from a seed, loses an
answer (the request was done), answers ``409``/``412`` in place of a conditional put's
``2xx``, answers ``503 SlowDown`` without forwarding, holds an answer past the client's
timeout (so it retries a request that landed), or does a request twice. The writers are
separate processes (:mod:`tests.object_storage.writers`), each appending one row per
write to a keyless table, so a commit applied twice shows as two rows.

One more writer reaches the store through a proxy that strips ``If-None-Match`` and
``If-Match`` from everything (a misconfigured route in front of an existing table), and
the faulty route strips them at random moments from the first-write check's requests:
such a write must fail with :class:`UnsafeStorageError` before it writes anything.
(Stripped headers on a racing event put itself are not in the random mix: two writers
racing for one slot through a store that ignores the header can lose a commit no check
can see. The guards of ``test_lost_commits`` narrow that to a race within a round trip.)

After every run, read straight from the server: every write reported committed is
present exactly once, none that failed definitely is present, one whose outcome is
unknown (:class:`CommitOutcomeUnknownError`) at most once; the timeline reads, every
event names its predecessor, and the log is gapless. ``make test`` runs two seeds; the
soak runs more seeds, writers and writes, inserts and upserts.
"""

from __future__ import annotations

from collections import Counter

import pytest
from lakeline.table import Table
from lakeline.timeline.storage.event_log.object_store import ObjectStoreLog
from lakeline.timeline.storage.filesystem import META_DIR, Storage

from tests.object_storage.proxy import Fault, FaultProxy, SeededFaults
from tests.object_storage.s3_tables import SCHEMA
from tests.object_storage.writers import check_model, run_writers, seed_row
from tests.seaweedfs import SeaweedServer

#: Each request's chance of each fault on the faulty route (``status`` counts only on
#: conditional puts, the only requests a 409/412 answers).
RATES = {"lose": 0.03, "status": 0.08, "throttle": 0.03, "duplicate": 0.03, "delay": 0.004}
#: The client's timeout on the faulty route, and how late a delayed answer comes.
TIMEOUT, LATE_S = "1s", 1.3


class Faults(SeededFaults):
    """:data:`RATES`, plus stripping the first-write check's requests now and then."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed, RATES, delay_s=LATE_S)
        self.strip = SeededFaults(seed + 1, {"strip": 0.15})

    def __call__(self, method: str, path: str, conditional: bool) -> Fault | None:
        if "/.lakeline-probe/" in path:
            return self.strip(method, path, conditional)
        return super().__call__(method, path, conditional)


def run(server: SeaweedServer, seed: int, writers: int, per_writer: int, op: str) -> Counter[str]:
    keyed = {"record_key": "id", "ordering_field": "ts"} if op == "upsert" else {}
    t = Table.create(server.uri(), SCHEMA, storage_options=server.options(), **keyed)  # type: ignore[arg-type]
    t.insert(seed_row()) if op == "insert" else t.upsert(seed_row())
    faulty = FaultProxy(server.endpoint, fault=Faults(seed))
    stripping = FaultProxy(server.endpoint, drop_conditions=True)
    try:
        routes = [server.options(AWS_ENDPOINT_URL=faulty.endpoint, TIMEOUT=TIMEOUT)] * writers
        routes.append(server.options(AWS_ENDPOINT_URL=stripping.endpoint))
        outcomes = run_writers(t.path, routes, op, per_writer)
    finally:
        faulty.stop()
        stripping.stop()
    stripped = [o for o in outcomes if o.key.startswith(f"w{writers}-")]
    assert all(o.outcome == "failed" and o.error.startswith("UnsafeStorageError") for o in stripped), stripped
    ids = Table.open(t.path, storage_options=server.options()).to_arrow()["id"].to_pylist()
    tally = check_model(outcomes, ids)
    # The timeline reads from the server as a fresh process would: gapless, each event
    # after the one it names (the chain is checked while reading).
    storage = Storage.for_uri(t.path, server.options())
    events = ObjectStoreLog(storage, storage.path(META_DIR)).read_from(0)
    assert [e.seq for e in events] == list(range(len(events)))
    tally.update({f"proxy {k}": v for k, v in faulty.counts.items()})
    print(f"seed {seed}: {dict(tally)}")
    assert faulty.counts["requests"] > 100 and sum(faulty.counts.values()) - faulty.counts["requests"] > 5
    assert tally["committed"] > 0
    return tally


@pytest.mark.parametrize("seed", [1, 2])
def test_the_model_holds_under_faults_with_several_writer_processes(open_s3: SeaweedServer, seed: int) -> None:
    run(open_s3, seed, writers=3, per_writer=5, op="insert")


@pytest.mark.soak
@pytest.mark.parametrize("seed", range(10, 20))
@pytest.mark.parametrize("op", ["insert", "upsert"])
def test_the_model_holds_under_faults_soak(open_s3: SeaweedServer, seed: int, op: str) -> None:
    run(open_s3, seed, writers=4, per_writer=20, op=op)
