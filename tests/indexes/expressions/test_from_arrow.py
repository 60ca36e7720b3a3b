"""pyarrow expressions through Substrait into the tree, and back (``to_arrow``)."""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.indexes.expressions import (
    FALSE,
    TRUE,
    Compare,
    In,
    Op,
    Ref,
    Unknown,
    and_,
    eq,
    from_arrow,
    is_in,
    is_null,
    not_,
    not_null,
    or_,
    to_arrow,
)
from lakeline.indexes.expressions.from_arrow import decode
from lakeline.indexes.expressions.substrait import MalformedSubstraitError, Message
from lakeline.timeline.errors import InvalidFilterError

f = pc.field
NAN = float("nan")
TABLE = pa.table(
    {
        "i": pa.array([1, 2, None, 4, 5, 3], pa.int64()),
        "c": pa.array([1, None, 3, 4, 5, 6], pa.int32()),
        "s": pa.array(["a", "b", None, "é", "", "ab"]),
        "d": pa.array([date(2020, 1, i) for i in (1, 2, 3)] + [None, date(2021, 5, 5), date(2019, 1, 1)]),
        "e": pa.array([0.5, NAN, None, 2.5, -1.0, 10.0]),
        "x": pa.array([True, False, None, True, None, False]),
        "t": pa.array(
            [datetime(2020, 1, 1, 12), None, datetime(2020, 1, 2), datetime(1999, 1, 1), None, datetime(2030, 1, 1)],
            pa.timestamp("us"),
        ),
        "m": pa.array(
            [Decimal("1.25"), Decimal("-3.50"), None, Decimal("0.00"), Decimal("9.99"), Decimal("1.26")],
            pa.decimal128(10, 2),
        ),
        "y": pa.array([b"a", b"\x00", None, b"zz", b"", b"a\x00"]),
        "tz": pa.array([datetime(2020, 1, 1, tzinfo=UTC)] * 3 + [None] * 3, pa.timestamp("us", tz="UTC")),
    }
)
SCHEMA = TABLE.schema

#: Expressions whose tree is exact: the tree, back in Arrow, selects the same rows.
EXACT = [
    f("i") == 3,
    f("i") != 3,
    f("i") < 3,
    f("i") <= 3,
    f("i") > 3,
    f("i") >= 3,
    pc.less(pc.scalar(3), f("i")),
    pc.greater_equal(pc.scalar(2), f("i")),
    f("c") == 3,
    f("c") > 2,
    f("c") == pc.scalar(4).cast(pa.int32(), safe=False),
    f("i").isin([1, 4, 7]),
    ~f("i").isin([1, 4, 7]),
    f("s").isin(["a", "é"]),
    ~f("s").isin(["a", "é"]),
    f("s").isin(["a", None]),
    f("i").isin([]),
    ~f("i").isin([]),
    f("i").isin([4]),
    ~f("i").isin([4]),
    f("i").is_null(),
    f("i").is_valid(),
    ~f("i").is_null(),
    ~f("i").is_valid(),
    (f("i") > 1) & (f("s") != "b"),
    (f("i") > 4) | f("s").is_null(),
    ~((f("i") > 1) & (f("s") < "b")),
    ~~(f("i") == 2),
    ~(~f("i").isin([1, 2]) | (f("i") == 5)),
    f("s") >= "ab",
    f("s") == "",
    f("d") == date(2020, 1, 2),
    f("d") < date(2020, 1, 3),
    f("e") < 1.0,
    ~(f("e") < 1.0),
    f("e") != 2.5,
    f("e") > 1,
    f("e") == NAN,
    ~(f("e") == NAN),
    f("x"),
    ~f("x"),
    f("x") == pc.scalar(False),
    f("x") & (f("i") > 0),
    f("t") >= datetime(2020, 1, 1, 12),
    f("t") < datetime(2020, 1, 2),
    f("tz") == datetime(2020, 1, 1, tzinfo=UTC),
    f("m") == Decimal("1.25"),
    f("m") < Decimal("0"),
    f("m") > Decimal("1.2"),
    f("y") == b"a",
    f("y") > b"a",
    f("i") == pa.scalar(None, pa.int64()),
    ~(f("i") == pa.scalar(None, pa.int64())),
    pc.scalar(True),
    pc.scalar(False),
    ~pc.scalar(True),
]


def _rows(expr: pc.Expression) -> list[int]:
    t = TABLE.append_column("_row", pa.array(range(TABLE.num_rows)))
    return t.filter(expr).column("_row").to_pylist()


@pytest.mark.parametrize("expr", EXACT, ids=[str(e).replace("\n", "") for e in EXACT])
def test_round_trip_selects_the_same_rows(expr: pc.Expression) -> None:
    tree = from_arrow(expr, SCHEMA)
    assert not isinstance(tree, Unknown), tree
    assert _rows(to_arrow(tree, SCHEMA)) == _rows(expr)
    assert _rows(to_arrow(tree)) == _rows(expr)  # without a schema, Arrow types the literals


def test_is_in_with_a_null_is_widened_never_narrowed() -> None:
    # ~is_in(.., MATCH) is false on null rows when null is in the set, true otherwise;
    # skip_nulls=True never matches a null row: Substrait carries neither distinction.
    for expr in (
        ~f("i").isin([1, None]),
        pc.is_in(f("i"), value_set=pa.array([1, None]), skip_nulls=True),
        ~pc.is_in(f("i"), value_set=pa.array([1, None]), skip_nulls=True),
    ):
        assert set(_rows(to_arrow(from_arrow(expr, SCHEMA)))) >= set(_rows(expr))


def test_decoded_trees() -> None:
    assert from_arrow(f("i") == 3, SCHEMA) == eq("i", 3)
    assert from_arrow(pc.less(pc.scalar(3), f("i")), SCHEMA) == Compare(Op.GT, Ref("i"), 3)
    assert from_arrow(f("c") == 3, SCHEMA) == eq("c", 3)  # pyarrow typed the literal int32
    assert from_arrow(f("s").isin(["a", "b"]), SCHEMA) == In(Ref("s"), frozenset({"a", "b"}))
    assert from_arrow(f("s").isin(["a", None]), SCHEMA) == or_(eq("s", "a"), is_null("s"))
    assert from_arrow(~f("s").isin(["a", "b"]), SCHEMA) == not_(and_(is_in("s", ["a", "b"]), not_null("s")))
    assert from_arrow(f("i").is_valid(), SCHEMA) == not_null("i")
    assert from_arrow(f("x"), SCHEMA) == eq("x", True)
    assert from_arrow(f("d") >= date(2020, 1, 2), SCHEMA) == Compare(Op.GE, Ref("d"), date(2020, 1, 2))
    assert from_arrow(f("m") == Decimal("-1.25"), SCHEMA) == eq("m", Decimal("-1.25"))
    assert from_arrow(f("t") == datetime(1969, 12, 31, 23, 59), SCHEMA) == eq("t", datetime(1969, 12, 31, 23, 59))
    assert from_arrow(f("tz") == datetime(2020, 1, 1, tzinfo=UTC), SCHEMA) == eq("tz", datetime(2020, 1, 1, tzinfo=UTC))
    assert from_arrow(f("y") == b"\x00\xff", SCHEMA) == eq("y", b"\x00\xff")
    assert from_arrow(f("i") == -(2**63), SCHEMA) == eq("i", -(2**63))
    assert from_arrow(f("i").isin([]), SCHEMA) == FALSE
    assert from_arrow(pc.scalar(True), SCHEMA) == TRUE
    assert from_arrow(f("i") == pa.scalar(None, pa.int64()), SCHEMA) == eq("i", None)


@pytest.mark.parametrize(
    "expr",
    [
        f("i") + 1 > 3,  # arithmetic
        pc.starts_with(f("s"), "a"),  # an unknown function
        pc.is_nan(f("e")),
        f("s").cast(pa.large_string(), safe=False) == "a",  # a cast of a column
        f("i") == f("i"),  # a column on both sides
        f("i"),  # a non-boolean column as a filter
        pc.scalar(pa.scalar(None, pa.bool_())),
        pc.scalar(pa.scalar(time(1, 2), pa.time64("us"))),  # a literal of a type the tree does not hold
    ],
    ids=str,
)
def test_not_understood_parts_are_unknown(expr: pc.Expression) -> None:
    assert isinstance(from_arrow(expr, SCHEMA), Unknown)


@pytest.mark.parametrize(
    "expr",
    [
        f("i") == f("c"),  # pyarrow would insert a safe cast, which Substrait cannot carry
        f("e").is_null(nan_is_null=True),
        pc.and_(f("x"), f("i") > 1),  # and without Kleene logic
        f("nope") == 1,  # not in the schema
        f("m") > Decimal("1.255"),  # more decimal places than the column: a cast of the column
        f("c") == 2**40,  # a literal out of the column type's range
    ],
    ids=str,
)
def test_unserializable_filters_are_one_unknown(expr: pc.Expression) -> None:
    tree = from_arrow(expr, SCHEMA)
    assert isinstance(tree, Unknown) and "not serializable" in tree.reason


def test_unknown_keeps_the_understood_parts() -> None:
    tree = from_arrow((f("i") == 3) & pc.starts_with(f("s"), "a"), SCHEMA)
    assert tree == and_(eq("i", 3), Unknown("function starts_with"))
    with pytest.raises(InvalidFilterError):
        to_arrow(tree)


def test_malformed_substrait_is_refused() -> None:
    for buf in (b"\x0a", b"\x0a\x05ab", b"\x0b", b"\xff" * 11, b""):
        with pytest.raises(MalformedSubstraitError):
            decode(buf, SCHEMA)
    assert Message(b"\x08\x96\x01").uint(1) == 150  # protobuf's own example: field 1 = 150
