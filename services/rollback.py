"""The rollback service: end failed writes and delete their files.

A write whose heartbeat expired (interval × (misses + 1)) is failed. The service's plan
names its targets: failed writes to end, writes already rolled back whose files are
still there (markers left: their rollback died midway), and completed writes whose
markers were left (the writer died right after completing; its files are live, only
the markers go). Each target is ended with a ``rolled_back`` event before any of its
files is deleted (see :mod:`lakeline.table.rollback`), so a rollback that dies midway is
simply executed again by the next run (the framework re-runs an inflight service
instant whose heartbeat expired); every step is idempotent. A marker that names
anything but a file of its instant is skipped and listed under ``refused``.

The plan also lists the staging folders of dead Spark writes (``staging``; the rules
are :mod:`lakeline.timeline.storage.staging_folders`'): a write killed mid-way, before or after
its instant began. Execute ends the failed writes first, then judges each listed
folder again and removes it only if its write is still dead, so a write that was only
slow keeps its staged input. Cleaning plans and removes them the same way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..table.rollback import delete_files_of, end_instant, expired_writers, remove_dead_staging
from ..timeline.diagnostics import faults
from ..timeline.instant import Action, Instant, State
from ..timeline.markers import delete_markers, instants_with_markers
from ..timeline.plans import RollbackPlan
from ..timeline.storage.staging_folders import Rules, dead_writes
from ..timeline.timeline import Timeline
from .plugin import Progress, Service

if TYPE_CHECKING:
    from ..table.table import Table


class RollbackService(Service):
    """Roll back failed writes (``t.services.rollback_failed()``, ``lakeline service run PATH rollback``)."""

    name = "rollback"
    action = Action.ROLLBACK

    def plan(self, table: Table, snapshot: Timeline, **options: Any) -> RollbackPlan | None:
        props = table.config.props
        targets = [
            i.id
            for i in expired_writers(table.log, snapshot, props.heartbeat_interval_ms, props.heartbeat_tolerable_misses)
        ]
        marked = [(i, x.state) for i in instants_with_markers(table.storage) if (x := snapshot.find(i)) is not None]
        leftovers = [i for i, state in marked if state is State.ROLLED_BACK]
        finished = [i for i, state in marked if state is State.COMPLETED]
        # Judged on this snapshot; execute judges them again before removing any.
        staging = dead_writes(table.storage, lambda: (snapshot, table.log.store.last_beats()), Rules.of(props))
        if not targets and not leftovers and not finished and not staging:
            return None
        return RollbackPlan(tuple(targets), tuple(leftovers), tuple(finished), tuple(staging))

    def execute(self, table: Table, instant: Instant, progress: Progress | None = None) -> dict[str, Any]:
        plan = RollbackPlan.from_dict(instant.plan)
        log, storage = table.log, table.storage
        faults.point("rollback.after_inflight")
        deleted = 0
        done = []
        refused: list[str] = []  # marker paths that are not files of their instant: kept
        targets = list(plan.targets)
        for n, t in enumerate(targets):
            ended = end_instant(log, storage, t, f"heartbeat expired; rolled back by {instant.id}")
            if ended is not None:
                deleted += ended.count
                refused.extend(ended.refused)
                done.append(t)
            if progress is not None:
                progress(n + 1, len(targets))
        for t in plan.leftovers:
            left = delete_files_of(storage, t)
            deleted += left.count
            refused.extend(left.refused)
        for t in plan.completed_markers:
            delete_markers(storage, t)
        # After the targets ended: a folder naming one of them is judged on its new state.
        staging = remove_dead_staging(log, storage, Rules.of(table.config.props), only=plan.staging)
        return {
            "rolled_back": len(done),
            "instants": done,
            "files_deleted": deleted,
            "refused": refused,
            "staging_removed": staging,
        }
