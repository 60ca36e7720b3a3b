"""A Spark filter (SQL text or a ``Column``) as an Arrow expression, for pruning only.

``lakeline.spark.read(spark, path, filter=...)`` plans on the driver which file slices
can hold matching rows (partitions, key ranges, column stats, bloom filters: the local
``Scan``'s pruning), and Spark then applies the filter itself to the rows read. So
this translation may give up (None: nothing is pruned) but must never be stricter than
Spark's filter. It understands the predicates pruning can use: ``column <op> literal``
(``=``, ``==``, ``!=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, either side), ``IN``,
``NOT IN``, ``IS [NOT] NULL``, ``BETWEEN``, ``AND``, ``OR``, ``NOT`` and parentheses,
over literals (numbers, 'strings', TRUE/FALSE, DATE '...', TIMESTAMP '...'). Anything
else makes the whole filter untranslated: one unknown function under an ``OR`` could
otherwise hide rows.

Why not Spark's own filter pushdown (``DataSourceReader.pushFilters``): in pyspark 4.3 a
reused DataFrame keeps the filters pushed by an earlier query (``df.filter(...).count()``
then ``df.count()`` gives the filtered count), so lakeline does not enable it; see
tests/spark/test_read.py::test_pyspark_filter_pushdown_bug_is_avoided.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_TOKEN = re.compile(r"""\s*(?:(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<str>'(?:[^']|'')*')|"""
                    r"""(?P<bq>`[^`]+`)|(?P<op><=>|<=|>=|<>|!=|==|=|<|>|\(|\)|,)|(?P<word>[A-Za-z_][\w.]*))""")
_COMPARE = {"=": "eq", "==": "eq", "!=": "ne", "<>": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}
_FLIP = {"eq": "eq", "ne": "ne", "lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}


class _Untranslatable(Exception):
    pass


def to_arrow_filter(filter: Any, schema: pa.Schema) -> pc.Expression | None:
    """The Arrow expression of a Spark SQL filter or Column over ``schema``'s columns;
    None when (any part of) it is not understood."""
    if filter is None:
        return None
    text = filter if isinstance(filter, str) else _column_text(filter)
    if text is None:
        return None
    try:
        parser = _Parser(_tokens(text), {f.name.lower(): f.name for f in schema})
        expr = parser.disjunction()
        if parser.pos != len(parser.tokens):
            return None
        return expr if isinstance(expr, pc.Expression) else None
    except (_Untranslatable, ValueError, IndexError, pa.ArrowException):
        return None


def _column_text(column: Any) -> str | None:
    """The SQL text of a ``Column`` (``Column<'(id > 5)'>``), or None."""
    m = re.fullmatch(r"Column<'(.*)'>", str(column), re.S)
    return m.group(1) if m else None


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise _Untranslatable(text[pos:])
        kind = m.lastgroup or ""
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], columns: dict[str, str]) -> None:
        self.tokens, self.columns, self.pos = tokens, columns, 0

    def peek(self, word: str) -> bool:
        return self.pos < len(self.tokens) and self.tokens[self.pos][1].upper() == word

    def take(self, word: str) -> None:
        if not self.peek(word):
            raise _Untranslatable(word)
        self.pos += 1

    def disjunction(self) -> pc.Expression:
        expr = self.conjunction()
        while self.peek("OR"):
            self.pos += 1
            expr = expr | self.conjunction()
        return expr

    def conjunction(self) -> pc.Expression:
        expr = self.negation()
        while self.peek("AND"):
            self.pos += 1
            expr = expr & self.negation()
        return expr

    def negation(self) -> pc.Expression:
        if self.peek("NOT"):
            self.pos += 1
            return ~self.negation()
        return self.predicate()

    def predicate(self) -> pc.Expression:
        if self.peek("("):
            self.pos += 1
            expr = self.disjunction()
            self.take(")")
            return expr
        left = self.operand()
        if self.peek("IS"):
            self.pos += 1
            negated = self.peek("NOT")
            self.pos += negated
            self.take("NULL")
            expr = _field(left).is_null()
            return ~expr if negated else expr
        negated = self.peek("NOT")
        self.pos += negated
        if self.peek("IN"):
            self.pos += 1
            self.take("(")
            values = [_literal(self.operand())]
            while self.peek(","):
                self.pos += 1
                values.append(_literal(self.operand()))
            self.take(")")
            expr = _field(left).isin(values)
            return ~expr if negated else expr
        if self.peek("BETWEEN"):
            self.pos += 1
            lo = _literal(self.operand())
            self.take("AND")
            hi = _literal(self.operand())
            expr = (_field(left) >= lo) & (_field(left) <= hi)
            return ~expr if negated else expr
        if negated:
            raise _Untranslatable("NOT")
        kind, op = self.tokens[self.pos]
        if kind != "op" or op not in _COMPARE:
            raise _Untranslatable(op)
        self.pos += 1
        right = self.operand()
        name = _COMPARE[op]
        if isinstance(left, pc.Expression) and not isinstance(right, pc.Expression):
            return getattr(left, f"__{name}__")(_literal(right))
        if isinstance(right, pc.Expression) and not isinstance(left, pc.Expression):
            return getattr(right, f"__{_FLIP[name]}__")(_literal(left))
        raise _Untranslatable(op)  # column vs column, literal vs literal

    def operand(self) -> Any:
        kind, text = self.tokens[self.pos]
        self.pos += 1
        if kind == "num":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "bq":
            return self._column(text[1:-1])
        if kind == "word":
            upper = text.upper()
            if upper in ("TRUE", "FALSE"):
                return upper == "TRUE"
            if upper in ("DATE", "TIMESTAMP") and self.pos < len(self.tokens) and self.tokens[self.pos][0] == "str":
                raw = self.operand()
                return date.fromisoformat(raw) if upper == "DATE" else datetime.fromisoformat(raw)
            return self._column(text)
        raise _Untranslatable(text)

    def _column(self, name: str) -> pc.Expression:
        real = self.columns.get(name.lower())
        if real is None:
            raise _Untranslatable(name)  # a function, a nested field, a typo: Spark decides
        return pc.field(real)


def _field(value: Any) -> pc.Expression:
    if not isinstance(value, pc.Expression):
        raise _Untranslatable(repr(value))
    return value


def _literal(value: Any) -> Any:
    if isinstance(value, pc.Expression):
        raise _Untranslatable("a column where a literal belongs")
    return value
