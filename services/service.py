"""The table-service plugin point and the one result type every service returns.

A table service is a two-phase action on the timeline. *Plan* decides what to do from a
snapshot and becomes the ``requested`` event (so any process can pick it up later);
*execute* does the work through the table's engine and returns what goes into the
``completed`` event. The framework (:mod:`.framework`) owns everything around those two
calls: the table lock while planning, the transitions, the heartbeat, re-running an
interrupted execution, and aborting. A service only knows its own work.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from ..timeline import faults
from ..timeline.errors import LakelineError
from ..timeline.instant import Action, Instant, State
from ..timeline.timeline import Timeline

if TYPE_CHECKING:
    from ..table.engine import Engine
    from ..table.table import Table

#: ``progress(done, total)``: called as a service works through its units (files, groups).
Progress = Callable[[int, int], None]

T = TypeVar("T")
R = TypeVar("R")


def map_in_batches(engine: "Engine", fn: Callable[[T], R], tasks: Sequence[T], batch: int,
                   progress: Progress | None = None, fault: str | None = None) -> list[R]:
    """``engine.map(fn, tasks)`` a batch at a time, so a long service run reports
    ``progress`` and reaches its mid-work ``fault`` point between batches. Returns the
    results in task order."""
    out: list[R] = []
    if progress is not None:
        progress(0, len(tasks))
    for start in range(0, len(tasks), batch):
        out.extend(engine.map(fn, tasks[start:start + batch]))
        if fault is not None:
            faults.point(fault)
        if progress is not None:
            progress(len(out), len(tasks))
    return out


@dataclass(frozen=True)
class ServiceResult:
    """What a service run did: its instant (None when there was nothing to do) and counts.

    ``aborted`` is the reason when the service gave up (its inputs changed, or it
    failed) and ended its instant as rolled back; writers are never affected by that.
    """

    instant: Instant | None
    stats: dict[str, Any] = field(default_factory=dict)
    aborted: str | None = None


class ServiceAbort(LakelineError):
    """Raised by a service's ``execute`` when it must give up: its instant is ended as
    rolled back, :meth:`TableService.abort` cleans up, and nothing else fails."""


class TableService(ABC):
    """One kind of table service (indexing, rollback, compaction, ...)."""

    #: The name users schedule it by (``t.services.schedule(name)``, the CLI, the runner).
    name: ClassVar[str]
    #: The timeline action of its instants.
    action: ClassVar[Action]

    @abstractmethod
    def plan(self, table: "Table", snapshot: Timeline, **options: Any) -> dict[str, Any] | None:
        """What to do, as the ``requested`` event's plan; None when there is nothing to do.

        Runs under the table lock with ``snapshot`` read inside it: keep it brief.

        Raises:
            LakelineError: the request is refused (nothing is appended).
        """

    def check_plan(self, timeline: Timeline, plan: Mapping[str, Any]) -> None:
        """Re-checked against the exact log prefix the ``requested`` event lands on (the
        lock is a liveness aid, this is what makes planning safe without it).

        Raises:
            LakelineError: the plan no longer holds.
        """

    @abstractmethod
    def execute(self, table: "Table", instant: Instant, progress: Progress | None = None) -> dict[str, Any]:
        """Do the work of a scheduled ``instant`` and return its completion metadata.

        Must be safe to run again after an interruption at any point: the framework
        re-runs an inflight instant whose executor died.

        Raises:
            ServiceAbort: give up; the instant is rolled back.
        """

    def complete(self, table: "Table", instant: Instant, metadata: dict[str, Any]) -> Instant:
        """Append the ``completed`` event (a service may check more first, e.g. under the
        table lock).

        Raises:
            ServiceAbort: the work can no longer be completed; the instant is rolled back.
        """
        ev = table.log.append(self.action, State.COMPLETED, metadata, instant=instant.id)
        return table.log.timeline.get(ev.instant)

    def abort(self, table: "Table", instant: Instant, reason: str) -> None:
        """Undo what an aborted execution left (files, partitions); idempotent."""

    def pending(self, timeline: Timeline) -> list[Instant]:
        """This service's pending instants, oldest first."""
        return [i for i in timeline.pending() if i.action_kind is self.action and self.owns(i)]

    def owns(self, instant: Instant) -> bool:
        """Whether ``instant`` is one of this service's (several services may share an action)."""
        return instant.plan.get("service", self.name) == self.name
