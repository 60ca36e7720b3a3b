"""``lakeline.spark.filters``: a Spark filter, as SQL text or as a ``Column`` (walked
through its nodes, never its printed form), becomes an Arrow filter that is never
stricter than Spark's own: for seeded random filters over ints, strings, dates and
doubles with nulls, every row Spark keeps is kept by the translation, which prunes
(is not None) for most of them."""

from __future__ import annotations

import random
from datetime import date, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from lakeline.spark.filters import to_arrow_filter

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("d", pa.date32()), ("f", pa.float64())])
DAY0 = date(2024, 1, 1)
STRINGS = ["a", "b", "it's", "z"]


def _rows(rng: random.Random, n: int = 80) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": None if rng.random() < 0.1 else rng.randint(0, 20),
                "s": None if rng.random() < 0.1 else rng.choice(STRINGS),
                "d": None if rng.random() < 0.1 else DAY0 + timedelta(days=rng.randint(0, 9)),
                "f": None if rng.random() < 0.1 else rng.choice([float("nan"), rng.uniform(0, 10)]),
            }
            for _ in range(n)
        ],
        schema=SCHEMA,
    )


def _sql_lit(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, date):
        return f"DATE '{v.isoformat()}'"
    return repr(v)


def _value(rng: random.Random, col: str) -> Any:
    if col == "id":
        return rng.randint(-1, 21)
    if col == "s":
        return rng.choice(STRINGS + ["", "c"])
    if col == "d":
        return DAY0 + timedelta(days=rng.randint(-1, 10))
    return rng.uniform(0, 10)


def _leaf(rng: random.Random) -> tuple[str, Any]:
    """One predicate as (SQL text, Column)."""
    from pyspark.sql import functions as F

    col = rng.choice(["id", "id", "s", "d", "f"])
    c = F.col(col)
    r = rng.random()
    if r < 0.1:
        return (f"{col} IS NULL", c.isNull()) if rng.random() < 0.5 else (f"{col} IS NOT NULL", c.isNotNull())
    if r < 0.25:
        vals = [_value(rng, col) for _ in range(rng.randint(1, 3))] + ([None] if rng.random() < 0.2 else [])
        return f"{col} IN ({', '.join(_sql_lit(v) for v in vals)})", c.isin(*vals)
    if r < 0.32:
        lo, hi = sorted([_value(rng, col), _value(rng, col)])
        return f"{col} BETWEEN {_sql_lit(lo)} AND {_sql_lit(hi)}", c.between(lo, hi)
    if r < 0.38:  # not understood: a function, null-safe equality, arithmetic
        x = _value(rng, "id")
        return rng.choice(
            [
                (f"id <=> {x}", F.col("id").eqNullSafe(x)),
                (f"id + 1 > {x}", F.expr(f"id + 1 > {x}")),
                ("startswith(s, 'a')", F.col("s").startswith("a")),
            ]
        )
    v = _value(rng, col)
    op = rng.choice(["=", "!=", "<", "<=", ">", ">="])
    fn = {"=": c.__eq__, "!=": c.__ne__, "<": c.__lt__, "<=": c.__le__, ">": c.__gt__, ">=": c.__ge__}[op]
    if col == "d" and rng.random() < 0.3:  # a date as a string: Spark casts it to the column's date
        return f"{col} {op} '{v.isoformat()}'", fn(v.isoformat())
    return f"{col} {op} {_sql_lit(v)}", fn(v)


def _filter(rng: random.Random, depth: int = 0) -> tuple[str, Any]:
    r = rng.random()
    if depth < 3 and r < 0.45:
        (a, ca), (b, cb) = _filter(rng, depth + 1), _filter(rng, depth + 1)
        return (f"({a}) AND ({b})", ca & cb) if r < 0.25 else (f"({a}) OR ({b})", ca | cb)
    if depth < 3 and r < 0.55:
        a, ca = _filter(rng, depth + 1)
        return f"NOT ({a})", ~ca
    return _leaf(rng)


def test_spark_filters_translate_never_stricter_than_spark(spark: Any) -> None:
    from pyspark.sql import functions as F

    rng = random.Random(26)
    rows = _rows(rng).append_column("row", pa.array(range(80), pa.int64()))
    df = spark.createDataFrame(rows.to_pylist(), schema="id long, s string, d date, f double, row long")
    filters = [_filter(rng) for _ in range(150)]
    # Spark evaluates every filter in one job: a boolean column per filter and form.
    cols = [F.coalesce(F.expr(text), F.lit(False)).alias(f"t{i}") for i, (text, _) in enumerate(filters)]
    cols += [F.coalesce(col, F.lit(False)).alias(f"c{i}") for i, (_, col) in enumerate(filters)]
    spark_rows = df.select("row", *cols).collect()
    translated = 0
    for i, (text, col) in enumerate(filters):
        for form, flt in (("t", text), ("c", col)):
            kept = {r["row"] for r in spark_rows if r[f"{form}{i}"]}
            arrow = to_arrow_filter(flt, SCHEMA)
            if arrow is None:
                continue
            translated += 1
            ours = set(ds.dataset(rows).to_table(filter=arrow).column("row").to_pylist())
            assert kept <= ours, (text, form, str(arrow), sorted(kept - ours))
        # Both forms read the same (a Column's nodes, the text's tokens), up to how
        # Spark spells a negation and what the parts not understood are; text lakeline
        # does not tokenize (``id + 1``, ``<=>``) is not translated at all.
        a, b = to_arrow_filter(col, SCHEMA), to_arrow_filter(text, SCHEMA)
        assert b is None or (a is not None and a.equals(b)), text
    assert translated > 0.5 * 2 * len(filters), translated  # 205 of 300 with this seed


def test_column_nodes_are_walked_not_printed(spark: Any) -> None:
    from pyspark.sql import functions as F

    id_, s = pc.field("id"), pc.field("s")

    def same(column: Any, want: pc.Expression) -> bool:
        got = to_arrow_filter(column, SCHEMA)
        return got is not None and got.equals(want)

    assert same(F.col("id") > 3, id_ > 3)
    assert same(F.lit(3) < F.col("ID"), id_ > 3)
    # A string literal that prints like a predicate is just a string.
    assert same(F.col("s") == "x') or (id > 1", s == "x') or (id > 1")
    # Not understood parts are true under any number of negations: nothing is hidden.
    assert to_arrow_filter(~(F.col("s").startswith("a") & (F.col("id") == 2)), SCHEMA) is None
    assert same(~F.col("s").startswith("a") & (F.col("id") == 2), id_ == 2)
    assert same(~((F.col("id") == 2) | (F.col("s") == "a")), (id_ != 2) & (s != "a"))
    assert to_arrow_filter(F.col("f") > 1.0, SCHEMA) is None  # NaN orders differently in Spark
    assert to_arrow_filter(F.col("nested.x") == 1, SCHEMA) is None
    assert same(F.expr("id = 4 and s = 'q'"), (id_ == 4) & (s == "q"))
    assert same(F.col("d") == date(2024, 1, 3), pc.field("d") == pa.scalar(date(2024, 1, 3), pa.date32()))
