"""Filters as data: a small expression tree of lakeline's own, and how to walk it.

Pruning asks the same few questions of every filter (may a file with these bounds hold a
match, may this partition, which values does the filter pin a column to). Arrow offers no
public API to take a ``pc.Expression`` apart, so lakeline keeps its own tree: frozen
dataclasses, built from Arrow through Substrait (:mod:`.from_arrow`), from SQL text or
other engines later, and turned back into Arrow (:mod:`.to_arrow`).

Semantics are SQL's three-valued logic: a comparison with a null (a null row, or a null
literal: ``value=None``) is neither true nor false, so it never matches and neither does
its negation; ``In`` never matches a null row. ``Unknown`` stands for anything not
understood: every pruning question treats it as "might match", in both polarities.

Each consumer is a small :class:`Visitor` run by :func:`visit` (the tree as it is, e.g.
:mod:`.to_arrow`) or :func:`visit_nnf` (negations pushed down to the leaves first: what
bound-based pruning needs, see :func:`push_not`). The helpers :func:`and_`, :func:`or_`,
:func:`not_` and :func:`is_in` simplify as they build; the dataclasses themselves never
rewrite what they are given.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Generic, TypeVar

T = TypeVar("T")

#: A literal: a plain Python value (``None`` is the typed null literal of SQL).
Value = int | float | str | bool | date | datetime | Decimal | bytes


class Op(Enum):
    """A comparison operator."""

    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"

    @property
    def negated(self) -> Op:
        """``not (a op b)`` is ``a op.negated b`` (for non-null, non-NaN values)."""
        return _NEGATED[self]

    @property
    def flipped(self) -> Op:
        """``b op a`` is ``a op.flipped b``."""
        return _FLIPPED[self]


_NEGATED = {Op.EQ: Op.NE, Op.NE: Op.EQ, Op.LT: Op.GE, Op.LE: Op.GT, Op.GT: Op.LE, Op.GE: Op.LT}
_FLIPPED = {Op.EQ: Op.EQ, Op.NE: Op.NE, Op.LT: Op.GT, Op.LE: Op.GE, Op.GT: Op.LT, Op.GE: Op.LE}


@dataclass(frozen=True)
class Ref:
    """A top-level column, by name."""

    name: str


class Expr:
    """Base of every node of the tree (a boolean expression over a row)."""

    __slots__ = ()


@dataclass(frozen=True)
class AlwaysTrue(Expr):
    """Every row matches."""


@dataclass(frozen=True)
class AlwaysFalse(Expr):
    """No row matches."""


@dataclass(frozen=True)
class And(Expr):
    children: tuple[Expr, ...]


@dataclass(frozen=True)
class Or(Expr):
    children: tuple[Expr, ...]


@dataclass(frozen=True)
class Not(Expr):
    child: Expr


@dataclass(frozen=True)
class Compare(Expr):
    """``column op value``; ``value=None`` (a null literal) never matches, negated or not."""

    op: Op
    ref: Ref
    value: Value | None


@dataclass(frozen=True)
class In(Expr):
    """``column IN (values)``: the values are never null; a null row never matches."""

    ref: Ref
    values: frozenset[Value]


@dataclass(frozen=True)
class IsNull(Expr):
    """``column IS NULL`` (a float NaN is not null); ``Not(IsNull)`` is IS NOT NULL."""

    ref: Ref


@dataclass(frozen=True)
class Unknown(Expr):
    """A part of a filter that is not understood: it might match any row, and so might
    its negation. ``reason`` says what it was, for explain output and tests."""

    reason: str


TRUE = AlwaysTrue()
FALSE = AlwaysFalse()


# -- simplifying constructors ---------------------------------------------------------


def and_(*children: Expr) -> Expr:
    """The conjunction, flattened; ``AlwaysTrue`` dropped, ``AlwaysFalse`` absorbs."""
    return _junction(And, children, absorbing=FALSE, neutral=TRUE)


def or_(*children: Expr) -> Expr:
    """The disjunction, flattened; ``AlwaysFalse`` dropped, ``AlwaysTrue`` absorbs."""
    return _junction(Or, children, absorbing=TRUE, neutral=FALSE)


def _junction(kind: type[And] | type[Or], children: Iterable[Expr], absorbing: Expr, neutral: Expr) -> Expr:
    out: list[Expr] = []
    for c in children:
        if c == absorbing:
            return absorbing
        if isinstance(c, kind):
            out.extend(c.children)
        elif c != neutral:
            out.append(c)
    if not out:
        return neutral
    return out[0] if len(out) == 1 else kind(tuple(out))


def not_(child: Expr) -> Expr:
    """The negation; constants flip and a double negation cancels (exact in three-valued
    logic). Other negations stay as they are: see :func:`push_not`."""
    if isinstance(child, AlwaysTrue):
        return FALSE
    if isinstance(child, AlwaysFalse):
        return TRUE
    if isinstance(child, Not):
        return child.child
    return Not(child)


def eq(column: str, value: Value | None) -> Compare:
    return Compare(Op.EQ, Ref(column), value)


def is_in(column: str, values: Iterable[Value | None]) -> Expr:
    """``column IN (values)`` in SQL: no values is ``AlwaysFalse``, one is ``=``, and a
    null among them adds ``= NULL`` (never true; it makes ``NOT IN`` never true)."""
    vals = list(values)
    present = frozenset(v for v in vals if v is not None)
    base: Expr = (
        FALSE if not present else eq(column, next(iter(present))) if len(present) == 1 else In(Ref(column), present)
    )
    return or_(base, eq(column, None)) if any(v is None for v in vals) else base


def is_null(column: str) -> IsNull:
    return IsNull(Ref(column))


def not_null(column: str) -> Expr:
    return Not(IsNull(Ref(column)))


def push_not(expr: Expr) -> Expr:
    """An equivalent tree whose ``Not`` only wraps ``In``, ``IsNull`` and ``Unknown``:
    De Morgan through ``And``/``Or``, ``not (a < v)`` as ``a >= v``.

    Exact in three-valued logic, except that a float NaN compares false both ways
    (``not (x < 1)`` holds for NaN, ``x >= 1`` does not): bound-based pruning is still
    sound because float bounds are only given for files without NaN (:class:`.ColumnBounds`).
    """
    return _push(expr, negate=False)


def _push(expr: Expr, negate: bool) -> Expr:
    if isinstance(expr, Not):
        return _push(expr.child, not negate)
    if isinstance(expr, And):
        parts = [_push(c, negate) for c in expr.children]
        return or_(*parts) if negate else and_(*parts)
    if isinstance(expr, Or):
        parts = [_push(c, negate) for c in expr.children]
        return and_(*parts) if negate else or_(*parts)
    if not negate:
        return expr
    if isinstance(expr, Compare):
        return Compare(expr.op.negated, expr.ref, expr.value)
    return not_(expr)


# -- visitors -------------------------------------------------------------------------


class Visitor(ABC, Generic[T]):
    """One consumer of the tree: a method per kind of node, given its children's results.

    :func:`visit` calls :meth:`not_` with the child's result; :func:`visit_nnf` never
    does, it calls :meth:`not_in`, :meth:`not_null` and :meth:`unknown` for the negated
    leaves instead (by default built from :meth:`not_`).
    """

    @abstractmethod
    def always_true(self) -> T: ...

    @abstractmethod
    def always_false(self) -> T: ...

    @abstractmethod
    def and_(self, children: list[T]) -> T: ...

    @abstractmethod
    def or_(self, children: list[T]) -> T: ...

    @abstractmethod
    def compare(self, node: Compare) -> T: ...

    @abstractmethod
    def is_in(self, node: In) -> T: ...

    @abstractmethod
    def is_null(self, node: IsNull) -> T: ...

    @abstractmethod
    def unknown(self, node: Unknown) -> T: ...

    def not_(self, child: T) -> T:
        raise NotImplementedError(f"{type(self).__name__} only walks trees with negations pushed down (visit_nnf)")

    def not_in(self, node: In) -> T:
        return self.not_(self.is_in(node))

    def not_null(self, node: IsNull) -> T:
        return self.not_(self.is_null(node))


def visit(expr: Expr, visitor: Visitor[T]) -> T:
    """Fold the tree as it is, bottom-up."""
    if isinstance(expr, And):
        return visitor.and_([visit(c, visitor) for c in expr.children])
    if isinstance(expr, Or):
        return visitor.or_([visit(c, visitor) for c in expr.children])
    if isinstance(expr, Not):
        return visitor.not_(visit(expr.child, visitor))
    return _leaf(expr, visitor)


def visit_nnf(expr: Expr, visitor: Visitor[T]) -> T:
    """Fold the tree after :func:`push_not`, with the negated leaves as their own kinds."""
    return _visit_pushed(push_not(expr), visitor)


def _visit_pushed(expr: Expr, visitor: Visitor[T]) -> T:
    if isinstance(expr, And):
        return visitor.and_([_visit_pushed(c, visitor) for c in expr.children])
    if isinstance(expr, Or):
        return visitor.or_([_visit_pushed(c, visitor) for c in expr.children])
    if isinstance(expr, Not):
        child = expr.child
        if isinstance(child, In):
            return visitor.not_in(child)
        if isinstance(child, IsNull):
            return visitor.not_null(child)
        if isinstance(child, Unknown):
            return visitor.unknown(child)
        raise TypeError(f"push_not left a negation of {type(child).__name__}")
    return _leaf(expr, visitor)


def _leaf(expr: Expr, visitor: Visitor[T]) -> T:
    if isinstance(expr, Compare):
        return visitor.compare(expr)
    if isinstance(expr, In):
        return visitor.is_in(expr)
    if isinstance(expr, IsNull):
        return visitor.is_null(expr)
    if isinstance(expr, Unknown):
        return visitor.unknown(expr)
    if isinstance(expr, AlwaysTrue):
        return visitor.always_true()
    if isinstance(expr, AlwaysFalse):
        return visitor.always_false()
    raise TypeError(f"not an expression node: {expr!r}")


class _Columns(Visitor[frozenset[str]]):
    def always_true(self) -> frozenset[str]:
        return frozenset()

    always_false = always_true

    def and_(self, children: list[frozenset[str]]) -> frozenset[str]:
        return frozenset().union(*children)

    or_ = and_

    def not_(self, child: frozenset[str]) -> frozenset[str]:
        return child

    def compare(self, node: Compare) -> frozenset[str]:
        return frozenset((node.ref.name,))

    def is_in(self, node: In) -> frozenset[str]:
        return frozenset((node.ref.name,))

    def is_null(self, node: IsNull) -> frozenset[str]:
        return frozenset((node.ref.name,))

    def unknown(self, node: Unknown) -> frozenset[str]:
        return frozenset()


def columns(expr: Expr) -> frozenset[str]:
    """The columns the understood parts of ``expr`` name (an ``Unknown`` names none)."""
    return visit(expr, _Columns())
