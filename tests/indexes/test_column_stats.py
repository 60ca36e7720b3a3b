"""Column statistics: bounds and counts per type, unknown bounds where pruning would be
unsafe, sketches that merge across files, and NDV within 3 % on 1M distinct values."""

from __future__ import annotations

import datetime as dt
import decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from lakeline.indexes.column_stats import decode_bound, estimate, file_stats, merge_sketches, ndv, sketch_values
from lakeline.indexes.pruning import stats_keep


def _row(stats: pa.Table, column: str) -> dict[str, object]:
    return next(r for r in stats.to_pylist() if r["column"] == column)


def test_bounds_and_counts_round_trip_per_type() -> None:
    rows = pa.table(
        {
            "i": pa.array([3, None, -7, 12], pa.int64()),
            "f": pa.array([0.1, 2.5, None, -1e300], pa.float64()),
            "s": pa.array(["b", "a", "zz", None]),
            "d": pa.array([dt.date(2026, 1, 2), dt.date(2025, 12, 31), None, None], pa.date32()),
            "t": pa.array(
                [dt.datetime(2026, 1, 1, 5), None, None, dt.datetime(2026, 1, 1, 4, 0, 0, 123)],
                pa.timestamp("us", tz="UTC"),
            ),
            "dec": pa.array([decimal.Decimal("1.25"), decimal.Decimal("-3.50"), None, None], pa.decimal128(10, 2)),
            "b": pa.array([True, None, True, True]),
        }
    )
    stats = file_stats("p/f.parquet", "p", rows)
    assert stats.num_rows == len(rows.column_names)
    for name in rows.column_names:
        r = _row(stats, name)
        col = rows.column(name)
        typ = col.type
        mm = pc.min_max(col)
        assert decode_bound(r["min"], typ) == mm["min"].cast(typ), name
        assert decode_bound(r["max"], typ) == mm["max"].cast(typ), name
        assert r["null_count"] == col.null_count
        assert r["value_count"] == len(col)
        assert r["path"] == "p/f.parquet" and r["partition"] == "p"


def test_nan_all_null_and_binary_columns_have_no_bounds() -> None:
    rows = pa.table(
        {
            "f": pa.array([1.0, float("nan"), 3.0]),
            "n": pa.array([None, None, None], pa.int64()),
            "bin": pa.array([b"\x00\xff", b"a", None]),
            "lst": pa.array([[1], [2, 3], None]),
        }
    )
    stats = file_stats("f", "", rows)
    for name in rows.column_names:
        r = _row(stats, name)
        assert r["min"] is None and r["max"] is None, name
    assert _row(stats, "lst")["ndv_sketch"] is None
    assert estimate(_row(stats, "bin")["ndv_sketch"]) == pytest.approx(2, abs=0.01)


def test_named_columns_only_and_missing_columns_skipped() -> None:
    rows = pa.table({"a": [1, 2], "b": ["x", "y"]})
    stats = file_stats("f", "", rows, columns=["b", "not_there"])
    assert stats.column("column").to_pylist() == ["b"]


def test_ndv_within_3_percent_on_1m_distinct_values_across_files() -> None:
    n = 1_000_000
    values = pa.array(range(n), pa.int64())
    # Ten files with overlapping ranges: merging must not double-count the overlap.
    parts = []
    for i in range(10):
        start = max(0, i * 100_000 - 20_000)
        chunk = pa.table({"k": values.slice(start, 120_000), "s": pc.cast(values.slice(start, 120_000), pa.string())})
        parts.append(file_stats(f"f{i}", "p0" if i < 5 else "p1", chunk))
    stats = pa.concat_tables(parts)
    for col in ("k", "s"):
        est = ndv(stats, col)
        assert abs(est.estimate - n) / n < 0.03, (col, est)
        assert est.lower <= n <= est.upper
    half = ndv(stats, "k", partition="p0")
    exact = 500_000  # files 0..4 cover [0, 500_000)
    assert abs(half.estimate - exact) / exact < 0.03


def test_merge_of_disjoint_and_identical_sketches() -> None:
    a = sketch_values(pa.array(range(1000)))
    b = sketch_values(pa.array(range(1000, 3000)))
    assert estimate(merge_sketches([a, b, None])) == pytest.approx(3000, rel=0.03)
    assert estimate(merge_sketches([a, a, a])) == pytest.approx(1000, rel=0.03)
    assert estimate(merge_sketches([])) == 0


def test_stats_pruning_never_drops_a_file_with_a_matching_row() -> None:
    """For every filter, a file whose rows match is kept; clear misses are dropped,
    including on a column with nulls (split into "null" and "in bounds" cases)."""
    rows = pa.table(
        {
            "a": pa.array([5, 7, None], pa.int64()),
            "b": pa.array([1, 2, 3], pa.int64()),
            "c": pa.array([None, None, None], pa.int64()),
            "s": pa.array(["m", None, "q"]),
        }
    )
    schema = rows.schema
    stats = {"f": file_stats("f", "", rows).to_pylist()}
    a, b, c, s = pc.field("a"), pc.field("b"), pc.field("c"), pc.field("s")
    filters = [
        a == 5,
        a == 6,
        a > 7,
        a >= 7,
        a < 5,
        a <= 5,
        a != 5,
        a.is_null(),
        ~a.is_null(),
        a.is_valid(),
        a.isin([1, 2]),
        a.isin([7, 100]),
        b == 4,
        b > 3,
        (b == 2) & (a == 5),
        (b == 9) | (a == 7),
        ~(b == 1),
        c.is_null(),
        c == 1,
        ~c.is_null(),
        (a > 100) | a.is_null(),
        ~(a > 6),
        s == "m",
        s < "m",
        s.is_null() & (a > 6),
        (s > "z") | (c > 0),
        pc.invert(a.is_null()) & (b == 3),
    ]
    for flt in filters:
        matches = ds.dataset(rows).to_table(filter=flt).num_rows > 0
        kept = stats_keep(flt, schema, stats, ["f"])[0]
        if matches:
            assert kept, f"pruned a file matching {flt}"
    for flt in (a > 7, a < 5, b == 4, b > 3, c == 1, a.isin([1, 2]), s < "m", (s > "z") | (c > 0)):
        assert not stats_keep(flt, schema, stats, ["f"])[0], f"{flt} should prune"
    # No stats, no filter: keep.
    assert stats_keep(a > 7, schema, {}, ["g"]) == [True]
    assert stats_keep(None, schema, stats, ["f"]) == [True]
