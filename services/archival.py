"""The archival service: move old completed events out of the active log.

Why: every process that opens a table reads the active log event by event (a file or a
row each), so a table with a long history would open ever slower. Archival keeps the
active log between ``archive.min-active-instants`` and ``archive.max-active-instants``
completed instants by moving the oldest events into the Parquet archive
(:mod:`lakeline.timeline.archive`). Readers merge the archive back in
(:class:`~lakeline.timeline.log.EventLog`), so ``t.timeline``, time travel and
incremental reads see exactly what they saw before: archival never changes a read.

What is moved is always a *closed prefix* of the log: the events ``first..through`` of
instants that all ended (completed or rolled back) by ``through``, so no active event
belongs to an archived instant and the active log reads on its own. It never passes:

* the earliest pending instant (it is not ended, so a closed prefix stops before it);
* a savepoint: events from the smallest pinned snapshot on stay active
  (:func:`lakeline.timeline.retention.pinned_seqs`);
* the cleaner's retain point, the earliest snapshot the last completed clean kept
  (:func:`lakeline.timeline.retention.last_retain_seq`): the snapshots cleaning still
  guarantees stay on the active log; a table never cleaned has no such bound.

The latest ``schema`` instant (the table's configuration) and the instants the
file-system view replays need not stay active: the event log merges the archive back
in, so they stay reachable. Were the schema instant a bound, a table whose schema never
changed could archive nothing, since its schema instant is the first of the log.

*Plan* (under the table lock): ``{"first_seq", "through_seq", "instants", "events",
"active_completed", "min_active", "max_active"}``; nothing when at most the maximum is
active (archival's own ``archive`` instants are not counted, or every run would make
the next one due; they are archived with the rest) (``t.services.archive()`` passes
``force=True``: down to the minimum whenever more are active), or when the bounds above
leave nothing to move. One archival at a time.
*Execute*: re-check the bounds against the fresh timeline (a savepoint made since the
plan aborts it); write the events not yet archived as one archive file (fault point
``archival.after_write``); then remove them from the active store oldest first, in
chunks (``archival.mid_delete`` between chunks). A crash anywhere leaves the events in
the archive, the active log or both; readers take each once, and the re-run skips the
write and finishes the removal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..timeline.archive import EventArchive
from ..timeline.diagnostics import faults
from ..timeline.errors import InvalidPropertyError, ServiceAbortedError, ServiceBusyError
from ..timeline.instant import Action, Instant, State
from ..timeline.plans import ArchivalPlan, Plan
from ..timeline.retention import last_retain_seq, pinned_seqs
from ..timeline.timeline import Timeline
from .plugin import Progress, Service

if TYPE_CHECKING:
    from ..table.table import Table

#: Events removed from the active store per call; the mid-delete fault point is between.
_DELETE_CHUNK = 256


def archive_of(table: Table) -> EventArchive:
    return table.log.archive if table.log.archive is not None else EventArchive(table.storage)


def archived_through(table: Table) -> int:
    """The last archived sequence number (-1 when nothing is): the active log starts
    after it. An archive file written by a run that died before removing its events
    counts as archived (readers already take those events from it)."""
    return max(archive_of(table).last_seq(), table.log.store.archived_through())


def limit(timeline: Timeline, running: int | None = None) -> tuple[int, str]:
    """The first sequence number archival must keep active, and why (``running``: the
    archival instant being executed, pending itself but no bound)."""
    bounds = [(timeline.last_seq + 1, "the end of the log")]
    pending = [i for i in timeline.pending() if i.id != running]
    if pending:
        bounds.append((pending[0].id, f"pending instant {pending[0].id}"))
    pins = pinned_seqs(timeline)
    if pins:
        bounds.append((pins[0], f"the savepoint of the snapshot at event {pins[0]}"))
    retain = last_retain_seq(timeline)
    if retain is not None:
        bounds.append((retain, f"the last clean's retain point (event {retain})"))
    return min(bounds)


def choose(timeline: Timeline, after: int, min_active: int, max_active: int, force: bool) -> ArchivalPlan | None:
    """The closed prefix to archive: events ``after + 1 ..`` up to the largest end that
    keeps ``min_active`` completed instants active and stays below :func:`limit`."""
    active = [i for i in timeline.instants() if i.id > after]
    # Archival's own instants are not counted: each run would otherwise make the next due.
    counted = [i.is_completed and i.action is not Action.ARCHIVE for i in active]
    completed = sum(counted)
    if completed <= (min_active if force else max_active):
        return None
    stop, _ = limit(timeline)
    best: tuple[int, int, int] | None = None  # (through seq, instants, completed archived)
    through, done = after, 0
    for n, inst in enumerate(active):
        if inst.id >= stop or not inst.state.is_terminal or completed - done <= min_active:
            break
        through = max(through, inst.last_seq)
        done += counted[n]
        # A closed prefix ends where the next instant starts after every event so far.
        nxt = active[n + 1].id if n + 1 < len(active) else timeline.last_seq + 1
        if through < nxt and through < stop and completed - done >= min_active:
            best = (through, n + 1, done)
    if best is None:
        return None
    through, count, _ = best
    return ArchivalPlan(after + 1, through, count, through - after, completed, min_active, max_active)


class ArchivalService(Service):
    """Archive old instants (``t.services.archive()``, ``run("archival")``, the runner)."""

    name = "archival"
    action = Action.ARCHIVE

    def plan(self, table: Table, snapshot: Timeline, force: bool = False, **options: Any) -> ArchivalPlan | None:
        """The prefix to archive, or None.

        Raises:
            InvalidPropertyError: an unknown option, or bounds the wrong way round.
        """
        if options:
            raise InvalidPropertyError(f"archival takes no options {sorted(options)}; it takes force=")
        props = table.config.props
        lo, hi = props.archive_min_active_instants, props.archive_max_active_instants
        if lo > hi:
            raise InvalidPropertyError(
                f"archive.min-active-instants ({lo}) is above archive.max-active-instants ({hi})"
            )
        if self.pending(snapshot):
            return None  # finished first by run(); one archival at a time
        return choose(snapshot, archived_through(table), lo, hi, force)

    def check_plan(self, timeline: Timeline, plan: Plan) -> None:
        """Refuse a second archival, or a prefix that passes a bound set meanwhile."""
        if self.pending(timeline):
            raise ServiceBusyError("another archival is pending")
        stop, why = limit(timeline)
        assert isinstance(plan, ArchivalPlan)
        if plan.through_seq >= stop:
            raise ServiceBusyError(f"the archival plan passes {why}")

    def execute(self, table: Table, instant: Instant, progress: Progress | None = None) -> dict[str, Any]:
        plan = ArchivalPlan.from_dict(instant.plan)
        first, through = plan.first_seq, plan.through_seq
        tl = table.log.refresh()
        stop, why = limit(tl, running=instant.id)
        if stop <= through:
            raise ServiceAbortedError(f"archiving events {first}..{through} would pass {why}")
        archive = archive_of(table)
        done = archive.last_seq()
        written = None
        if done < through:
            # The timeline holds every event, archived or active: the archive continues
            # exactly after its last file, whatever an earlier attempt left.
            events = tl.events_after(done)[: through - done]
            written = archive.write(events).path
        faults.point("archival.after_write")
        store = table.log.store
        start = store.archived_through() + 1
        total = max(0, through + 1 - start)
        chunk = max(1, min(_DELETE_CHUNK, (total + 1) // 2))
        if progress is not None:
            progress(0, total)
        for lo in range(start, through + 1, chunk):
            hi = min(lo + chunk - 1, through)
            store.delete_through(hi)
            if progress is not None:
                progress(hi + 1 - start, total)
            if hi < through:
                faults.point("archival.mid_delete")
        archived = [i for i in tl.instants() if first <= i.id <= through]
        return {
            "first_seq": first,
            "through_seq": through,
            "events_archived": through + 1 - first,
            "instants_archived": len(archived),
            "completed_archived": sum(1 for i in archived if i.state is State.COMPLETED),
            "archive_file": written,
        }
