"""A change batch as one write: the deletes of some keys and the upserts of others.

Why: a CDC stream's micro-batch holds both, and as a delete and then an upsert it was
two writes, each tagging its keys against the snapshot: with random keys every file
group holds some of either, so each tag read the keys of every group, and the batch's
250 deletes cost as much as its 5,000 upserts (docs/performance.md, "CDC ingest").
Here the keys of both are tagged in one pass, the rows routed with their own ``_op``
(one log or rewrite per file group, holding its deletes and updates), and the write
commits once, as an upsert whose plan also names the keys it deletes (the key check
covers both, :class:`~.plan.WritePlan` ``deleted_keys``).

Only for keys that are disjoint (no key both deleted and upserted: that order inside
one batch needs two writes, the caller's fallback) and deletes that name their
partition or a table without partitions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.commit_metadata import Operation
from ..context import TableContext
from .operations import _keys_with_partition, _merge_logs, _merge_rewrites, _route_inserts, _route_updates, _tag
from .plan import WritePlan
from .records import OP_DELETE, OP_UPSERT, delete_records, prepare_keys, split_by_partition

if TYPE_CHECKING:
    from ..table import Table
    from .writer import WriteResult


def can_combine(t: Table, upserts: pa.Table, deletes: pa.Table) -> bool:
    """Whether :func:`write_changes` can take this batch: no key both deleted and
    upserted, and the deletes name their partition (or the table has none)."""
    cfg = t.config
    if not all(c in deletes.column_names for c in cfg.partition_by):
        return False
    keys = list(cfg.record_key)
    both = upserts.select(keys).join(deletes.select(keys), keys, join_type="inner", use_threads=False)
    return both.num_rows == 0


def write_changes(t: Table, upserts: pa.Table, deletes: pa.Table, txn: tuple[str, int] | None) -> WriteResult:
    """Delete ``deletes`` (key columns, and the partition columns of a partitioned
    table) and upsert ``upserts`` in one write (check :func:`can_combine` first).

    Raises:
        as ``Table.upsert`` and ``Table.delete``: bad input before anything is written,
        CommitConflictError when concurrent commits kept conflicting.
    """
    cfg = t.config
    cfg.require_key(Operation.UPSERT)
    rows, evolve = t._prepared(upserts)
    keys = prepare_keys(deletes, cfg)

    def planner(ctx: TableContext) -> WritePlan:
        # The rows as prepared, or (where writes conform them again to a schema a
        # concurrent instant changed) as the attempt's context has them.
        return plan_changes(ctx, rows(ctx) if callable(rows) else rows, keys)

    return t._write(Operation.UPSERT, cfg.write_action, planner, None, evolve, txn)


def plan_changes(ctx: TableContext, upserts: pa.Table, deletes: pa.Table) -> WritePlan:
    """The plan of :func:`write_changes`: per partition, one tag of both sets of keys."""
    cfg, view = ctx.config, ctx.view
    key = list(cfg.record_key)
    plan = WritePlan(Operation.UPSERT)
    ups = split_by_partition(upserts, cfg.partition_by)
    dels = split_by_partition(deletes, cfg.partition_by)
    inserted = updated = deleted = 0
    new_keys, deleted_keys = [], []
    for partition in dict.fromkeys([*ups, *dels]):
        up = ups.get(partition, upserts.slice(0, 0))
        de = dels.get(partition, deletes.slice(0, 0))
        deleted_keys.append(_keys_with_partition(de, cfg.record_key, partition))
        slices = view.latest_slices(partition)
        if slices:
            # permissive: the upserts' key columns may be declared non-nullable, the deletes' are not
            both = pa.concat_tables([up.select(key), de.select(key)], promote_options="permissive")
            fgs, pos = _tag(ctx, plan, slices, both)
            n = up.num_rows
            updated += _route_updates(cfg, plan, partition, slices, up, (fgs[:n], pos[:n]), OP_UPSERT)
            recs = delete_records(de, cfg.schema, cfg.record_key)
            deleted += _route_updates(cfg, plan, partition, slices, recs, (fgs[n:], pos[n:]), OP_DELETE)
            fresh = up.filter(pc.is_null(fgs[:n]))
        else:
            fresh = up
        inserted += fresh.num_rows
        taken = {r.slice.file_group for r in plan.rewrites if r.partition == partition}
        _route_inserts(cfg, plan, partition, slices, fresh, taken)
        new_keys.append(_keys_with_partition(fresh, cfg.record_key, partition))
    plan.new_keys = pa.concat_tables(new_keys) if new_keys else None
    plan.deleted_keys = pa.concat_tables(deleted_keys) if deleted_keys else None
    plan.stats = {"inserted": inserted, "updated": updated, "deleted": deleted}
    _merge_logs(plan)
    _merge_rewrites(plan)
    return plan
