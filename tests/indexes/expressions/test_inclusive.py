"""Hand-picked cases of ``might_match`` (file bounds), ``partition_might_match`` and
``pinned_values``: each answers False / pins only when no row can match otherwise."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.indexes.expressions import (
    FALSE,
    TRUE,
    ColumnBounds,
    Compare,
    Expr,
    Op,
    Ref,
    Unknown,
    and_,
    eq,
    from_arrow,
    is_in,
    is_null,
    might_match,
    not_,
    not_null,
    or_,
    partition_might_match,
    pinned_values,
)

B = ColumnBounds


def cmp(op: str, col: str, value: object) -> Compare:
    return Compare(Op(op), Ref(col), value)  # type: ignore[arg-type]


INTS = {"a": B(10, 20, 0, 5)}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (eq("a", 9), False),
        (eq("a", 10), True),
        (eq("a", 20), True),
        (eq("a", 21), False),
        (cmp("lt", "a", 10), False),
        (cmp("le", "a", 10), True),
        (cmp("gt", "a", 20), False),
        (cmp("ge", "a", 20), True),
        (cmp("ne", "a", 15), True),
        (not_(cmp("lt", "a", 25)), False),
        (not_(cmp("ge", "a", 10)), False),
        (not_(eq("a", 15)), True),
        (is_in("a", [1, 2, 30]), False),
        (is_in("a", [1, 2, 30, 12]), True),
        (is_in("a", range(21, 10_000)), False),
        (not_(is_in("a", [10, 20])), True),
        (is_null("a"), False),
        (not_null("a"), True),
        (eq("a", None), False),
        (not_(eq("a", None)), False),  # a comparison with null never holds
        (eq("b", 1), True),  # a column without bounds
        (or_(eq("a", 1), Unknown("f(a)")), True),
        (not_(or_(eq("a", 15), Unknown("f(a)"))), True),
        (and_(eq("a", 1), Unknown("f(a)")), False),
        (not_(and_(eq("a", 15), Unknown("f(a)"))), True),
        (TRUE, True),
        (FALSE, False),
        (not_(TRUE), False),
        (eq("a", "10"), True),
        (eq("a", True), True),
        (eq("a", date(2020, 1, 1)), True),  # mixed kinds: keep
        (eq("a", 15.5), True),
        (cmp("gt", "a", 19.5), True),
        (cmp("gt", "a", 20.0), False),
        (eq("a", Decimal("9.9")), False),
    ],
)
def test_int_bounds(expr: Expr, expected: bool) -> None:
    assert might_match(expr, INTS) is expected


def test_ne_prunes_only_a_single_valued_column() -> None:
    assert might_match(cmp("ne", "a", 7), {"a": B(7, 7, 0, 3)}) is False
    # null rows never match != either, so nulls do not keep the file
    assert might_match(cmp("ne", "a", 7), {"a": B(7, 7, 2, 3)}) is False
    assert might_match(cmp("ne", "a", 7), {"a": B(7, 8, 0, 3)}) is True
    assert might_match(not_(is_in("a", [6, 7])), {"a": B(7, 7, 1, 3)}) is False
    assert might_match(not_(is_in("a", [6, 8])), {"a": B(7, 7, 1, 3)}) is True


def test_nulls() -> None:
    all_null = {"a": B(None, None, 4, 4)}
    assert might_match(eq("a", 1), all_null) is False
    assert might_match(not_(eq("a", 1)), all_null) is False
    assert might_match(is_in("a", [1, 2]), all_null) is False
    assert might_match(not_(is_in("a", [1, 2])), all_null) is False
    assert might_match(is_null("a"), all_null) is True
    assert might_match(not_null("a"), all_null) is False
    no_null = {"a": B(1, 2, 0, 4)}
    assert might_match(is_null("a"), no_null) is False
    assert might_match(not_(not_null("a")), no_null) is False
    unknown_counts = {"a": B(1, 2, None, None)}
    assert might_match(is_null("a"), unknown_counts) is True
    assert might_match(not_null("a"), unknown_counts) is True
    assert might_match(eq("a", 5), unknown_counts) is False


def test_strings_dates_timestamps_bytes() -> None:
    s = {"s": B("apple", "banana", 0, 9)}
    assert might_match(eq("s", "b"), s) is True
    assert might_match(eq("s", "bananas"), s) is False
    assert might_match(cmp("lt", "s", "apple"), s) is False
    assert might_match(eq("s", "é"), {"s": B("z", "zz", 0, 1)}) is False  # code point order = UTF-8 byte order
    d = {"d": B(date(2020, 1, 1), date(2020, 1, 31), 0, 9)}
    assert might_match(cmp("gt", "d", date(2020, 1, 31)), d) is False
    assert might_match(eq("d", datetime(2020, 1, 5)), d) is True  # a datetime against dates: keep
    t = {"t": B(datetime(2020, 1, 1), datetime(2020, 1, 2), 0, 9)}
    assert might_match(cmp("gt", "t", datetime(2020, 1, 3)), t) is False
    assert might_match(cmp("gt", "t", datetime(2020, 1, 3, tzinfo=UTC)), t) is True  # naive vs aware: keep
    assert (
        might_match(
            not_(eq("t", datetime(2020, 1, 1, tzinfo=UTC))), {"t": B(datetime(2020, 1, 1), datetime(2020, 1, 1), 0, 1)}
        )
        is True
    )
    assert might_match(eq("y", b"\x00"), {"y": B(b"\x01", b"\xff", 0, 1)}) is False


def test_nan_never_prunes() -> None:
    nan = float("nan")
    assert might_match(eq("e", 1.0), {"e": B(nan, nan, 0, 1)}) is True
    assert might_match(eq("e", 1.0), {"e": B(0.0, nan, 0, 1)}) is True
    for op in Op:
        assert might_match(cmp(op.value, "e", nan), {"e": B(0.0, 1.0, 0, 1)}) is True
    assert might_match(is_in("e", [nan, 5.0]), {"e": B(0.0, 1.0, 0, 1)}) is True
    assert might_match(eq("e", 5.0), {"e": B(0.0, 1.0, 0, 1)}) is False
    assert might_match(eq("m", Decimal("NaN")), {"m": B(Decimal(0), Decimal(1), 0, 1)}) is True


def test_unknown_function_under_or_keeps_every_file() -> None:
    sch = pa.schema([("a", pa.int64()), ("s", pa.string())])
    filters = [
        (pc.field("a") == 3) | pc.starts_with(pc.field("s"), "x"),
        ~((pc.field("a") != 3) & pc.starts_with(pc.field("s"), "x")),
        (pc.field("a") == 3) | (pc.field("a") * 2 > 10),
    ]
    for flt in filters:
        tree = from_arrow(flt, sch)
        assert might_match(tree, {"a": B(100, 200, 0, 9), "s": B("a", "b", 0, 9)}) is True
        assert partition_might_match(tree, {"a": 100, "s": "a"}) is True
    known_side = from_arrow((pc.field("a") == 3) & pc.starts_with(pc.field("s"), "x"), sch)
    assert might_match(known_side, {"a": B(100, 200, 0, 9)}) is False


def test_partition() -> None:
    assert partition_might_match(eq("p", 3), {"p": 3}) is True
    assert partition_might_match(eq("p", 3), {"p": 4}) is False
    assert partition_might_match(cmp("ne", "p", 3), {"p": 3}) is False
    assert partition_might_match(eq("p", 3), {"p": None}) is False
    assert partition_might_match(is_null("p"), {"p": None}) is True
    assert partition_might_match(is_null("p"), {"p": 3}) is False
    assert partition_might_match(not_(is_in("p", [1, 2])), {"p": None}) is False
    assert partition_might_match(and_(eq("p", 3), eq("q", 9)), {"p": 3}) is True  # q is not a partition column
    assert partition_might_match(eq("f", 1.0), {"f": float("nan")}) is True


def test_pins() -> None:
    assert pinned_values(eq("k", 3), "k") == {3}
    assert pinned_values(eq("k", 3), "j") is None
    assert pinned_values(and_(eq("k", 3), cmp("gt", "j", 1)), "k") == {3}
    assert pinned_values(and_(is_in("k", [1, 2, 3]), is_in("k", [2, 3, 4])), "k") == {2, 3}
    assert pinned_values(or_(eq("k", 1), is_in("k", [5, 6])), "k") == {1, 5, 6}
    assert pinned_values(or_(eq("k", 1), eq("j", 5)), "k") is None
    assert pinned_values(not_(cmp("ne", "k", 4)), "k") == {4}
    assert pinned_values(not_(eq("k", 4)), "k") is None
    assert pinned_values(not_(is_in("k", [4, 5])), "k") is None
    assert pinned_values(is_in("k", [4, None]), "k") == {4}
    assert pinned_values(eq("k", None), "k") == frozenset()
    assert pinned_values(or_(eq("k", 1), Unknown("?")), "k") is None
    assert pinned_values(and_(eq("k", 1), Unknown("?")), "k") == {1}
    assert pinned_values(eq("k", float("nan")), "k") is None
    assert pinned_values(TRUE, "k") is None
