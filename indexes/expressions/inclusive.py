"""May a file, or a partition folder, hold a row matching a filter? (inclusive pruning)

The answer is False only when no row can match: a file is dropped on it, so every doubt
answers True. A file is described by :class:`ColumnBounds` per column (a column without
an entry is unknown); a partition by its folder's values, which are bounds with
``min == max`` (:func:`partition_might_match` reuses the same evaluator).

The filter is walked with its negations pushed down (:func:`~.tree.visit_nnf`): each
leaf then asks a plain question of the bounds, e.g. ``x >= v`` may hold when
``max >= v``; ``x != v`` fails only when ``min == max == v`` (null rows never match
``!=``, so the null count does not matter); ``NOT IN`` fails only when
``min == max`` is one of the values. The evaluator gives up (True) on an ``Unknown``,
on a literal or bound that is NaN, and on values of different kinds (a string bound
against a number, a date against a datetime, naive against aware datetimes): Python
would order those differently from Arrow or not at all.
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Mapping
from dataclasses import dataclass

from .tree import Compare, Expr, In, IsNull, Op, Unknown, Value, Visitor, visit_nnf
from .values import comparable


@dataclass(frozen=True)
class ColumnBounds:
    """What a file's column stats say about one column; None is unknown.

    ``min``/``max`` bound every non-null value (inclusive, need not be tight). A float
    column's bounds must be None when the file may hold NaN (NaN has no place in an
    ordering; lakeline's column stats leave them null then). ``null_count`` and
    ``row_count`` count the column's nulls and the file's rows.
    """

    min: Value | None = None
    max: Value | None = None
    null_count: int | None = None
    row_count: int | None = None

    @property
    def all_null(self) -> bool:
        """Whether the file surely holds no non-null value of the column."""
        return self.null_count is not None and self.row_count is not None and self.null_count >= self.row_count


def might_match(expr: Expr, bounds: Mapping[str, ColumnBounds]) -> bool:
    """False only when no row of a file with these column bounds can match ``expr``."""
    return visit_nnf(expr, _MightMatch(bounds))


def partition_might_match(expr: Expr, values: Mapping[str, Value | None]) -> bool:
    """False only when no row of a partition whose rows hold ``values`` (partition
    column to value, None for a null) can match ``expr``; other columns are unknown."""
    return might_match(
        expr,
        {c: ColumnBounds(v, v, 0, 1) if v is not None else ColumnBounds(None, None, 1, 1) for c, v in values.items()},
    )


@functools.lru_cache(maxsize=64)
def _sorted_values(node: In) -> tuple[Value, ...] | None:
    """The values of an ``In`` in order, or None when they are not all of one kind."""
    if not comparable(*node.values):
        return None
    return tuple(sorted(node.values))  # one kind: mutually ordered


class _MightMatch(Visitor[bool]):
    def __init__(self, bounds: Mapping[str, ColumnBounds]) -> None:
        self.bounds = bounds

    def always_true(self) -> bool:
        return True

    def always_false(self) -> bool:
        return False

    def and_(self, children: list[bool]) -> bool:
        return all(children)

    def or_(self, children: list[bool]) -> bool:
        return any(children)

    def unknown(self, node: Unknown) -> bool:
        return True

    def _values(self, column: str) -> tuple[ColumnBounds | None, bool]:
        """The column's bounds, and whether it may hold a non-null value."""
        b = self.bounds.get(column)
        return b, b is None or not b.all_null

    def compare(self, node: Compare) -> bool:
        b, has_values = self._values(node.ref.name)
        if node.value is None or not has_values:
            return False  # a comparison with null, or only null rows: never true
        if b is None or b.min is None or b.max is None:
            return True
        lo, hi, v = b.min, b.max, node.value
        if not comparable(lo, hi, v):
            return True
        try:
            if node.op is Op.EQ:
                return lo <= v <= hi  # type: ignore[operator]
            if node.op is Op.NE:
                return not (lo == hi == v)
            if node.op is Op.LT:
                return lo < v  # type: ignore[operator]
            if node.op is Op.LE:
                return lo <= v  # type: ignore[operator]
            if node.op is Op.GT:
                return hi > v  # type: ignore[operator]
            return hi >= v  # type: ignore[operator]
        except TypeError:
            return True

    def is_in(self, node: In) -> bool:
        b, has_values = self._values(node.ref.name)
        if not has_values:
            return False
        if b is None or b.min is None or b.max is None:
            return True
        values = _sorted_values(node)
        if values is None or not comparable(b.min, b.max, values[0]):
            return True
        try:
            i = bisect_left(values, b.min)
            return i < len(values) and values[i] <= b.max  # type: ignore[operator]
        except TypeError:
            return True

    def not_in(self, node: In) -> bool:
        b, has_values = self._values(node.ref.name)
        if not has_values:
            return False
        if b is None or b.min is None or b.max is None or not comparable(b.min, b.max, *node.values):
            return True
        return not (b.min == b.max and b.min in node.values)

    def is_null(self, node: IsNull) -> bool:
        b = self.bounds.get(node.ref.name)
        return b is None or b.null_count is None or b.null_count > 0

    def not_null(self, node: IsNull) -> bool:
        return self._values(node.ref.name)[1]
