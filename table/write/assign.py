"""Assignments: the ``set`` of an update (``UPDATE ... SET col = expr``), checked and applied.

``set`` maps column names to Arrow expressions over a row's current values
(``pc.field("n") + 1``) or to literals (``"banana"``, ``None``, a ``pa.Scalar``). Every
check that needs no data runs in :func:`check_assignments`, before anything is read or
written: unknown columns, record-key and partition columns (a row's identity and place
are fixed), expressions Arrow cannot evaluate, and result types that belong to another
family than the column's. :func:`apply_assignments` then computes the new rows and casts
each assigned column to the table's type, refusing a value the cast would change
(an overflow, a truncation) with :class:`SchemaMismatchError`.

Why a module of its own: the update planner (:mod:`.update`) applies assignments to the
matched rows of keyed tables, and a copy-on-write rewrite task (:mod:`.group_tasks`)
applies them inside the file groups of append-only tables; both must compute the same.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ...timeline.errors import ImmutableColumnError, InvalidUpdateError, SchemaMismatchError, UnknownColumnError
from ...timeline.table_config import TableConfig
from .records import castable, conform_column, evaluation_errors

#: Checked assignments: (column, expression) pairs in schema order (picklable, hashable).
Assignments = tuple[tuple[str, pc.Expression], ...]


def _as_expression(column: str, value: Any) -> pc.Expression:
    if isinstance(value, pc.Expression):
        return value
    if isinstance(value, (pa.Array, pa.ChunkedArray, pa.Table, pa.RecordBatch, list, dict, set)):
        raise InvalidUpdateError(
            f"set[{column!r}] must be an Arrow expression or a literal, not {type(value).__name__}"
        )
    try:
        return pc.scalar(value)
    except (TypeError, pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        raise InvalidUpdateError(
            f"set[{column!r}] = {value!r} is neither an Arrow expression nor a literal: {e}"
        ) from None


def _same_family(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether a value of ``src`` may be assigned to a ``dst`` column: a lossless cast
    (:func:`records.castable`), or one within a numeric or temporal family whose values
    the safe cast checks row by row (``n + 1`` over an int32 column, a Python int literal)."""
    if castable(src, dst):
        return True
    for fam in (
        pa.types.is_integer,
        pa.types.is_floating,
        pa.types.is_decimal,
        pa.types.is_timestamp,
        pa.types.is_date,
        pa.types.is_time,
        pa.types.is_duration,
    ):
        if fam(src) and fam(dst):
            return True
    return (pa.types.is_integer(src) and (pa.types.is_floating(dst) or pa.types.is_decimal(dst))) or (
        pa.types.is_decimal(src) and pa.types.is_floating(dst)
    )


def evaluate(rows: pa.Table, exprs: Mapping[str, pc.Expression]) -> pa.Table:
    """The expressions projected over ``rows`` (one output column per name)."""
    return ds.dataset(rows).to_table(columns=dict(exprs))


def check_assignments(config: TableConfig, assignments: Any, over: pa.Schema | None = None) -> Assignments:
    """``set`` checked against the table, before anything is read or written; the
    expressions are over the table's columns, or over ``over`` (a MERGE's ``source.``
    and ``target.`` columns).

    Raises:
        InvalidUpdateError: not a non-empty mapping of column names to expressions or
            literals, or an expression Arrow cannot evaluate.
        UnknownColumnError: a column (assigned or referenced) the table does not have.
        ImmutableColumnError: a record-key or partition column is assigned.
        SchemaMismatchError: a value's type is of another family than its column's.
    """
    if not isinstance(assignments, Mapping) or not assignments:
        raise InvalidUpdateError("update needs set= as a non-empty mapping of column names to values")
    schema = config.schema
    names = [c for c in assignments]
    bad = [c for c in names if not isinstance(c, str)]
    if bad:
        raise InvalidUpdateError(f"set keys must be column names, not {bad!r}")
    unknown = [c for c in names if c not in schema.names]
    if unknown:
        raise UnknownColumnError(f"update sets unknown column(s) {unknown}; the table has {schema.names}")
    fixed = [c for c in names if c in config.record_key or c in config.partition_by]
    if fixed:
        raise ImmutableColumnError(
            f"update cannot set record-key or partition column(s) {fixed}: they fix a "
            "row's identity and place (delete the rows and insert them anew)"
        )
    exprs = {c: _as_expression(c, assignments[c]) for c in names}
    with evaluation_errors("update's set", InvalidUpdateError):
        typed = evaluate((schema if over is None else over).empty_table(), exprs)
    for c in names:
        src, dst = typed.schema.field(c).type, schema.field(c).type
        if not _same_family(src, dst):
            raise SchemaMismatchError(f"update sets column {c!r} ({dst}) to a value of type {src}")
    return tuple((f.name, exprs[f.name]) for f in schema if f.name in exprs)


def apply_assignments(
    rows: pa.Table, assignments: Assignments, schema: pa.Schema, over: pa.Table | None = None
) -> pa.Table:
    """``rows`` (every column of ``schema``) with the assignments applied, each computed
    from the rows' current values (or from ``over``'s, row for row), cast to ``schema``.

    Raises:
        SchemaMismatchError: a computed value does not fit its column (overflow,
            truncation, null in a non-nullable column).
    """
    if rows.num_rows == 0 or not assignments:
        return rows
    try:
        new = evaluate(rows if over is None else over, dict(assignments))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise SchemaMismatchError(f"update's set failed on the matched rows: {e}") from None
    out = rows
    for c, _ in assignments:
        f = schema.field(c)
        col = new.column(c)
        if col.type != f.type:
            try:
                col = col.cast(f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaMismatchError(f"update sets column {c!r} to values that do not fit {f.type}: {e}") from None
        col = conform_column(col, f)
        out = out.set_column(out.schema.get_field_index(c), f, col)
    return out


def apply_where(
    rows: pa.Table, where: pc.Expression, assignments: Assignments, schema: pa.Schema
) -> tuple[pa.Table, int]:
    """``rows`` (a whole file) with the assignments applied to the rows ``where`` is true
    for (null keeps the row as it is), in their order; and how many rows matched."""
    row = "__lakeline_row"  # under the reserved prefix: never a user column
    marked = rows.append_column(row, pa.array(np.arange(rows.num_rows, dtype=np.int64)))
    hit = ds.dataset(marked).to_table(filter=where, columns=[row]).column(row).to_numpy()
    if len(hit) == 0:
        return rows, 0
    mask = np.zeros(rows.num_rows, dtype=bool)
    mask[hit] = True
    changed = apply_assignments(rows.filter(pa.array(mask)), assignments, schema)
    # Put the changed rows back where they were: take from [unchanged, changed] by position.
    keep = rows.filter(pa.array(~mask))
    both = pa.concat_tables([keep.cast(schema), changed.cast(schema)])
    order = np.empty(rows.num_rows, dtype=np.int64)
    order[~mask] = np.arange(keep.num_rows)
    order[mask] = keep.num_rows + np.arange(changed.num_rows)
    return both.take(pa.array(order)), len(hit)
