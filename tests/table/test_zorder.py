"""Z-order (lakeline.table.zorder): order-preserving codes spread over each column's bits,
keys that interleave the columns' bits, and the sort strategies of clustering."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lakeline.table.zorder import order_preserving_codes, sort_rows, zorder_indices, zorder_keys


def test_codes_keep_the_order_span_the_bits_and_put_nulls_last() -> None:
    codes = order_preserving_codes(pa.array([30, None, 10, 20, 10]), 4)
    assert codes.tolist() == [10, 15, 0, 5, 0]
    assert order_preserving_codes(pa.array(["b", "b"]), 8).tolist() == [0, 0]
    assert order_preserving_codes(pa.array([], pa.int64()), 8).tolist() == []


def test_keys_interleave_the_bits_first_column_most_significant() -> None:
    # Two columns of two distinct values each: codes 0 and 2**32 - 1 (every bit set).
    t = pa.table({"a": [0, 0, 1, 1], "b": [0, 1, 0, 1]})
    keys = zorder_keys(t, ["a", "b"])
    hi = np.uint64(0xAAAAAAAAAAAAAAAA)  # a's bits at the odd positions
    lo = np.uint64(0x5555555555555555)  # b's bits at the even positions
    assert keys.tolist() == [0, int(lo), int(hi), int(hi | lo)]
    with pytest.raises(ValueError):
        zorder_keys(t, [])


def test_a_zorder_visits_quadrants_where_a_linear_sort_does_not() -> None:
    # A 4x4 grid: the Z-order takes the 2x2 quadrant (0..1, 0..1) before any x = 2.
    t = pa.table({"x": [x for x in range(4) for _ in range(4)], "y": [y for _ in range(4) for y in range(4)]})
    first = t.take(zorder_indices(t, ["x", "y"])).slice(0, 4)
    assert sorted(zip(first.column("x").to_pylist(), first.column("y").to_pylist())) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    linear = sort_rows(t, ["x", "y"], "linear").slice(0, 4)
    assert linear.column("x").to_pylist() == [0, 0, 0, 0]
    assert sort_rows(t, [], "zorder").equals(t)
    with pytest.raises(KeyError):
        sort_rows(t, ["x"], "hilbert")
