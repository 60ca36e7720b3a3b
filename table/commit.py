"""The optimistic commit of one write attempt.

``begin`` appends ``requested`` (the plan names the snapshot position ``p`` the writer
read) and ``inflight`` and starts a heartbeat. The writer then writes files, each
behind a marker. ``complete`` appends ``completed`` with a check that runs against the
exact log before the slot it wins: the conflict rules against every data instant that
completed after ``p``, and a refusal if the instant was rolled back meanwhile. A
conflict aborts the attempt (its files are rolled back) and the caller may replay it.
If the store fails so that the outcome is unknown, nothing is deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from ..timeline import faults
from ..timeline.commit_metadata import CommitMetadata
from ..timeline.conflicts import KeyCheck, find_conflict
from ..timeline.errors import CommitOutcomeUnknownError, LakelineError
from ..timeline.heartbeat import Heartbeat
from ..timeline.instant import Action, Instant, State
from ..timeline.timeline import Timeline
from ..timeline.markers import delete_markers
from .rollback import rollback_instant

if TYPE_CHECKING:
    from .table import Table


class ConflictDetected(LakelineError):
    """This attempt conflicts with a concurrent commit (internal: the writer retries)."""


class Commit:
    """One attempt at one write instant."""

    def __init__(self, table: "Table", action: Action, operation: str, snapshot: Timeline) -> None:
        self.table = table
        self.action = action
        self.operation = operation
        self.snapshot = snapshot
        self.instant_id: int = -1
        self._heartbeat: Heartbeat | None = None
        self._done = False

    def begin(self) -> int:
        """Append requested and inflight, start the heartbeat; return the instant id."""
        log = self.table.log
        plan = {"operation": self.operation, "snapshot_seq": self.snapshot.last_seq, "writer": True}
        faults.point("commit.before_requested")
        ev = log.append(self.action, State.REQUESTED, plan)
        self.instant_id = ev.instant
        props = self.table.config.resolved_properties()
        self._heartbeat = Heartbeat(log.store, self.instant_id, props["heartbeat.interval-ms"]).start()
        faults.point("commit.after_requested")
        log.append(self.action, State.INFLIGHT, {}, instant=self.instant_id)
        faults.point("commit.after_inflight")
        return self.instant_id

    def complete(self, metadata: CommitMetadata, key_check: KeyCheck | None = None,
                 also_check: Callable[[Timeline], None] | None = None) -> Instant:
        """Validate against concurrent commits and append ``completed``.

        ``also_check`` runs on the same timeline as the conflict check, right before the
        slot is taken; whatever it raises aborts this completion attempt (and nothing
        else: the instant stays inflight for the caller to try again).

        Raises:
            ConflictDetected: a concurrent commit conflicts (the attempt is rolled back).
            InvalidTransitionError: the instant was rolled back meanwhile (stale writer).
            CommitOutcomeUnknownError: the store failed; nothing was deleted.
        """
        p = self.snapshot.last_seq

        def check(tl: Timeline) -> None:
            concurrent = [i for i in tl.completed_after(p) if i.id != self.instant_id]
            reason = find_conflict(metadata, concurrent, key_check)
            if reason is not None:
                raise ConflictDetected(f"instant {self.instant_id} ({self.operation}): {reason}")
            if also_check is not None:
                also_check(tl)

        faults.point("commit.before_complete")
        try:
            ev = self.table.log.append(
                self.action, State.COMPLETED, metadata.to_dict(), instant=self.instant_id, check=check
            )
        except CommitOutcomeUnknownError:
            self._stop_heartbeat(clear=False)
            self._done = True
            raise
        faults.point("commit.after_complete")
        self._done = True
        self._stop_heartbeat(clear=True)
        delete_markers(self.table.storage, self.instant_id)
        return self.table.log.timeline.get(ev.instant)

    def abort(self, reason: str) -> None:
        """Roll this attempt back (idempotent; a no-op once completed)."""
        if self._done or self.instant_id < 0:
            return
        self._done = True
        self._stop_heartbeat(clear=False)
        rollback_instant(self.table.log, self.table.storage, self.instant_id, reason)

    def _stop_heartbeat(self, clear: bool) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop(clear=clear)
            self._heartbeat = None
