"""Metrics hook: one process-wide sink that code reports measurements to.

Why: code deep in the protocols (how long the table lock was held, ...) has numbers an
operator wants, but the library must not pick a metrics system nor keep them itself (a
list that grows forever in a long-lived runner). It calls :func:`observe` (or times a
block with :func:`timed`); by default that goes to a no-op sink. Whoever runs the
process binds a real one with :func:`set_sink`: the scheduled runner a Prometheus
adapter, a test or a benchmark a :class:`RecordingSink` (see :func:`recording`).

Names are dotted, ``<subsystem>.<what>_<unit>`` (``service.lock_hold_seconds``); labels
are keyword arguments with string values. Measurements reported:

* ``service.lock_hold_seconds``: each time the table lock was held by a table service's
  phase (:func:`lakeline.services.phases.table_lock`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol


class MetricsSink(Protocol):
    """Where measurements go. Called on whichever thread measured; must not raise."""

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Record one observation of the metric ``name``."""
        ...


class NoopSink:
    """The default: measurements are dropped."""

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Drop the observation."""


@dataclass(frozen=True)
class Observation:
    """One measurement as a :class:`RecordingSink` keeps it."""

    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


class RecordingSink:
    """Keeps every observation in memory (tests, benchmarks); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.observations: list[Observation] = []

    def observe(self, name: str, value: float, **labels: str) -> None:
        """Append the observation."""
        with self._lock:
            self.observations.append(Observation(name, value, dict(labels)))

    def values(self, name: str) -> list[float]:
        """The values observed for ``name``, in order."""
        with self._lock:
            return [o.value for o in self.observations if o.name == name]


_sink: MetricsSink = NoopSink()


def set_sink(sink: MetricsSink | None) -> MetricsSink:
    """Bind ``sink`` for the whole process (``None``: back to the no-op); returns the previous one."""
    global _sink
    previous, _sink = _sink, (sink if sink is not None else NoopSink())
    return previous


def get_sink() -> MetricsSink:
    """The sink bound now."""
    return _sink


def observe(name: str, value: float, **labels: str) -> None:
    """Report one observation to the bound sink."""
    _sink.observe(name, value, **labels)


@contextmanager
def timed(name: str, **labels: str) -> Iterator[None]:
    """Observe the seconds the ``with`` block took (also when it raises)."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        observe(name, time.perf_counter() - t0, **labels)


@contextmanager
def recording() -> Iterator[RecordingSink]:
    """Bind a fresh :class:`RecordingSink` for the ``with`` block, then restore the previous sink."""
    sink = RecordingSink()
    previous = set_sink(sink)
    try:
        yield sink
    finally:
        set_sink(previous)
