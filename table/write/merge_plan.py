"""The MERGE planner: a :class:`~.merger.MergeSpec` on one snapshot, as one write's plan.

A MERGE is the writes it decides, planned together so they commit once:

1. **Read the targets.** The live rows of the slices that hold a source key, found as
   an upsert finds them (the record index, or key ranges and blooms: an ``isin`` scan
   filter of a large source cost 10x more), or of every slice when a by-source clause
   must see the rows no source key matches; only the columns the clauses read
   (:func:`_target_columns`), on the table's engine.
2. **Join on the record key** and pick, for every row, the first clause of its group
   whose condition holds (:func:`first_clause`).
3. **Write** each slice's updates and deletes into its file group, as an update does:
   one log on merge-on-read, one rewrite on copy-on-write, so the group is read once;
   the inserted source rows go where an upsert's new keys go (small groups first).

*Updates keep Delta's meaning on the default (``deduplicate``) engine*: the new row
wins whatever its ordering value. A row whose ordering value would lose the fold to the
one it replaces is written after a delete record of its key (a fold drops every version
up to a key's last delete), as ``Table.update`` does when ``set`` assigns the ordering
field. On other merge engines an updated row is a new version of its key, folded by the
engine's rule as an upsert's row is (docs/merge-engines.md).

*Conflicts* (:mod:`.key_check`): the matched keys are claimed as an update's (rule 5: a
concurrent version of one of them would be undone), the inserted keys as an upsert's
new keys (rule 1), the source keys that matched nothing as a delete's when a matched
clause could have applied to them (rule 3: a concurrent insert of one would have
matched), and a by-source clause reads every row, so every row a concurrent commit
wrote conflicts (rule 4 with an always-true predicate). A conflict replays the MERGE
on the fresh snapshot.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.commit_metadata import Operation
from ...timeline.errors import ImmutableColumnError, InvalidMergeError
from ...timeline.table_config import TableConfig, TableType
from ...timeline.view.file_group import FileSlice
from ..context import TableContext
from ..merge_engine import DEDUPLICATE, MergeEngine
from ..read.slice_read import SliceRead, read_slice
from .assign import apply_assignments, evaluate
from .fold_check import check_folds
from .merger import (
    BY_SOURCE,
    MATCHED,
    NOT_MATCHED,
    SOURCE,
    TARGET,
    Clause,
    ClauseKind,
    MergeSpec,
    check_source_columns,
    prefixed,
    prepare_source,
)
from .operations import _keys_with_partition, _merge_logs, _merge_rewrites, _route_inserts, _tag, _with_op
from .plan import PARTITION, LogAppend, Rewrite, WritePlan
from .records import (
    OP_DELETE,
    OP_UPSERT,
    conform_column,
    delete_records,
    evaluation_errors,
    same_columns,
    split_by_partition,
)
from .update import EVERY_ROW

_T, _S = "__lakeline_target_row", "__lakeline_source_row"  # in memory only, reserved prefix


def first_clause(clauses: tuple[Clause, ...], rows: pa.Table) -> np.ndarray:
    """For every row of ``rows`` (prefixed columns), the index in ``clauses`` of the
    first clause whose condition holds, -1 for none (a null condition does not hold).

    Raises:
        InvalidMergeError: a condition fails on the rows (a division by zero, say).
    """
    choice = np.full(rows.num_rows, -1, dtype=np.int64)
    for i, clause in enumerate(clauses):
        free = choice == -1
        if not free.any():
            break
        if clause.condition is None:
            choice[free] = i
            continue
        with evaluation_errors(f"{clause.kind}'s condition {clause.condition}", InvalidMergeError):
            held = evaluate(rows, {"c": clause.condition}).column("c")
        hold = pc.fill_null(held, False).to_numpy(zero_copy_only=False).astype(bool)
        choice[free & hold] = i
    return choice


def _renamed(table: pa.Table, prefix: str) -> pa.Table:
    return table.rename_columns([prefix + c for c in table.column_names])


def _target_slices(ctx: TableContext, plan: WritePlan, source: pa.Table, every: bool) -> list[FileSlice]:
    """The slices whose rows the MERGE must see: every slice when a by-source clause
    acts on the rows no source key matches, else those holding a source key, found as
    an upsert finds them (the record index, or key ranges and blooms)."""
    slices = ctx.view.latest_slices()
    if every or source.num_rows == 0 or not slices:
        return slices if every else []
    groups, _ = _tag(ctx, plan, slices, source.select(list(ctx.config.record_key)), positions=False)
    held = set(pc.unique(groups.drop_null()).to_pylist())
    return [s for s in slices if s.file_group in held]


def _target_columns(cfg: TableConfig, spec: MergeSpec) -> list[str]:
    """The table columns a target row is read with: all of them when an update sets
    some (the others keep the target's values); else the key, partition and ordering
    columns and those a condition names (``target.<column>`` in its text: a column
    read too many is harmless)."""
    if any(c.kind == ClauseKind.MATCHED_UPDATE and c.assignments is not None for c in spec.clauses):
        return list(cfg.schema.names)
    names = {*cfg.record_key, *cfg.partition_by, *((cfg.ordering_field,) if cfg.ordering_field else ())}
    for clause in spec.clauses:
        if clause.condition is not None:
            text = str(clause.condition)
            names |= {n for n in cfg.schema.names if f"{TARGET}{n}" in text}
    return [n for n in cfg.schema.names if n in names]


def _pairs(target: pa.Table, source_keys: pa.Table, key: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(target row, source row) of every matched pair."""
    t = target.select(key).append_column(_T, pa.array(np.arange(target.num_rows, dtype=np.int64)))
    hit = t.join(source_keys, key, join_type="inner", use_threads=False)
    return hit.column(_T).to_numpy(), hit.column(_S).to_numpy()


def _updated_rows(cfg: TableConfig, clause: Clause, target: pa.Table, joined: pa.Table, source: pa.Table) -> pa.Table:
    """The new versions of matched ``target`` rows under an update clause (every
    column of the table, its types)."""
    schema = cfg.schema
    if clause.assignments is not None:
        return apply_assignments(target, clause.assignments, schema, over=joined)
    fixed = set(cfg.record_key) | set(cfg.partition_by)
    for c in cfg.partition_by:
        a, b = source.column(c), target.column(c)
        same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        if not pc.all(same).as_py():
            raise ImmutableColumnError(
                f"merge's update without set= would move rows to another partition (column {c!r} differs "
                "between source and target): delete them and insert them anew, or set= the other columns"
            )
    cols = [target.column(f.name) if f.name in fixed else conform_column(source.column(f.name), f) for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


def _loses_fold(cfg: TableConfig, new: pa.Table, old: pa.Table) -> np.ndarray:
    """Rows whose new version would lose the ``deduplicate`` fold to the old one (a
    smaller ordering value, or a null on either side)."""
    if cfg.ordering_field is None or MergeEngine.of(cfg).name != DEDUPLICATE or new.num_rows == 0:
        return np.zeros(new.num_rows, dtype=bool)
    ge = pc.greater_equal(new.column(cfg.ordering_field), old.column(cfg.ordering_field))
    return ~pc.fill_null(ge, False).to_numpy(zero_copy_only=False).astype(bool)


def merge_planner(cfg: TableConfig, source: pa.Table, spec: MergeSpec) -> Callable[[TableContext], WritePlan]:
    """The planner each attempt of a MERGE runs. A replay after a schema instant
    replaced the schema (a rename, a drop) checks the source again against the new
    one, so an old column name is refused, typed."""

    def planner(ctx: TableContext) -> WritePlan:
        if same_columns(ctx.config.schema, cfg.schema):
            return plan_merge(ctx, source, spec)
        again = prepare_source(source, ctx.config)
        check_source_columns(ctx.config, again.schema, spec)
        return plan_merge(ctx, again, spec)

    return planner


def plan_merge(ctx: TableContext, source: pa.Table, spec: MergeSpec) -> WritePlan:
    """Plan ``spec`` with ``source`` (from :func:`~.merger.prepare_source`) on the
    attempt's snapshot.

    Raises:
        SchemaMismatchError, ImmutableColumnError, InvalidMergeError: a value or a
            condition fails on the rows (nothing written).
        SnapshotExpiredError: a file of the snapshot was cleaned (run_write plans again).
    """
    cfg, schema = ctx.config, ctx.config.schema
    key = list(cfg.record_key)
    matched, inserts, by_source = spec.of(MATCHED), spec.of(NOT_MATCHED), spec.of(BY_SOURCE)
    plan = WritePlan(Operation.MERGE)
    slices = _target_slices(ctx, plan, source, bool(by_source))
    # Only the target columns the clauses read: an update without set= replaces the rest.
    read_schema = pa.schema([schema.field(c) for c in _target_columns(cfg, spec)])
    engine = MergeEngine.of(cfg)
    reads = [SliceRead(ctx.storage, s, read_schema, cfg.record_key, cfg.ordering_field, engine=engine) for s in slices]
    source_keys = source.select(key).append_column(_S, pa.array(np.arange(source.num_rows, dtype=np.int64)))
    seen = np.zeros(source.num_rows, dtype=bool)
    stats = {"rows_updated": 0, "rows_inserted": 0, "rows_deleted": 0}
    claimed: list[pa.Table] = []
    for s, rows in zip(slices, ctx.engine.map(read_slice, reads)):
        if rows.num_rows == 0:
            continue
        rows = rows.select(read_schema.names).cast(read_schema)
        t_rows, s_rows = _pairs(rows, source_keys, key)
        seen[s_rows] = True
        deletes: list[pa.Table] = []
        updates: list[pa.Table] = []
        if len(t_rows):
            target, src = rows.take(t_rows), source.take(s_rows)
            claimed.append(_keys_with_partition(target, cfg.record_key, s.partition))
            joined = pa.Table.from_arrays(
                _renamed(src, SOURCE).columns + _renamed(target, TARGET).columns,
                schema=pa.schema(list(prefixed(src.schema, SOURCE)) + list(prefixed(target.schema, TARGET))),
            )
            choice = first_clause(matched, joined)
            for i, clause in enumerate(matched):
                mask = pa.array(choice == i)
                if not pc.any(mask).as_py():
                    continue
                if clause.kind == ClauseKind.MATCHED_DELETE:
                    deletes.append(target.filter(mask).select(key))
                    stats["rows_deleted"] += deletes[-1].num_rows
                    continue
                old = target.filter(mask)
                new = _updated_rows(cfg, clause, old, joined.filter(mask), src.filter(mask))
                lose = _loses_fold(cfg, new, old)
                if lose.any():  # the new version must win: the key's older versions end here
                    deletes.append(old.filter(pa.array(lose)).select(key))
                updates.append(new)
                stats["rows_updated"] += new.num_rows
        if by_source:
            alone = np.ones(rows.num_rows, dtype=bool)
            alone[t_rows] = False
            lonely = rows.filter(pa.array(alone))
            gone = lonely.filter(pa.array(first_clause(by_source, _renamed(lonely, TARGET)) >= 0))
            if gone.num_rows:
                deletes.append(gone.select(key))
                stats["rows_deleted"] += gone.num_rows
        if not deletes and not updates:
            continue
        parts = [_with_op(delete_records(d, schema, cfg.record_key), OP_DELETE) for d in deletes]
        parts += [_with_op(u, OP_UPSERT) for u in updates]
        incoming = pa.concat_tables(parts, promote_options="permissive")  # deletes: nullable
        if cfg.table_type == TableType.MOR:
            plan.logs.append(LogAppend(s.partition, s, incoming))
        else:
            plan.rewrites.append(Rewrite(s.partition, s, incoming))
    _plan_inserts(ctx, plan, source, seen, inserts, stats, bool(matched))
    plan.updated_keys = pa.concat_tables(claimed) if claimed else None
    if by_source:
        plan.delete_predicate = EVERY_ROW
    plan.stats = stats
    _merge_logs(plan)
    _merge_rewrites(plan)
    check_folds(ctx, plan)  # an aggregation table's sums still fit, before anything is written
    return plan


def _plan_inserts(
    ctx: TableContext,
    plan: WritePlan,
    source: pa.Table,
    seen: np.ndarray,
    inserts: tuple[Clause, ...],
    stats: dict[str, int],
    claim_unmatched: bool,
) -> None:
    """Route the source rows no target matched that an insert clause takes, as an
    upsert routes new keys; claim the rest when a matched clause could have taken them."""
    cfg = ctx.config
    unmatched = source.filter(pa.array(~seen))
    take = first_clause(inserts, _renamed(unmatched, SOURCE)) >= 0 if inserts else np.zeros(unmatched.num_rows, bool)
    if claim_unmatched and (~take).any():
        rest = unmatched.filter(pa.array(~take)).select(list(cfg.record_key))
        plan.deleted_keys = rest.append_column(PARTITION, pa.nulls(rest.num_rows, pa.string()))
    if not take.any():
        return
    chosen = unmatched.filter(pa.array(take))
    rows = pa.Table.from_arrays([conform_column(chosen.column(f.name), f) for f in cfg.schema], schema=cfg.schema)
    rows = MergeEngine.of(cfg).prepare(rows)
    stats["rows_inserted"] += rows.num_rows
    new_keys = []
    for partition, part in split_by_partition(rows, cfg.partition_by).items():
        # Not into a group this MERGE already logs to: its log holds no base positions
        # (keys read, not tagged), and one log either points into the base or does not.
        taken = {r.slice.file_group for r in plan.rewrites if r.partition == partition}
        taken |= {lg.slice.file_group for lg in plan.logs if lg.partition == partition}
        _route_inserts(cfg, plan, partition, ctx.view.latest_slices(partition), part, taken)
        new_keys.append(_keys_with_partition(part, cfg.record_key, partition))
    plan.new_keys = pa.concat_tables(new_keys)
