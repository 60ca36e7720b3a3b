"""A pyarrow ``pc.Expression`` as a :mod:`.tree`, through Substrait.

Arrow has no public API to take an expression apart, and its printed form is no
contract. Its documented way out is Substrait: ``pyarrow.substrait.serialize_expressions``
writes an ``ExtendedExpression`` protobuf, which :mod:`.substrait` reads (the schema
given to it without field metadata: :func:`without_metadata`). Field numbers
below are those of Substrait 0.44 (the version pyarrow declares), files
``extended_expression.proto``, ``extensions/extensions.proto``, ``algebra.proto`` and
``type.proto``.

The tree is for pruning; a user's filter is always *evaluated* as the user's own
expression. So the translation is exact where it can be and otherwise only ever wider
(it may say a row matches when it does not, never the reverse), in both polarities:

* whatever is not understood becomes :class:`~.tree.Unknown` ("might match"): an
  unknown function (``is_nan``, ``starts_with``, arithmetic, ...), a column compared
  with a column, a cast of a column (its values may differ from the column's: overflow,
  truncation), nested fields, literals of other types (time, interval, ns timestamps);
  an expression pyarrow cannot serialize at all (safe casts, ``and_`` without Kleene
  logic, ``is_null(nan_is_null=True)``) is one ``Unknown`` as a whole; so is a call
  with a function option or a field the reader does not understand (a later pyarrow
  may write ``nan_is_null`` as an option of ``is_null``): a call read only in part is
  never pruned on;
* a cast of a literal is folded into the literal's value (pyarrow's unsafe cast);
* ``is_in`` is written as a ``SingularOrList`` that drops its null handling: a null
  row *matches* ``is_in`` with ``null_matching_behavior=MATCH`` when the value set holds
  null, and ``~is_in`` matches a null row whenever ``is_in`` is false for it, unlike
  SQL's ``IN``. So it becomes ``In`` plus ``IsNull`` when the list holds a null, and,
  under an odd number of negations, ``In and not null`` (whose negation admits the
  null rows). Exact for the common cases, wider for ``skip_nulls=True`` with a null.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.errors import InvalidFilterError
from ...timeline.field_ids import strip_ids
from .substrait import MalformedSubstraitError, Message
from .tree import FALSE, TRUE, Compare, Expr, Op, Ref, Unknown, Value, and_, is_in, is_null, not_, not_null, or_

_COMPARISONS = {"equal": Op.EQ, "not_equal": Op.NE, "lt": Op.LT, "lte": Op.LE, "gt": Op.GT, "gte": Op.GE}
#: The functions the decoder translates; any other call is ``Unknown`` whatever it holds.
_TRANSLATED = frozenset({"and", "or", "not", "is_null", "is_not_null", *_COMPARISONS})
_EPOCH = datetime(1970, 1, 1)


def from_arrow(expr: pc.Expression, schema: pa.Schema) -> Expr:
    """The tree of ``expr`` over ``schema``'s columns; never raises: whatever cannot be
    read (the whole expression, if pyarrow cannot serialize it) is ``Unknown``."""
    try:
        from pyarrow import substrait
    except ImportError:  # a pyarrow built without Substrait: no pruning, still correct
        return Unknown(f"pyarrow without Substrait: {expr}")
    try:
        buf = substrait.serialize_expressions([expr], ["filter"], without_metadata(schema))
    except (pa.ArrowException, TypeError, ValueError, KeyError) as e:
        return Unknown(f"not serializable to Substrait ({type(e).__name__}: {e}): {expr}")
    try:
        return decode(bytes(buf), schema)
    except InvalidFilterError as e:  # MalformedSubstraitError, or an operand not caught where read
        return Unknown(f"unreadable Substrait ({e}): {expr}")


def without_metadata(schema: pa.Schema) -> pa.Schema:
    """``schema`` with no field metadata at any depth, as the Substrait serializer takes
    it: pyarrow refuses a field inside a struct that carries metadata ("substrait::Type::
    Struct does not support field metadata"), and every nested field of a lakeline table
    carries its field id, so a table with a struct column had no filter read (no pruning
    at all). Substrait needs none of it: a column is referenced by its position, which
    :func:`decode` reads back against the schema itself (names and types unchanged)."""
    return pa.schema([f.remove_metadata().with_type(strip_ids(f.type)) for f in schema])


def decode(buf: bytes, schema: pa.Schema) -> Expr:
    """The tree of the one expression of a serialized ``ExtendedExpression``.

    Raises:
        MalformedSubstraitError: not such a message, or not exactly one expression.
    """
    msg = Message(buf)
    functions: dict[int, str] = {}
    for decl in msg.messages(2):  # ExtendedExpression.extensions
        if decl.has(3):  # SimpleExtensionDeclaration.extension_function
            fn = decl.message(3)
            # ExtensionFunction.function_anchor = 2, .name = 3 (maybe "name:signature")
            functions[fn.uint(2)] = fn.string(3).split(":", 1)[0]
    refs = msg.messages(3)  # ExtendedExpression.referred_expr
    if len(refs) != 1 or not refs[0].has(1):  # ExpressionReference.expression
        raise MalformedSubstraitError("expected exactly one expression")
    return _Decoder(functions, schema).predicate(refs[0].message(1), negated=False)


@dataclass(frozen=True)
class _Lit:
    value: Value | None


class _Unsupported(InvalidFilterError):
    """Internal: an operand the tree cannot express (becomes ``Unknown``)."""


class _Decoder:
    def __init__(self, functions: dict[int, str], schema: pa.Schema) -> None:
        self.functions, self.schema = functions, schema

    def predicate(self, e: Message, negated: bool) -> Expr:
        """``e`` as a boolean; ``negated``: under an odd number of ``not``."""
        kind = _kind(e)
        if kind == 1:  # Expression.literal
            operand = self.operand(e)
            if not isinstance(operand, _Lit):
                return Unknown("a literal of an unsupported type as a filter")
            lit = operand.value
            return TRUE if lit is True else FALSE if lit is False else Unknown(f"literal {lit!r} as a filter")
        if kind == 2:  # Expression.selection: a bare boolean column
            ref = self.column(e.message(2))
            if ref is not None and pa.types.is_boolean(self.schema.field(ref.name).type):
                return Compare(Op.EQ, ref, True)
            return Unknown("a non-boolean column as a filter")
        if kind == 3:
            return self.function(e.message(3), negated)
        if kind == 8:
            return self.singular_or_list(e.message(8), negated)
        return Unknown(f"Substrait expression kind {kind}")

    def function(self, f: Message, negated: bool) -> Expr:
        # ScalarFunction.function_reference = 1, .arguments = 4; FunctionArgument.value = 3
        name = self.functions.get(f.uint(1), f"function #{f.uint(1)}")
        if name not in _TRANSLATED:
            return Unknown(f"function {name}")
        unread = _unread_part(f, name)
        if unread is not None:
            return Unknown(unread)
        args = [a.message(3) if a.has(3) else None for a in f.messages(4)]
        if None in args:
            return Unknown(f"{name} with a type or enum argument")
        exprs = [a for a in args if a is not None]
        if name in ("and", "or") and exprs:
            parts = [self.predicate(a, negated) for a in exprs]
            return and_(*parts) if name == "and" else or_(*parts)
        if name == "not" and len(exprs) == 1:
            return not_(self.predicate(exprs[0], not negated))
        if name in ("is_null", "is_not_null") and len(exprs) == 1:
            ref = self.operand(exprs[0])
            if not isinstance(ref, Ref):
                return Unknown(f"{name} of an expression")
            return is_null(ref.name) if name == "is_null" else not_null(ref.name)
        if name in _COMPARISONS and len(exprs) == 2:
            left, right = self.operand(exprs[0]), self.operand(exprs[1])
            op = _COMPARISONS[name]
            if isinstance(left, Ref) and isinstance(right, _Lit):
                return Compare(op, left, right.value)
            if isinstance(left, _Lit) and isinstance(right, Ref):
                return Compare(op.flipped, right, left.value)
            return Unknown(f"{name} of operands other than a column and a literal")
        return Unknown(f"function {name}")

    def singular_or_list(self, s: Message, negated: bool) -> Expr:
        # SingularOrList.value = 1, .options = 2
        ref = self.operand(s.message(1))
        options = [self.operand(o) for o in s.messages(2)]
        if not isinstance(ref, Ref) or not all(isinstance(o, _Lit) for o in options):
            return Unknown("is_in of an expression or with non-literal options")
        values = [o.value for o in options if isinstance(o, _Lit)]
        present = [v for v in values if v is not None]
        if negated:  # its negation must admit null rows (see the module docstring)
            return and_(is_in(ref.name, present), not_null(ref.name))
        return (
            or_(is_in(ref.name, present), is_null(ref.name)) if len(present) < len(values) else is_in(ref.name, present)
        )

    def operand(self, e: Message) -> Ref | _Lit | None:
        """A column, a literal, or None (anything else)."""
        kind = _kind(e)
        try:
            if kind == 2:
                return self.column(e.message(2))
            if kind == 1:
                return _Lit(self.literal(e.message(1)))
            if kind == 11:  # Expression.cast: Cast.type = 1, .input = 2
                cast = e.message(11)
                inner = self.operand(cast.message(2))
                if isinstance(inner, _Lit):
                    return _Lit(_cast(inner.value, _arrow_type(cast.message(1))))
        except _Unsupported:
            return None
        return None

    def column(self, ref: Message) -> Ref | None:
        # FieldReference.direct_reference = 1 (ReferenceSegment.struct_field = 2:
        # StructField.field = 1, .child = 2), root_type: .root_reference = 4
        if not ref.has(1) or not ref.has(4):
            return None
        segment = ref.message(1)
        if segment.first_of(1, 2, 3) != 2:
            return None
        field = segment.message(2)
        index = field.sint(1)
        if field.has(2) or not 0 <= index < len(self.schema):
            return None  # a nested field
        return Ref(self.schema.field(index).name)

    def literal(self, lit: Message) -> Value | None:
        """A ``Expression.Literal``'s Python value (None: the typed null literal)."""
        kind = lit.first_of(*_LITERALS)
        if kind is None:
            raise _Unsupported("a literal of an unknown type")
        return _LITERALS[kind](lit, kind)


#: ``ScalarFunction`` fields the decoder reads: function_reference 1, output_type 3 (the
#: call's result type, boolean for every predicate it translates), arguments 4, options 5.
#: Any other (the deprecated ``args`` = 2, a field of a later Substrait) means the call
#: would be read only in part.
_CALL_FIELDS = frozenset({1, 3, 4, 5})

#: Function options whose behaviours leave a call as the decoder translates it: function
#: -> option name -> the preferences that mean the plain call. ``is_null`` with
#: ``nan_is_null`` false is SQL's ``IS NULL``; true would also match NaN.
_PLAIN_OPTIONS: dict[str, dict[str, frozenset[str]]] = {"is_null": {"nan_is_null": frozenset({"false", "FALSE"})}}


def _unread_part(f: Message, name: str) -> str | None:
    """Why the call ``f`` (to function ``name``) cannot be read whole, or None if it can.

    A call is translated only when every field and every option of it is understood:
    an option changes what the call matches (``is_null(nan_is_null=True)`` also matches
    NaN), so a call read without one could prune a file that holds a match. An option
    is understood only when each behaviour the producer allows (``FunctionOption.name``
    = 1, ``.preference`` = 2, repeated, any of which a consumer may pick) is one under
    which the translation holds.
    """
    extra = sorted(set(f.fields) - _CALL_FIELDS)
    if extra:
        return f"{name} with Substrait fields {extra} the reader does not know"
    plain = _PLAIN_OPTIONS.get(name, {})
    for option in f.messages(5):
        key, preferences = option.string(1), option.strings(2)
        allowed = plain.get(key)
        if allowed is None or not preferences or not set(preferences) <= allowed:
            return f"{name} with option {key}={'|'.join(preferences) or '?'}"
    return None


def _kind(e: Message) -> int | None:
    """Which ``Expression.rex_type`` is set: literal 1, selection 2, scalar_function 3,
    window_function 5, if_then 6, switch_expression 7, singular_or_list 8,
    multi_or_list 9, cast 11, subquery 12, nested 13, enum 10 (deprecated)."""
    return e.first_of(1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13)


def _decimal(lit: Message, kind: int) -> Decimal:
    # Literal.Decimal: value = 1 (16 bytes, little-endian two's complement), scale = 3
    d = lit.message(kind)
    unscaled = int.from_bytes(d.blob(1), "little", signed=True)
    return Decimal(unscaled).scaleb(-d.sint(3))


def _micros(lit: Message, kind: int) -> datetime:
    try:
        value = _EPOCH + timedelta(microseconds=lit.sint(kind))
    except OverflowError as e:
        raise _Unsupported("a timestamp out of Python's range") from e
    return value.replace(tzinfo=UTC) if kind == 27 else value


def _date(lit: Message, kind: int) -> date:
    try:
        return date(1970, 1, 1) + timedelta(days=lit.sint(kind))
    except OverflowError as e:
        raise _Unsupported("a date out of Python's range") from e


#: Expression.Literal fields (Substrait 0.44): boolean 1, i8 2, i16 3, i32 5, i64 7,
#: fp32 10, fp64 11, string 12, binary 13, timestamp 14 (microseconds), date 16 (days),
#: fixed_char 21, var_char 22 (VarChar.value = 1), fixed_binary 23, decimal 24,
#: timestamp_tz 27 (microseconds, UTC), null 29. Other kinds are not supported.
_LITERALS: dict[int, Callable[[Message, int], Value | None]] = {
    1: lambda m, k: bool(m.uint(k)),
    2: Message.sint,
    3: Message.sint,
    5: Message.sint,
    7: Message.sint,
    10: Message.fp32,
    11: Message.fp64,
    12: Message.string,
    21: Message.string,
    13: Message.blob,
    23: Message.blob,
    14: _micros,
    27: _micros,
    16: _date,
    22: lambda m, k: m.message(k).string(1),
    24: _decimal,
    29: lambda m, k: None,
    **{k: lambda m, k: _unsupported(k) for k in (17, 19, 20, 25, 26, 28, 30, 31, 32, 33, 34, 35, 36, 37)},
}


def _unsupported(kind: int) -> Value:
    raise _Unsupported(f"a literal of kind {kind}")


#: Type kinds (Substrait 0.44 type.proto): bool 1, i8 2, i16 3, i32 5, i64 7, fp32 10,
#: fp64 11, string 12, binary 13, timestamp 14, date 16; decimal 24 (scale 1, precision 2).
_TYPES = {
    1: pa.bool_(),
    2: pa.int8(),
    3: pa.int16(),
    5: pa.int32(),
    7: pa.int64(),
    10: pa.float32(),
    11: pa.float64(),
    12: pa.string(),
    13: pa.binary(),
    14: pa.timestamp("us"),
    16: pa.date32(),
}


def _arrow_type(t: Message) -> pa.DataType:
    kind = t.first_of(*_TYPES, 24)
    if kind == 24:
        d = t.message(24)
        return pa.decimal128(d.sint(2), d.sint(1))
    if kind is None:
        raise _Unsupported("a cast to an unsupported type")
    return _TYPES[kind]


def _cast(value: Value | None, typ: pa.DataType) -> Value | None:
    """A literal cast as pyarrow casts it (Substrait only carries unsafe casts)."""
    try:
        result = pc.cast(pa.scalar(value), typ, safe=False).as_py()
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as e:
        raise _Unsupported(f"a literal cast to {typ}") from e
    if result is not None and not isinstance(result, int | float | str | bytes | date | Decimal):
        raise _Unsupported(f"a literal cast to {typ}")
    return result
