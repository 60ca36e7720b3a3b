"""Before an upsert commits on an aggregation table: every key's ``sum`` and ``count``
still fit their columns' types once its new version folds in (issue 45, item 3).

Within a batch, the fold of a key's rows already refuses a total its type cannot hold
(:mod:`lakeline.table.checked_sums`, while the rows are prepared). Across writes the
table folds a key's versions later: a copy-on-write rewrite folds them while it writes
(after the instant is requested), and a merge-on-read write only appends a log, folded
by every read and compaction after it commits. A log whose fold overflows would make
the key, and every read of its slice, fail for good (D10). So while the upsert is
planned, on its snapshot and before anything is written, :func:`check_folds` reads the
current values of the summed columns of the keys it touches (each touched slice merged,
only those columns, only the row groups that may hold the keys) and folds the new
versions onto them with the same checked fold: a total that does not fit is
:class:`~lakeline.timeline.errors.AggregateOverflowError` and the write never begins.

A concurrent writer could add to the same key between this snapshot and our commit;
each write alone fits, both together might not. The keys a merge-on-read upsert adds to
are therefore claimed like an update's (the key check's rule 5,
:mod:`lakeline.table.write.key_check`): a concurrent version of one of them is a
conflict, the attempt replays on a fresh snapshot and this check runs again on it.
Copy-on-write needs no claim: two rewrites of one group already conflict.
"""

from __future__ import annotations

import decimal
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...indexes.pruning import filter_tree
from ...timeline.field_ids import field_id
from ...timeline.storage.data_reads import open_parquet
from ...timeline.storage.filesystem import Storage
from ...timeline.table_config import TableConfig
from ...timeline.view.file_group import FileSlice
from ..checked_sums import checks
from ..context import TableContext
from ..files import snapshot_file_reading
from ..merge import merge_onto
from ..merge_engine import MergeEngine
from ..read.slice_read import SliceRead, read_slice
from .plan import PARTITION, WritePlan
from .records import OP, OP_UPSERT, constant


@dataclass(frozen=True)
class FoldCheck:
    """One touched slice: its current rows of ``incoming``'s keys, folded with them."""

    storage: Storage
    slice: FileSlice
    schema: pa.Schema  # the key, the ordering field and the summed columns
    key: tuple[str, ...]
    ordering: str | None
    engine: MergeEngine
    incoming: pa.Table  # the write's versions for the slice, ``schema``'s columns and ``_op``


def summed_columns(cfg: TableConfig) -> list[str]:
    """The columns of ``cfg``'s table whose fold adds values up in a type that can
    overflow (``sum``/``count`` on integers and decimals); empty for other engines."""
    engine = MergeEngine.of(cfg)
    return [c for c, _ in engine.checked_columns() if checks(cfg.schema.field(c).type)]


def check_folds(ctx: TableContext, plan: WritePlan) -> None:
    """Refuse ``plan`` (an upsert's) when a key it touches would fold to a total its
    column cannot hold; claim the keys its logs add to (see the module docstring).

    Raises:
        AggregateOverflowError: the column, the key and the total that does not fit.
    """
    cfg = ctx.config
    summed = summed_columns(cfg)
    if not summed:
        return
    key, ordering = cfg.record_key, cfg.ordering_field
    names = list(dict.fromkeys([*key, *((ordering,) if ordering else ()), *summed]))
    schema = pa.schema([cfg.schema.field(c) for c in names])
    engine = MergeEngine.of(cfg)
    touched = [(r.slice, r.incoming) for r in plan.rewrites if r.incoming is not None and not r.new_keys_only]
    touched += [(lg.slice, lg.incoming) for lg in plan.logs]
    tasks = [
        FoldCheck(ctx.storage, s, schema, key, ordering, engine, _upserts(rows, names))
        for s, rows in touched
        if s.base is not None or s.logs
    ]
    ctx.engine.map(check_slice, [t for t in tasks if t.incoming.num_rows])
    claims = [_claimed(lg.incoming, key, lg.partition) for lg in plan.logs]
    claims = [c for c in claims if c.num_rows]
    if claims:
        mine = pa.concat_tables(claims)
        plan.updated_keys = mine if plan.updated_keys is None else pa.concat_tables([plan.updated_keys, mine])


def check_slice(task: FoldCheck) -> None:
    """Fold ``task.incoming`` onto the slice's current rows of its keys (raises
    AggregateOverflowError like any fold whose total does not fit), unless the files'
    statistics already prove every total fits."""
    if _fits_by_statistics(task):
        return
    keys = task.incoming.select(list(task.key))
    # Only the rows of the keys the write touches matter: with a filter on the key
    # alone, the slice read decodes only the row groups and log rows that may hold them.
    flt = None
    for k in task.key:
        term = pc.field(k).isin(pc.unique(keys.column(k)))
        flt = term if flt is None else flt & term
    tree = filter_tree(flt, task.schema) if flt is not None else None
    current = read_slice(
        SliceRead(
            task.storage, task.slice, task.schema, task.key, task.ordering, filter=flt, tree=tree, engine=task.engine
        )
    )
    if flt is not None:
        current = current.filter(flt)
    if current.num_rows:
        merge_onto(current, task.incoming, task.key, task.ordering, task.engine)


def _fits_by_statistics(task: FoldCheck) -> bool:
    """Whether the Parquet statistics of the slice's files and the incoming values prove
    that no key's total can leave its column's range. A file holds at most one row of a
    key (a base one per key, a log one version per key), so a key's total lies within
    the sum over the files (and the incoming versions) of their minimum and maximum,
    each widened to include 0 (a delete starts a key over: any subset of the versions
    stays within). Typical counters (int64, small values) pass; a file without
    statistics for a column, or another type or field there (a schema change), proves
    nothing, and the rows are read instead."""
    with decimal.localcontext(decimal.Context(prec=200)):  # decimal sums unrounded
        return _statistics_bound(task)


def _statistics_bound(task: FoldCheck) -> bool:
    summed = [f for f in task.schema if f.name not in task.key and f.name != task.ordering]
    low = {f.name: 0 for f in summed}
    high = dict(low)
    for file in task.slice.files:
        with snapshot_file_reading(file.path):
            parquet = open_parquet(task.storage, file.path, file.bytes)
            md, file_schema = parquet.metadata, parquet.schema_arrow
        paths = [md.schema.column(i).path for i in range(md.num_columns)]
        for f in summed:
            i = paths.index(f.name) if paths.count(f.name) == 1 else -1
            if i < 0 or f.name not in file_schema.names:
                return False
            theirs = file_schema.field(f.name)
            if theirs.type != f.type or field_id(theirs) != field_id(f):
                return False
            least: Any = 0  # the file's smallest and largest value (0: only nulls)
            most: Any = 0
            for g in range(md.num_row_groups):
                rg = md.row_group(g)
                st = rg.column(i).statistics
                if st is not None and st.has_null_count and st.null_count == rg.num_rows:
                    continue  # only nulls: adds nothing
                if st is None or not st.has_min_max:
                    return False
                least, most = min(least, st.min), max(most, st.max)
            low[f.name] += least
            high[f.name] += most
    for f in summed:
        lo, hi = pc.min_max(task.incoming.column(f.name)).values()
        low[f.name] += min(0, lo.as_py() or 0)
        high[f.name] += max(0, hi.as_py() or 0)
        least, most = _range(f.type)
        if low[f.name] < least or high[f.name] > most:
            return False
    return True


def _range(t: pa.DataType) -> tuple[int | decimal.Decimal, int | decimal.Decimal]:
    """The smallest and largest value of an integer or decimal type."""
    if pa.types.is_decimal(t):
        top = decimal.Decimal(10**t.precision - 1).scaleb(-t.scale, decimal.Context(prec=200))
        return top.copy_negate(), top  # exact: unary minus would round to the context's 28 digits
    info = np.iinfo(np.dtype(t.to_pandas_dtype()))
    return int(info.min), int(info.max)


def _upserts(rows: pa.Table, names: list[str]) -> pa.Table:
    """The upsert records of ``rows`` (a plan's incoming rows), only ``names`` and ``_op``."""
    ups = rows.filter(pc.equal(rows.column(OP), OP_UPSERT)) if OP in rows.column_names else rows
    out = ups.select(names)
    return out.append_column(OP, constant(OP_UPSERT, out.num_rows))


def _claimed(rows: pa.Table, key: tuple[str, ...], partition: str) -> pa.Table:
    """The keys of the upsert records of a log, with :data:`PARTITION`: claimed for
    the key check at completion as if updated."""
    ups = rows.filter(pc.equal(rows.column(OP), OP_UPSERT))
    keys = ups.select(list(key))
    return keys.append_column(PARTITION, constant(partition, keys.num_rows))
