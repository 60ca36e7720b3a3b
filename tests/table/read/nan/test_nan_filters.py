"""Filtered reads keep the float NaN rows a filter matches (issue 45, no row lost).

A Parquet row group's float statistics leave NaN out: a group holding ``1.0`` and a NaN
has min = max = 1.0, and pyarrow's dataset scan, given ``x != 1.0`` or ``is_nan(x)``,
skipped it and lost the NaN row. Every read here, over copy-on-write and merge-on-read
tables (with and without logs), partitioned or not, float32 and float64 (and a float in
a struct), with the column-stats and bloom-filter indexes on, must equal
``pyarrow.compute``'s own filter over the whole table read unfiltered.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

NAN = float("nan")

x = pc.field("x")
f = pc.field("s", "f")

#: Filters on the float column: those NaN matches, those it must not (``>``, ``<``).
FILTERS: dict[str, pc.Expression] = {
    "is_nan": pc.is_nan(x),
    "ne": x != 1.0,
    "not_eq": ~(x == 1.0),
    "is_null_nan": pc.is_null(x, nan_is_null=True),
    "gt": x > 0.0,
    "lt": x < 2.0,
    "is_in": x.isin([1.0, NAN]),
    "not_is_in": ~x.isin([1.0]),
    "ne_and_key": (x != 1.0) & (pc.field("k") >= 2),
    "ne_or_key": (x != 1.0) | (pc.field("k") == 5),
    "eq": x == 1.0,
}
#: Filters on a float in a struct (a table of its own: see :func:`_schema`).
NESTED_FILTERS: dict[str, pc.Expression] = {"is_nan": pc.is_nan(f), "ne": f != 1.0, "not_eq": ~(f == 1.0)}

#: (table type, with logs): merge-on-read without logs reads bases as copy-on-write does.
LAYOUTS = {"cow": ("cow", False), "mor": ("mor", False), "mor_logs": ("mor", True)}


def _schema(typ: pa.DataType, nested: bool) -> pa.Schema:
    """The rows' schema; ``nested`` adds a struct holding the float too (on a table of
    its own, so the tables without one are tested as they were)."""
    fields = [pa.field("k", pa.int64(), nullable=False), pa.field("p", pa.string()), pa.field("x", typ)]
    return pa.schema(fields + ([pa.field("s", pa.struct([pa.field("f", typ)]))] if nested else []))


def _rows(schema: pa.Schema, keys: list[int], xs: list[float | None]) -> pa.Table:
    columns = {"k": keys, "p": ["a" if k % 2 else "b" for k in keys], "x": xs, "s": [{"f": v} for v in xs]}
    return pa.table({n: columns[n] for n in schema.names}, schema=schema)


def _table(tmp_path: Path, layout: str, partitioned: bool, typ: pa.DataType, nested: bool = False) -> Table:
    """A table whose first file holds only NaN and 1.0 in each partition (statistics
    min = max = 1.0), then other values, then a file without NaN (the indexes bound it);
    with logs, an upsert changes a few rows."""
    kind, logs = LAYOUTS[layout]
    schema = _schema(typ, nested)
    t = Table.create(
        tmp_path / "t",
        schema,
        record_key="k",
        partition_by=["p"] if partitioned else None,
        table_type=kind,
        properties={"write.small-file-limit-bytes": 0},
    )
    t.indexes.create("column_stats")
    t.indexes.create("bloom_filters", columns=["x"])
    t.insert(_rows(schema, [0, 1, 2, 3], [NAN, 1.0, 1.0, NAN]))
    t.insert(_rows(schema, [4, 5, 6, 7, 8, 9], [1.0, 2.5, -1.0, None, NAN, 1.0]))
    t.insert(_rows(schema, [10, 11, 12, 13], [7.0, 8.0, 7.5, 8.0]))
    if logs:
        t.upsert(_rows(schema, [1, 4, 6], [NAN, 1.0, 3.0]))
        assert any(s.logs for s in t.scan().slices)
    else:
        assert not any(s.logs for s in t.scan().slices)
    return t


def _keys(rows: pa.Table) -> list[int]:
    return sorted(rows.column("k").to_pylist())


def _expected(t: Table, flt: pc.Expression) -> list[int]:
    return _keys(t.to_arrow().filter(flt))


READS: dict[str, Callable[[Table, pc.Expression], pa.Table]] = {
    "to_arrow": lambda t, flt: t.to_arrow(filter=flt),
    "projected": lambda t, flt: t.to_arrow(filter=flt, columns=["k"]),
    "to_batches": lambda t, flt: pa.Table.from_batches(
        list(t.scan(filter=flt, columns=["k", "p"]).to_batches()), t.scan(columns=["k", "p"]).schema
    ),
    "to_pandas": lambda t, flt: pa.Table.from_pandas(t.to_pandas(filter=flt)),
}


@pytest.mark.parametrize("typ", [pa.float32(), pa.float64()], ids=["float32", "float64"])
@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_filtered_reads_equal_arrow_filter_on_whole_table(
    tmp_path: Path, layout: str, partitioned: bool, typ: pa.DataType
) -> None:
    t = _table(tmp_path, layout, partitioned, typ)
    for name, flt in FILTERS.items():
        want = _expected(t, flt)
        for read, how in READS.items():
            assert _keys(how(t, flt)) == want, (name, read)


def test_the_nan_rows_are_what_the_filters_match(tmp_path: Path) -> None:
    """The expected answers hold the NaN rows (so the comparison above can fail)."""
    t = _table(tmp_path, "cow", False, pa.float64())
    assert _expected(t, FILTERS["is_nan"]) == [0, 3, 8]
    assert _expected(t, FILTERS["ne"]) == [0, 3, 5, 6, 8, 10, 11, 12, 13]
    assert _expected(t, FILTERS["is_null_nan"]) == [0, 3, 7, 8]
    assert _expected(t, FILTERS["lt"]) == [1, 2, 4, 6, 9]  # NaN is not < 2
    assert _expected(t, FILTERS["ne_and_key"]) == [3, 5, 6, 8, 10, 11, 12, 13]


def test_the_indexes_prune_while_the_nan_rows_are_read(tmp_path: Path) -> None:
    """The column-stats and bloom stages do prune these tables (the NaN-free file), and
    not the files holding NaN: what the reads above run against."""
    t = _table(tmp_path, "cow", False, pa.float64())
    lt = t.scan(filter=FILTERS["lt"]).explain()
    assert lt["files_after_stats_pruning"] == lt["files_total"] - 1
    eq = t.scan(filter=FILTERS["eq"]).explain()
    assert eq["files_after_bloom_pruning"] == eq["files_total"] - 1
    assert _keys(t.to_arrow(filter=FILTERS["is_nan"])) == [0, 3, 8]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_a_float_in_a_struct_keeps_its_nan_rows(tmp_path: Path, layout: str) -> None:
    t = _table(tmp_path, layout, True, pa.float32(), nested=True)
    for name, flt in NESTED_FILTERS.items():
        want = _expected(t, flt)
        assert 0 in want  # row 0 holds a NaN
        for read, how in READS.items():
            assert _keys(how(t, flt)) == want, (name, read)


def test_a_filter_without_floats_is_pushed_down_whole(tmp_path: Path) -> None:
    """The fast path: nothing runs after the Parquet scan for an integer filter, and a
    float filter's other conjuncts still reach the scan (its row groups are skipped)."""
    schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("x", pa.float64())])
    t = Table.create(tmp_path / "t", schema, record_key="k")
    t.insert(pa.table({"k": [1, 2, 3], "x": [NAN, 1.0, NAN]}, schema=schema))
    flt = pc.field("k") >= 2
    assert t.scan(filter=flt)._push.after is None
    assert t.scan(filter=flt)._push.pushed is flt
    split = t.scan(filter=(x != 1.0) & flt)._push
    assert split.after is not None and split.pushed is not None
    assert "k" in str(split.pushed) and "x" not in str(split.pushed)
    assert _keys(t.to_arrow(filter=(x != 1.0) & flt)) == [3]


def test_delete_where_and_update_reach_the_nan_rows(tmp_path: Path) -> None:
    t = _table(tmp_path, "cow", False, pa.float64())
    t.update(where=pc.is_nan(x) & (pc.field("k") < 3), set={"x": 5.0})
    assert _keys(t.to_arrow(filter=x == 5.0)) == [0]
    t.delete_where(x != 1.0)
    assert _keys(t.to_arrow()) == [1, 2, 4, 7, 9]


def test_polars_keeps_the_nan_rows(tmp_path: Path) -> None:
    pl = pytest.importorskip("polars")
    t = _table(tmp_path, "mor_logs", True, pa.float64())
    for expr, flt in [(pl.col("x").is_nan(), FILTERS["is_nan"]), (pl.col("x") != 1.0, FILTERS["ne"])]:
        got = sorted(t.to_polars().filter(expr).collect()["k"].to_list())
        assert got == _expected(t, flt)


@pytest.mark.parametrize("layout", ["cow", "mor"])
@pytest.mark.parametrize("consumer", ["duckdb", "dataset"])
def test_dataset_consumers_keep_the_nan_rows(tmp_path: Path, consumer: str, layout: str) -> None:
    """to_duckdb and to_pyarrow_dataset hand the consumer a pyarrow dataset: the consumer
    pushes ``x != 1.0`` into pyarrow's Parquet scan itself, and lakeline never sees the
    filter. The scan keeps the first file's NaN rows since a file holding a NaN carries
    no statistics for that column (``test_nan_statistics.py``; files written before
    that still lose them, docs/interop.md)."""
    t = _table(tmp_path, layout, False, pa.float64(), nested=True)
    for name, flt, sql in [
        ("ne", FILTERS["ne"], "x != 1.0"),
        ("nested_ne", NESTED_FILTERS["ne"], "s.f != 1.0"),
        ("is_nan", FILTERS["is_nan"], "isnan(x)"),
    ]:
        if consumer == "duckdb":
            rel = t.to_duckdb(connection=duckdb.connect())
            got = sorted(k for (k,) in rel.filter(sql).project("k").fetchall())
        else:
            got = _keys(t.to_pyarrow_dataset().to_table(filter=flt))
        assert 0 in got and got == _expected(t, flt), name


MIXED = pa.schema(
    [
        pa.field("k", pa.int64(), nullable=False),
        pa.field("x", pa.float32()),
        pa.field("s", pa.string()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us", tz="Europe/Paris")),
        pa.field("m", pa.decimal128(9, 2)),
    ]
)


def _mixed_literal(rng: random.Random, col: str) -> object:
    return {
        "k": lambda: rng.randint(-2, 60),
        "x": lambda: rng.choice([NAN, 1.0, 0.5, -1.0, 2.0]),
        "s": lambda: rng.choice(["a", "b", "c", ""]),
        "d": lambda: date(2026, 1, 1) + timedelta(days=rng.randint(-1, 5)),
        "ts": lambda: datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=rng.randint(-1, 5)),
        "m": lambda: Decimal(rng.randint(-200, 200)) / 100,
    }[col]()


def _mixed_filter(rng: random.Random, depth: int = 0) -> pc.Expression:
    r = rng.random()
    if depth < 2 and r < 0.35:
        return _mixed_filter(rng, depth + 1) & _mixed_filter(rng, depth + 1)
    if depth < 2 and r < 0.5:
        return _mixed_filter(rng, depth + 1) | _mixed_filter(rng, depth + 1)
    if depth < 2 and r < 0.6:
        return ~_mixed_filter(rng, depth + 1)
    col = rng.choice(MIXED.names)
    field, value = pc.field(col), pa.scalar(_mixed_literal(rng, col), MIXED.field(col).type)
    if col == "x" and rng.random() < 0.3:
        return pc.is_nan(field) if rng.random() < 0.5 else pc.is_null(field, nan_is_null=True)
    if rng.random() < 0.15:
        return field.isin(pa.array([_mixed_literal(rng, col) for _ in range(3)], MIXED.field(col).type))
    op = rng.choice(["==", "!=", "<", ">="])
    return {"==": field == value, "!=": field != value, "<": field < value, ">=": field >= value}[op]


def test_random_mixed_filters_read_what_arrow_filters(tmp_path: Path) -> None:
    """Filters mixing float tests with tests of other types (dates, zoned timestamps,
    decimals, strings): what the Parquet scan is given holds for every matching row, and
    the read equals Arrow's filter over the whole table."""
    rng = random.Random(45)
    t = Table.create(tmp_path / "t", MIXED, record_key="k", properties={"write.small-file-limit-bytes": 0})
    for start in range(0, 60, 15):
        keys = list(range(start, start + 15))
        t.insert(pa.table({c: [_mixed_literal(rng, c) if c != "k" else k for k in keys] for c in MIXED.names}, MIXED))
    whole = t.to_arrow()
    for _ in range(100):
        flt = _mixed_filter(rng)
        want = _keys(whole.filter(flt))
        push = t.scan(filter=flt)._push
        if push.pushed is not None:
            assert set(want) <= set(_keys(whole.filter(push.pushed))), str(flt)
        assert _keys(t.to_arrow(filter=flt)) == want, str(flt)
