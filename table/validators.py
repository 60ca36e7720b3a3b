"""Built-in pre-commit validators (Hudi's ``SparkPreCommitValidator`` family, and Delta's
CHECK constraints), each a small frozen value that is called with a
:class:`~.hooks.ValidationContext` and raises :class:`ValidationError` to refuse.

* :func:`row_count_change`: the live row count may change by at least/at most so much;
* :func:`no_nulls`: the rows the write inserts or updates have no null in these columns;
* :func:`rows_satisfy`: an Arrow expression holds for every row the write inserts or
  updates (as SQL's CHECK: a row where it is null passes; combine with ``no_nulls``).

The SQL validators (query equality, inequality, single result) need Spark and live in
:mod:`lakeline.spark.validators`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..timeline.errors import UnknownColumnError, ValidationError
from .hooks import ValidationContext
from .write.records import check_filter


@dataclass(frozen=True)
class RowCountChange:
    """``after - before`` live rows within ``[min, max]`` (None: unbounded)."""

    min: int | None = None
    max: int | None = None

    @property
    def name(self) -> str:
        return f"row_count_change(min={self.min}, max={self.max})"

    def __call__(self, ctx: ValidationContext) -> None:
        change = ctx.after.count_rows() - ctx.before.count_rows()
        if (self.min is not None and change < self.min) or (self.max is not None and change > self.max):
            raise ValidationError(f"the row count would change by {change}, outside [{self.min}, {self.max}]")


@dataclass(frozen=True)
class NoNulls:
    """No null in ``columns`` among the rows the write inserts or updates."""

    columns: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"no_nulls({', '.join(self.columns)})"

    def check_schema(self, schema: pa.Schema) -> None:
        """Raises UnknownColumnError before the write when a column is not the table's."""
        missing = [c for c in self.columns if c not in schema.names]
        if missing:
            raise UnknownColumnError(f"no_nulls: unknown columns {missing}")

    def __call__(self, ctx: ValidationContext) -> None:
        rows = ctx.new_rows
        nulls = {c: rows.column(c).null_count for c in self.columns if rows.column(c).null_count}
        if nulls:
            raise ValidationError(f"nulls in {nulls} (column: rows)")


@dataclass(frozen=True)
class RowsSatisfy:
    """``expression`` is not false for any row the write inserts or updates."""

    expression: pc.Expression
    label: str = ""

    @property
    def name(self) -> str:
        return f"rows_satisfy({self.label or self.expression})"

    def check_schema(self, schema: pa.Schema) -> None:
        """Raises UnknownColumnError, InvalidFilterError before the write on a bad expression."""
        check_filter(schema, self.expression)

    def __call__(self, ctx: ValidationContext) -> None:
        rows = ctx.new_rows
        # A filter by expression drops the rows where it is null: SQL CHECK semantics.
        failing = rows.filter(pc.invert(self.expression))
        if failing.num_rows:
            sample = failing.slice(0, 3).to_pylist()
            raise ValidationError(
                f"{failing.num_rows} of {rows.num_rows} new rows break {self.expression}, e.g. {sample}"
            )


def row_count_change(min: int | None = None, max: int | None = None) -> RowCountChange:
    """Refuse a write that changes the live row count by less than ``min`` or more than
    ``max`` (e.g. ``row_count_change(min=0)``: never shrink the table)."""
    return RowCountChange(min, max)


def no_nulls(columns: Sequence[str] | str) -> NoNulls:
    """Refuse a write whose inserted or updated rows hold a null in ``columns``."""
    return NoNulls((columns,) if isinstance(columns, str) else tuple(columns))


def rows_satisfy(expression: pc.Expression, label: str = "") -> RowsSatisfy:
    """Refuse a write with an inserted or updated row for which ``expression`` is false
    (``rows_satisfy(pc.field("amount") >= 0)``)."""
    return RowsSatisfy(expression, label)
