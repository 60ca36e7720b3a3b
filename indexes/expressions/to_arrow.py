"""A :mod:`.tree` as a pyarrow ``pc.Expression``, for filters that were never Arrow's:
Spark SQL text, Polars, lakeline's own (a user's Arrow filter is evaluated as given).

The translation keeps the tree's structure (no negation is pushed down, so float NaN
behaves as in the tree) and SQL's three-valued logic: comparisons and ``is_null`` are
Arrow's own; ``In`` is ``is_in`` for a non-null row and null for a null row, because
Arrow's ``is_in`` is false there and ``~is_in`` would then match it, where SQL's
``NOT IN`` does not. An ``Unknown`` has no Arrow form: :class:`InvalidFilterError`.
"""

from __future__ import annotations

import functools
import operator

import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.errors import InvalidFilterError
from .tree import Compare, Expr, In, IsNull, Op, Unknown, Value, Visitor, visit

_OPS = {
    Op.EQ: operator.eq,
    Op.NE: operator.ne,
    Op.LT: operator.lt,
    Op.LE: operator.le,
    Op.GT: operator.gt,
    Op.GE: operator.ge,
}


def to_arrow(expr: Expr, schema: pa.Schema | None = None) -> pc.Expression:
    """The Arrow expression of ``expr``; literals take their column's type from
    ``schema`` when it has the column and the value fits (else Arrow infers one).

    Raises:
        InvalidFilterError: ``expr`` holds an ``Unknown``.
    """
    return visit(expr, _ToArrow(schema))


class _ToArrow(Visitor[pc.Expression]):
    def __init__(self, schema: pa.Schema | None) -> None:
        self.schema = schema

    def always_true(self) -> pc.Expression:
        return pc.scalar(True)

    def always_false(self) -> pc.Expression:
        return pc.scalar(False)

    def and_(self, children: list[pc.Expression]) -> pc.Expression:
        return functools.reduce(operator.and_, children)

    def or_(self, children: list[pc.Expression]) -> pc.Expression:
        return functools.reduce(operator.or_, children)

    def not_(self, child: pc.Expression) -> pc.Expression:
        return ~child

    def compare(self, node: Compare) -> pc.Expression:
        result: pc.Expression = _OPS[node.op](pc.field(node.ref.name), self.scalar(node.ref.name, node.value))
        return result

    def is_in(self, node: In) -> pc.Expression:
        field = pc.field(node.ref.name)
        values = self.array(node.ref.name, sorted(node.values, key=repr))
        return pc.if_else(field.is_null(), pa.scalar(None, pa.bool_()), field.isin(values))

    def is_null(self, node: IsNull) -> pc.Expression:
        return pc.field(node.ref.name).is_null()

    def unknown(self, node: Unknown) -> pc.Expression:
        raise InvalidFilterError(f"a filter part lakeline does not understand has no Arrow form: {node.reason}")

    def _type(self, column: str) -> pa.DataType | None:
        if self.schema is None or column not in self.schema.names:
            return None
        typ: pa.DataType = self.schema.field(column).type
        return typ

    def scalar(self, column: str, value: Value | None) -> pa.Scalar:
        typ = self._type(column)
        if typ is not None:
            try:
                return pa.scalar(value, typ)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                pass  # e.g. 300 for an int8 column: Arrow compares it in a wider type
        try:
            return pa.scalar(value)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            raise InvalidFilterError(f"no Arrow literal for {value!r} (column {column})") from e

    def array(self, column: str, values: list[Value]) -> pa.Array:
        typ = self._type(column)
        if typ is not None:
            try:
                return pa.array(values, typ)
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                pass
        try:
            return pa.array(values)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
            raise InvalidFilterError(f"no Arrow value set for {values!r} (column {column})") from e
