"""Rolling back an instant: end it on the timeline first, then delete its files.

The ``rolled_back`` event is appended before any file is touched. Once it is on the
log the instant can never complete (the transition is illegal), so deleting the files
its markers name is safe even if the original writer wakes up; and if the instant
completed first, the append is refused and nothing is deleted. Deleting is idempotent,
so a rollback that died midway is simply run again.
"""

from __future__ import annotations

from ..timeline.errors import InvalidTransitionError
from ..timeline.instant import State
from ..timeline.log import EventLog
from ..timeline.storage import Storage
from ..timeline import faults
from ..timeline.markers import delete_markers, list_markers


def delete_instant_files(storage: Storage, instant: int) -> int:
    """Delete every file the instant's markers name, then the markers; return the count."""
    deleted = 0
    for rel in list_markers(storage, instant):
        faults.point("rollback.mid_delete")
        deleted += storage.delete(storage.path(rel))
    delete_markers(storage, instant)
    return deleted


def rollback_instant(log: EventLog, storage: Storage, instant: int, reason: str) -> int | None:
    """Roll back a pending instant.

    Returns:
        How many files were deleted, or None when the instant completed (or was rolled
        back) before we could end it, in which case nothing is touched.
    """
    inst = log.refresh().get(instant)
    if inst.state_kind is State.COMPLETED:
        return None
    if inst.state_kind is not State.ROLLED_BACK:
        try:
            log.append(inst.action_kind, State.ROLLED_BACK, {"reason": reason}, instant=instant)
        except InvalidTransitionError:
            if log.refresh().get(instant).state_kind is State.COMPLETED:
                return None
    faults.point("rollback.after_event")
    deleted = delete_instant_files(storage, instant)
    log.store.clear_beat(instant)
    return deleted
