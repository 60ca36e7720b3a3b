"""Spark SQL filter text as lakeline's expression tree (:mod:`.filters` explains what
is read and why): the user's own text, tokenized and read by a small recursive-descent
parser; a literal is kept only where Spark and Arrow agree on its comparison with the
column (:func:`fit`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

import pyarrow as pa

from ...indexes.expressions import Compare, Expr, Op, Ref, Unknown, Value, and_, is_in, is_null, not_, or_
from ...timeline.errors import InvalidFilterError

_TOKEN = re.compile(
    r"""\s*(?:(?P<num>-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)|(?P<str>'(?:[^']|'')*')|"""
    r"""(?P<bq>`[^`]+`)|(?P<op><=>|<=|>=|<>|!=|==|=|<|>|\(|\)|,)|(?P<word>[A-Za-z_][\w.]*))"""
)
_COMPARE = {"=": Op.EQ, "==": Op.EQ, "!=": Op.NE, "<>": Op.NE, "<": Op.LT, "<=": Op.LE, ">": Op.GT, ">=": Op.GE}
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


class _Untranslatable(InvalidFilterError):
    """Text this parser does not read: the whole filter is left untranslated."""


@dataclass(frozen=True)
class Col:
    """An operand naming a column of the schema."""

    name: str


@dataclass(frozen=True)
class Lit:
    value: Value | None


@dataclass(frozen=True)
class Other:
    """An operand that is neither a column nor a literal lakeline reads."""

    what: str


Operand = Col | Lit | Other


def parse_sql(text: str, columns: dict[str, str], schema: pa.Schema) -> Expr | None:
    try:
        parser = _Parser(_tokens(text), columns, schema)
        expr = parser.disjunction()
    except (_Untranslatable, ValueError, IndexError):
        return None
    return expr if parser.pos == len(parser.tokens) else None


# -- literals against columns ---------------------------------------------------------


def compare(op: Op, column: str, value: Value | None, schema: pa.Schema) -> Expr:
    """``column op value`` when Spark and Arrow agree on it, else ``Unknown``."""
    if value is None:
        return Compare(op, Ref(column), None)  # never true in Spark either
    lit = fit(value, schema.field(column).type)
    if lit is None:
        return Unknown(f"{column} compared with {value!r} of another kind")
    return Compare(op, Ref(column), lit)


def fit(value: Value, typ: pa.DataType) -> Value | None:
    """``value`` as the column's kind of literal, or None when Spark would cast."""
    if pa.types.is_integer(typ) or pa.types.is_decimal(typ):
        ok = isinstance(value, int | Decimal) or (isinstance(value, float) and value == value)
        return value if ok and not isinstance(value, bool) else None
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        return value if isinstance(value, str) else None
    if pa.types.is_boolean(typ):
        return value if isinstance(value, bool) else None
    if pa.types.is_date(typ):
        if isinstance(value, str) and ISO_DATE.fullmatch(value):
            try:
                return date.fromisoformat(value)
            except ValueError:
                return None
        return value if isinstance(value, date) and type(value) is date else None
    return None  # floats (NaN), timestamps (session time zone), binary, nested


def in_list(column: str, values: list[Value | None], schema: pa.Schema) -> Expr:
    fitted = [None if v is None else fit(v, schema.field(column).type) for v in values]
    if any(f is None and v is not None for f, v in zip(fitted, values)):
        return Unknown(f"{column} IN values of another kind")
    return is_in(column, fitted)


# -- SQL text ---------------------------------------------------------------------------


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
    def __init__(self, tokens: list[tuple[str, str]], columns: dict[str, str], schema: pa.Schema) -> None:
        self.tokens, self.columns, self.schema, self.pos = tokens, columns, schema, 0

    def peek(self, word: str) -> bool:
        return self.pos < len(self.tokens) and self.tokens[self.pos][1].upper() == word

    def take(self, word: str) -> None:
        if not self.peek(word):
            raise _Untranslatable(word)
        self.pos += 1

    def disjunction(self) -> Expr:
        parts = [self.conjunction()]
        while self.peek("OR"):
            self.pos += 1
            parts.append(self.conjunction())
        return or_(*parts)

    def conjunction(self) -> Expr:
        parts = [self.negation()]
        while self.peek("AND"):
            self.pos += 1
            parts.append(self.negation())
        return and_(*parts)

    def negation(self) -> Expr:
        if self.peek("NOT"):
            self.pos += 1
            return not_(self.negation())
        return self.predicate()

    def predicate(self) -> Expr:
        if self.peek("("):
            self.pos += 1
            inner = self.disjunction()
            self.take(")")
            return inner
        left = self.operand()
        if self.peek("IS"):
            self.pos += 1
            negated = self.peek("NOT")
            self.pos += negated
            self.take("NULL")
            expr: Expr = is_null(left.name) if isinstance(left, Col) else Unknown("IS NULL of a non-column")
            return not_(expr) if negated else expr
        negated = self.peek("NOT")
        self.pos += negated
        if self.peek("IN"):
            self.pos += 1
            self.take("(")
            values = [self.operand()]
            while self.peek(","):
                self.pos += 1
                values.append(self.operand())
            self.take(")")
            if isinstance(left, Col) and all(isinstance(v, Lit) for v in values):
                expr = in_list(left.name, [v.value for v in values if isinstance(v, Lit)], self.schema)
            else:
                expr = Unknown("IN over something other than a column and literals")
            return not_(expr) if negated else expr
        if self.peek("BETWEEN"):
            self.pos += 1
            lo = self.operand()
            self.take("AND")
            hi = self.operand()
            if isinstance(left, Col) and isinstance(lo, Lit) and isinstance(hi, Lit):
                expr = and_(
                    compare(Op.GE, left.name, lo.value, self.schema), compare(Op.LE, left.name, hi.value, self.schema)
                )
            else:
                expr = Unknown("BETWEEN over something other than a column and literals")
            return not_(expr) if negated else expr
        if negated:
            raise _Untranslatable("NOT")
        kind, op = self.tokens[self.pos]
        if kind != "op" or op not in _COMPARE:
            raise _Untranslatable(op)  # <=>, or no operator: a syntax lakeline does not read
        self.pos += 1
        right = self.operand()
        if isinstance(left, Col) and isinstance(right, Lit):
            return compare(_COMPARE[op], left.name, right.value, self.schema)
        if isinstance(right, Col) and isinstance(left, Lit):
            return compare(_COMPARE[op].flipped, right.name, left.value, self.schema)
        return Unknown(f"{op} between {left} and {right}")  # column vs column, a function...

    def operand(self) -> Operand:
        kind, text = self.tokens[self.pos]
        self.pos += 1
        if kind == "num":
            return Lit(float(text) if any(c in text for c in ".eE") else int(text))
        if kind == "str":
            return Lit(text[1:-1].replace("''", "'"))
        if kind == "bq":
            return self._column(text[1:-1])
        if kind == "word":
            upper = text.upper()
            if upper in ("TRUE", "FALSE"):
                return Lit(upper == "TRUE")
            if upper == "NULL":
                return Lit(None)
            if upper == "DATE" and self.pos < len(self.tokens) and self.tokens[self.pos][0] == "str":
                raw = self.operand()
                return Lit(date.fromisoformat(str(raw.value))) if isinstance(raw, Lit) else raw
            if upper == "TIMESTAMP" and self.pos < len(self.tokens) and self.tokens[self.pos][0] == "str":
                self.pos += 1
                return Other("a timestamp literal")
            if self.peek("("):
                raise _Untranslatable(text)  # a function call: its arguments are not parsed
            return self._column(text)
        raise _Untranslatable(text)

    def _column(self, name: str) -> Operand:
        real = self.columns.get(name.lower())
        return Col(real) if real is not None else Other(name)  # a nested field, a typo: Spark decides
