"""The values a filter pins a column to: what bloom filters and key ranges can probe.

``pinned_values(expr, "k")`` is a set S such that every row matching ``expr`` has
``k`` in S, or None when the filter does not pin ``k``. Pins come from ``k = v`` and
``k IN (...)``; a conjunction intersects its children's pins (children that do not pin
``k`` constrain nothing), a disjunction unites them only when every child pins ``k``.
A comparison with a null literal never matches, so it pins to nothing (the empty set);
so does ``AlwaysFalse``. Negated leaves and ``Unknown`` pin nothing; a NaN value gives
up (NaN equals nothing, and sets treat it by identity).
"""

from __future__ import annotations

from .tree import Compare, Expr, In, IsNull, Op, Unknown, Value, Visitor, visit_nnf
from .values import is_nan

Pins = frozenset[Value] | None


def pinned_values(expr: Expr, column: str) -> frozenset[Value] | None:
    """The values ``column`` can take in a row matching ``expr``, or None (not pinned)."""
    return visit_nnf(expr, _Pins(column))


class _Pins(Visitor[Pins]):
    def __init__(self, column: str) -> None:
        self.column = column

    def always_true(self) -> Pins:
        return None

    def always_false(self) -> Pins:
        return frozenset()

    def and_(self, children: list[Pins]) -> Pins:
        pinned = [c for c in children if c is not None]
        return frozenset.intersection(*pinned) if pinned else None

    def or_(self, children: list[Pins]) -> Pins:
        if any(c is None for c in children):
            return None
        return frozenset().union(*(c for c in children if c is not None))

    def compare(self, node: Compare) -> Pins:
        if node.value is None:
            return frozenset()
        if node.ref.name != self.column or node.op is not Op.EQ or is_nan(node.value):
            return None
        return frozenset((node.value,))

    def is_in(self, node: In) -> Pins:
        if node.ref.name != self.column or any(is_nan(v) for v in node.values):
            return None
        return node.values

    def is_null(self, node: IsNull) -> Pins:
        return None

    def not_in(self, node: In) -> Pins:
        return None

    def not_null(self, node: IsNull) -> Pins:
        return None

    def unknown(self, node: Unknown) -> Pins:
        return None
