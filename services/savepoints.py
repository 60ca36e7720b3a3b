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

**Bookmarks** are savepoints with a ``consumer`` (a change-feed reader's name): one
pins every snapshot from its own on, so the consumer's next ``changes(start,
images=True)``, which reads the snapshots before and after each instant of the range,
finds them all (Paimon's consumer ids; Hudi's CDC readers fail once the cleaner passed
them). Moving a bookmark pins the new position before it releases the old one, so the
consumer is never unprotected; every check above applies to the files of all the
snapshots it pins (:func:`lakeline.services.cleaning.files_from`).

The creator also checks that the pinned snapshot's files still exist *after* its
event landed: a clean that completed before the savepoint (or a stale cleaner) may
have deleted them, and then the creation fails with :class:`SnapshotExpiredError`
(and the savepoint is released) rather than pin a snapshot that is already broken.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..timeline.errors import InstantNotFoundError, InvalidBookmarkError, SavepointConflictError, SnapshotExpiredError
from ..timeline.instant import Action, Instant, State, instant_id_of
from ..timeline.log import AppendCheck
from ..timeline.plans import OP_CREATE, OP_RELEASE, CleanPlan, Plan, SavepointCreatePlan, SavepointReleasePlan
from ..timeline.retention import Savepoint, active_savepoints, pinned_seqs
from ..timeline.timeline import Timeline
from .cleaning import files_from

if TYPE_CHECKING:
    from ..table.table import Table

__all__ = [
    "OP_CREATE",
    "OP_RELEASE",
    "Savepoint",
    "active_savepoints",
    "bookmarks",
    "create_savepoint",
    "move_bookmark",
    "release_bookmark",
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
    tl, wanted = _target(table, instant_id, "savepoint")
    return _pin(table, tl, wanted)


def _target(table: Table, instant_id: int | str | None, what: str) -> tuple[Timeline, int]:
    """The fresh timeline and the completed instant a pin names: ``instant_id``, parsed
    before anything is read or written ('3' is instant 3, as for as_of; True is none),
    or the latest.

    Raises:
        InstantNotFoundError: no instant id, or nothing completed yet.
    """
    wanted = None if instant_id is None else instant_id_of(instant_id)
    tl = table.log.refresh()
    if wanted is None:
        last = tl.last_completed()
        if last is None:
            raise InstantNotFoundError(f"nothing has completed yet: there is no snapshot to {what}")
        wanted = last.id
    return tl, wanted


def _pin(table: Table, tl: Timeline, instant_id: int, consumer: str | None = None) -> Instant:
    """:func:`create_savepoint` of completed instant ``instant_id`` of ``tl`` (with a
    ``consumer``: that consumer's bookmark, pinning every snapshot from it on)."""
    snap = tl.as_of_instant(instant_id)  # raises when not completed
    target = tl.get(instant_id)
    assert target.completed_seq is not None  # as_of_instant refused one that is not completed
    seq = target.completed_seq

    def pinned_files(timeline: Timeline) -> set[str]:
        if consumer is None:
            return {f.path for f in table.view(snap).files()}
        return files_from(table, timeline, seq)

    done = _append_done(
        table, SavepointCreatePlan(instant_id, seq, consumer), check=_no_clean_deleting(table, instant_id, pinned_files)
    )
    # Checked after the event landed: from now on a cleaner skips these files.
    storage = table.storage
    gone = storage.missing(storage.path(p) for p in sorted(pinned_files(table.log.refresh())))
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


def _no_clean_deleting(table: Table, instant_id: int, pinned: Callable[[Timeline], set[str]]) -> AppendCheck:
    """The check of a savepoint's ``requested`` append (see the module docstring);
    ``pinned`` gives the files it pins on the log it lands on (a bookmark's grow with
    every data instant after it)."""
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
            doomed = set(CleanPlan.from_dict(clean.plan).paths()) & pinned(tl)
            for sp in active_savepoints(tl):
                if not doomed:
                    break
                if claimed is not None and sp.id < claimed:
                    # The cleaner read this one and skips its files (a bookmark's: all from it on).
                    doomed -= files_from(table, tl, sp.seq) if sp.consumer is not None else files_of(tl, sp.seq)
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


def _check_consumer(consumer: object, new: bool = False) -> str:
    """``consumer`` if it is a consumer's name; ``new``: one a bookmark may be set for
    (a name with control characters, accepted before, can still be released)."""
    if not isinstance(consumer, str) or not consumer.strip() or len(consumer) > 200:
        raise InvalidBookmarkError(
            f"a bookmark's consumer is a non-empty name of at most 200 characters, not {consumer!r}"
        )
    # A NUL, a newline or another control character (or a lone surrogate) in a name
    # breaks the listings and logs that show it (one consumer per line, `savepoint list`).
    if new and any(unicodedata.category(c) in ("Cc", "Cs") for c in consumer):
        raise InvalidBookmarkError(f"a bookmark's consumer may not hold control characters: {consumer!r}")
    return consumer


def bookmarks(timeline: Timeline) -> dict[str, Savepoint]:
    """Each consumer's bookmark (its newest, when a move was cut short), by consumer."""
    out: dict[str, Savepoint] = {}
    for sp in active_savepoints(timeline):
        if sp.consumer is not None:
            out[sp.consumer] = sp  # by id: the newest wins
    return out


def move_bookmark(table: Table, consumer: str, instant_id: int | str | None = None) -> Instant:
    """Set ``consumer``'s bookmark at completed instant ``instant_id`` (default: the
    latest): pin every snapshot from it on, then release the consumer's earlier
    bookmarks. A consumer that read ``changes(start, end)`` moves its bookmark to
    ``end`` once it has processed them.

    Raises:
        InvalidBookmarkError: ``consumer`` is not a non-empty name, or holds a control character.
        InstantNotFoundError: no such completed instant.
        SavepointConflictError: an inflight clean is deleting files of those snapshots.
        SnapshotExpiredError: a snapshot from there on was already cleaned.
    """
    _check_consumer(consumer, new=True)
    tl, wanted = _target(table, instant_id, "bookmark")
    earlier = [sp for sp in active_savepoints(tl) if sp.consumer == consumer]
    if len(earlier) == 1 and earlier[0].instant == wanted:
        return tl.get(earlier[0].id)  # already there (a stream commits every micro-batch)
    done = _pin(table, tl, wanted, consumer)
    for sp in earlier:  # the new pin holds first: the consumer is never unprotected
        _append_done(table, SavepointReleasePlan(sp.id))
    return done


def release_bookmark(table: Table, consumer: str) -> list[Instant]:
    """End ``consumer``'s bookmark; the next clean may remove what only it kept.

    Raises:
        InstantNotFoundError: the consumer has no bookmark.
    """
    mine = [sp for sp in active_savepoints(table.log.refresh()) if sp.consumer == _check_consumer(consumer)]
    if not mine:
        raise InstantNotFoundError(f"no bookmark of consumer {consumer!r}")
    return [_append_done(table, SavepointReleasePlan(sp.id)) for sp in mine]
