"""Function options in Substrait: a call read only in part is never pruned on (issue 45,
item 6).

A Substrait ``ScalarFunction`` carries options (``FunctionOption``: a name and the
behaviours the producer accepts, ``overflow=ERROR`` on pyarrow's ``add``). pyarrow 26
refuses to write ``is_null(nan_is_null=True)`` at all, so today that filter is one
``Unknown``; a later pyarrow that writes it as ``is_null`` with an option would, for a
reader that skips options, become plain ``IS NULL`` and prune every file without a null
(losing the NaN rows the user asked for). The messages here are pyarrow's own with one
field added by hand: what such a pyarrow would write.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeline.indexes.expressions import ColumnBounds, Unknown, is_null, might_match
from lakeline.indexes.expressions.from_arrow import decode
from lakeline.table import Table

SCHEMA = pa.schema([("x", pa.float64()), ("k", pa.int64())])
#: A file holding NaN and no null: ``is_null(x, nan_is_null=True)`` matches its NaN row.
NAN_NO_NULL = {"x": ColumnBounds(None, None, 0, 3)}


# -- a protobuf writer, just enough to add one field to a message pyarrow wrote ---------------


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _split(buf: bytes) -> list[tuple[int, bytes, bytes]]:
    """(field number, the whole encoded field, its payload for a length-delimited one)."""
    out, pos = [], 0
    while pos < len(buf):
        start = pos
        key, pos = _read_varint(buf, pos)
        wire = key & 7
        payload = b""
        if wire == 0:
            _, pos = _read_varint(buf, pos)
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            payload, pos = buf[pos : pos + size], pos + size
        else:
            pos += 8 if wire == 1 else 4
        out.append((key >> 3, buf[start:pos], payload))
    return out


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, pos


def _with_call_fields(expr: pc.Expression, extra: bytes) -> bytes:
    """pyarrow's ``ExtendedExpression`` for ``expr`` (a function call at the top) with
    ``extra`` (encoded fields) appended to its ``ScalarFunction``."""
    from pyarrow import substrait

    buf = bytes(substrait.serialize_expressions([expr], ["filter"], SCHEMA))

    def rewrite(message: bytes, number: int, change: object) -> bytes:
        parts = []
        for n, whole, payload in _split(message):
            parts.append(_len_field(n, change(payload)) if n == number else whole)  # type: ignore[operator]
        return b"".join(parts)

    # ExtendedExpression.referred_expr = 3 -> ExpressionReference.expression = 1 ->
    # Expression.scalar_function = 3: the call, to which the fields are appended.
    return rewrite(buf, 3, lambda ref: rewrite(ref, 1, lambda e: rewrite(e, 3, lambda call: call + extra)))


def _option(name: str, *preferences: str) -> bytes:
    # ScalarFunction.options = 5; FunctionOption.name = 1, .preference = 2 (repeated)
    body = _len_field(1, name.encode()) + b"".join(_len_field(2, p.encode()) for p in preferences)
    return _len_field(5, body)


# -- the tests -------------------------------------------------------------------------------


def test_the_untouched_message_is_plain_is_null_and_prunes() -> None:
    """The control: without an option the call is ``IS NULL`` and a file without a null
    is pruned, so the tests below see the option, not a reader that never prunes."""
    tree = decode(_with_call_fields(pc.is_null(pc.field("x")), b""), SCHEMA)
    assert tree == is_null("x")
    assert not might_match(tree, NAN_NO_NULL)


@pytest.mark.parametrize(
    "extra",
    [
        _option("nan_is_null", "true"),
        _option("nan_is_null", "TRUE", "false"),  # any behaviour the producer allows
        _option("nan_is_null"),  # no preference at all
        _option("a_future_option", "whatever"),
        _len_field(2, b"\x1a\x00"),  # the deprecated ScalarFunction.args: operands read in part
    ],
    ids=["nan_is_null=true", "true-or-false", "no-preference", "unknown-option", "deprecated-args"],
)
def test_a_call_with_an_option_it_does_not_understand_is_unknown(extra: bytes) -> None:
    tree = decode(_with_call_fields(pc.is_null(pc.field("x")), extra), SCHEMA)
    assert isinstance(tree, Unknown), tree
    assert might_match(tree, NAN_NO_NULL)


def test_an_option_it_understands_keeps_the_call() -> None:
    """``nan_is_null=false`` is what plain ``is_null`` means: still pruned on."""
    tree = decode(_with_call_fields(pc.is_null(pc.field("x")), _option("nan_is_null", "false")), SCHEMA)
    assert tree == is_null("x")


def test_an_option_on_and_makes_the_whole_and_unknown() -> None:
    """``and`` with an option it does not know is not read as ``and`` either."""
    from pyarrow import substrait

    expr = (pc.field("k") == 1) & pc.is_null(pc.field("x"))
    plain = decode(bytes(substrait.serialize_expressions([expr], ["filter"], SCHEMA)), SCHEMA)
    assert not might_match(plain, {**NAN_NO_NULL, "k": ColumnBounds(1, 1, 0, 3)})
    crafted = decode(_with_call_fields(expr, _option("a_future_option", "x")), SCHEMA)
    assert isinstance(crafted, Unknown)
    assert might_match(crafted, {**NAN_NO_NULL, "k": ColumnBounds(1, 1, 0, 3)})


def _nan_table(tmp_path: Path) -> Table:
    """Three files (one per insert: no small-file packing) with column stats: NaN and no
    null (k 1, 2), neither (k 3, 4), a null (k 5, 6)."""
    props = {"write.small-file-limit-bytes": 0}
    t = Table.create(tmp_path / "t", SCHEMA, record_key="k", ordering_field=None, properties=props)
    t.indexes.create("column_stats")
    t.insert(pa.table({"x": [float("nan"), 1.0], "k": [1, 2]}, schema=SCHEMA))
    t.insert(pa.table({"x": [2.0, 3.0], "k": [3, 4]}, schema=SCHEMA))
    t.insert(pa.table({"x": [None, 4.0], "k": [5, 6]}, schema=SCHEMA))
    return t


NAN_IS_NULL = pc.is_null(pc.field("x"), nan_is_null=True)


def test_is_null_with_nan_is_null_never_prunes_a_file_holding_nan(tmp_path: Path) -> None:
    """End to end on a table with column stats: the file whose only match is a NaN is read."""
    t = _nan_table(tmp_path)
    (nan_file,) = [p for p in t.scan().files() if pq.read_table(p).column("k").to_pylist() == [1, 2]]
    assert nan_file in t.scan(filter=NAN_IS_NULL).files()
    # And the filter without NaN prunes: the check above is not of a pruner that never prunes.
    assert len(t.scan(filter=pc.is_null(pc.field("x"))).files()) < len(t.scan().files())


@pytest.mark.parametrize("flt", [NAN_IS_NULL, pc.is_nan(pc.field("x")), pc.field("x") != 1.0], ids=str)
def test_filters_matching_nan_return_the_nan_rows(tmp_path: Path, flt: pc.Expression) -> None:
    t = _nan_table(tmp_path)
    assert sorted(t.to_arrow(filter=flt).column("k").to_pylist()) == sorted(
        t.to_arrow().filter(flt).column("k").to_pylist()
    )
