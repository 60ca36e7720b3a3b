"""The update planner: ``t.update(where=..., set=...)`` as the write it becomes.

An update reads the rows ``where`` matches in the attempt's snapshot, computes their new
values (:mod:`.assign`) and writes them back into the file groups that hold them. It runs
inside :func:`~.writer.run_write`'s attempt, so a replay after a conflict reads the rows
again from the fresh snapshot and computes from what is there then.

* **Keyed tables** become an upsert of the same keys into the same file groups: a log of
  the new rows on merge-on-read, a rewrite of the group on copy-on-write. The slices the
  rows were read from name their file groups, so no tagging is needed.
  *Ordering*: an updated row keeps its ordering value unless ``set`` assigns it. Versions
  that tie on the ordering value fold to the later one (:mod:`.merge`), and the updated
  row comes after every version it was computed from, so it wins. When ``set`` assigns
  the ordering field, a smaller value would lose that fold; the update then writes a
  delete record of the key right before its new row (in the same log or rewrite), and a
  fold drops everything up to a key's last delete: the assigned value holds, whatever it is.
* **Append-only tables** rewrite the file groups holding matching rows, like
  ``delete_where`` does, with the changed rows in place (a ``commit``).

Conflicts: the rules of the write it becomes (an upsert: file groups, and the key check),
plus rule 5 of :mod:`.key_check` (a concurrent upsert or delete of a key this update
read is a conflict: applied last, the update would undo it) and rule 4 with ``where`` as
the predicate (a concurrent row matching ``where`` is one the update must change).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ...timeline.commit_metadata import Operation
from ...timeline.errors import InvalidFilterError, SnapshotExpiredError, UnsupportedOperationError
from ...timeline.storage.data_reads import DAMAGED, PARQUET_FORMAT, check_sizes, unreadable
from ...timeline.table_config import TableConfig, TableType
from ..context import TableContext
from ..merge_engine import AGGREGATION, FIRST_ROW, MergeEngine
from ..read.pushdown import filtered_scanner, pushdown
from ..read.scan import Scan, SliceRead, read_slice
from .assign import Assignments, apply_assignments, check_assignments
from .operations import _with_op
from .plan import PARTITION, LogAppend, Rewrite, WritePlan
from .records import OP_DELETE, OP_UPSERT, check_filter, constant, same_columns

#: What an update of every row (``where=None``) claims against concurrent rows (rule 4).
EVERY_ROW = pc.scalar(True)


@dataclass(frozen=True)
class SliceMatch:
    """Read the live rows of one slice that ``where`` matches (None: every row)."""

    read: SliceRead
    where: pc.Expression | None


def slice_matches(task: SliceMatch) -> pa.Table:
    """The matched rows of a slice, every column of the schema: a plain base file is
    read with the filter pushed into Parquet, a slice with logs merged first."""
    r, s = task.read, task.read.slice
    if not s.logs and s.base is not None:
        try:
            check_sizes(r.storage, [(s.base.path, s.base.bytes)])  # swapped or cut short: refused
            dset = ds.dataset(
                [r.storage.path(s.base.path)], schema=r.schema, format=PARQUET_FORMAT, filesystem=r.storage.fs
            )
            try:
                # No test of a float column reaches Parquet's statistics (NaN is in none).
                return filtered_scanner(dset, pushdown(task.where, r.schema), None).to_table()
            except DAMAGED as e:
                if (damaged := unreadable(r.storage, s.base.path, s.base.bytes)) is not None:
                    raise damaged from None  # the base is damaged: CorruptFileError naming it
                if isinstance(e, OSError):
                    raise
                raise _unevaluable(task.where, e) from e  # the file reads: the filter's own error
        except FileNotFoundError as e:
            raise SnapshotExpiredError(
                f"{s.base.path} of the snapshot being updated is missing (cleaned meanwhile, "
                "or deleted outside lakeline)"
            ) from e
    rows = read_slice(r)
    if task.where is None:
        return rows
    try:
        return ds.dataset(rows).to_table(filter=task.where)
    except pa.ArrowInvalid as e:
        raise _unevaluable(task.where, e) from e


def _unevaluable(where: pc.Expression | None, error: Exception) -> InvalidFilterError:
    return InvalidFilterError(f"the filter {where} cannot be evaluated on the rows: {error}")


def update_planner(
    cfg: TableConfig, where: pc.Expression | None, set: Mapping[str, Any] | None
) -> Callable[[TableContext], WritePlan]:
    """Check an update's input against ``cfg`` (refused before anything is written) and
    return the planner each attempt runs.

    Raises:
        UnsupportedOperationError: the table's merge engine is ``aggregation`` or
            ``first-row``: the updated row, written as a new version, would be added to
            the old one or dropped (docs/merge-engines.md).
    """
    engine = MergeEngine.of(cfg)
    if engine.name in (AGGREGATION, FIRST_ROW):
        raise UnsupportedOperationError(
            f"update on a table whose merge.engine is {engine.name!r}: the new row would be folded "
            "as another version (aggregated, or dropped); delete the keys and upsert the rows instead"
        )
    check_filter(cfg.schema, where)
    assignments = check_assignments(cfg, set)

    def planner(ctx: TableContext) -> WritePlan:
        if same_columns(ctx.config.schema, cfg.schema):
            return plan_update(ctx, where, assignments)
        # A replay after a schema instant replaced the schema (a rename, a drop): the
        # filter and the assignments are checked again, so an old name is refused, typed.
        check_filter(ctx.config.schema, where)
        return plan_update(ctx, where, check_assignments(ctx.config, set))

    return planner


def plan_update(ctx: TableContext, where: pc.Expression | None, assignments: Assignments) -> WritePlan:
    """Plan an update on the attempt's snapshot (checked input: ``where`` by
    ``check_filter``, ``assignments`` by :func:`~.assign.check_assignments`).

    Raises:
        SchemaMismatchError: a computed value does not fit its column (nothing written).
        SnapshotExpiredError: a file of the snapshot was cleaned (run_write plans again).
    """
    cfg = ctx.config
    schema = cfg.schema
    slices = Scan(ctx, filter=where).slices  # pruned by partition, key range and indexes
    engine = MergeEngine.of(cfg)
    tasks = [
        SliceMatch(SliceRead(ctx.storage, s, schema, cfg.record_key, cfg.ordering_field, engine=engine), where)
        for s in slices
    ]
    matched = ctx.engine.map(slice_matches, tasks)
    plan = WritePlan(Operation.UPDATE, delete_predicate=EVERY_ROW if where is None else where)
    reset_ordering = cfg.ordering_field is not None and any(c == cfg.ordering_field for c, _ in assignments)
    updated = 0
    keys: list[pa.Table] = []
    for s, rows in zip(slices, matched):
        if rows.num_rows == 0:
            continue
        rows = rows.cast(schema)
        new = apply_assignments(rows, assignments, schema)  # typed refusals, before any write
        updated += rows.num_rows
        if not cfg.has_key:
            plan.rewrites.append(Rewrite(s.partition, s, None, plan.delete_predicate, assign=assignments))
            continue
        incoming = _with_op(new, OP_UPSERT)
        if reset_ordering:
            incoming = pa.concat_tables([_with_op(rows, OP_DELETE), incoming])
        if cfg.table_type == TableType.MOR:
            plan.logs.append(LogAppend(s.partition, s, incoming))
        else:
            plan.rewrites.append(Rewrite(s.partition, s, incoming))
        k = rows.select(list(cfg.record_key))
        keys.append(k.append_column(PARTITION, constant(s.partition, k.num_rows)))
    plan.updated_keys = pa.concat_tables(keys) if keys else None
    plan.stats = {"updated": updated}
    return plan
