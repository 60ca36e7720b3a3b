"""Rolling back an instant: end it on the timeline first, then delete its files.

The ``rolled_back`` event is appended before any file is touched. Once it is on the
log the instant can never complete (the transition is illegal), so deleting the files
its markers name is safe even if the original writer wakes up; and if the instant
completed first, the append is refused and nothing is deleted. Deleting is idempotent,
so a rollback that died midway is simply run again.

A marker is only a claim: rollback deletes a path only when it is a file of that
instant (:func:`~lakeline.timeline.markers.is_instant_file`: a data file inside the
table whose name carries the instant id, or that instant's metadata-table delta).
Anything else a marker names (a damaged marker, the table root) is skipped and
reported, never deleted, and the rollback goes on.

A Spark write's staging folder (``.lakeline/staging/<write>/``) is no file of an
instant: it exists before the instant and outlives a conflict's rolled-back attempt.
:func:`remove_dead_staging` removes the folders whose write is dead by the rules of
:mod:`lakeline.timeline.storage.staging_folders` (its owner stopped beating and no instant it
names is alive); the rollback service calls it after ending the failed writes, and
cleaning calls it too. It never touches a live write's folder.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..timeline.diagnostics import faults
from ..timeline.errors import InvalidTransitionError
from ..timeline.heartbeat import is_expired
from ..timeline.instant import Action, Instant, State
from ..timeline.log import EventLog
from ..timeline.markers import delete_markers, is_instant_file, list_markers
from ..timeline.plans import WriteRequest
from ..timeline.storage.filesystem import Storage
from ..timeline.storage.staging_folders import Rules, dead_writes, naming, remove
from ..timeline.timeline import Timeline

_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deleted:
    """What deleting an instant's files did: how many went, and the marker paths refused."""

    count: int
    refused: tuple[str, ...] = ()


def delete_files_of(storage: Storage, instant: int) -> Deleted:
    """Delete every file of ``instant`` its markers name, then the markers."""
    deleted = 0
    refused = []
    for rel in list_markers(storage, instant):
        if not is_instant_file(rel, instant):
            refused.append(rel)
            _log.warning(
                "rollback of instant %d skips %r: a marker names it, but it is not a file of that instant", instant, rel
            )
            continue
        faults.point("rollback.mid_delete")
        deleted += storage.delete(storage.path(rel))
    delete_markers(storage, instant)
    return Deleted(deleted, tuple(refused))


def delete_instant_files(storage: Storage, instant: int) -> int:
    """Delete every file the instant's markers name, then the markers; return the count."""
    return delete_files_of(storage, instant).count


def rollback_instant(log: EventLog, storage: Storage, instant: int, reason: str) -> int | None:
    """Roll back a pending instant.

    Returns:
        How many files were deleted, or None when the instant completed before we
        could end it, in which case nothing is touched.
    """
    done = end_instant(log, storage, instant, reason)
    return None if done is None else done.count


def end_instant(log: EventLog, storage: Storage, instant: int, reason: str) -> Deleted | None:
    """:func:`rollback_instant`, telling also which marker paths were refused."""
    inst = log.refresh().get(instant)
    if inst.state is State.COMPLETED:
        return None
    if inst.state is not State.ROLLED_BACK:
        try:
            log.append(inst.action, State.ROLLED_BACK, {"reason": reason}, instant=instant)
        except InvalidTransitionError:
            if log.refresh().get(instant).state is State.COMPLETED:
                return None
    faults.point("rollback.after_event")
    deleted = delete_files_of(storage, instant)
    log.store.clear_beat(instant)
    return deleted


def remove_dead_staging(
    log: EventLog, storage: Storage, rules: Rules, only: tuple[str, ...] | None = None
) -> list[str]:
    """Remove the staging folders of dead writes (of those in ``only``, when given: a
    plan's list, judged again now); the write ids removed. The timeline is read after
    the owner files, so a write that began meanwhile is judged alive."""
    if only is not None and not only:
        return []
    dead = dead_writes(storage, lambda: (log.refresh(), log.store.last_beats()), rules, only=only)
    if dead:
        _log.info("removing the staging folders of dead writes: %s", ", ".join(dead))
    return remove(storage, dead)


def rollback_pending_writes(log: EventLog, storage: Storage, snapshot: Timeline, rules: Rules) -> None:
    """Single-writer tables: any pending write belongs to a writer that died; its staging
    folder (a Spark write's) goes with it when the folder's write is dead by ``rules``."""
    ended = []
    for inst in snapshot.pending():
        if WriteRequest.from_dict(inst.plan).writer:  # only a live writer's plan says so
            rollback_instant(log, storage, inst.id, "eager rollback (single-writer table)")
            ended.append(inst.id)
    named = tuple(w for i in ended for w in naming(storage, i))
    if named:
        remove_dead_staging(log, storage, rules, only=named)


#: Instants appended requested -> inflight -> completed in one go, with no heartbeat:
#: pending past the heartbeat expiry, the process that appended them died.
_ONE_SHOT = frozenset({Action.SAVEPOINT, Action.SCHEMA})


def expired_writers(log: EventLog, snapshot: Timeline, interval_ms: int, tolerable_misses: int) -> list[Instant]:
    """Pending write instants whose heartbeat expired, and savepoint or schema instants
    left pending as long (their process died between ``requested`` and ``completed``;
    rolled back, they did not happen, which is what their caller saw)."""
    beats = log.store.last_beats()
    return [
        i
        for i in snapshot.pending()
        if (WriteRequest.from_dict(i.plan).writer or i.action in _ONE_SHOT)
        and is_expired(i, beats, interval_ms, tolerable_misses)
    ]
