"""The commit protocol: how an instant's written files become a completed instant.

Every instant that writes data files goes through it, a write and a rewriting service
(compaction, clustering) alike; they differ only in how the instant starts and in the
rule that decides whether it may still complete:

1. **begin** (writes): ``requested`` (the plan names the snapshot position ``p`` the
   writer read) and ``inflight``, and a heartbeat. A service's instant was begun by the
   framework (:mod:`lakeline.services.phases`), which also beats for it: the service
   :meth:`Commit.resume`\\ s it.
2. The caller writes its files, each behind a marker.
3. **index updates**: the entries of the new files for every index building or ready
   now, behind the instant's markers (:func:`~lakeline.indexes.on_commit.write_commit_updates`).
4. **complete**: ``completed``, appended with a check that runs against the exact log
   before the slot it wins: the caller's :data:`CompletionRule` (for writes
   :func:`write_rule`: the conflict rules and the key check against every data instant
   completed after ``p``; for a service its own conflict rule), and then that no index
   started building since step 3. If one did, its entries are written and completion is
   tried again (index states are read from the timeline at completion, never from the
   writer's configuration, so the indexer never waits for writers inflight when it
   scheduled).
5. **after**: the beat is cleared, markers and earlier attempts' files removed, entries
   for indexes dropped meanwhile deleted, and the metadata table's **upkeep** done.
   None of it may fail the write, which has landed (:func:`after_commit_step`).

**abort** rolls a write attempt back (its files are behind its markers). Two edges never
leak or lie: a ``begin`` that fails after ``requested`` stops the beat and rolls the
instant back itself, as the caller's guard starts only after it; and whether
``completed`` landed is the log's to say (:meth:`EventLog.append` reads its slot back by
token after any failure): committed, or :class:`CommitOutcomeUnknownError`, after which
nothing is deleted.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from ...indexes.entries import Precomputed
from ...indexes.files_index import load_view
from ...indexes.on_commit import after_commit_upkeep, unhandled_indexes, write_commit_updates
from ...indexes.states import written_indexes
from ...timeline.commit_metadata import CommitMetadata
from ...timeline.conflicts import Conflict, ConflictKind, KeyCheck, find_conflict
from ...timeline.diagnostics import faults
from ...timeline.errors import AttemptConflictError, CommitConflictError, CommitOutcomeUnknownError, IndexesBehindError
from ...timeline.field_ids import field_id
from ...timeline.heartbeat import Heartbeat
from ...timeline.instant import Action, Instant, State
from ...timeline.markers import delete_markers
from ...timeline.plans import WriteRequest
from ...timeline.table_config import TableConfig
from ...timeline.timeline import Timeline
from ..context import TableContext
from ..rollback import rollback_instant

_log = logging.getLogger(__name__)

#: ``rule(timeline)`` raises when the instant may not complete on ``timeline``.
CompletionRule = Callable[[Timeline], None]

#: Completion attempts that may each find a newly created index (then write its entries).
_INDEX_ROUNDS = 20


def write_rule(
    ctx: TableContext, instant: int, operation: str, metadata: CommitMetadata, key_check: KeyCheck | None
) -> CompletionRule:
    """The completion rule of a write: no data instant completed after the snapshot the
    write planned on conflicts with it (:func:`~lakeline.timeline.conflicts.find_conflict`,
    with the key check for the rules that need keys)."""
    p = ctx.snapshot.last_seq

    def rule(tl: Timeline) -> None:
        concurrent = [i for i in tl.completed_after(p) if i.id != instant]
        reason = find_conflict(metadata, concurrent, key_check) or schema_conflict(ctx.config, concurrent)
        if reason is not None:
            raise AttemptConflictError(f"instant {instant} ({operation}): {reason}", reason)

    return rule


def schema_conflict(config: TableConfig, concurrent: list[Instant]) -> Conflict | None:
    """A schema instant among ``concurrent`` whose schema lost, renamed or retyped a
    column of ``config``'s: the write's rows were conformed to a schema that is no
    longer the table's, so it replays and conforms them again, or fails typed (an old
    column name, a narrowing). Its files would read right by field id; the replay is
    what docs/design.md promises a writer. Columns only added (another writer's
    ``add-columns``, or this write's own) are no conflict: the files lack them and
    read them as nulls, as they always did."""
    for inst in concurrent:
        if inst.action is not Action.SCHEMA:
            continue
        raw = inst.metadata.get("config")
        if not isinstance(raw, Mapping):
            return Conflict(ConflictKind.SCHEMA_CHANGED, inst.id, inst.action)
        theirs = {(f.name, str(f.type), field_id(f)) for f in TableConfig.from_dict(raw).schema}
        if any((f.name, str(f.type), field_id(f)) not in theirs for f in config.schema):
            return Conflict(ConflictKind.SCHEMA_CHANGED, inst.id, inst.action)
    return None


def after_commit_step(what: str, step: Callable[[], None]) -> None:
    """Run a clean-up step that follows a ``completed`` event: it never fails the write,
    which has landed (a caller told otherwise would retry it and write the rows twice).
    What it leaves behind is redone later (the next commit's upkeep, the cleaner)."""

    def with_fault_point() -> None:
        faults.point("commit.cleanup")
        step()

    _logged(what, with_fault_point)


def _logged(what: str, step: Callable[[], None]) -> None:
    try:
        step()
    except Exception as e:  # noqa: BLE001 - anything here is after the commit point
        _log.warning("%s failed after the commit landed (left for later): %r", what, e)


class Commit:
    """One attempt of one instant on its way to ``completed``. Start it with
    :meth:`begin` (a write) or :meth:`resume` (a service's claimed instant)."""

    def __init__(
        self, ctx: TableContext, action: Action, instant_id: int, *, leftovers: Sequence[str] = (), writer: bool = False
    ) -> None:
        self.ctx = ctx
        self.action = action
        self.instant_id = instant_id
        #: Files of earlier, interrupted attempts of this instant: removed once it completed.
        self._leftovers = list(leftovers)
        #: A write's own fault points (``commit.*``) and heartbeat; a service has the framework's.
        self._writer = writer
        self._heartbeat: Heartbeat | None = None
        self._done = False
        #: (index name, creating instant, delta path or None) of every index given entries.
        self._indexed: list[tuple[str, int, str | None]] = []

    # -- 1. begin ---------------------------------------------------------------------

    @classmethod
    def begin(cls, ctx: TableContext, action: Action, operation: str) -> Commit:
        """Append ``requested`` and ``inflight`` for a write, start its heartbeat."""
        plan = WriteRequest(operation, ctx.snapshot.last_seq, writer=True).to_dict()
        faults.point("commit.before_requested")
        ev = ctx.log.append(action, State.REQUESTED, plan)
        commit = cls(ctx, action, ev.instant, writer=True)
        try:
            interval_ms = ctx.config.props.heartbeat_interval_ms
            commit._heartbeat = Heartbeat(ctx.log.store, ev.instant, interval_ms).start(immediate=False)
            faults.point("commit.after_requested")
            ctx.log.append(action, State.INFLIGHT, {}, instant=ev.instant)
            faults.point("commit.after_inflight")
        except BaseException as e:
            # The caller only guards what follows begin: end the instant here, so no
            # heartbeat beats on for it in a long-lived process.
            commit._end_failed_begin(e)
            raise
        return commit

    @classmethod
    def resume(cls, ctx: TableContext, instant: Instant, leftovers: Sequence[str] = ()) -> Commit:
        """The commit of a service instant the framework began and this attempt holds;
        ``leftovers`` are the files earlier attempts wrote (named by the markers there
        were when this attempt started), deleted once it completed: an executor presumed
        dead may still wake up and complete with them until then."""
        return cls(ctx, instant.action, instant.id, leftovers=leftovers)

    def _end_failed_begin(self, error: BaseException) -> None:
        """Stop the beat, then roll the instant back (nothing was written yet). If even
        that fails (the store is down), the instant is left without a beat: it expires
        and ``rollback_failed`` ends it."""
        self._done = True
        try:
            self._stop_heartbeat(clear=False)
        finally:
            try:
                rollback_instant(self.ctx.log, self.ctx.storage, self.instant_id, f"begin failed: {error!r}")
            except Exception as e:  # noqa: BLE001 - best effort; the original error is raised
                _log.warning(
                    "instant %d: begin failed (%r) and so did its rollback (%r); it will expire "
                    "and be rolled back by rollback_failed",
                    self.instant_id,
                    error,
                    e,
                )

    # -- 3. index updates -------------------------------------------------------------

    def write_index_updates(self, metadata: CommitMetadata, precomputed: Precomputed | None = None) -> None:
        """Entries of the instant's new files for every index building or ready now that
        has none yet, behind the markers (``precomputed``: what the file tasks computed
        from the rows they wrote, by file path).

        The timeline as last read is enough: an index that started building since is
        caught by the completion's check (:meth:`complete`), which runs on the log the
        event lands on and sends the commit back here; reading the log again first would
        cost a round trip on every commit for a rare case."""
        ctx, cfg = self.ctx, self.ctx.config
        done = {(name, created) for name, created, _ in self._indexed}
        self._indexed += write_commit_updates(
            ctx.storage,
            ctx.log.timeline,
            self.instant_id,
            metadata,
            cfg.schema,
            cfg.record_key,
            skip=done,
            map_fn=ctx.engine.map,
            precomputed=precomputed,
        )

    # -- 4. complete ------------------------------------------------------------------

    def complete(self, metadata: CommitMetadata, rule: CompletionRule) -> Instant:
        """Append ``completed`` if ``rule`` and the index check pass on the exact log it
        lands on, writing entries for indexes created meanwhile and trying again.

        Raises:
            whatever ``rule`` raises (AttemptConflictError for writes, ServiceAbortedError
                or StaleAttemptError for services): nothing was appended.
            InvalidTransitionError: the instant was rolled back meanwhile (stale writer).
            CommitOutcomeUnknownError: the store failed; nothing was deleted.
            CommitConflictError: indexes kept being created through every round.
        """
        for _ in range(_INDEX_ROUNDS):
            try:
                inst = self._append_completed(metadata, rule)
            except IndexesBehindError:
                self.write_index_updates(metadata)
                continue
            self._after_commit_cleanup(metadata)
            return inst
        raise CommitConflictError(f"instant {self.instant_id}: indexes kept being created while it completed")

    def _append_completed(self, metadata: CommitMetadata, rule: CompletionRule) -> Instant:
        done = {(name, created) for name, created, _ in self._indexed}

        def check(tl: Timeline) -> None:
            rule(tl)
            if unhandled_indexes(tl, done):
                raise IndexesBehindError("an index started building")

        if self._writer:
            faults.point("commit.before_complete")
        try:
            ev = self.ctx.log.append(
                self.action, State.COMPLETED, metadata.to_dict(), instant=self.instant_id, check=check
            )
        except CommitOutcomeUnknownError:
            self._stop_heartbeat(clear=False)
            self._done = True
            raise
        self._done = True
        if self._writer:
            faults.point("commit.after_complete")
        return self.ctx.log.timeline.get(ev.instant)

    # -- 5. after ---------------------------------------------------------------------

    def _after_commit_cleanup(self, metadata: CommitMetadata) -> None:
        """Clear the beat, remove earlier attempts' files and the markers, and this
        commit's entries of indexes dropped meanwhile. None of it may fail the write:
        what is left (a beat, markers of a completed instant, an orphan file) is harmless,
        and ``rollback_failed`` and the cleaner remove it."""
        storage = self.ctx.storage
        _logged(
            f"instant {self.instant_id} completed; clearing its heartbeat", lambda: self._stop_heartbeat(clear=True)
        )

        def remove_files() -> None:
            if self._writer:
                faults.point("commit.delete_markers")
            for rel in self._leftovers:
                storage.delete(storage.path(rel))
            # Every file behind the markers is known here: the new files, the index
            # deltas and the earlier attempts' leftovers (a store deletes them by name).
            deltas = [rel for _, _, rel in self._indexed if rel is not None]
            delete_markers(storage, self.instant_id, [f.path for f in metadata.files] + deltas + self._leftovers)

        _logged(f"instant {self.instant_id} completed; removing its markers", remove_files)
        after_commit_step(f"dropping stale index entries of instant {self.instant_id}", self._drop_stale_updates)

    def _drop_stale_updates(self) -> None:
        """Remove this commit's entries for indexes dropped while it completed: the drop may
        have removed the index's files before these were written, and nobody else would."""
        storage = self.ctx.storage
        live = {(d.name, d.instant) for d in written_indexes(self.ctx.log.timeline)}
        for name, created, rel in self._indexed:
            if rel is not None and (name, created) not in live:
                storage.delete(storage.path(rel))

    def after_commit_upkeep(self, rewrote_rows: int = 0) -> None:
        """The metadata table's upkeep after the commit (a checkpoint of the view, folded
        index deltas where due; ``rewrote_rows``: a service's rewritten rows, see
        :func:`~lakeline.indexes.on_commit.after_commit_upkeep`); never raises."""
        ctx = self.ctx

        def upkeep() -> None:
            after_commit_upkeep(
                ctx.storage,
                ctx.log.timeline,
                lambda tl: load_view(ctx.storage, tl, [ctx.view]),
                ctx.config.props,
                ctx.view.known_checkpoint,
                rewrote_rows,
            )

        # A write's upkeep is one of its fault points (commit.cleanup); a service's is not.
        (after_commit_step if self._writer else _logged)(
            f"metadata-table upkeep after instant {self.instant_id}", upkeep
        )

    # -- abort ------------------------------------------------------------------------

    def abort(self, reason: str) -> None:
        """Roll this write attempt back (idempotent; a no-op once completed)."""
        if self._done:
            return
        self._done = True
        self._stop_heartbeat(clear=False)
        # Files written after another process rolled this instant back are not behind
        # markers any more: the file task that wrote them deleted them itself
        # (:func:`~.files.write_indexed` re-checks its marker).
        rollback_instant(self.ctx.log, self.ctx.storage, self.instant_id, reason)

    def _stop_heartbeat(self, clear: bool) -> None:
        if self._heartbeat is not None:
            self._heartbeat.stop(clear=clear)
            self._heartbeat = None
