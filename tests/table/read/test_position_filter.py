"""Dropping rows by position (lakeline.table.read.position_filter): the C loop, the Arrow
fallback and the in-place variant all give what Arrow's filter gives.

Under CI the extension must be built: the Makefile's editable install compiles it.
"""

from __future__ import annotations

import os
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from lakeline.table.read import position_filter
from lakeline.table.read.position_filter import drop_positions

RNG = np.random.default_rng(16)
BUILT = position_filter.NATIVE is not None or os.environ.get("CI") == "true"


def test_the_extension_is_built_under_ci() -> None:
    if os.environ.get("CI") == "true":
        assert position_filter.NATIVE is not None, "table/_position_filter.c was not compiled by the install"


def _expected(column: pa.ChunkedArray, positions: np.ndarray) -> pa.ChunkedArray:
    keep = np.ones(len(column), dtype=bool)
    keep[positions] = False
    return column.filter(pa.array(keep))


def _arrays(n: int) -> list[pa.Array]:
    ints = RNG.integers(-1000, 1000, n)
    nulls = RNG.random(n) < 0.1
    return [
        pa.array(ints, mask=nulls),
        pa.array(ints.astype(np.int32), mask=nulls),
        pa.array(ints.astype(np.int8)),
        pa.array(ints.astype(np.float64), mask=nulls),
        pa.array(ints.astype(np.int32), mask=nulls).cast(pa.date32()),
        pa.array(ints, mask=nulls).cast(pa.timestamp("us")),
        pa.array(RNG.random(n) < 0.5, mask=RNG.random(n) < 0.2),
        pa.array([Decimal(int(x)) / 100 for x in ints], pa.decimal128(7, 2)),
        pa.array([None if m else str(x) for x, m in zip(ints, nulls)]),
        pa.array([b"abcd"] * n, pa.binary(4)),
    ]


def _chunks(column: pa.ChunkedArray, positions: np.ndarray | None = None) -> list[list[object]]:
    """Each chunk's values (without the rows at ``positions``) as a sorted list, nulls
    first: the rows of each chunk without their order."""
    out, start = [], 0
    for c in column.chunks:
        values = c.to_pylist()
        if positions is not None:
            gone = {int(p) - start for p in positions if start <= p < start + len(c)}
            values = [v for i, v in enumerate(values) if i not in gone]
        start += len(c)
        out.append(sorted(values, key=lambda v: (v is not None, v)))
    return out


@pytest.mark.parametrize("n", [1, 9, 64, 65, 1000, 20_011])
@pytest.mark.parametrize("mode", ["copy", "shift", "swap"])
def test_drop_positions_equals_arrows_filter(n: int, mode: str) -> None:
    """Copying and shifting in place give Arrow's filter exactly; filling the holes
    from each chunk's end gives the same rows of each chunk, in another order."""
    for array in _arrays(n):
        for share in (0.0, 0.01, 0.3, 1.0):
            positions = np.unique(RNG.integers(0, n, max(1, int(n * share)))).astype(np.int64)
            # Chunks that start at odd offsets of their buffers, and one without rows.
            cut = n // 3
            column = pa.chunked_array([array.slice(0, cut), array.slice(cut, 0), array.slice(cut)], type=array.type)
            expected = _expected(column, positions)
            copy = pa.chunked_array([pa.concat_arrays([c]) for c in column.chunks], type=array.type)
            if mode == "copy":
                got = drop_positions(column, positions)
            else:
                got = drop_positions(copy, positions, in_place=True, keep_order=mode == "shift")
            got.validate(full=True)
            assert got.null_count == expected.null_count
            if mode == "swap":
                assert _chunks(got) == _chunks(column, positions), (array.type, share)
                # Columns the C loop cannot move (strings) take the same rows by index:
                # every column of a table must move alike.
                assert got.equals(drop_positions(column, positions, keep_order=False)), (array.type, share)
            else:
                assert got.equals(expected), (array.type, share)
            if mode == "copy":
                assert column.equals(
                    pa.chunked_array([array.slice(0, cut), array.slice(cut, 0), array.slice(cut)], type=array.type)
                ), "the input changed"


def test_swap_moves_only_rows_from_beyond_the_kept_ones() -> None:
    """Filling holes keeps every row below ``len - dropped`` where it was and fills each
    hole with the earliest kept row beyond them, in order."""
    column = pa.chunked_array([pa.array(np.arange(10, dtype=np.int64))])
    got = drop_positions(column, np.array([1, 4, 8], dtype=np.int64), in_place=True, keep_order=False)
    assert got.to_pylist() == [0, 7, 2, 3, 9, 5, 6]


def test_a_table_read_without_order_keeps_its_rows_whole(tmp_path) -> None:
    """A merge-on-read read drops rows from every column of a decoded base without
    keeping their order: fixed-width columns in place, a string column by index; each
    row must stay whole."""
    n = 50_000
    ints = RNG.integers(0, 10**6, n)
    table = pa.table(
        {
            "a": pa.array(ints, mask=RNG.random(n) < 0.1),
            "s": pa.array([f"v{x}" for x in ints]),
            "b": pa.array(ints % 2 == 0),
            "d": pa.array(ints.astype(np.float64)),
        }
    )
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=8_192)
    positions = np.unique(RNG.integers(0, n, 700)).astype(np.int64)
    decoded = pq.read_table(tmp_path / "f.parquet")
    got = pa.table(
        {c: drop_positions(decoded.column(c), positions, in_place=True, keep_order=False) for c in table.column_names}
    )
    keep = np.ones(n, dtype=bool)
    keep[positions] = False
    expected = table.filter(pa.array(keep))
    assert sorted(got.to_pylist(), key=str) == sorted(expected.to_pylist(), key=str)


def test_columns_chunked_apart_keep_their_rows_whole() -> None:
    """A merge by position that may reorder rows does not, when the base's columns are
    chunked differently (fill_holes moves rows within a chunk)."""
    from lakeline.table.merge import merge_at_positions
    from lakeline.table.write.records import BASE_POS, OP

    n = 1_000
    a = pa.array(np.arange(n, dtype=np.int64))
    base = pa.table(
        {
            "a": pa.chunked_array([a.slice(0, 300), a.slice(300)]),
            "b": pa.chunked_array([pa.array(np.arange(n, dtype=np.int64) * 10)]),
        }
    )
    positions = np.arange(5, n, 9, dtype=np.int64)
    changes = pa.table({OP: ["D"] * len(positions), BASE_POS: positions})
    got = merge_at_positions(base, changes, ("a",), None, ["a", "b"], owned=True, keep_order=False)
    assert all(r["b"] == 10 * r["a"] for r in got.to_pylist())
    assert got.num_rows == n - len(positions)


def test_a_log_pointing_past_its_base_is_refused() -> None:
    from lakeline.table.merge import merge_at_positions
    from lakeline.table.write.records import BASE_POS, OP
    from lakeline.timeline.errors import CorruptLogError

    base = pa.table({"a": pa.array(np.arange(10, dtype=np.int64))})
    changes = pa.table({OP: ["D", "D"], BASE_POS: pa.array([3, 10], pa.int64())})
    with pytest.raises(CorruptLogError):
        merge_at_positions(base, changes, ("a",), None, ["a"], owned=True, keep_order=False)
    assert base.column("a").to_pylist() == list(range(10)), "the base changed before the refusal"


def test_in_place_on_a_decoded_parquet_column(tmp_path) -> None:
    """What a merge-on-read read does: drop rows from a column it decoded, chunk by row
    group, in place; the neighbouring columns stay intact."""
    n = 300_000
    table = pa.table(
        {
            "a": pa.array(RNG.integers(0, 10**9, n), mask=RNG.random(n) < 0.05),
            "b": pa.array([Decimal(int(x)) / 100 for x in RNG.integers(0, 10**6, n)], pa.decimal128(7, 2)),
        }
    )
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=65_536)
    positions = np.unique(RNG.integers(0, n, 2_000)).astype(np.int64)
    decoded = pq.read_table(tmp_path / "f.parquet")
    a = drop_positions(decoded.column("a"), positions, in_place=True)
    assert a.equals(_expected(table.column("a"), positions))
    assert decoded.column("b").equals(table.column("b"))


@pytest.mark.skipif(not BUILT, reason="lakeline was installed without its C extension")
def test_without_the_extension_the_rows_are_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    column = pa.chunked_array([_arrays(5_000)[0]])
    positions = np.arange(0, 5_000, 7, dtype=np.int64)
    native = drop_positions(column, positions)
    monkeypatch.setattr(position_filter, "NATIVE", None)
    assert drop_positions(column, positions).equals(native)


@pytest.mark.skipif(not BUILT, reason="lakeline was installed without its C extension")
def test_bad_positions_are_refused_by_the_c_loop() -> None:
    values = pa.array(np.arange(10, dtype=np.int64))
    buffers = values.buffers()
    out = pa.allocate_buffer(80)
    for bad in ([3, 3], [5, 2], [10], [-1]):
        with pytest.raises(ValueError, match="positions"):
            position_filter.NATIVE.drop_rows(buffers[1], None, 0, 10, 8, np.array(bad, dtype=np.int64), out, None, 0)
    with pytest.raises(ValueError, match="too small"):
        position_filter.NATIVE.drop_rows(buffers[1], None, 0, 11, 8, np.array([1], dtype=np.int64), out, None, 0)
