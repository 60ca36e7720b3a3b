"""A Spark filter (SQL text or a ``Column``) as an Arrow expression, for pruning only.

``lakeline.spark.read(spark, path, filter=...)`` plans on the driver which file slices
can hold matching rows (partitions, key ranges, column stats, bloom filters: the local
``Scan``'s pruning), and Spark then applies the filter itself to the rows read. So
this translation may give up (None: nothing is pruned) but must never be stricter than
Spark's filter.

Both kinds of filter become lakeline's expression tree (:mod:`lakeline.indexes.expressions`):

* SQL text is the user's own input: a small recursive-descent parser over its tokens
  reads ``column <op> literal`` (``=``, ``==``, ``!=``, ``<>``, ``<``, ``<=``, ``>``,
  ``>=``, either side), ``IN``, ``NOT IN``, ``IS [NOT] NULL``, ``BETWEEN``, ``AND``,
  ``OR``, ``NOT`` and parentheses, over literals (numbers, 'strings', TRUE/FALSE,
  NULL, DATE '...'); a predicate it cannot read (a function, ``<=>``, column against
  column) is an ``Unknown`` node, text it cannot tokenize or parse is untranslated;
* a ``Column`` is taken apart structurally, never through its printed form: its
  ``ColumnNode`` (``column._jc.node()``, classic pyspark 4) is walked through py4j
  (``UnresolvedFunction`` name and arguments, ``Literal`` value, ``UnresolvedAttribute``
  name parts; an ``expr(...)`` string is the SQL text above). Anything else, or a
  Spark Connect column, is ``Unknown``.

A comparison is understood only where Spark and Arrow agree on it: the literal is of
the column's kind (numbers for integer and decimal columns, strings, booleans, dates;
a 'yyyy-mm-dd' string against a date column is the date Spark casts it to); float
columns (Spark orders NaN above every number, Arrow compares it false) and timestamps
(Spark reads a literal in the session time zone) are ``Unknown``, like ``<=>``.

The tree then becomes Arrow *widened*: negations are pushed to the leaves and every
``Unknown`` left is ``true``, which only admits more rows, so an unknown part never
hides a row (Spark filters again); ``IN`` is Arrow's ``is_in``, whose only difference
from SQL's (null rows under a negation) is wider too. A filter that widens to ``true``
is None.

Why not Spark's own filter pushdown (``DataSourceReader.pushFilters``): pyspark 4.3's
JVM side keeps the plan a pushdown returned (the reader's partitions and its ``read``)
on the relation's provider (``PythonDataSourceV2.setReadInfo``), and every scan of that
relation that pushes nothing reads with it: a later unfiltered query on the same
DataFrame or view reads only the slices another query's filter kept, and of a union of
two filters of one DataFrame one scan reads with the other's pruning. A pruning reader
cannot tell the query it serves from another (Spark hands it no filter at read time),
so no pruning through ``pushFilters`` is correct there; lakeline prunes in
``lakeline.spark.read(filter=...)`` instead. tests/spark/source/test_views_and_options.py
::test_pyspark_keeps_pushed_read_plans_on_the_relation proves it on the installed
pyspark with a pruning probe source, and fails once pyspark plans each scan alone (as
Spark's main branch does: read info scoped to the scan), when pushdown can be enabled.
"""

from __future__ import annotations

import functools
import operator
from datetime import date
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from py4j.protocol import Py4JError

from ...indexes.expressions import (
    FALSE,
    TRUE,
    And,
    Expr,
    In,
    Not,
    Op,
    Or,
    Unknown,
    and_,
    is_null,
    not_,
    or_,
    push_not,
    to_arrow,
)
from ...timeline.errors import InvalidFilterError
from .sql import ISO_DATE, Col, Lit, Operand, Other, compare, in_list, parse_sql


def to_arrow_filter(filter: Any, schema: pa.Schema) -> pc.Expression | None:
    """An Arrow expression that holds wherever the Spark SQL filter or ``Column`` does,
    over ``schema``'s columns; None when nothing of it can prune."""
    if filter is None:
        return None
    tree = filter_tree(filter, schema)
    return None if tree is None else widened_arrow(tree, schema)


def filter_tree(filter: Any, schema: pa.Schema) -> Expr | None:
    """The tree of a Spark SQL filter or ``Column``; None when SQL text does not parse."""
    columns = {f.name.lower(): f.name for f in schema}
    if isinstance(filter, str):
        return parse_sql(filter, columns, schema)
    try:
        node = filter._jc.node()
    except (AttributeError, Py4JError):  # Spark Connect, an older pyspark, not a Column: nothing to walk
        return Unknown(f"a {type(filter).__name__} that is not a classic pyspark 4 Column")
    try:
        return _ColumnNodes(columns, schema).predicate(node)
    except (Py4JError, AttributeError, LookupError, TypeError, ValueError) as e:  # a node unlike the walk expects
        return Unknown(f"a Column node lakeline cannot walk ({type(e).__name__})")


# -- the tree as a wider Arrow filter -------------------------------------------------


def widened_arrow(tree: Expr, schema: pa.Schema) -> pc.Expression | None:
    """``tree`` with negations pushed down and ``Unknown`` as true, in Arrow; None when
    that is always true (nothing to prune)."""
    wide = _widen(push_not(tree))
    if wide == TRUE:
        return None
    try:
        return _arrow(wide, schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError, InvalidFilterError):
        return None


def _widen(expr: Expr) -> Expr:
    if isinstance(expr, And):
        return and_(*(_widen(c) for c in expr.children))
    if isinstance(expr, Or):
        return or_(*(_widen(c) for c in expr.children))
    if isinstance(expr, Unknown) or (isinstance(expr, Not) and isinstance(expr.child, Unknown)):
        return TRUE
    return expr


def _arrow(expr: Expr, schema: pa.Schema) -> pc.Expression:
    if isinstance(expr, And):
        return functools.reduce(operator.and_, (_arrow(c, schema) for c in expr.children))
    if isinstance(expr, Or):
        return functools.reduce(operator.or_, (_arrow(c, schema) for c in expr.children))
    if isinstance(expr, In):
        return pc.field(expr.ref.name).isin(_value_set(expr, schema))
    if isinstance(expr, Not) and isinstance(expr.child, In):
        return ~pc.field(expr.child.ref.name).isin(_value_set(expr.child, schema))
    return to_arrow(expr, schema)  # comparisons, null checks, constants


def _value_set(node: In, schema: pa.Schema) -> pa.Array:
    return pa.array(sorted(node.values, key=repr), schema.field(node.ref.name).type)


# -- Column nodes -----------------------------------------------------------------------

_NODE_COMPARE = {"=": Op.EQ, "==": Op.EQ, "!=": Op.NE, "<>": Op.NE, "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE}


class _ColumnNodes:
    """Walks a pyspark 4 ``ColumnNode`` tree through py4j (classes of
    ``org.apache.spark.sql.internal``)."""

    def __init__(self, columns: dict[str, str], schema: pa.Schema) -> None:
        self.columns, self.schema = columns, schema

    def predicate(self, node: Any) -> Expr:
        kind = node.getClass().getSimpleName()
        if kind == "SqlExpression":  # F.expr("..."): the user's SQL text
            tree = parse_sql(str(node.expression()), self.columns, self.schema)
            return Unknown("F.expr text lakeline does not parse") if tree is None else tree
        if kind == "Literal":
            value = node.value()
            return TRUE if value is True else FALSE if value is False else Unknown(f"literal {value!r} as a filter")
        if kind != "UnresolvedFunction" or node.isDistinct() or node.isUserDefinedFunction():
            return Unknown(f"a {kind} node")
        name = str(node.functionName()).lower()
        args = _seq(node.arguments())
        if name == "and" and args:
            return and_(*(self.predicate(a) for a in args))
        if name == "or" and args:
            return or_(*(self.predicate(a) for a in args))
        if name in ("!", "not") and len(args) == 1:
            return not_(self.predicate(args[0]))
        if name in ("isnull", "isnotnull") and len(args) == 1:
            col = self.operand(args[0])
            if not isinstance(col, Col):
                return Unknown(f"{name} of a non-column")
            return is_null(col.name) if name == "isnull" else not_(is_null(col.name))
        if name == "in" and args:
            col, values = self.operand(args[0]), [self.operand(a) for a in args[1:]]
            if not isinstance(col, Col) or not all(isinstance(v, Lit) for v in values):
                return Unknown("in over something other than a column and literals")
            return in_list(col.name, [v.value for v in values if isinstance(v, Lit)], self.schema)
        if name in _NODE_COMPARE and len(args) == 2:
            left, right = self.operand(args[0]), self.operand(args[1])
            if isinstance(left, Col) and isinstance(right, Lit):
                return compare(_NODE_COMPARE[name], left.name, right.value, self.schema)
            if isinstance(right, Col) and isinstance(left, Lit):
                return compare(_NODE_COMPARE[name].flipped, right.name, left.value, self.schema)
        return Unknown(f"function {name}")  # <=>, startswith, arithmetic, column vs column...

    def operand(self, node: Any) -> Operand:
        kind = node.getClass().getSimpleName()
        if kind == "UnresolvedAttribute":
            parts = [str(p) for p in _seq(node.nameParts())]
            real = self.columns.get(parts[0].lower()) if len(parts) == 1 else None
            return Col(real) if real is not None else Other(".".join(parts))
        if kind == "Literal":
            return _literal(node.value())
        return Other(kind)


def _seq(seq: Any) -> list[Any]:
    """A Scala ``Seq`` (through py4j) as a list."""
    return [seq.apply(i) for i in range(seq.size())]


def _literal(value: Any) -> Operand:
    """A ``Literal`` node's value: Python's own for numbers, strings, booleans and null;
    a ``java.time.LocalDate`` (or ``java.sql.Date``) is a date; anything else is not read."""
    if value is None or isinstance(value, bool | int | float | str):
        return Lit(value)
    try:
        cls = str(value.getClass().getName())
    except (AttributeError, Py4JError):
        return Other(type(value).__name__)
    if cls in ("java.time.LocalDate", "java.sql.Date"):
        text = str(value.toString())
        if ISO_DATE.fullmatch(text):
            return Lit(date.fromisoformat(text))
    return Other(cls)
