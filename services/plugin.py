"""The table-service plugin point and the one result type every service returns.

A table service is a two-phase action on the timeline. *Plan* decides what to do from a
snapshot and becomes the ``requested`` event (so any process can pick it up later);
*execute* does the work through the table's engine and returns what goes into the
``completed`` event. The framework (:mod:`.phases`) owns everything around those two
calls: the table lock while planning, the transitions, the heartbeat, re-running an
interrupted execution, and aborting. A service only knows its own work.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..timeline.conflicts import Conflict
from ..timeline.diagnostics import faults
from ..timeline.errors import StaleAttemptError
from ..timeline.instant import Action, Instant, State
from ..timeline.plans import Plan, service_of
from ..timeline.timeline import Timeline

if TYPE_CHECKING:
    from ..table.engine import Engine
    from ..table.table import Table

#: ``progress(done, total)``: called as a service works through its units (files, groups).
Progress = Callable[[int, int], None]

T = TypeVar("T")
R = TypeVar("R")


def map_in_batches(
    engine: Engine,
    fn: Callable[[T], R],
    tasks: Sequence[T],
    batch: int,
    progress: Progress | None = None,
    fault: str | None = None,
) -> list[R]:
    """``engine.map(fn, tasks)`` a batch at a time, so a long service run reports
    ``progress`` and reaches its mid-work ``fault`` point between batches. Returns the
    results in task order."""
    out: list[R] = []
    if progress is not None:
        progress(0, len(tasks))
    for start in range(0, len(tasks), batch):
        out.extend(engine.map(fn, tasks[start : start + batch]))
        if fault is not None:
            faults.point(fault)
        if progress is not None:
            progress(len(out), len(tasks))
    return out


#: The payload key of a claiming ``inflight`` event (and of a ``rolled_back`` event an
#: executor appends): the id of the execution attempt.
ATTEMPT = "attempt"


def claim_of(timeline: Timeline, instant: int) -> tuple[str | None, int]:
    """``(attempt, ts_us)`` of the latest claiming ``inflight`` event of ``instant``:
    the attempt that holds it now; ``(None, 0)`` while it was never claimed. An
    ``inflight`` event without an attempt (a writer's, or an older executor's) is the
    attempt ``""``."""
    for ev in reversed(timeline.events_after(instant - 1)):
        if ev.instant == instant and ev.state is State.INFLIGHT:
            return str(ev.payload.get(ATTEMPT, "")), ev.ts_us
    return None, 0


@dataclass(frozen=True)
class Attempt:
    """One execution attempt of a service instant, as its claiming event names it.

    Every effect of an attempt is checked against the log: :meth:`check` is an append
    check (it runs against the exact log prefix the event lands on) that refuses the
    event unless this attempt still holds the instant.
    """

    instant: int
    id: str

    def holds(self, timeline: Timeline) -> bool:
        """Whether this attempt is the latest claim of its instant in ``timeline``."""
        return claim_of(timeline, self.instant)[0] == self.id

    def check(self, timeline: Timeline) -> None:
        """Refuse an event of this attempt once it no longer holds its instant.

        Raises:
            StaleAttemptError: another attempt re-claimed the instant.
        """
        if not self.holds(timeline):
            raise StaleAttemptError(
                f"attempt {self.id} no longer holds instant {self.instant} (another executor re-claimed it)"
            )


#: The attempt this thread executes (set by the framework around a service's execute,
#: complete and abort).
running: ContextVar[Attempt | None] = ContextVar("lakeline_service_attempt", default=None)


def fence(instant: int, also: Callable[[Timeline], None] | None = None) -> Callable[[Timeline], None]:
    """The append check every event of a service's execution carries: the running
    attempt still holds ``instant`` (when the framework runs it), then ``also``."""
    attempt = running.get()

    def check(timeline: Timeline) -> None:
        if attempt is not None and attempt.instant == instant:
            attempt.check(timeline)
        if also is not None:
            also(timeline)

    return check


@dataclass(frozen=True)
class ServiceResult:
    """What one service run did, in the same fields for every service.

    ``instant`` is None when there was nothing to do (or on a dry run); ``stats`` holds
    the service's counts, flat for every service (a rewriting service's commit metadata
    keeps its files in ``instant.metadata``): ``file_groups_compacted``,
    ``file_groups_clustered``, ``files_deleted``, ``events_archived``, ``rolled_back``,
    ... ``aborted`` is the reason when the service gave up (its inputs changed, or it
    failed) and ended its instant as rolled back, writers are never affected by that;
    ``conflict`` is then the typed reason when a concurrent instant changed its inputs. A
    dry run has ``dry_run``, the ``plan`` it would write (None: nothing to plan) and the
    ``pending`` instants a run would finish first.
    """

    instant: Instant | None
    stats: dict[str, Any] = field(default_factory=dict)
    aborted: str | None = None
    service: str = ""
    conflict: Conflict | None = None
    dry_run: bool = False
    plan: dict[str, Any] | None = None
    pending: tuple[int, ...] = ()

    @classmethod
    def of(cls, service: str, instant: Instant) -> ServiceResult:
        """The result of a completed service ``instant``, its stats read from its metadata."""
        return cls(instant, stats_of(instant.metadata), service=service)


def stats_of(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The flat stats of a completed service instant: a rewriting service's commit metadata
    nests its counts under ``stats``; the other services' metadata is the counts."""
    inner = metadata.get("stats")
    return dict(inner) if isinstance(inner, Mapping) else dict(metadata)


class Service(ABC):
    """One kind of table service (indexing, rollback, compaction, ...)."""

    #: The name users schedule it by (``t.services.schedule(name)``, the CLI, the runner).
    name: ClassVar[str]
    #: The timeline action of its instants.
    action: ClassVar[Action]

    @abstractmethod
    def plan(self, table: Table, snapshot: Timeline, **options: Any) -> Plan | None:
        """What to do, as a typed plan (:mod:`lakeline.timeline.plans`) that the framework
        writes as the ``requested`` event (``to_dict()``, plus the service's name); None
        when there is nothing to do.

        Runs under the table lock with ``snapshot`` read inside it: keep it brief.

        Raises:
            LakelineError: the request is refused (nothing is appended).
        """

    def check_plan(self, timeline: Timeline, plan: Plan) -> None:
        """Re-checked against the exact log prefix the ``requested`` event lands on (the
        lock is a liveness aid, this is what makes planning safe without it).

        Raises:
            LakelineError: the plan no longer holds.
        """

    @abstractmethod
    def execute(self, table: Table, instant: Instant, progress: Progress | None = None) -> dict[str, Any]:
        """Do the work of a scheduled ``instant`` and return its completion metadata.

        Must be safe to run again after an interruption at any point: the framework
        re-runs an inflight instant whose executor died.

        Raises:
            ServiceAbortedError: give up; the instant is rolled back.
        """

    def complete(self, table: Table, instant: Instant, metadata: dict[str, Any]) -> Instant:
        """Append the ``completed`` event (a service may check more first, e.g. under the
        table lock).

        Raises:
            ServiceAbortedError: the work can no longer be completed; the instant is rolled back.
        """
        ev = table.log.append(self.action, State.COMPLETED, metadata, instant=instant.id, check=fence(instant.id))
        return table.log.timeline.get(ev.instant)

    def abort(self, table: Table, instant: Instant, reason: str) -> None:
        """Undo what an aborted execution left (files, partitions); idempotent.

        The framework calls it only once this attempt's own ``rolled_back`` event
        landed: a stale attempt never gets here.
        """

    def abortable(self, instant: Instant) -> bool:
        """Whether a failed execution ends the instant as rolled back (True), or leaves
        it inflight for another executor to finish (an action that cannot be undone
        once started, e.g. dropping an index)."""
        return True

    def pending(self, timeline: Timeline) -> list[Instant]:
        """This service's pending instants, oldest first."""
        return [i for i in timeline.pending() if i.action is self.action and self.owns(i)]

    def owns(self, instant: Instant) -> bool:
        """Whether ``instant`` is one of this service's (several services may share an action)."""
        return service_of(instant.plan, self.name) == self.name
