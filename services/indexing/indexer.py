"""The async indexer: build an index while writers keep writing, exact when it is ready.

As docs/indexes.md ("Lifecycle") describes it (after Hudi RFC-45, fixed where Hudi is weak):

1. *Schedule* (under the table lock, briefly): the ``indexing.requested`` event carries
   the plan. Its position is the *base*: every instant completed before it is built in
   bulk, everything after it is caught up. From that event on the index is
   ``building``, and every writer that completes after it writes the index's entries:
   writers read the index states from the timeline they complete on, never from their
   configuration (:meth:`lakeline.table.write.commit.Commit.complete`), so no writer
   inflight at schedule time can slip through unindexed and the indexer never waits
   for writers.
2. *Build* (no lock): entries for every live base file of the snapshot at the base,
   through the table's engine, into a metadata-table base at the base position.
3. *Catch up*: instants completed after the base that wrote no entries for the index
   (they completed before they could see it) are indexed by the indexer.
4. *Finalize* (under the lock): catch up on whatever completed meanwhile, and append
   ``indexing.completed`` with a check, against the exact log prefix it lands on, that
   no data instant completed unindexed; the index is ``ready``.
5. *Abort*: a failed build ends the instant as rolled back (the index is absent again)
   and removes its partition; writers are never failed. A build whose process died is
   executed again by any process once its heartbeat expired: every step is idempotent.
6. *Drop*: the ``requested`` event makes the index ``dropping`` at once (readers and
   writers stop using it); execution removes its partition. A drop that fails is left
   inflight for another executor to finish, never rolled back: its files may be half
   gone, and a rolled-back drop would make the index ``ready`` again.

Fencing (issue 11, item 3; :mod:`..phases`): every event of an execution is appended
only while its attempt holds the instant, and the partition a build, catch-up, abort or
drop touches is that of one definition (``<name>@<creating instant>``). So an executor
that stalled while another completed the build can neither complete, roll back nor drop
the ready index, and no executor of an old definition can reach the partition of a
re-created index of the same name. The bulk build replaces only bases at or before its
base (:meth:`MetadataTable.rebuild`), so a late one cannot undo a fold done since.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ...indexes.build import build_tasks, built, catch_up, gone_but_live, live_files, missing_updates, try_build_task
from ...indexes.entries import IndexTarget, check_definition, column_ids, resolve
from ...indexes.metadata_table import MetadataTable
from ...indexes.record_index import generation as record_generation
from ...indexes.record_index.rows import default_buckets
from ...indexes.record_index.spill import spill_task
from ...indexes.states import (
    IndexDef,
    IndexKind,
    check_can_create,
    check_can_drop,
    create_plan,
    drop_plan,
    dropped_partition,
    partition_of,
    stored_kind,
)
from ...timeline.diagnostics import faults
from ...timeline.errors import (
    IndexBuildError,
    IndexExistsError,
    LakelineError,
    ServiceAbortedError,
    UnindexedCommitError,
)
from ...timeline.instant import Action, Instant, State
from ...timeline.plans import OP_CREATE, OP_DROP, IndexCreatePlan, IndexDropPlan, IndexPlan, Plan, index_plan
from ...timeline.timeline import Timeline
from ..phases import table_lock
from ..plugin import Progress, Service, fence, map_in_batches

if TYPE_CHECKING:
    from ...table.table import Table

#: Base files indexed per engine call, so progress is reported as the build goes.
_BATCH = 64
#: Finalize attempts, each catching up on writers that completed during the last one.
_FINALIZE_ROUNDS = 100


def index_def(plan: IndexCreatePlan, instant: int) -> IndexDef:
    """The index an ``indexing`` create plan defines."""
    return IndexDef(
        plan.index,
        stored_kind(plan),
        plan.columns,
        "building",
        instant,
        dict(plan.options),
        plan.field_ids,
        plan.automatic,
    )


def _plan(instant: Instant) -> IndexPlan:
    """The plan of one of this service's instants.

    Raises:
        ServiceAbortedError: a plan this version does not know.
    """
    plan = index_plan(instant.plan)
    if plan is None:
        raise ServiceAbortedError(f"indexing instant {instant.id} has a plan this version does not know")
    return plan


class IndexingService(Service):
    """Create (build) and drop indexes as ``indexing`` instants."""

    name = "indexing"
    action = Action.INDEXING

    def plan(self, table: Table, snapshot: Timeline, **options: Any) -> IndexPlan | None:
        """``op="create"`` with ``index, kind, columns, options`` (and ``automatic``: the table
        builds it by itself), or ``op="drop"`` with ``index``.

        Raises:
            InvalidIndexError: unknown kind, bad name, unknown or repeated columns.
            InvalidIndexOptionsError: an unknown option, or a bad ``fpp``.
            IndexExistsError: creating a name that is building, ready or dropping.
            IndexNotFoundError: dropping an index that does not exist.
        """
        if options.get("op", OP_CREATE) == OP_DROP:
            name = str(options["index"])
            drop_plan(name)  # refuses the always-on files index first
            plan: IndexPlan = drop_plan(name, check_can_drop(snapshot, name).instant)
        else:
            # Checked before the requested event (issue 25, B4b-d): a bad fpp, name or
            # option used to fail the build after the instant was written.
            name, kind, columns, opts = check_definition(
                options.get("index"), options.get("kind"), options.get("columns"), options.get("options")
            )
            if kind == IndexKind.RECORD_INDEX and "buckets" not in opts:
                # Sized by the table now and recorded in the plan: every reader and
                # writer hashes keys into the same buckets for the index's whole life.
                opts["buckets"] = default_buckets(sum(f.rows for f in table.view(snapshot).files()))
            cfg = table.config
            ids = column_ids(cfg.schema, columns or ())
            plan = create_plan(name, kind, columns, opts, ids, options.get("automatic") is True)
            resolve(index_def(plan, -1), cfg.schema, cfg.record_key)  # refuse bad columns now
        self.check_plan(snapshot, plan)
        return plan

    def check_plan(self, timeline: Timeline, plan: Plan) -> None:
        assert isinstance(plan, (IndexCreatePlan, IndexDropPlan))
        if isinstance(plan, IndexDropPlan):
            cur = check_can_drop(timeline, plan.index)
            if plan.created is not None and plan.created != cur.instant:
                raise IndexExistsError(
                    f"index {cur.name!r} was re-created (instant {cur.instant}) "
                    f"since the drop of instant {plan.created} was planned"
                )
        else:
            check_can_create(timeline, plan.index)

    def execute(self, table: Table, instant: Instant, progress: Progress | None = None) -> dict[str, Any]:
        plan = _plan(instant)
        name = plan.index
        if isinstance(plan, IndexDropPlan):
            partition = dropped_partition(table.log.timeline, instant)
            fence(instant.id)(table.log.refresh())  # a stale attempt stops here (not needed
            MetadataTable(table.storage).drop(partition)  # for safety: the partition is dead)
            return {"op": OP_DROP, "index": name, "partition": partition}
        cfg = table.config
        try:
            target = resolve(index_def(plan, instant.id), cfg.schema, cfg.record_key)
        except LakelineError as e:
            raise ServiceAbortedError(f"index {name!r} cannot be built: {e}") from e
        storage = table.storage
        base = table.log.refresh().as_of_seq(instant.id)  # the requested event is the base
        started = time.perf_counter()
        if target.kind == IndexKind.RECORD_INDEX:
            entries, files = self._build_records(table, base, target, instant.id, progress)
            build_s = time.perf_counter() - started
            faults.point("indexing.after_build")
        else:
            rows, files = self._build(table, base, target, progress)
            build_s = time.perf_counter() - started
            # A stale attempt is stopped here already (cheaper than being refused at
            # completion). The check is not atomic with the write below, which is why that
            # write reaches only this definition's partition and never past a newer base.
            fence(instant.id)(table.log.refresh())
            faults.point("indexing.after_build")
            MetadataTable(storage).rebuild(target.partition, base, rows)
            entries = rows.num_rows
        caught_up = catch_up(storage, table.log.refresh(), base.last_seq, target, cfg.schema, table.log.refresh)
        faults.point("indexing.mid_catchup")
        return {
            "op": OP_CREATE,
            "index": name,
            "kind": target.kind.value,
            "columns": list(target.columns),
            "base_seq": base.last_seq,
            "files_built": files,
            "entries": entries,
            "build_s": round(build_s, 4),
            "caught_up": caught_up,
        }

    def _build(
        self, table: Table, base: Timeline, target: IndexTarget, progress: Progress | None
    ) -> tuple[pa.Table, int]:
        """Entries of every live data file at the base (with ``_instant``), and how many files.

        A file replaced since the base and cleaned meanwhile is left out once it is no
        longer live (issue 11, item 8).

        Raises:
            IndexBuildError: a file that is still live cannot be read.
        """
        tasks = build_tasks(table.storage, table.view(base), target, table.config.schema)
        parts = map_in_batches(table.service_engine, try_build_task, tasks, _BATCH, progress)
        gone = [p for p in parts if isinstance(p, str)]
        lost = gone_but_live(gone, table.log.refresh())
        if lost:
            raise IndexBuildError(
                f"index {target.name!r}: {len(lost)} live data file(s) cannot be read, e.g. {lost[0]}"
            )
        return built(target, [p for p in parts if not isinstance(p, str)]), len(tasks)

    def _build_records(
        self, table: Table, base: Timeline, target: IndexTarget, instant: int, progress: Progress | None
    ) -> tuple[int, int]:
        """A record index's first generation at the base, built in bounded memory
        (:func:`lakeline.indexes.record_index.generation.build`); returns (entries, files).
        Published only while this attempt holds the instant (the same fence as the
        other kinds' rebuild), and never over a newer generation."""
        engine = table.service_engine

        def map_fn(fn: Any, items: Any) -> list[Any]:
            return map_in_batches(engine, fn, items, _BATCH, progress if fn is spill_task else None)

        built = record_generation.build(
            table.storage,
            [(f.path, f.bytes) for f, _ in live_files(table.view(base))],
            base,
            target,
            table.config.schema,
            map_fn,
            lost=lambda gone: gone_but_live(gone, table.log.refresh()),
            fence=lambda: fence(instant)(table.log.refresh()),
        )
        return built.entries, built.files

    def complete(self, table: Table, instant: Instant, metadata: dict[str, Any]) -> Instant:
        """Finalize: under the table lock, catch up and complete with the check that no
        data instant completed after the base without entries."""
        plan = _plan(instant)
        if isinstance(plan, IndexDropPlan):
            return super().complete(table, instant, metadata)
        cfg = table.config
        target = resolve(index_def(plan, instant.id), cfg.schema, cfg.record_key)
        log, storage, base_seq = table.log, table.storage, instant.id
        faults.point("indexing.before_finalize")
        with table_lock(table):
            for _ in range(_FINALIZE_ROUNDS):
                metadata["caught_up"] = metadata.get("caught_up", 0) + catch_up(
                    storage, log.refresh(), base_seq, target, cfg.schema, log.refresh
                )

                def nothing_unindexed(now: Timeline) -> None:
                    if missing_updates(storage, now, base_seq, target.partition):
                        raise UnindexedCommitError(target.name)

                try:
                    # Checked in this order against the prefix it lands on: this attempt
                    # still holds the instant, and every data instant has entries.
                    ev = log.append(
                        self.action,
                        State.COMPLETED,
                        metadata,
                        instant=instant.id,
                        check=fence(instant.id, nothing_unindexed),
                    )
                    return log.timeline.get(ev.instant)
                except UnindexedCommitError:
                    continue
        raise ServiceAbortedError(f"index {target.name!r} could not catch up with writers")

    def abort(self, table: Table, instant: Instant, reason: str) -> None:
        """Remove the partition of the definition this create instant made, and only it
        (the framework calls this once this attempt's own ``rolled_back`` landed)."""
        plan = index_plan(instant.plan)
        if isinstance(plan, IndexCreatePlan) and table.log.refresh().get(instant.id).state is State.ROLLED_BACK:
            MetadataTable(table.storage).drop(partition_of(plan.index, instant.id))

    def abortable(self, instant: Instant) -> bool:
        """A drop is never rolled back once it ran: it is finished by another executor."""
        return not isinstance(index_plan(instant.plan), IndexDropPlan)
