"""The runner's queue of due (table, service) pairs: who runs next when threads are few.

Why a queue of our own rather than apscheduler's executor: apscheduler runs jobs in
the order they fire, so with more due than threads a busy table's frequent schedules
would take every thread while a table with a huge backlog waited its turn. Schedules
only *put* pairs here; the runner's threads *take* them by priority:

1. **missed ticks** first: a pair whose schedule fired again while it was still
   queued has waited a whole period; the more periods, the sooner it goes. This is
   what keeps any table from starving, whatever the backlogs;
2. then the **biggest backlog** (:attr:`~.stats.TableStats.backlog` of its
   table: pending instants, log files, small slices, as of the last stats read);
3. then the oldest.

A pair is queued at most once and never while it runs: a compaction slower than its
schedule does not pile up copies of itself (its fires count as missed ticks instead).
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass

from .tables import Target

#: A pair's key: (table name, service).
Key = tuple[str, str]


@dataclass
class Due:
    """A queued (table, service) pair."""

    target: Target
    service: str
    seq: int
    backlog: int = 0
    missed: int = 0

    @property
    def key(self) -> Key:
        return self.target.name, self.service

    def priority(self) -> tuple[int, int, int]:
        return self.missed, self.backlog, -self.seq


class DueQueue:
    """Thread-safe: schedules :meth:`put`, worker threads :meth:`take` and :meth:`done`."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queued: dict[Key, Due] = {}
        self._running: set[Key] = set()
        self._seq = itertools.count()
        self._closed = False

    def put(self, target: Target, service: str, backlog: int) -> bool:
        """Queue the pair, or count a missed tick if it is queued already; nothing while
        it runs or once the queue is closed. Returns whether it was newly queued."""
        key = (target.name, service)
        with self._cond:
            if self._closed or key in self._running:
                return False
            if key in self._queued:
                self._queued[key].missed += 1
                return False
            self._queued[key] = Due(target, service, next(self._seq), backlog)
            self._cond.notify()
            return True

    def take(self, wait: bool) -> Due | None:
        """The next pair by priority, now marked running; None when the queue is closed,
        or (``wait=False``) empty."""
        with self._cond:
            while True:
                if self._closed:
                    return None
                if self._queued:
                    due = max(self._queued.values(), key=Due.priority)
                    del self._queued[due.key]
                    self._running.add(due.key)
                    return due
                if not wait:
                    return None
                self._cond.wait()

    def done(self, due: Due) -> None:
        """The pair's run ended: it may be queued again."""
        with self._cond:
            self._running.discard(due.key)
            self._cond.notify_all()

    def close(self) -> None:
        """Take nothing more: drop what is queued and wake every waiting thread."""
        with self._cond:
            self._closed = True
            self._queued.clear()
            self._cond.notify_all()

    def running(self) -> set[Key]:
        """The pairs running now."""
        with self._cond:
            return set(self._running)
