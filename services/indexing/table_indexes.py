"""``t.indexes``: create, list, drop, validate and rebuild a table's indexes.

Create and drop are ``indexing`` instants of the async indexer
(:mod:`.indexer`), so every writer and reader learns of them from the timeline.
``create(..., wait=True)`` schedules and builds in this process and returns when the
index is ``ready``; ``wait=False`` returns at once with the index ``building`` while a
thread of this process builds it (if the process ends first, any process finishes the
build with ``t.services.run("indexing")`` or ``lakeline service run PATH indexing`` once
the heartbeat expired). Writers keep writing throughout.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ...indexes.build import build, validate
from ...indexes.column_stats import STATS_SCHEMA, NdvEstimate, ndv
from ...indexes.entries import check_definition, resolve
from ...indexes.file_checks import metadata_problems, record_index_problems
from ...indexes.files_index import FILES, validate_checkpoint, write_checkpoint
from ...indexes.metadata_table import MetadataTable, visible_paths
from ...indexes.on_commit import fold_record_index
from ...indexes.record_index import generation as record_generation
from ...indexes.record_index.check import validate as check_records
from ...indexes.record_index.store import folder_of, newest_generation, visible_deltas
from ...indexes.states import (
    IndexDef,
    IndexKind,
    IndexState,
    check_can_drop,
    index_states,
    list_indexes,
    readable_indexes,
)
from ...timeline.commit_metadata import Operation
from ...timeline.errors import IndexBuildError, IndexNotFoundError, LakelineError, LockTimeoutError, ServiceBusyError
from ...timeline.plans import OP_CREATE, OP_DROP, IndexCreatePlan
from ...timeline.view.fs_view import FileSystemView
from ..phases import claimable, execute, schedule
from ..plugin import Progress
from .automatic import build_if_keys_random
from .indexer import IndexingService

if TYPE_CHECKING:
    from ...table.context import TableContext
    from ...table.table import Table

log = logging.getLogger(__name__)

#: Times ``validate`` of a record index reads the table again because a fold moved on.
_VALIDATE_ROUNDS = 5


class TableIndexes:
    """The index API of one table (``Table.indexes``)."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self._threads: list[threading.Thread] = []

    def list(self) -> list[IndexDef]:
        """Indexes building, ready or dropping, by name (from the timeline as it is now)."""
        return list_indexes(self.table.timeline)

    def create(
        self,
        kind: str,
        columns: Sequence[str] | None = None,
        wait: bool = True,
        name: str | None = None,
        options: dict[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> IndexDef:
        """Create an index: schedule its ``indexing`` instant (it is ``building`` from
        then on) and build it.

        Args:
            kind: ``column_stats``, ``bloom_filters`` or ``record_index`` (key -> file
                and row, exact; columns: the record key only).
            columns: indexed columns; None means every column (stats) or the record
                key (bloom filters).
            wait: build here and return when ready; False returns at once while a
                background thread builds.
            name: defaults to the kind; 1 to 100 letters, digits, ``_`` or ``-``.
            options: ``{"fpp": 0.01}`` for bloom filters (1e-9 <= fpp < 1);
                ``{"buckets": 64}`` for a record index (1 to 65536; default: sized by
                the table, recorded in the plan).
            progress: ``progress(done, total)`` as base files are indexed.

        Returns:
            The index as the timeline now defines it (``ready`` after a wait); the
            record index the table built by itself, when this asks for it
            (:mod:`.automatic`).

        Raises:
            InvalidIndexError: unknown kind, bad name, or unknown or repeated columns.
            InvalidIndexOptionsError: an option the kind does not take, or a bad ``fpp``.
            IndexExistsError: a user's index of that name exists (or is being created).
            CorruptEventError: a data instant's record is damaged (nothing scheduled).
            IndexBuildError: the build failed and was rolled back (wait=True).
        """
        # Refused before the table lock is even taken; the service's plan checks again
        # (the path of ``services.schedule`` and ``lakeline index create --no-wait``).
        name, kind, cols, opts = check_definition(name, kind, columns, options)
        adopted = self._adopt(name, kind, cols, opts, wait)
        if adopted is not None:
            return adopted
        return self.create_definition(name, kind, cols, opts, wait, progress)

    def create_definition(
        self,
        name: str,
        kind: str,
        cols: Sequence[str] | None,
        opts: dict[str, Any],
        wait: bool,
        progress: Progress | None = None,
        automatic: bool = False,
    ) -> IndexDef:
        """``create`` of a checked definition (``automatic``: the table builds it by
        itself, :mod:`.automatic`)."""
        # The build replays the data instants' records (the view, cached for it): a
        # damaged one is CorruptEventError now rather than after the requested event.
        self.table.view(self.table.log.refresh())
        service = IndexingService()
        inst = schedule(
            self.table, service, op=OP_CREATE, index=name, kind=kind, columns=cols, options=opts, automatic=automatic
        )
        assert inst is not None  # creating always has something to do
        plan = IndexCreatePlan.from_dict(inst.plan)
        if not wait:
            thread = threading.Thread(
                target=self._build_quietly, args=(service, inst.id, progress), name=f"lakeline-index-{plan.index}"
            )
            thread.start()
            self._threads.append(thread)
            return self._definition(plan.index, inst.id)
        result = execute(self.table, service, inst.id, progress)
        if result.aborted is not None:
            raise IndexBuildError(f"index {plan.index!r} was not built: {result.aborted}")
        return self._definition(plan.index, inst.id)

    def _adopt(
        self, name: str, kind: str, cols: Sequence[str] | None, opts: dict[str, Any], wait: bool
    ) -> IndexDef | None:
        """The index the table built by itself when ``create`` asks for that very index
        (same name, kind and options), ready after a ``wait``; None otherwise (then
        scheduling refuses a name that is taken, as always)."""
        cur = index_states(self.table.log.refresh()).get(name)
        if cur is None or not cur.automatic or cur.kind != kind or cur.state == IndexState.DROPPING.value:
            return None
        if tuple(cols or ()) != cur.columns or any(cur.options.get(k) != v for k, v in opts.items()):
            return None
        if wait and cur.state == IndexState.BUILDING.value:
            self.finish(cur)
            return self._definition(name, cur.instant)
        return cur

    def finish(self, d: IndexDef, wait: bool = True) -> None:
        """Finish building ``d`` here when its builder died (its heartbeat expired), else
        (``wait``) wait for the live builder; IndexBuildError when it was rolled back."""
        tl = self.table.log.refresh()
        if claimable(self.table, tl.get(d.instant), tl):
            try:
                result = execute(self.table, IndexingService(), d.instant)
            except ServiceBusyError:
                pass  # another process took it over first
            else:
                if result.aborted is not None:
                    raise IndexBuildError(f"index {d.name!r} was not built: {result.aborted}")
                return
        if wait:
            self.wait(d.name)

    def before_write(self, operation: Operation, rows: Callable[[TableContext], pa.Table]) -> None:
        """Build the record index before a write when the table's keys show random
        (:func:`.automatic.build_if_keys_random`; never raises)."""
        build_if_keys_random(self, operation, rows)

    def _build_quietly(self, service: IndexingService, instant: int, progress: Progress | None) -> None:
        try:
            execute(self.table, service, instant, progress)
        except LakelineError as e:  # rolled back already; a waiter sees the index absent
            log.warning("background build of indexing instant %s failed: %r", instant, e)

    def _definition(self, name: str, instant: int) -> IndexDef:
        found = [d for d in list_indexes(self.table.timeline) if d.name == name and d.instant == instant]
        if not found:
            raise IndexBuildError(f"index {name!r} (instant {instant}) is absent: its build was rolled back")
        return found[0]

    def wait(self, name: str, timeout_s: float | None = None, poll_s: float = 0.05) -> IndexDef:
        """Block until index ``name`` is ready.

        Raises:
            IndexBuildError: its build was rolled back (or it was dropped) meanwhile.
            IndexNotFoundError: no such index.
            LockTimeoutError: not ready within ``timeout_s``.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        first = next((d for d in self.list() if d.name == name), None)
        if first is None:
            raise IndexNotFoundError(f"no index {name!r}")
        while True:
            d = next((d for d in self.list() if d.name == name and d.instant == first.instant), None)
            if d is None:
                raise IndexBuildError(f"index {name!r} is absent: its build was rolled back or it was dropped")
            if d.state == "ready":
                return d
            if deadline is not None and time.monotonic() > deadline:
                raise LockTimeoutError(f"index {name!r} not ready within {timeout_s} s")
            time.sleep(poll_s)

    def drop(self, name: str) -> None:
        """Drop an index while writers keep writing: ``dropping`` at once (readers and
        writers stop using it), its files removed, then absent.

        Raises:
            IndexNotFoundError: no such index (or it is already being dropped).
            InvalidIndexError: ``name`` is the always-on ``files`` index.
        """
        service = IndexingService()
        inst = schedule(self.table, service, op=OP_DROP, index=name)
        assert inst is not None
        execute(self.table, service, inst.id)

    def ndv(self, column: str, partition: str | None = None, name: str | None = None) -> NdvEstimate:
        """Distinct values of ``column`` in the table (or one partition folder) now,
        from the merged sketches of a ready ``column_stats`` index.

        Counts the live base files; values only in merge-on-read logs not yet compacted
        are not counted.

        Raises:
            IndexNotFoundError: no ready column_stats index (of that name) covers it.
        """
        return ndv(self._stats_of(column, name), column, partition)

    def sketches(self, column: str, name: str | None = None) -> pa.Table:
        """The NDV sketch of ``column`` in every live base file now (``partition``,
        ``path``, ``file_group``, ``sketch``: an Apache DataSketches HLL image that Spark's
        ``hll_union_agg`` and the datasketches library merge).

        Raises:
            IndexNotFoundError: no ready column_stats index (of that name) covers it.
        """
        rows = self._stats_of(column, name)
        rows = rows.filter(pc.equal(rows.column("column"), column))
        groups = {
            s.base.path: s.file_group
            for s in self.table.view(self.table.timeline).latest_slices()
            if s.base is not None
        }
        paths = rows.column("path").to_pylist()
        return pa.table(
            {
                "partition": rows.column("partition"),
                "path": rows.column("path"),
                "file_group": pa.array([groups.get(p) for p in paths], pa.string()),
                "sketch": rows.column("ndv_sketch"),
            }
        )

    def _stats_of(self, column: str, name: str | None) -> pa.Table:
        """The column_stats entries of the live base files from a ready index covering
        ``column``."""
        snapshot = self.table.timeline
        ready = [d for d in readable_indexes(snapshot, IndexKind.COLUMN_STATS) if name is None or d.name == name]
        cfg = self.table.config
        for d in ready:
            if column not in resolve(d, cfg.schema, cfg.record_key).columns:
                continue
            # Base files only: a log's values are updates of keys its base already holds
            # (counting both would count replaced values), as in Hudi until compaction.
            paths = [s.base.path for s in self.table.view(snapshot).latest_slices() if s.base is not None]
            rows = visible_paths(MetadataTable(self.table.storage).read(d.partition, snapshot), paths)
            return rows if rows is not None else STATS_SCHEMA.empty_table()
        raise IndexNotFoundError(f"no ready column_stats index covers column {column!r}")

    def rebuild(self, name: str | None = None) -> builtins.list[str]:
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
            target = resolve(d, cfg.schema, cfg.record_key)
            if d.kind == IndexKind.RECORD_INDEX:
                files = [(f.path, f.bytes) for f in view.files()]
                built = record_generation.build(storage, files, snapshot, target, cfg.schema, sweep=False)
                out.append(folder_of(d.partition, built.generation.seq, built.generation.token))
                continue
            rows = build(storage, view, target, cfg.schema)
            out.append(MetadataTable(storage).rebuild(d.partition, snapshot, rows))
        return out

    def compact(self, name: str | None = None) -> builtins.list[str]:
        """Fold the metadata-table deltas of completed instants into bases (one ready
        index, or every ready index); returns the new bases' paths.

        A building index is left alone: its builder writes catch-up deltas for instants
        that completed earlier, and a base folded past their completion would hide them.
        """
        tl = self.table.timeline
        mt = MetadataTable(self.table.storage)
        out: builtins.list[str] = []
        for d in readable_indexes(tl):
            if name is not None and d.name != name:
                continue
            if d.kind == IndexKind.RECORD_INDEX:
                out.extend(fold_record_index(self.table.storage, tl, self.table.view(tl), d))
            elif (p := mt.compact(d.partition, tl)) is not None:
                out.append(p)
        return out

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
        storage = self.table.storage
        for d in defs:
            # Damaged or missing index files first, each by name (entries are compared
            # only for an index whose files are sound: a damaged one stops at its first).
            if d.kind == IndexKind.RECORD_INDEX:
                damaged = record_index_problems(storage, d.name, d.partition, self.table.log.refresh())
            else:
                damaged = metadata_problems(storage, d.name, d.partition)
            if damaged:
                mismatches.extend(damaged)
                continue
            if d.kind == IndexKind.RECORD_INDEX:
                n, bad = self._validate_records(d)
                checked += n
                mismatches.extend(bad)
                continue
            n, bad = validate(
                self.table.storage,
                view,
                snapshot,
                resolve(d, cfg.schema, cfg.record_key),
                cfg.schema,
                self.table.service_engine.map,
                frozenset(cfg.moved_names),
            )
            checked += n
            mismatches.extend(bad)
        return {"files_checked": checked, "mismatches": mismatches}

    def _validate_records(self, d: IndexDef) -> tuple[int, builtins.list[dict[str, Any]]]:
        """Validate a record index against the newest snapshot its generation serves (a
        fold landing meanwhile moves it on: the snapshot is read again)."""
        cfg, storage = self.table.config, self.table.storage
        target = resolve(d, cfg.schema, cfg.record_key)
        for _ in range(_VALIDATE_ROUNDS):
            snapshot = self.table.log.refresh()
            gen = newest_generation(storage, target.partition)
            if gen is not None and gen.seq > snapshot.last_seq:
                continue
            deltas = visible_deltas(storage, target.partition, snapshot, gen.seq if gen is not None else -1)
            files = [(f.path, f.bytes) for f in self.table.view(snapshot).files()]
            try:
                bad = check_records(storage, files, gen, deltas, target, cfg.schema, self.table.service_engine.map)
            except FileNotFoundError:
                continue  # a fold replaced what was being read
            return len(files), bad
        raise IndexBuildError(f"index {d.name!r} kept changing while validated")
