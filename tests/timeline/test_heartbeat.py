"""Heartbeats (timeline/heartbeat.py): a writer beats first after half an interval, so a
short commit writes no beat and clears none; a service beats at once; a pending instant
without a beat counts from its requested time."""

from __future__ import annotations

import time

from lakeline.timeline.heartbeat import Heartbeat, is_expired
from lakeline.timeline.instant import Action, State
from lakeline.timeline.log import EventLog

from tests.helpers import StoreFactory


def test_a_writer_that_ends_within_half_an_interval_never_beats(store_factory: StoreFactory) -> None:
    store = store_factory()
    cleared: list[tuple[int, str]] = []
    clear = store.clear_beat
    store.clear_beat = lambda i, a="": (cleared.append((i, a)), clear(i, a))[1]  # type: ignore[method-assign]
    beat = Heartbeat(store, 7, interval_ms=10_000).start(immediate=False)
    beat.stop(clear=True)
    assert store.beats() == {} and cleared == []  # no put, no delete


def test_a_writer_beats_after_half_an_interval_and_clears_its_beat(store_factory: StoreFactory) -> None:
    store = store_factory()
    beat = Heartbeat(store, 7, interval_ms=100).start(immediate=False)
    deadline = time.monotonic() + 10
    while (7, "") not in store.beats() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert (7, "") in store.beats()
    beat.stop(clear=True)
    assert store.beats() == {}


def test_a_service_beats_at_once(store_factory: StoreFactory) -> None:
    store = store_factory()
    beat = Heartbeat(store, 8, interval_ms=10_000, attempt="a1").start()
    try:
        assert (8, "a1") in store.beats()
    finally:
        beat.stop(clear=True)
    assert store.beats() == {}


def test_a_pending_instant_without_a_beat_counts_from_its_requested_time(store_factory: StoreFactory) -> None:
    log = EventLog(store_factory())
    ev = log.append(Action.COMMIT, State.REQUESTED, {})
    inst = log.refresh().get(ev.instant)
    assert not is_expired(inst, {}, interval_ms=1000, tolerable_misses=1, now=ev.ts_us + 1_999_000)
    assert is_expired(inst, {}, interval_ms=1000, tolerable_misses=1, now=ev.ts_us + 2_001_000)
