"""``t.services``: the per-table entry point to table services.

Every service goes through the same two phases (:mod:`.phases`): ``schedule(name)``
appends a plan as a ``requested`` instant; ``execute(instant)`` runs it, in this process
or any other, later. ``run(name)`` does both for what is due, after finishing pending
plans of that service whose executor died.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..timeline.errors import ServiceBusyError, UnknownServiceError
from ..timeline.instant import Instant
from ..timeline.plans import service_of
from .archival import ArchivalService
from .cleaning import CleaningService
from .clustering import ALL as EVERY_GROUP
from .clustering import ClusteringService, check_options
from .compaction import ALL, CompactionService
from .indexing.indexer import IndexingService
from .phases import execute, run_pending, schedule
from .plugin import Progress, Service, ServiceResult
from .rollback import RollbackService
from .savepoints import (
    Savepoint,
    active_savepoints,
    bookmarks,
    create_savepoint,
    move_bookmark,
    release_bookmark,
    release_savepoint,
)

if TYPE_CHECKING:
    from ..table.table import Table

#: Every service by the name users schedule it by.
SERVICES: dict[str, type[Service]] = {
    "indexing": IndexingService,
    "rollback": RollbackService,
    "compaction": CompactionService,
    "clustering": ClusteringService,
    "cleaning": CleaningService,
    "archival": ArchivalService,
}


def service_named(name: str) -> Service:
    """The service called ``name``.

    Raises:
        UnknownServiceError: no such service in this version.
    """
    if name in SERVICES:
        return SERVICES[name]()
    raise UnknownServiceError(f"unknown service {name!r}; known: {', '.join(SERVICES)}")


def _service_of(instant: Instant) -> Service:
    name = service_of(instant.plan) or instant.action.value
    return service_named(name)


class TableServices:
    """Services of one table."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def schedule(self, name: str, **options: Any) -> Instant | None:
        """Plan service ``name`` now (under the table lock); None when there is nothing to do.

        Raises:
            UnknownServiceError: no such service.
            LakelineError: the service refused the request (nothing was appended).
        """
        return schedule(self.table, service_named(name), **options)

    def execute(self, instant: Instant | int, progress: Progress | None = None) -> ServiceResult:
        """Execute a scheduled (or interrupted) service instant.

        Raises:
            ServiceBusyError: a live process is executing it.
            ServiceStateError: it is not a service instant, or it was rolled back.
        """
        inst_id = instant if isinstance(instant, int) else instant.id
        inst = self.table.log.refresh().get(inst_id)
        return execute(self.table, _service_of(inst), inst_id, progress)

    def run(
        self, name: str, dry_run: bool = False, progress: Progress | None = None, **options: Any
    ) -> list[ServiceResult]:
        """Finish pending plans of service ``name`` whose executor died (or that nobody
        ran yet), then schedule and execute a new plan if one is due.

        ``dry_run`` plans without appending anything: one result with no instant whose
        ``plan`` is what would be done. Indexing plans come only from
        ``t.indexes.create``/``drop``, so ``run("indexing")`` only finishes pending ones.

        Raises:
            UnknownServiceError: no such service.
        """
        service = service_named(name)
        if dry_run:
            plan = None if name == "indexing" else service.plan(self.table, self.table.log.refresh(), **options)
            pending = [i.id for i in service.pending(self.table.log.refresh())]
            return [
                ServiceResult(
                    None,
                    service=name,
                    dry_run=True,
                    plan=None if plan is None else plan.to_dict(),
                    pending=tuple(pending),
                )
            ]
        results = run_pending(self.table, service, progress)
        if name != "indexing" and (inst := schedule(self.table, service, **options)) is not None:
            try:
                results.append(execute(self.table, service, inst.id, progress))
            except ServiceBusyError:
                # Another process's run_pending claimed the new plan between our schedule
                # and execute (an inline service, a runner): it is being done.
                pass
        return results

    def compact(self, progress: Progress | None = None) -> ServiceResult:
        """Compact every merge-on-read slice that has logs, whatever the trigger strategy
        (an explicit call acts on everything eligible); pending compactions whose
        executor died are finished first. The result's ``instant`` is None when there
        was nothing to compact (or the table is not merge-on-read).
        """
        results = self.run("compaction", progress=progress, trigger=ALL)
        return results[-1] if results else ServiceResult(None, {"file_groups_compacted": 0}, service="compaction")

    def cluster(
        self, sort_by: Sequence[str] | str | None = None, strategy: str | None = None, progress: Progress | None = None
    ) -> ServiceResult:
        """Rewrite every file group (outside pending plans) as new groups of about the
        target size, sorted by ``sort_by`` under ``strategy`` (``"linear"``: by the
        columns in turn; ``"zorder"``: interleaved, so filters on any of them prune
        files); defaults: ``clustering.sort-columns`` (else the record key) and
        ``clustering.strategy``. Pending clusterings whose executor died are finished
        first. The result's ``instant`` (a ``replacecommit``) is None when the table has
        no file group; ``aborted`` says why when a concurrent write touched its inputs.

        Raises:
            InvalidPropertyError: an unknown strategy (nothing is appended).
            UnknownColumnError: an unknown sort column (nothing is appended).
        """
        check_options(self.table, sort_by, strategy)  # before run() finishes any pending plan
        results = self.run("clustering", progress=progress, scope=EVERY_GROUP, sort_by=sort_by, strategy=strategy)
        return results[-1] if results else ServiceResult(None, {"file_groups_clustered": 0}, service="clustering")

    def archive(self, progress: Progress | None = None) -> ServiceResult:
        """Move the oldest completed instants into the timeline archive until
        ``archive.min-active-instants`` remain active (an explicit call ignores the
        ``archive.max-active-instants`` trigger), never past a pending instant, a
        savepoint or the last clean's retain point. Reads do
        not change: ``t.timeline`` still lists archived instants. ``instant`` is None
        when there was nothing to archive; ``stats`` has ``events_archived``,
        ``first_seq`` and ``through_seq``.
        """
        results = self.run("archival", progress=progress, force=True)
        nothing = {"events_archived": 0, "instants_archived": 0}
        return results[-1] if results else ServiceResult(None, nothing, service="archival")

    def rollback_failed(self) -> ServiceResult:
        """Roll back every pending write whose heartbeat expired, and finish rollbacks
        that died midway."""
        results = self.run("rollback")
        nothing = {"rolled_back": 0, "files_deleted": 0}
        return results[-1] if results else ServiceResult(None, nothing, service="rollback")

    def clean(
        self,
        policy: str | None = None,
        retain: int | None = None,
        dry_run: bool = True,
        orphan_age_ms: int | None = None,
        progress: Progress | None = None,
    ) -> ServiceResult:
        """Delete the files no snapshot inside retention needs (policy and retain default
        to ``clean.policy``/``clean.retain``: keep_latest_commits, 10). A dry run by
        default, like the CLI and delta-rs's ``vacuum``: it only lists; pass
        ``dry_run=False`` to delete. ``stats["files"]`` lists what was (or, on a dry run,
        would be) deleted; ``instant`` is None when there was nothing to delete or on a
        dry run, which deletes nothing.
        """
        if dry_run:
            plan = CleaningService().plan(
                self.table, self.table.log.refresh(), policy=policy, retain=retain, orphan_age_ms=orphan_age_ms
            )
            files = sorted(plan.paths()) if plan is not None else []
            return ServiceResult(
                None,
                {"files": files, "files_deleted": 0, "files_to_delete": len(files)},
                service="cleaning",
                dry_run=True,
                plan=None if plan is None else plan.to_dict(),
            )
        results = self.run("cleaning", progress=progress, policy=policy, retain=retain, orphan_age_ms=orphan_age_ms)
        if not results:
            return ServiceResult(None, {"files": [], "files_deleted": 0}, service="cleaning")
        last = results[-1]
        return replace(last, stats={**last.stats, "files": list(last.stats.get("deleted", ()))})

    def savepoint(self, instant_id: int | str | None = None) -> Instant:
        """Pin the snapshot as of completed instant ``instant_id`` (default: the latest)
        against cleaning and archival; returns the ``savepoint`` instant.

        Raises:
            InstantNotFoundError: no such completed instant.
            SnapshotExpiredError: that snapshot was already cleaned.
        """
        return create_savepoint(self.table, instant_id)

    def release_savepoint(self, instant_id: int | str) -> Instant:
        """End a savepoint (its id, or the pinned instant's); the next clean may remove
        what only it kept.

        Raises:
            InstantNotFoundError: no such active savepoint.
        """
        return release_savepoint(self.table, instant_id)

    def savepoints(self) -> list[Savepoint]:
        """Active savepoints, by id (``.id``, ``.instant`` pinned, ``.seq`` its snapshot;
        a bookmark's ``.consumer``)."""
        return active_savepoints(self.table.log.refresh())

    def bookmark(self, consumer: str, instant_id: int | str | None = None) -> Instant:
        """Set change-feed consumer ``consumer``'s bookmark at completed instant
        ``instant_id`` (default: the latest), releasing its earlier one: cleaning and
        archival keep every snapshot from there on, so ``t.changes(instant_id,
        images=True)`` stays readable until the consumer moves on.

        Raises:
            InvalidBookmarkError: ``consumer`` is not a non-empty name.
            InstantNotFoundError: no such completed instant.
            SnapshotExpiredError: a snapshot from there on was already cleaned.
        """
        return move_bookmark(self.table, consumer, instant_id)

    def release_bookmark(self, consumer: str) -> list[Instant]:
        """End ``consumer``'s bookmark.

        Raises:
            InstantNotFoundError: the consumer has no bookmark.
        """
        return release_bookmark(self.table, consumer)

    def bookmarks(self) -> dict[str, Savepoint]:
        """Each change-feed consumer's bookmark (``.instant``: where it reads from)."""
        return bookmarks(self.table.log.refresh())

    def pending(self, names: Sequence[str] | None = None) -> list[Instant]:
        """Pending service instants (of the given services), by id."""
        wanted = (
            [service_named(n) for n in names]
            if names
            else [
                IndexingService(),
                RollbackService(),
                CompactionService(),
                CleaningService(),
                ClusteringService(),
                ArchivalService(),
            ]
        )
        tl = self.table.log.refresh()
        return sorted((i for s in wanted for i in s.pending(tl)), key=lambda i: i.id)
