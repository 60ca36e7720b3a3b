"""Z-order: one sort key that keeps rows close in several columns at once.

Sorting by ``(a, b)`` lexicographically clusters files tightly on ``a`` and not at all
on ``b``: a filter on ``b`` alone still reads every file. A Z-order (Morton) key
interleaves the bits of the columns, so rows near each other in every column land near
each other in the order, and each file of the clustered output covers a small box of
the columns' space; per-file min/max statistics then prune range filters on any of
them.

Each column is first mapped to an unsigned integer that preserves its order: its dense
rank (Arrow's ``rank``, which orders ints, floats with NaN after numbers, strings,
timestamps, dates and booleans alike, nulls last), stretched over the bits each column
gets, so every column weighs the same however many distinct values it has (interleaving
raw values would let a column of large integers dominate one of small ones). The bits
are interleaved with numpy, one vectorised shift per bit and column: no Python loop over
rows.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Bits of the Z-order key (an unsigned 64-bit integer), shared by the columns.
KEY_BITS = 64
#: Most bits one column gets (its codes must be exact in float64, see below).
COLUMN_BITS = 32


def order_preserving_codes(column: pa.Array | pa.ChunkedArray, bits: int) -> np.ndarray:
    """``column`` as unsigned integers of ``bits`` bits with the same order (nulls last).

    Dense ranks ``1..d`` are spread evenly over ``[0, 2**bits - 1]``, so a column with
    few distinct values still spans every bit and weighs as much as the others.
    """
    n = len(column)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    ranks = pc.rank(column, sort_keys="ascending", tiebreaker="dense").to_numpy().astype(np.float64) - 1.0
    top = float(ranks.max())
    if top == 0:
        return np.zeros(n, dtype=np.uint64)
    hi = (1 << bits) - 1
    # float64 holds 2**32 - 1 exactly and the product is monotone in the rank, so the
    # order is kept; with more distinct values than codes, neighbours share a code.
    return np.minimum(np.floor(ranks * (hi / top)), hi).astype(np.uint64)


def zorder_keys(table: pa.Table, columns: Sequence[str]) -> np.ndarray:
    """The Z-order key of every row of ``table`` over ``columns`` (uint64)."""
    k = len(columns)
    if k == 0:
        raise ValueError("a Z-order needs at least one column")
    bits = max(1, min(COLUMN_BITS, KEY_BITS // k))
    codes = [order_preserving_codes(table.column(c), bits) for c in columns]
    key = np.zeros(table.num_rows, dtype=np.uint64)
    one = np.uint64(1)
    # Bit b of column j goes to bit b*k + (k-1-j): the first column is the most
    # significant within each group of k bits.
    for b in range(bits):
        for j, code in enumerate(codes):
            key |= ((code >> np.uint64(b)) & one) << np.uint64(b * k + (k - 1 - j))
    return key


def zorder_indices(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """Row indices that put ``table`` in Z-order over ``columns`` (stable on ties); over
    one column that is simply its sort order."""
    if len(columns) == 1:
        return linear_indices(table, columns)
    return pa.array(np.argsort(zorder_keys(table, columns), kind="stable"))


def linear_indices(table: pa.Table, columns: Sequence[str]) -> pa.Array:
    """Row indices that sort ``table`` lexicographically by ``columns`` (nulls last)."""
    return pc.sort_indices(table, sort_keys=[(c, "ascending", "at_end") for c in columns])


#: Sort strategies of clustering, by name.
STRATEGIES = {"linear": linear_indices, "zorder": zorder_indices}


def sort_rows(table: pa.Table, columns: Sequence[str], strategy: str) -> pa.Table:
    """``table`` sorted by ``columns`` under ``strategy`` (``linear`` or ``zorder``);
    unchanged when there are no columns.

    Raises:
        KeyError: an unknown strategy (callers check names first).
    """
    if not columns or table.num_rows <= 1:
        return table
    return table.take(STRATEGIES[strategy](table, columns))
