"""Savepoints: pin a snapshot so cleaning (and archival) keep it readable.

A savepoint lives on the timeline only, so every process sees the same pins without
reading any local state (:mod:`lakeline.timeline.retention` reads them). It is a
``savepoint`` instant whose plan says what to do, like the indexer's create/drop:

* ``{"op": "create", "instant": X, "seq": S}`` pins the snapshot as of instant ``X``
  (``S`` is the sequence number of ``X``'s completion, the snapshot's name);
* ``{"op": "release", "savepoint": P}`` ends savepoint ``P``.

Both go ``requested → inflight → completed`` at once. A savepoint is active from its
``requested`` event (a creator that died before completing still pins: keeping files
costs space, never rows) until a completed release names it.

**Savepoints against a running clean** (no window between a check and a delete). A
clean deletes only the files its plan lists, and that plan is fixed in its
``requested`` event; it reads the savepoints once, after its claiming ``inflight``
event landed, and skips every file they pin. So a savepoint whose ``requested`` event
lands before the clean's first ``inflight`` is honoured by the cleaner; one landing
after it could be missed, and is therefore refused: the ``requested`` append carries a
check, run against the exact log prefix it lands on, that no inflight clean's plan
lists a file of the pinned snapshot (other than files a savepoint older than that
clean's ``inflight`` already pins). Refused means :class:`SavepointConflictError` (a
:class:`SnapshotExpiredError`: the clean is expiring that snapshot) and nothing
appended. Whichever event wins its slot first decides, so no interleaving lets a
savepoint succeed and its files be deleted.

The creator also checks that the pinned snapshot's files still exist *after* its
event landed: a clean that completed before the savepoint (or a stale cleaner) may
have deleted them, and then the creation fails with :class:`SnapshotExpiredError`
(and the savepoint is released) rather than pin a snapshot that is already broken.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..timeline.errors import InstantNotFoundError, SavepointConflictError, SnapshotExpiredError
from ..timeline.instant import Action, Instant, State, instant_id_of
from ..timeline.log import AppendCheck
from ..timeline.plans import OP_CREATE, OP_RELEASE, CleanPlan, Plan, SavepointCreatePlan, SavepointReleasePlan
from ..timeline.retention import Savepoint, active_savepoints, pinned_seqs
from ..timeline.timeline import Timeline

if TYPE_CHECKING:
    from ..table.table import Table

__all__ = [
    "OP_CREATE",
    "OP_RELEASE",
    "Savepoint",
    "active_savepoints",
    "create_savepoint",
    "pinned_seqs",
    "release_savepoint",
]


def _append_done(table: Table, plan: Plan, check: AppendCheck | None = None) -> Instant:
    log = table.log
    ev = log.append(Action.SAVEPOINT, State.REQUESTED, plan.to_dict(), check=check)
    log.append(Action.SAVEPOINT, State.INFLIGHT, {}, instant=ev.instant)
    log.append(Action.SAVEPOINT, State.COMPLETED, plan.to_dict(), instant=ev.instant)
    return log.refresh().get(ev.instant)


def create_savepoint(table: Table, instant_id: int | str | None = None) -> Instant:
    """Pin the snapshot as of completed instant ``instant_id`` (default: the latest; an
    int or an int-like string, as ``as_of`` takes it: :func:`instant_id_of`).

    Raises:
        InstantNotFoundError: no such completed instant (or an empty table), or
            ``instant_id`` is no instant id (a bool, a float, other text).
        SavepointConflictError: an inflight clean is deleting files of that snapshot.
        SnapshotExpiredError: that snapshot's files were already cleaned.
    """
    # Parsed before anything is read or written: '3' is instant 3 (as for as_of), True is none.
    wanted = None if instant_id is None else instant_id_of(instant_id)
    tl = table.log.refresh()
    if wanted is None:
        last = tl.last_completed()
        if last is None:
            raise InstantNotFoundError("nothing has completed yet: there is no snapshot to savepoint")
        wanted = last.id
    return _pin(table, tl, wanted)


def _pin(table: Table, tl: Timeline, instant_id: int) -> Instant:
    """:func:`create_savepoint` of completed instant ``instant_id`` of ``tl``."""
    snap = tl.as_of_instant(instant_id)  # raises when not completed
    target = tl.get(instant_id)
    pinned = {f.path for f in table.view(snap).files()}
    assert target.completed_seq is not None  # as_of_instant refused one that is not completed
    done = _append_done(
        table,
        SavepointCreatePlan(instant_id, target.completed_seq),
        check=_no_clean_deleting(table, instant_id, pinned),
    )
    # Checked after the event landed: from now on a cleaner skips these files.
    storage = table.storage
    gone = storage.missing(storage.path(f.path) for f in table.view(snap).files())
    if gone:
        release_savepoint(table, done.id)
        raise SnapshotExpiredError(
            f"snapshot as of {instant_id} is outside retention: {len(gone)} of its files were cleaned, e.g. {gone[0]}"
        )
    return done


def _first_claim(timeline: Timeline, instant_id: int) -> int | None:
    """Sequence number of the first ``inflight`` event of ``instant_id``."""
    return next(
        (ev.seq for ev in timeline.events_after(instant_id) if ev.instant == instant_id and ev.state is State.INFLIGHT),
        None,
    )


def _no_clean_deleting(table: Table, instant_id: int, pinned: set[str]) -> AppendCheck:
    """The check of a savepoint's ``requested`` append (see the module docstring)."""
    seen: dict[int, set[str]] = {}  # snapshot seq -> its files, computed once

    def files_of(tl: Timeline, seq: int) -> set[str]:
        if seq not in seen:
            seen[seq] = {f.path for f in table.view(tl.as_of_seq(seq)).files()}
        return seen[seq]

    def check(tl: Timeline) -> None:
        for clean in tl.pending():
            if clean.action is not Action.CLEAN or clean.state is not State.INFLIGHT:
                continue
            claimed = _first_claim(tl, clean.id)
            doomed = set(CleanPlan.from_dict(clean.plan).paths()) & pinned
            for sp in active_savepoints(tl):
                if not doomed:
                    break
                if claimed is not None and sp.id < claimed:
                    doomed -= files_of(tl, sp.seq)  # the cleaner read this one and skips its files
            if doomed:
                raise SavepointConflictError(
                    f"cannot savepoint the snapshot as of {instant_id}: clean {clean.id} is deleting "
                    f"{len(doomed)} of its files (e.g. {sorted(doomed)[0]}); it is outside that clean's retention"
                )

    return check


def release_savepoint(table: Table, savepoint_id: int | str) -> Instant:
    """End savepoint ``savepoint_id`` (the id :func:`create_savepoint` returned, or the
    id of the pinned instant when one active savepoint pins it; an int or an int-like
    string).

    Raises:
        InstantNotFoundError: no active savepoint by that id, or ``savepoint_id`` is no
            instant id.
    """
    wanted = instant_id_of(savepoint_id)
    active = active_savepoints(table.log.refresh())
    match = [s for s in active if s.id == wanted] or [s for s in active if s.instant == wanted]
    if not match:
        raise InstantNotFoundError(f"no active savepoint {wanted}")
    return _append_done(table, SavepointReleasePlan(match[0].id))
