"""Savepoints: pin a snapshot so cleaning (and archival) keep it readable.

A savepoint lives on the timeline only, so every process sees the same pins without
reading any local state (:mod:`lakeline.timeline.retention` reads them). It is a
``savepoint`` instant whose plan says what to do, like the indexer's create/drop:

* ``{"op": "create", "instant": X, "seq": S}`` pins the snapshot as of instant ``X``
  (``S`` is the sequence number of ``X``'s completion, the snapshot's name);
* ``{"op": "release", "savepoint": P}`` ends savepoint ``P``.

Both go ``requested → inflight → completed`` at once. A savepoint is active from its
``requested`` event (a creator that died before completing still pins: keeping files
costs space, never rows) until a completed release names it. The creator checks that
the pinned snapshot's files still exist *after* its event landed: a cleaner that
planned before the savepoint re-checks the pins before it deletes, and one that
deleted meanwhile makes the creation fail with :class:`SnapshotExpiredError` (and the
savepoint is released) rather than pin a snapshot that is already broken.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..timeline.errors import InstantNotFoundError, SnapshotExpiredError
from ..timeline.instant import Action, Instant, State
from ..timeline.retention import OP_CREATE, OP_RELEASE, Savepoint, active_savepoints, pinned_seqs

if TYPE_CHECKING:
    from ..table.table import Table

__all__ = ["OP_CREATE", "OP_RELEASE", "Savepoint", "active_savepoints", "create_savepoint", "pinned_seqs",
           "release_savepoint"]


def _append_done(table: "Table", plan: dict[str, Any]) -> Instant:
    log = table.log
    ev = log.append(Action.SAVEPOINT, State.REQUESTED, plan)
    log.append(Action.SAVEPOINT, State.INFLIGHT, {}, instant=ev.instant)
    log.append(Action.SAVEPOINT, State.COMPLETED, dict(plan), instant=ev.instant)
    return log.refresh().get(ev.instant)


def create_savepoint(table: "Table", instant_id: int | None = None) -> Instant:
    """Pin the snapshot as of completed instant ``instant_id`` (default: the latest).

    Raises:
        InstantNotFoundError: no such completed instant (or an empty table).
        SnapshotExpiredError: that snapshot's files were already cleaned.
    """
    tl = table.log.refresh()
    if instant_id is None:
        last = tl.last_completed()
        if last is None:
            raise InstantNotFoundError("nothing has completed yet: there is no snapshot to savepoint")
        instant_id = last.id
    snap = tl.as_of_instant(instant_id)  # raises when not completed
    target = tl.get(instant_id)
    done = _append_done(table, {"op": OP_CREATE, "instant": instant_id, "seq": target.completed_seq})
    # Checked after the event landed: from now on a cleaner skips these files.
    storage = table.storage
    gone = storage.missing(storage.path(f.path) for f in table.view(snap).files())
    if gone:
        release_savepoint(table, done.id)
        raise SnapshotExpiredError(f"snapshot as of {instant_id} is outside retention: {len(gone)} of its "
                                   f"files were cleaned, e.g. {gone[0]}")
    return done


def release_savepoint(table: "Table", savepoint_id: int) -> Instant:
    """End savepoint ``savepoint_id`` (the id :func:`create_savepoint` returned, or the
    id of the pinned instant when one active savepoint pins it).

    Raises:
        InstantNotFoundError: no active savepoint by that id.
    """
    active = active_savepoints(table.log.refresh())
    match = [s for s in active if s.id == savepoint_id] or [s for s in active if s.instant == savepoint_id]
    if not match:
        raise InstantNotFoundError(f"no active savepoint {savepoint_id}")
    return _append_done(table, {"op": OP_RELEASE, "savepoint": match[0].id})
