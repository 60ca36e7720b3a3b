"""The rollback service: end failed writes and delete their files.

A write whose heartbeat expired (interval × (misses + 1)) is failed. The service
records its work as a ``rollback`` instant whose plan names the targets, ends each
target with a ``rolled_back`` event before deleting anything (see
:mod:`lakeline.table.rollback`), and also finishes rollbacks that died after their
event but before their files were gone (their markers are still there).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..timeline import faults
from ..timeline.instant import Action, Instant, State
from ..table.markers import instants_with_markers
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
    targets = [i.id for i in expired_writers(table, snapshot)]
    leftovers = [i for i in instants_with_markers(table.storage)
                 if (x := snapshot.find(i)) is not None and x.state_kind is State.ROLLED_BACK]
    if not targets and not leftovers:
        return None, {"rolled_back": 0, "files_deleted": 0}
    req = log.append(Action.ROLLBACK, State.REQUESTED, {"targets": targets, "leftovers": leftovers})
    log.append(Action.ROLLBACK, State.INFLIGHT, instant=req.instant)
    faults.point("rollback.after_inflight")
    deleted = 0
    done = []
    for t in targets:
        n = rollback_instant(log, table.storage, t, f"heartbeat expired; rolled back by {req.instant}")
        if n is not None:
            deleted += n
            done.append(t)
    for t in leftovers:
        deleted += delete_instant_files(table.storage, t)
    stats = {"rolled_back": len(done), "instants": done, "files_deleted": deleted}
    ev = log.append(Action.ROLLBACK, State.COMPLETED, stats, instant=req.instant)
    return log.timeline.get(ev.instant), stats
