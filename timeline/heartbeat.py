"""Heartbeats: how a writer or service shows it is still working on an instant.

A :class:`Heartbeat` records a beat through the store every ``heartbeat.interval-ms``
from a daemon thread while the instant is inflight. An instant is *failed* when its last
beat (or, with none, its requested time) is older than interval × (misses + 1); only
then may the rollback service end it, or another executor re-claim a service instant.
A process that dies stops beating, which is the whole point: no coordination with it
is needed.

A beat belongs to an *attempt*: writers beat with the empty attempt, a service
executor with the attempt id its claiming event carries (:mod:`lakeline.services.phases`).
Two executors of one instant (the loser of a claim race, a stale executor that woke
up) therefore never overwrite or clear each other's beat, and expiry is judged on the
beat of the attempt the timeline names (:func:`attempt_expired`).
"""

from __future__ import annotations

import threading

from .instant import Instant, datetime_to_micros
from .log import now_us
from .storage.event_log.protocol import TimelineStore


def expiry_us(interval_ms: int, tolerable_misses: int) -> int:
    """How old a beat may be before its instant counts as failed."""
    return interval_ms * 1000 * (tolerable_misses + 1)


def is_expired(
    instant: Instant, beats: dict[int, int], interval_ms: int, tolerable_misses: int, now: int | None = None
) -> bool:
    """Whether a pending instant's writer has stopped beating."""
    last = beats.get(instant.id, datetime_to_micros(instant.requested_at))
    return (now if now is not None else now_us()) - last > expiry_us(interval_ms, tolerable_misses)


def attempt_expired(
    instant: Instant,
    attempt: str,
    since_us: int,
    beats: dict[tuple[int, str], int],
    interval_ms: int,
    tolerable_misses: int,
    now: int | None = None,
) -> bool:
    """Whether ``attempt`` of ``instant`` has stopped beating: its last beat, or with
    none ``since_us`` (when the attempt claimed the instant), is too old. Beats of other
    attempts of the same instant do not count."""
    last = max(beats.get((instant.id, attempt), since_us), since_us)
    return (now if now is not None else now_us()) - last > expiry_us(interval_ms, tolerable_misses)


class Heartbeat:
    """Beats for one instant (one attempt of it) from a daemon thread until stopped.

    Use as a context manager around the inflight work.
    """

    def __init__(self, store: TimelineStore, instant: int, interval_ms: int, attempt: str = "") -> None:
        self.store = store
        self.instant = instant
        self.attempt = attempt
        self.interval_s = interval_ms / 1000.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._beaten = False

    def start(self, immediate: bool = True) -> Heartbeat:
        """Beat now (``immediate``) or first after half an interval, then every interval.

        A writer's instant counts from its requested time until it first beats
        (:func:`is_expired`), so a writer need not beat at once: a commit that ends within
        half an interval (most do) never writes a beat nor clears one, two requests fewer
        per commit. A service executor beats at once: its claim is judged by its own
        beat, and the claim race's loser is told apart by it.
        """
        if immediate:
            self._beat()
        self._thread = threading.Thread(
            target=self._run, args=(immediate,), name=f"heartbeat-{self.instant}", daemon=True
        )
        self._thread.start()
        return self

    def _beat(self) -> None:
        self._beaten = True  # before the put: a put that fails may still have landed
        self.store.beat(self.instant, now_us(), self.attempt)

    def _run(self, beaten: bool) -> None:
        wait = self.interval_s if beaten else self.interval_s / 2
        while not self._stop.wait(wait):
            wait = self.interval_s
            try:
                self._beat()
            except Exception:  # noqa: BLE001 - a missed beat is tolerated; the next may land
                continue

    def stop(self, clear: bool = True) -> None:
        """Stop beating; ``clear`` removes this attempt's beat (and only this one's),
        when it ever beat."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if clear and self._beaten:
            self.store.clear_beat(self.instant, self.attempt)

    def __enter__(self) -> Heartbeat:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
