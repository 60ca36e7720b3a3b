"""The optimistic commit of one write attempt.

``begin`` appends ``requested`` (the plan names the snapshot position ``p`` the writer
read) and ``inflight`` and starts a heartbeat. The writer then writes files, each
behind a marker. ``complete`` appends ``completed`` with a check that runs against the
exact log before the slot it wins: the conflict rules against every data instant that
completed after ``p``, and a refusal if the instant was rolled back meanwhile. A
conflict aborts the attempt (its files are rolled back) and the caller may replay it.
If the store fails so that the outcome is unknown, nothing is deleted.

Two edges of the attempt never leak or lie. If ``begin`` fails after ``requested``
landed (the ``inflight`` append, the heartbeat), it stops the beat and rolls the instant
back itself, because the caller's guard only starts after ``begin``: no beat goes on
forever in a long-lived process. Once ``completed`` landed, the write has committed
whatever follows: clearing the beat and deleting the markers are logged when they fail,
never raised (``rollback_failed`` removes markers left by completed instants). Whether
``completed`` landed is the log's to say (:meth:`EventLog.append` reads its slot back
by token after any failure): committed, or :class:`CommitOutcomeUnknownError`.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from ..timeline import faults
from ..timeline.commit_metadata import CommitMetadata
from ..timeline.conflicts import KeyCheck, find_conflict
from ..timeline.errors import (
    CommitOutcomeUnknownError,
    ConcurrentCommitError,
)
from ..timeline.heartbeat import Heartbeat
from ..timeline.instant import Action, Instant, State
from ..timeline.markers import delete_markers
from ..timeline.plans import WriteRequestPlan
from ..timeline.timeline import Timeline
from .rollback import rollback_instant

if TYPE_CHECKING:
    from .table import Table


_log = logging.getLogger(__name__)


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
        plan = WriteRequestPlan(self.operation, self.snapshot.last_seq, writer=True).to_dict()
        faults.point("commit.before_requested")
        ev = log.append(self.action, State.REQUESTED, plan)
        self.instant_id = ev.instant
        try:
            props = self.table.config.resolved_properties()
            self._heartbeat = Heartbeat(log.store, self.instant_id, props["heartbeat.interval-ms"]).start()
            faults.point("commit.after_requested")
            log.append(self.action, State.INFLIGHT, {}, instant=self.instant_id)
            faults.point("commit.after_inflight")
        except BaseException as e:
            # The caller only guards what follows begin: end the instant here, so no
            # heartbeat beats on for it in a long-lived process.
            self._end_failed_begin(e)
            raise
        return self.instant_id

    def _end_failed_begin(self, error: BaseException) -> None:
        """Stop the beat, then roll the instant back (nothing was written yet). If even
        that fails (the store is down), the instant is left without a beat: it expires
        and ``rollback_failed`` ends it."""
        self._done = True
        try:
            self._stop_heartbeat(clear=False)
        finally:
            try:
                rollback_instant(self.table.log, self.table.storage, self.instant_id,
                                 f"begin failed: {error!r}")
            except Exception as e:  # noqa: BLE001 - best effort; the original error is raised
                _log.warning("instant %d: begin failed (%r) and so did its rollback (%r); it will expire "
                             "and be rolled back by rollback_failed", self.instant_id, error, e)

    def complete(self, metadata: CommitMetadata, key_check: KeyCheck | None = None,
                 also_check: Callable[[Timeline], None] | None = None) -> Instant:
        """Validate against concurrent commits and append ``completed``.

        ``also_check`` runs on the same timeline as the conflict check, right before the
        slot is taken; whatever it raises aborts this completion attempt (and nothing
        else: the instant stays inflight for the caller to try again).

        Raises:
            ConcurrentCommitError: a concurrent commit conflicts (the attempt is rolled back).
            InvalidTransitionError: the instant was rolled back meanwhile (stale writer).
            CommitOutcomeUnknownError: the store failed; nothing was deleted.
        """
        p = self.snapshot.last_seq

        def check(tl: Timeline) -> None:
            concurrent = [i for i in tl.completed_after(p) if i.id != self.instant_id]
            reason = find_conflict(metadata, concurrent, key_check)
            if reason is not None:
                raise ConcurrentCommitError(f"instant {self.instant_id} ({self.operation}): {reason}")
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
        self._done = True
        faults.point("commit.after_complete")
        self._after_complete()
        return self.table.log.timeline.get(ev.instant)

    def _after_complete(self) -> None:
        """Clear the beat and remove the markers of a committed instant. Neither may fail
        the write: what is left (a beat, markers of a completed instant) is harmless, and
        ``rollback_failed`` removes markers of completed instants."""
        try:
            self._stop_heartbeat(clear=True)
        except Exception as e:  # noqa: BLE001 - the write committed; a stale beat is harmless
            _log.warning("instant %d completed; clearing its heartbeat failed: %r", self.instant_id, e)
        try:
            faults.point("commit.delete_markers")
            delete_markers(self.table.storage, self.instant_id)
        except Exception as e:  # noqa: BLE001 - the write committed; rollback_failed removes them
            _log.warning("instant %d completed; its markers are left for rollback_failed: %r", self.instant_id, e)

    def abort(self, reason: str) -> None:
        """Roll this attempt back (idempotent; a no-op once completed)."""
        if self._done or self.instant_id < 0:
            return
        self._done = True
        self._stop_heartbeat(clear=False)
        # Files written after another process rolled this instant back are not behind
        # markers any more: the file task that wrote them deleted them itself
        # (:func:`~.files.write_indexed` re-checks its marker).
        rollback_instant(self.table.log, self.table.storage, self.instant_id, reason)

    def _stop_heartbeat(self, clear: bool) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop(clear=clear)
            self._heartbeat = None
