"""Retention as the timeline records it: savepoints that pin snapshots, and the retain
point of the cleaner.

Readers, the cleaner and archival all need the same answer to "which snapshots are still
readable", from the timeline alone, so every process agrees without local state:

* a **savepoint** is a ``savepoint`` instant whose plan is ``{"op": "create",
  "instant": X, "seq": S}`` (pin the snapshot as of instant ``X``, whose completion is
  event ``S``) until a completed ``{"op": "release", "savepoint": P}`` names it; it pins
  from its ``requested`` event on (``lakeline.services.savepoints`` writes them);
  one whose plan names a ``consumer`` is that change-feed consumer's **bookmark** and
  pins every snapshot from ``S`` on;
* the **retain point** of a completed ``clean`` is the earliest snapshot it kept (its
  ``retain_seq``): snapshots before it may have lost files.

A time-travel read of a snapshot before the furthest retain point that no savepoint
pins (and no bookmark at or before it) fails with :class:`SnapshotExpiredError` before
it reads anything, even where its files happen to survive: outside retention is a rule,
not an accident of what was left.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import SnapshotExpiredError
from .instant import Action, State
from .plans import SavepointCreatePlan, SavepointReleasePlan, savepoint_plan
from .timeline import Timeline


@dataclass(frozen=True)
class Savepoint:
    """An active savepoint: its own instant id, the pinned instant and snapshot seq,
    and for a bookmark the consumer it belongs to (it pins every snapshot from ``seq`` on)."""

    id: int
    instant: int
    seq: int
    state: str
    consumer: str | None = None


def _released(timeline: Timeline) -> set[int]:
    return {
        p.savepoint
        for i in timeline.by_action(Action.SAVEPOINT)
        if i.is_completed and isinstance(p := savepoint_plan(i.plan), SavepointReleasePlan)
    }


def active_savepoints(timeline: Timeline) -> list[Savepoint]:
    """Savepoints that pin a snapshot in ``timeline`` (pending creations included), by id."""
    gone = _released(timeline)
    return [
        Savepoint(i.id, p.instant, p.seq, i.state, p.consumer)
        for i in timeline.by_action(Action.SAVEPOINT)
        if isinstance(p := savepoint_plan(i.plan), SavepointCreatePlan)
        and i.id not in gone
        and i.state is not State.ROLLED_BACK
    ]


def pinned_seqs(timeline: Timeline) -> list[int]:
    """Snapshot sequence numbers that active savepoints pin, ascending: cleaning keeps
    their files and archival must not pass the smallest."""
    return sorted({s.seq for s in active_savepoints(timeline)})


def bookmark_seqs(timeline: Timeline) -> list[int]:
    """Snapshot sequence numbers from which active bookmarks pin every snapshot, ascending."""
    return sorted({s.seq for s in active_savepoints(timeline) if s.consumer is not None})


def last_retain_seq(timeline: Timeline) -> int | None:
    """The retain point of the last completed clean (archival must not pass it), None
    when the table was never cleaned."""
    cleans = [i for i in timeline.completed() if i.action is Action.CLEAN]
    return int(cleans[-1].metadata["retain_seq"]) if cleans and "retain_seq" in cleans[-1].metadata else None


def furthest_retain_seq(timeline: Timeline) -> int | None:
    """The latest retain point of any completed clean: every snapshot before it may have
    lost files to one of them (a later clean with a looser policy does not bring them
    back). None when the table was never cleaned."""
    seqs = [
        int(i.metadata["retain_seq"])
        for i in timeline.completed()
        if i.action is Action.CLEAN and i.metadata.get("retain_seq") is not None
    ]
    return max(seqs) if seqs else None


def check_retained(timeline: Timeline, snapshot_seq: int, name: object) -> None:
    """Refuse a read of the snapshot ending at event ``snapshot_seq`` when it lies
    before the furthest retain point and no savepoint pins it.

    Args:
        timeline: the table's timeline as it is now (it holds the cleans).
        snapshot_seq: the last event of the snapshot to read.
        name: how the caller named the snapshot (for the message).

    Raises:
        SnapshotExpiredError: the snapshot is outside retention.
    """
    retain = furthest_retain_seq(timeline)
    if retain is None or snapshot_seq >= retain or snapshot_seq in pinned_seqs(timeline):
        return
    if any(b <= snapshot_seq for b in bookmark_seqs(timeline)):
        return  # a bookmark keeps every snapshot from its own on
    raise SnapshotExpiredError(
        f"snapshot as of {name} is outside retention: the cleaner keeps snapshots from event {retain} on "
        "(savepoint a snapshot, or bookmark a change-feed consumer, to keep it readable)"
    )
