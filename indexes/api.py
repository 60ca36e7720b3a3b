"""``t.indexes``: create, list, drop and validate a table's indexes.

Create and drop are ``indexing`` instants, so every writer and reader learns of them
from the timeline. This version builds synchronously (the async indexer of the next
issue splits the same steps across a service): request the instant (the index is now
``building`` and writers that complete from here on write its entries), build every
live base file of the snapshot at that point, catch up on data instants that completed
meanwhile without writing entries, then complete with a check that nothing new
slipped in unindexed, looping until it holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..timeline import faults
from ..timeline.errors import IndexNotFoundError, InvalidTransitionError, LakelineError
from ..timeline.fs_view import FileSystemView
from ..timeline.instant import Action, State
from ..timeline.timeline import Timeline
from .column_stats import STATS_SCHEMA, NdvEstimate, ndv
from .files_index import FILES, validate_checkpoint, write_checkpoint
from .lifecycle import (
    IndexDef,
    check_can_create,
    check_can_drop,
    create_plan,
    drop_plan,
    list_indexes,
    readable_indexes,
)
from .maintain import build, catch_up, live_bases, missing_updates, resolve, validate
from .metadata_table import MetadataTable, visible_paths

if TYPE_CHECKING:
    from ..table.table import Table

_MAX_FINALIZE_ROUNDS = 100


class _Unindexed(LakelineError):
    """Internal: a data instant completed without entries; catch up and try again."""


class TableIndexes:
    """The index API of one table (``Table.indexes``)."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def list(self) -> list[IndexDef]:
        """Indexes building, ready or dropping, by name (from the timeline as it is now)."""
        return list_indexes(self.table.timeline)

    def create(self, kind: str, columns: Sequence[str] | None = None, wait: bool = True,
               name: str | None = None, options: dict[str, Any] | None = None) -> IndexDef:
        """Create an index and build it (synchronously; ``wait`` is accepted for the
        contract, the async build is the next issue's).

        ``name`` defaults to the kind. ``options``: ``{"fpp": 0.01}`` for bloom filters.

        Raises:
            InvalidIndexError: unknown kind, bad name, or unknown columns.
            IndexExistsError: an index of that name exists.
        """
        cfg = self.table.config
        name = name or kind
        plan = create_plan(name, kind, columns, options)
        idx = IndexDef(name, kind, tuple(plan["columns"]), "building", -1, plan["options"])
        target = resolve(idx, cfg.schema, cfg.record_key)  # refuse bad columns before any event
        log = self.table.log
        check_can_create(log.refresh(), name)
        ev = log.append(Action.INDEXING, State.REQUESTED, plan,
                        check=lambda tl: check_can_create(tl, name))
        instant = ev.instant
        storage = self.table.storage
        try:
            faults.point("indexing.after_requested")
            log.append(Action.INDEXING, State.INFLIGHT, {}, instant=instant)
            base = log.refresh()
            rows = build(storage, self.table.view(base), target, cfg.schema)
            MetadataTable(storage).rebuild(name, base, rows)
            pos = base.last_seq
            for _ in range(_MAX_FINALIZE_ROUNDS):
                tl = log.refresh()
                catch_up(storage, tl, pos, target, cfg.schema)
                faults.point("indexing.mid_catchup")

                def nothing_unindexed(now: Timeline, since: int = pos) -> None:
                    if missing_updates(storage, now, since, name):
                        raise _Unindexed(name)

                try:
                    log.append(Action.INDEXING, State.COMPLETED, {"index": name}, instant=instant,
                               check=nothing_unindexed)
                    break
                except _Unindexed:
                    continue
            else:
                raise _Unindexed(f"index {name!r} could not catch up with writers")
        except BaseException:
            # An aborted build leaves no index: roll the instant back, remove its files.
            try:
                log.append(Action.INDEXING, State.ROLLED_BACK, {"reason": "build failed"}, instant=instant)
            except InvalidTransitionError:
                pass
            MetadataTable(storage).drop(name)
            raise
        return next(d for d in list_indexes(log.refresh()) if d.name == name)

    def drop(self, name: str) -> None:
        """Drop an index: ``dropping`` at once (readers and writers stop using it), its
        files removed, then absent.

        Raises:
            IndexNotFoundError: no such index (or it is already being dropped).
            InvalidIndexError: ``name`` is the always-on ``files`` index.
        """
        log = self.table.log
        plan = drop_plan(name)
        check_can_drop(log.refresh(), name)
        ev = log.append(Action.INDEXING, State.REQUESTED, plan,
                        check=lambda tl: check_can_drop(tl, name) and None)
        log.append(Action.INDEXING, State.INFLIGHT, {}, instant=ev.instant)
        MetadataTable(self.table.storage).drop(name)
        log.append(Action.INDEXING, State.COMPLETED, {"index": name}, instant=ev.instant)

    def ndv(self, column: str, partition: str | None = None, name: str | None = None) -> NdvEstimate:
        """Distinct values of ``column`` in the table (or one partition folder) now,
        from the merged sketches of a ready ``column_stats`` index.

        Counts the live base files; values only in merge-on-read logs not yet compacted
        are not counted.

        Raises:
            IndexNotFoundError: no ready column_stats index (of that name) covers it.
        """
        snapshot = self.table.timeline
        ready = [d for d in readable_indexes(snapshot, "column_stats") if name is None or d.name == name]
        cfg = self.table.config
        for d in ready:
            if column not in resolve(d, cfg.schema, cfg.record_key).columns:
                continue
            paths = [b.path for b in live_bases(self.table.view(snapshot))]
            rows = visible_paths(MetadataTable(self.table.storage).read(d.name, snapshot), paths)
            if rows is None:
                rows = STATS_SCHEMA.empty_table()
            return ndv(rows, column, partition)
        raise IndexNotFoundError(f"no ready column_stats index covers column {column!r}")

    def rebuild(self, name: str | None = None) -> list[str]:
        """Recompute ready indexes (one, or all, and the ``files`` checkpoint) from the
        data files of the current snapshot, replacing what the metadata table holds;
        returns the new bases' paths. Writers may keep writing: deltas of instants that
        complete after the snapshot are kept.

        Raises:
            IndexNotFoundError: ``name`` names no ready index.
        """
        snapshot = self.table.timeline
        cfg = self.table.config
        storage = self.table.storage
        out = []
        if name in (None, FILES):
            out.append(write_checkpoint(storage, FileSystemView(snapshot)))
            if name == FILES:
                return out
        defs = [d for d in readable_indexes(snapshot) if name is None or d.name == name]
        if name is not None and not defs:
            raise IndexNotFoundError(f"no ready index named {name!r}")
        view = self.table.view(snapshot)
        for d in defs:
            rows = build(storage, view, resolve(d, cfg.schema, cfg.record_key), cfg.schema)
            out.append(MetadataTable(storage).rebuild(d.name, snapshot, rows))
        return out

    def compact(self, name: str | None = None) -> list[str]:
        """Fold the metadata-table deltas of completed instants into bases (one ready
        index, or every ready index); returns the new bases' paths.

        A building index is left alone: its builder writes catch-up deltas for instants
        that completed earlier, and a base folded past their completion would hide them.
        """
        tl = self.table.timeline
        mt = MetadataTable(self.table.storage)
        names = [d.name for d in readable_indexes(tl) if name is None or d.name == name]
        return [p for n in names if (p := mt.compact(n, tl)) is not None]

    def validate(self, name: str | None = None) -> dict[str, Any]:
        """Recompute indexes (one, or every ready/building one, and the ``files`` index's
        newest checkpoint) from the data files and the timeline of the current snapshot,
        and list every mismatch.

        Raises:
            IndexNotFoundError: ``name`` names no index.
        """
        snapshot = self.table.timeline
        cfg = self.table.config
        checked = 0
        mismatches: list[dict[str, Any]] = []
        if name in (None, FILES):
            report = validate_checkpoint(self.table.storage, snapshot)
            mismatches.extend(report["mismatches"])
            if name == FILES:
                return {"files_checked": len(self.table.view(snapshot).files()), "mismatches": mismatches}
        if name is not None:
            defs = [check_can_drop(snapshot, name)]
        else:
            defs = [d for d in list_indexes(snapshot) if d.is_written]
        view = self.table.view(snapshot)
        for d in defs:
            n, bad = validate(self.table.storage, view, snapshot, resolve(d, cfg.schema, cfg.record_key), cfg.schema)
            checked += n
            mismatches.extend(bad)
        return {"files_checked": checked, "mismatches": mismatches}
