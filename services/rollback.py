"""The rollback service: end failed writes and delete their files.

A write whose heartbeat expired (interval × (misses + 1)) is failed. The service
records its work as a ``rollback`` instant whose plan names the targets, ends each
target with a ``rolled_back`` event before deleting anything (see
:mod:`lakeline.table.rollback`), and also finishes rollbacks that died after their
event but before their files were gone (their markers are still there).

A rollback instant beats like a writer. One whose process died stops beating; the next
run ends it as ``rolled_back`` and redoes its work (its targets are either still
pending with an expired heartbeat, or rolled back with markers left). Markers left by
a writer that died right after completing are removed (its files are live).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..timeline import faults
from ..timeline.errors import InvalidTransitionError
from ..timeline.heartbeat import Heartbeat, is_expired
from ..timeline.instant import Action, Instant, State
from ..timeline.markers import delete_markers, instants_with_markers
from ..table.rollback import delete_instant_files, rollback_instant
from ..table.writer import expired_writers

if TYPE_CHECKING:
    from ..table.table import Table


def rollback_failed(table: "Table") -> tuple[Instant | None, dict[str, Any]]:
    """Roll back failed writes.

    Returns:
        The completed rollback instant (None when nothing had failed) and counts.
    """
    log = table.log
    snapshot = log.refresh()
    props = table.config.resolved_properties()
    interval, misses = props["heartbeat.interval-ms"], props["heartbeat.tolerable-misses"]
    beats = log.store.last_beats()
    targets = [i.id for i in expired_writers(table, snapshot)]
    stalled = [i.id for i in snapshot.pending()
               if i.action_kind is Action.ROLLBACK and is_expired(i, beats, interval, misses)]
    marked = [(i, x.state_kind) for i in instants_with_markers(table.storage) if (x := snapshot.find(i)) is not None]
    leftovers = [i for i, state in marked if state is State.ROLLED_BACK]
    finished = [i for i, state in marked if state is State.COMPLETED]
    if not targets and not leftovers and not stalled and not finished:
        return None, {"rolled_back": 0, "files_deleted": 0}
    req = log.append(Action.ROLLBACK, State.REQUESTED, {"targets": targets, "leftovers": leftovers,
                                                         "stalled": stalled, "completed_markers": finished})
    heartbeat = Heartbeat(log.store, req.instant, interval).start()
    try:
        log.append(Action.ROLLBACK, State.INFLIGHT, instant=req.instant)
        faults.point("rollback.after_inflight")
        for s in stalled:
            try:
                log.append(Action.ROLLBACK, State.ROLLED_BACK, {"reason": f"interrupted; redone by {req.instant}"},
                           instant=s)
            except InvalidTransitionError:
                pass  # it finished after all
            log.store.clear_beat(s)
        deleted = 0
        done = []
        for t in targets:
            n = rollback_instant(log, table.storage, t, f"heartbeat expired; rolled back by {req.instant}")
            if n is not None:
                deleted += n
                done.append(t)
        for t in leftovers:
            deleted += delete_instant_files(table.storage, t)
        for t in finished:
            delete_markers(table.storage, t)
        stats = {"rolled_back": len(done), "instants": done, "files_deleted": deleted, "stalled_rollbacks": stalled}
        ev = log.append(Action.ROLLBACK, State.COMPLETED, stats, instant=req.instant)
    finally:
        heartbeat.stop(clear=True)
    return log.timeline.get(ev.instant), stats
