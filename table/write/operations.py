"""Planners for the five writes: insert, upsert, delete, delete_where, overwrite.

Each planner turns checked input and a snapshot into a :class:`WritePlan`. They only
read; :func:`lakeline.table.write.writer.run_write` executes and commits the plan.
"""

from __future__ import annotations

import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...indexes.pruning import key_blooms
from ...indexes.record_index.lookup import RecordIndexReader
from ...indexes.record_index.lookup import tag as record_tag
from ...timeline.commit_metadata import Operation
from ...timeline.errors import DuplicateKeyError, MetadataTableError, UnknownColumnError
from ...timeline.table_config import TableConfig, TableType
from ...timeline.view.file_group import FileSlice
from ..context import TableContext
from ..read.partition_pruning import prune_slices
from .fold_check import check_folds
from .plan import PARTITION, LogAppend, NewFiles, Rewrite, WritePlan
from .records import BASE_POS, OP, OP_DELETE, OP_UPSERT, constant, delete_records, split_by_partition
from .tagging import beyond_every_range, tag


def _tag(
    ctx: TableContext, plan: WritePlan, slices: list[FileSlice], keys: pa.Table, positions: bool = True
) -> tuple[pa.Array, pa.Array]:
    """``tag`` the keys (their groups, and their rows in those groups' base files),
    adding the time it took to ``plan.timings["tag_s"]``.

    With a ready record index the snapshot can use, the index answers alone
    (:func:`lakeline.indexes.record_index.lookup.tag`, the same answer); else the
    record-key bloom filters of the snapshot are read once per plan, on first use.
    """
    t0 = time.perf_counter()
    try:
        return _tags_of(ctx, plan, slices, keys, positions)
    finally:
        plan.timings["tag_s"] = plan.timings.get("tag_s", 0.0) + time.perf_counter() - t0


def _tags_of(
    ctx: TableContext, plan: WritePlan, slices: list[FileSlice], keys: pa.Table, positions: bool
) -> tuple[pa.Array, pa.Array]:
    cfg = ctx.config
    positions = positions and cfg.table_type == TableType.MOR
    if not plan.index_opened:
        plan.index_opened = True
        plan.record_index = RecordIndexReader.open(ctx.storage, ctx.snapshot, cfg.schema, cfg.record_key)
    if plan.record_index is not None and beyond_every_range(slices, keys, cfg.record_key):
        # Keys past every file's range (sequential new keys): none is there, nothing read.
        return pa.nulls(keys.num_rows, pa.string()), pa.nulls(keys.num_rows, pa.int64())
    if plan.record_index is not None:
        try:
            # Exact from the index alone: no data file is read, keys it proves new included.
            return record_tag(plan.record_index, slices, keys, positions)
        except MetadataTableError:
            plan.record_index = None  # folded away under us: the data answers instead
    if plan.key_blooms is None:
        plan.key_blooms = key_blooms(ctx.storage, ctx.snapshot, cfg.schema, cfg.record_key)
    # Positions only where a log will keep them: merge-on-read updates and deletes.
    return tag(ctx.storage, ctx.engine, slices, keys, cfg.record_key, plan.key_blooms, positions)


def _with_op(rows: pa.Table, op: str) -> pa.Table:
    return rows.append_column(OP, constant(op, rows.num_rows))


def _keys_with_partition(rows: pa.Table, key: tuple[str, ...], partition: str) -> pa.Table:
    keys = rows.select(list(key))
    return keys.append_column(PARTITION, constant(partition, keys.num_rows))


def _group_rows(rows: pa.Table, fgs: pa.Array) -> dict[str, pa.Table]:
    """Rows per file group id (rows whose group is null are left out)."""
    out: dict[str, pa.Table] = {}
    present = pc.is_valid(fgs)
    if not pc.any(present).as_py():
        return out
    idx = pa.array(np.arange(rows.num_rows, dtype=np.int64)).filter(present)
    t = pa.table({"fg": fgs.filter(present), "i": idx})
    grouped = t.group_by(["fg"], use_threads=False).aggregate([("i", "list")])
    for fg, ids in zip(grouped.column("fg").to_pylist(), grouped.column("i_list")):
        out[fg] = rows.take(ids.values)
    return out


def _route_updates(
    cfg: TableConfig,
    plan: WritePlan,
    partition: str,
    slices: list[FileSlice],
    rows: pa.Table,
    tags: tuple[pa.Array, pa.Array],
    op: str,
) -> int:
    """Rows of keys the table holds, to their groups: a log each (merge-on-read, the
    rows with their base positions), or a rewrite each (copy-on-write)."""
    fgs, positions = tags
    by_id = {s.file_group: s for s in slices}
    if cfg.table_type == TableType.MOR:
        rows = rows.append_column(BASE_POS, positions)
    n = 0
    for fg, part_rows in _group_rows(rows, fgs).items():
        incoming = _with_op(part_rows, op)
        n += part_rows.num_rows
        if cfg.table_type == TableType.MOR:
            plan.logs.append(LogAppend(partition, by_id[fg], incoming))
        else:
            plan.rewrites.append(Rewrite(partition, by_id[fg], incoming))
    return n


def _route_inserts(
    cfg: TableConfig, plan: WritePlan, partition: str, slices: list[FileSlice], rows: pa.Table, taken: set[str]
) -> None:
    """New keys: the partition's small file groups are filled first (copy-on-write by
    rewriting them up to the target size, merge-on-read through a log up to the small
    limit), the rest (and every append-only insert) starts new file groups."""
    if rows.num_rows == 0:
        return
    target = cfg.props.write_target_file_size_bytes
    small_limit = min(cfg.props.write_small_file_limit_bytes, target)
    start = 0
    if cfg.has_key and small_limit > 0 and cfg.table_type == TableType.COW:
        start = _fill_by_rewrite(plan, partition, slices, rows, taken, small_limit, target)
    elif cfg.has_key and small_limit > 0:
        start = _fill_by_log(plan, partition, slices, rows, taken, small_limit)
    if start < rows.num_rows:
        plan.new_files.append(NewFiles(partition, rows.slice(start)))


def _small_groups(slices: list[FileSlice], taken: set[str], small_limit: int) -> list[FileSlice]:
    """The slices under ``small_limit`` bytes holding rows, smallest first."""
    return sorted(
        (s for s in slices if s.bytes < small_limit and s.file_group not in taken and any(f.rows for f in s.files)),
        key=lambda s: s.bytes,
    )


def _fill_by_rewrite(
    plan: WritePlan, partition: str, slices: list[FileSlice], rows: pa.Table, taken: set[str], small: int, target: int
) -> int:
    """Copy-on-write: rewrite small bases with new rows up to the target size (the
    rewrite is paid either way); returns how many of ``rows`` were placed."""
    start = 0
    for s in _small_groups([s for s in slices if s.base is not None and s.base.rows], taken, small):
        if start >= rows.num_rows:
            break
        per_row = max(s.base.bytes / s.base.rows, 1e-9)  # type: ignore[union-attr]
        room = int((target - s.bytes) / per_row)
        if room <= 0:
            continue
        chunk = rows.slice(start, room)
        start += chunk.num_rows
        plan.rewrites.append(Rewrite(partition, s, _with_op(chunk, OP_UPSERT), inserts=True, new_keys_only=True))
    return start


def _fill_by_log(
    plan: WritePlan, partition: str, slices: list[FileSlice], rows: pa.Table, taken: set[str], small: int
) -> int:
    """Merge-on-read: new rows go into a log of a small group, up to the small limit
    (not the target: a log is read whole by every merged read until a compaction folds
    it, so big appends still start groups of their own). A stream of small batches then
    fills a few groups instead of starting one per batch, which every later update,
    tag and compaction would pay for (docs/write-path.md). The rows carry no base
    position (their keys are new to the group), and the log is marked as holding new
    keys for the key check; returns how many of ``rows`` were placed."""
    start = 0
    for s in _small_groups(slices, taken, small):
        if start >= rows.num_rows:
            break
        n = sum(f.rows for f in s.files)
        per_row = max(s.bytes / n, 1e-9)
        room = int((small - s.bytes) / per_row)
        if room <= 0:
            continue
        chunk = _with_op(rows.slice(start, room), OP_UPSERT)
        start += chunk.num_rows
        chunk = chunk.append_column(BASE_POS, pa.nulls(chunk.num_rows, pa.int64()))
        plan.logs.append(LogAppend(partition, s, chunk, inserts=True))
    return start


def plan_insert(ctx: TableContext, rows: pa.Table) -> WritePlan:
    cfg, view = ctx.config, ctx.view
    plan = WritePlan(Operation.INSERT, stats={"inserted": rows.num_rows})
    check = cfg.has_key and cfg.props.write_insert_key_check
    new_keys = []
    for partition, part in split_by_partition(rows, cfg.partition_by).items():
        slices = view.latest_slices(partition)
        if check and slices:
            fgs, _ = _tag(ctx, plan, slices, part.select(list(cfg.record_key)), positions=False)
            if fgs.null_count != len(fgs):
                dupes = part.filter(pc.is_valid(fgs)).select(list(cfg.record_key)).slice(0, 5).to_pylist()
                raise DuplicateKeyError(
                    f"insert carries {len(fgs) - fgs.null_count} key(s) the table already holds, e.g. {dupes}; "
                    "use upsert to update them"
                )
        _route_inserts(cfg, plan, partition, slices, part, set())
        if cfg.has_key:
            new_keys.append(_keys_with_partition(part, cfg.record_key, partition))
    if new_keys:
        plan.new_keys = pa.concat_tables(new_keys)
    return plan


def plan_upsert(ctx: TableContext, rows: pa.Table) -> WritePlan:
    cfg, view = ctx.config, ctx.view
    plan = WritePlan(Operation.UPSERT)
    updated = inserted = 0
    new_keys = []
    for partition, part in split_by_partition(rows, cfg.partition_by).items():
        slices = view.latest_slices(partition)
        tags = _tag(ctx, plan, slices, part.select(list(cfg.record_key)))
        updated += _route_updates(cfg, plan, partition, slices, part, tags, OP_UPSERT)
        fresh = part.filter(pc.is_null(tags[0]))
        inserted += fresh.num_rows
        taken = {r.slice.file_group for r in plan.rewrites if r.partition == partition}
        _route_inserts(cfg, plan, partition, slices, fresh, taken)
        new_keys.append(_keys_with_partition(fresh, cfg.record_key, partition))
    plan.new_keys = pa.concat_tables(new_keys) if new_keys else None
    plan.stats = {"inserted": inserted, "updated": updated}
    _merge_logs(plan)
    _merge_rewrites(plan)
    check_folds(ctx, plan)  # an aggregation table's sums still fit, before anything is written
    return plan


def _merge_logs(plan: WritePlan) -> None:
    """One log per file group: a write's logs are named by group and write token, so a
    group with updates, deletes and new keys gets one log holding them all (disjoint
    keys)."""
    merged: dict[tuple[str, str], LogAppend] = {}
    for log in plan.logs:
        k = (log.partition, log.slice.file_group)
        prev = merged.get(k)
        if prev is None:
            merged[k] = log
            continue
        both = pa.concat_tables([prev.incoming, log.incoming], promote_options="permissive")
        merged[k] = LogAppend(log.partition, log.slice, both, prev.inserts or log.inserts)
    plan.logs = list(merged.values())


def _merge_rewrites(plan: WritePlan) -> None:
    """A copy-on-write group hit by both updates and small-file inserts is rewritten once."""
    merged: dict[tuple[str, str], Rewrite] = {}
    for r in plan.rewrites:
        k = (r.partition, r.slice.file_group)
        if k in merged:
            prev = merged[k]
            both = pa.concat_tables([prev.incoming, r.incoming], promote_options="permissive")
            merged[k] = Rewrite(
                r.partition, r.slice, both, None, prev.inserts or r.inserts, prev.new_keys_only and r.new_keys_only
            )
        else:
            merged[k] = r
    plan.rewrites = list(merged.values())


def plan_delete(ctx: TableContext, keys: pa.Table, operation: Operation = Operation.DELETE) -> WritePlan:
    """Delete by key. With the partition columns present the search is narrowed to those
    partitions; without them every partition is searched."""
    cfg, view = ctx.config, ctx.view
    plan = WritePlan(operation)
    have_parts = all(c in keys.column_names for c in cfg.partition_by)
    if have_parts:
        groups = split_by_partition(keys, cfg.partition_by)
    else:
        groups = {p: keys for p in view.partitions()}
    deleted = 0
    key_cols = keys.select(list(cfg.record_key))
    if have_parts:
        named = [_keys_with_partition(part, cfg.record_key, p) for p, part in groups.items()]
        plan.deleted_keys = pa.concat_tables(named) if named else None
    else:
        plan.deleted_keys = key_cols.append_column(PARTITION, pa.nulls(keys.num_rows, pa.string()))
    for partition, part in groups.items():
        slices = view.latest_slices(partition)
        if not slices:
            continue
        tags = _tag(ctx, plan, slices, part.select(list(cfg.record_key)))
        recs = delete_records(part, cfg.schema, cfg.record_key)
        deleted += _route_updates(cfg, plan, partition, slices, recs, tags, OP_DELETE)
    plan.stats = {"deleted": deleted}
    return plan


def plan_delete_where(ctx: TableContext, predicate: pc.Expression) -> WritePlan:
    cfg = ctx.config
    if cfg.has_key:
        from ..read.scan import Scan

        cols = list(dict.fromkeys(list(cfg.record_key) + list(cfg.partition_by)))
        hits = Scan(ctx, filter=predicate, columns=cols).to_arrow()
        plan = plan_delete(ctx, hits, operation=Operation.DELETE_WHERE)
        plan.delete_predicate = predicate
        return plan
    plan = WritePlan(Operation.DELETE_WHERE, delete_predicate=predicate)
    for s in prune_slices(ctx, ctx.view.latest_slices(), predicate):
        plan.rewrites.append(Rewrite(s.partition, s, None, predicate))
    return plan


def plan_overwrite(ctx: TableContext, rows: pa.Table, partitions: list[str] | None) -> WritePlan:
    cfg, view = ctx.config, ctx.view
    by_part = split_by_partition(rows, cfg.partition_by)
    targets = list(by_part) if partitions is None else partitions
    if not cfg.partition_by:
        targets = [""]
    plan = WritePlan(Operation.OVERWRITE, stats={"inserted": rows.num_rows})
    for p in targets:
        groups = [g.id for g in view.file_groups(p)]
        if groups:
            plan.replaced[p] = groups
    plan.replaced_partitions = sorted(set(targets))
    for partition, part in by_part.items():
        plan.new_files.append(NewFiles(partition, part))
    if cfg.has_key:
        plan.new_keys = (
            pa.concat_tables([_keys_with_partition(part, cfg.record_key, p) for p, part in by_part.items()])
            if by_part
            else None
        )
    plan.stats["file_groups_replaced"] = sum(len(v) for v in plan.replaced.values())
    if not by_part and not plan.replaced:
        return WritePlan(Operation.OVERWRITE)
    return plan


def partition_targets(partition_by: tuple[str, ...], partitions: list[object]) -> list[str]:
    """Normalise ``overwrite(partitions=...)``: Hive paths or dicts of column values.

    Raises:
        UnknownColumnError: a dict names a column that is not a partition column.
    """
    from ...timeline.view.file_group import partition_path

    cols = partition_by
    out = []
    for p in partitions:
        if isinstance(p, str):
            out.append(p)
            continue
        if not isinstance(p, dict) or set(p) != set(cols):
            raise UnknownColumnError(f"partition {p!r} must give exactly the partition columns {list(cols)}")
        out.append(partition_path(cols, tuple(p[c] for c in cols)))
    return out
