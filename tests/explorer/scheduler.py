"""Actors and the step scheduler: exactly one actor runs between two fault points.

Why threads and not processes: the scheduler must stop an actor at *every* fault point
and pick who goes next, which needs a hook on the point itself
(:func:`lakeline.timeline.diagnostics.faults.set_hook`). Each actor is a thread with its own
``Table.open`` handle (its own store and caches, as a separate process would have);
the hook parks a registered actor thread at each point until the scheduler gives it
the next turn, and lets every other thread through (heartbeat threads, engine worker
threads, the explorer's own checks).

A crash is an actor parked for good: nothing after its point runs, and its store drops
its heartbeats without clearing them, so the table sees a dead process once the beat
expires. Conversely a *live* actor parked at a point must never look dead because the
machine is slow: its store reports a fresh beat for every instant it is working on, so
only crashes expire and a replay takes the same path.

The table lock is a lease polled with sleeps: an actor parked while holding it would
stall every other actor that wants it. Points reached inside ``table_lock`` therefore
do not yield (the locked section runs as part of the step that entered it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lakeline.timeline.diagnostics import faults
from lakeline.timeline.instant import State
from lakeline.timeline.log import now_us

if TYPE_CHECKING:
    from lakeline.table import Table

#: The pseudo-point an actor parks at before each of its operations (it plans there).
OP_START = "op.start"


class ActorKilled(BaseException):
    """Unwinds a parked actor thread when a run is torn down (BaseException so that
    nothing in lakeline handles it as an error)."""


class StepTimeout(Exception):
    """An actor neither reached a fault point nor finished within the step timeout."""


@dataclass
class OpOutcome:
    """How one operation of an actor ended."""

    label: str
    ok: bool
    result: Any = None
    error: BaseException | None = None
    instants: list[int] = field(default_factory=list)


class Actor:
    """One logical process: a thread running its operations in order on its own handle."""

    def __init__(self, index: int, name: str, table: Table, ops: list[Any], sched: Scheduler) -> None:
        self.index = index
        self.name = name
        self.table = table
        self.ops = ops
        self.sched = sched
        self.state = "new"  # new, parked, running, done, crashed
        self.point: str | None = None
        self.op_index = -1
        self.outcomes: list[OpOutcome] = []
        self.touched: set[int] = set()  # instants of the current op (requested or beaten)
        self.attempts: set[tuple[int, str]] = set()
        self.events: list[str] = []  # events appended during the current step
        self.lock_depth = 0
        self.killed = False
        self._turn = False
        self.thread = threading.Thread(target=self._main, name=f"actor-{name}", daemon=True)
        _wrap_store(self)

    # -- the actor's side ----------------------------------------------------------

    def _main(self) -> None:
        try:
            for i, op in enumerate(self.ops):
                self.op_index = i
                self.park(OP_START)
                outcome = OpOutcome(op.label(), ok=True)
                self.sched.current_op[self.index] = outcome
                # What the op read of the schema, before it commits (the checker may see
                # its instant complete while the op is parked on its way out).
                seen: dict[str, Any] = self.sched.seen.setdefault((self.index, i), {})
                try:
                    outcome.result = op.run(self.table, seen)
                except ActorKilled:
                    return
                except Exception as e:  # noqa: BLE001 - every outcome is recorded and judged
                    outcome.ok, outcome.error = False, e
                self.touched.clear()
                self.attempts.clear()
                self.outcomes.append(outcome)
        except ActorKilled:
            return
        finally:
            with self.sched.cond:
                if self.state != "crashed":
                    self.state = "done"
                    self.point = None
                self.sched.cond.notify_all()

    def park(self, point: str) -> None:
        """Wait here until the scheduler gives this actor its next turn."""
        cond = self.sched.cond
        with cond:
            if self.killed:
                raise ActorKilled()
            self.point = point
            if self.state != "crashed":
                self.state = "parked"
            cond.notify_all()
            while not self._turn and not self.killed:
                cond.wait()
            self._turn = False
            if self.killed:
                raise ActorKilled()
            self.state = "running"

    # -- the scheduler's side --------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self.state in ("new", "parked")

    def give_turn(self, timeout_s: float) -> None:
        """Run this actor up to its next point (or its end)."""
        cond = self.sched.cond
        with cond:
            self.events = []
            self.state = "running"
            self._turn = True
            cond.notify_all()
            deadline = time.monotonic() + timeout_s
            while self.state == "running" or self._turn:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StepTimeout(
                        f"actor {self.name} did not reach a point within {timeout_s:.0f} s (last point {self.point})"
                    )
                cond.wait(left)

    def crash(self) -> None:
        """The process dies where it is parked: it never runs again, its beats stop."""
        with self.sched.cond:
            self.state = "crashed"

    def revive(self) -> None:
        """A crashed actor wakes up where it stopped (a stale process): it beats again
        and runs on when given turns."""
        with self.sched.cond:
            if self.state == "crashed":
                self.state = "parked"

    def kill(self) -> None:
        with self.sched.cond:
            self.killed = True
            self.sched.cond.notify_all()

    def live_for(self, instant: int) -> bool:
        return self.state not in ("crashed", "done") and instant in self.touched


def _wrap_store(actor: Actor) -> None:
    """Give the actor's store the crash and liveness behaviour (see the module docstring)
    and record the events it appends."""
    store = actor.table.log.store
    sched = actor.sched
    put, beat, last_beats = store.put_if_absent, store.beat, store.last_beats
    beats = getattr(store, "beats", None)

    def put_if_absent(event: Any) -> None:
        put(event)
        if actor.state == "crashed" or actor.killed:
            return
        actor.events.append(f"{event.action.value}.{event.state.value}#{event.instant}")
        sched.appended.append((actor.index, actor.op_index, event))
        if event.state is State.REQUESTED:
            actor.touched.add(event.instant)
            sched.instant_op.setdefault(event.instant, (actor.index, actor.op_index))
        for k, v in (event.payload or {}).items():
            if "attempt" in k and isinstance(v, str):
                actor.attempts.add((event.instant, v))
                actor.touched.add(event.instant)

    def beat_(instant: int, *args: Any, **kwargs: Any) -> None:
        if actor.state == "crashed" or actor.killed:
            return  # a dead process does not beat
        attempt = args[1] if len(args) > 1 else kwargs.get("attempt", "")
        actor.touched.add(instant)
        actor.attempts.add((instant, str(attempt)))
        beat(instant, *args, **kwargs)

    def live_now(out: dict[Any, int], by_attempt: bool) -> dict[Any, int]:
        now = now_us()
        for a in sched.actors:
            if a.state in ("crashed", "done") or a.killed:
                continue
            for i in list(a.touched):
                if by_attempt:
                    out[(i, "")] = now
                    for key in list(out):
                        if isinstance(key, tuple) and key[0] == i:
                            out[key] = now
                    for att in list(a.attempts):
                        if att[0] == i:
                            out[att] = now
                else:
                    out[i] = now
        return out

    def last_beats_() -> dict[int, int]:
        return live_now(dict(last_beats()), by_attempt=False)

    store.put_if_absent = put_if_absent  # type: ignore[method-assign]
    store.beat = beat_  # type: ignore[method-assign]
    store.last_beats = last_beats_  # type: ignore[method-assign]
    if beats is not None:

        def beats_() -> dict[Any, int]:
            return live_now(dict(beats()), by_attempt=True)

        store.beats = beats_  # type: ignore[method-assign]


class Scheduler:
    """Owns the actors of one run and the fault-point hook that parks them."""

    def __init__(self, yield_at: Callable[[str], bool], step_timeout_s: float = 60.0) -> None:
        self.cond = threading.Condition()
        self.actors: list[Actor] = []
        self.by_thread: dict[int, Actor] = {}
        self.yield_at = yield_at
        self.step_timeout_s = step_timeout_s
        self.instant_op: dict[int, tuple[int, int]] = {}
        self.current_op: dict[int, OpOutcome] = {}
        #: (actor, op index) -> what that op recorded of the schema (``Op.run``'s ``seen``).
        self.seen: dict[tuple[int, int], dict[str, Any]] = {}
        self.appended: list[tuple[int, int, Any]] = []
        self._previous_hook: Callable[[str], None] | None = None
        self._restore: list[tuple[Any, str, Any]] = []

    def add(self, name: str, table: Table, ops: list[Any]) -> Actor:
        actor = Actor(len(self.actors), name, table, ops, self)
        self.actors.append(actor)
        return actor

    def _hook(self, name: str) -> None:
        actor = self.by_thread.get(threading.get_ident())
        if actor is None or actor.thread is not threading.current_thread():
            return  # not an actor (thread ids are reused once an actor's thread ended)
        if actor.killed:
            raise ActorKilled()
        if actor.lock_depth > 0 or not self.yield_at(name):
            return
        actor.park(name)

    @contextmanager
    def installed(self) -> Iterator[Scheduler]:
        """Install the hook and the lock patch, start the actor threads (each parks at
        its first operation); on exit kill and join every actor and undo the patches."""
        import lakeline.services.indexing.indexer as indexing
        import lakeline.services.phases as framework

        original = framework.table_lock

        @contextmanager
        def counted_lock(table: Any) -> Iterator[None]:
            actor = self.by_thread.get(threading.get_ident())
            if actor is not None and actor.thread is not threading.current_thread():
                actor = None
            with original(table):
                if actor is not None:
                    actor.lock_depth += 1
                try:
                    yield
                finally:
                    if actor is not None:
                        actor.lock_depth -= 1

        for mod in (framework, indexing):
            if hasattr(mod, "table_lock"):
                self._restore.append((mod, "table_lock", mod.table_lock))
                mod.table_lock = counted_lock
        self._previous_hook = faults.set_hook(self._hook)
        try:
            for a in self.actors:
                a.thread.start()
                self.by_thread[a.thread.ident or 0] = a
            with self.cond:
                while any(a.point is None and a.state != "done" for a in self.actors):
                    self.cond.wait(1.0)
            yield self
        finally:
            for a in self.actors:
                a.kill()
            for a in self.actors:
                a.thread.join(timeout=20)
            faults.set_hook(self._previous_hook)
            for mod, attr, value in self._restore:
                setattr(mod, attr, value)
