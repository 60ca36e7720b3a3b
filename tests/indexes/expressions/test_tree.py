"""The tree's simplifying constructors, negation push-down, visitors and ``columns``."""

from __future__ import annotations

import pytest
from lakeline.indexes.expressions import (
    FALSE,
    TRUE,
    And,
    Compare,
    In,
    IsNull,
    Not,
    Op,
    Or,
    Ref,
    Unknown,
    and_,
    columns,
    eq,
    is_in,
    is_null,
    not_,
    not_null,
    or_,
    push_not,
)
from lakeline.indexes.expressions.tree import Visitor, visit

A3 = eq("a", 3)
B1 = Compare(Op.LT, Ref("b"), 1)


def test_and_or_simplify() -> None:
    assert and_() == TRUE and or_() == FALSE
    assert and_(A3, FALSE, B1) == FALSE
    assert or_(A3, TRUE) == TRUE
    assert and_(TRUE, A3) == A3
    assert or_(FALSE, A3, FALSE) == A3
    assert and_(A3, and_(B1, is_null("c"))) == And((A3, B1, IsNull(Ref("c"))))
    assert or_(or_(A3, B1), A3) == Or((A3, B1, A3))


def test_not_simplifies_constants_and_double_negation() -> None:
    assert not_(TRUE) == FALSE and not_(FALSE) == TRUE
    assert not_(not_(A3)) == A3
    assert not_(A3) == Not(A3)


def test_is_in_helper() -> None:
    assert is_in("a", []) == FALSE
    assert is_in("a", [4]) == eq("a", 4)
    assert is_in("a", [4, 5, 4]) == In(Ref("a"), frozenset({4, 5}))
    # SQL: a null in the list adds "= NULL", which never holds (and makes NOT IN never hold)
    assert is_in("a", [4, None]) == Or((eq("a", 4), eq("a", None)))
    assert is_in("a", [None]) == eq("a", None)


def test_push_not() -> None:
    e = not_(and_(A3, or_(B1, not_(is_null("c")), Unknown("f(x)"))))
    assert push_not(e) == or_(
        Compare(Op.NE, Ref("a"), 3), and_(Compare(Op.GE, Ref("b"), 1), is_null("c"), Not(Unknown("f(x)")))
    )
    assert push_not(not_(is_in("a", [1, 2]))) == Not(In(Ref("a"), frozenset({1, 2})))
    assert push_not(Not(TRUE)) == FALSE
    for op in Op:
        assert op.negated.negated is op and op.flipped.flipped is op


def test_columns() -> None:
    e = or_(and_(A3, not_null("c")), is_in("d", ["x", "y"]), Unknown("g(z)"), not_(B1))
    assert columns(e) == {"a", "b", "c", "d"}
    assert columns(TRUE) == frozenset()


def test_visitor_without_not_refuses_raw_negation() -> None:
    class Count(Visitor[int]):
        def always_true(self) -> int:
            return 0

        def always_false(self) -> int:
            return 0

        def and_(self, children: list[int]) -> int:
            return sum(children)

        or_ = and_

        def compare(self, node: Compare) -> int:
            return 1

        def is_in(self, node: In) -> int:
            return 1

        def is_null(self, node: IsNull) -> int:
            return 1

        def unknown(self, node: Unknown) -> int:
            return 1

    assert visit(and_(A3, B1, or_(is_null("x"), Unknown("?"))), Count()) == 4
    with pytest.raises(NotImplementedError):
        visit(not_(A3), Count())


def test_nodes_are_frozen_and_hashable() -> None:
    assert len({A3, eq("a", 3), B1}) == 2
    with pytest.raises(AttributeError):
        A3.value = 4  # type: ignore[misc]
