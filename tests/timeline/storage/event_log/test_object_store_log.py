"""The event log on an object store: what opening it costs, and checkpoints that heal.

Opening must cost a bounded number of requests however long the history (issue 27):
the hint, the newest checkpoint, and the events after it, probed a window at a time.
Counted on the wire, through :class:`tests.object_storage.proxy.FaultProxy` in front of
the real server, for a log of 120 events and one of 1,250: the same bound holds.
"""

from __future__ import annotations

from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.storage.event_log.object_store import CHECKPOINT_EVERY, PROBE_WINDOW, ObjectStoreLog
from lakeline.timeline.storage.filesystem import META_DIR, Storage

from tests.object_storage.proxy import FaultProxy
from tests.seaweedfs import SeaweedServer

#: Requests a fresh open may make: the mark, the hint, the checkpoint and the next
#: (missing) one, then up to a checkpoint interval of events in windows (plus the
#: window that finds the end).
BOUND = 4 + (CHECKPOINT_EVERY // PROBE_WINDOW + 2) * PROBE_WINDOW


def fill(store: ObjectStoreLog, n: int) -> None:
    for seq in range(n):
        store.put_if_absent(Event(seq, 10**9 + seq, seq, Action.COMMIT, State.REQUESTED, {"n": seq}, f"t{seq}"))


def log_at(uri: str, options: dict[str, str]) -> ObjectStoreLog:
    storage = Storage.for_uri(uri, options)
    return ObjectStoreLog(storage, storage.path(META_DIR))


def requests_to_open(s3: SeaweedServer, uri: str) -> tuple[int, int]:
    """(requests, events) of one fresh read of the whole log, counted on the wire."""
    proxy = FaultProxy(s3.endpoint)
    try:
        events = log_at(uri, s3.options(AWS_ENDPOINT_URL=proxy.endpoint)).read_from(0)
        return proxy.counts["requests"], len(events)
    finally:
        proxy.stop()


def test_opening_costs_a_bounded_number_of_requests_however_long_the_log(s3: SeaweedServer) -> None:
    short, long = s3.uri("short"), s3.uri("long")
    fill(log_at(short, s3.options()), 120)
    fill(log_at(long, s3.options()), 1250)
    short_requests, short_events = requests_to_open(s3, short)
    long_requests, long_events = requests_to_open(s3, long)
    assert (short_events, long_events) == (120, 1250)
    assert short_requests <= BOUND and long_requests <= BOUND, (short_requests, long_requests, BOUND)


def test_a_reader_heals_a_missing_checkpoint(s3: SeaweedServer) -> None:
    uri = s3.uri()
    store = log_at(uri, s3.options())
    fill(store, 3 * CHECKPOINT_EVERY + 5)
    for c in range(CHECKPOINT_EVERY, 3 * CHECKPOINT_EVERY + 1, CHECKPOINT_EVERY):  # as if every appender died
        store.objects.delete(store._checkpoint_path(c))
    store.objects.delete(f"{store.checkpoints_dir}/_last_checkpoint")
    assert [e.seq for e in store.read_from(0)] == list(range(3 * CHECKPOINT_EVERY + 5))  # probed, then healed
    requests, events = requests_to_open(s3, uri)
    assert events == 3 * CHECKPOINT_EVERY + 5 and requests <= BOUND


def test_archival_keeps_the_log_readable_from_a_checkpoint(s3: SeaweedServer) -> None:
    uri = s3.uri()
    store = log_at(uri, s3.options())
    fill(store, 2 * CHECKPOINT_EVERY + 10)
    store.delete_through(CHECKPOINT_EVERY + 50)
    assert [e.seq for e in log_at(uri, s3.options()).read_from(0)] == list(
        range(CHECKPOINT_EVERY + 51, 2 * CHECKPOINT_EVERY + 10)
    )
    assert store.objects.head(store._event_path(CHECKPOINT_EVERY)) is None  # archived events are gone
