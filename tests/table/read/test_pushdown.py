"""Reading lakeline tables from DuckDB and Polars with pushdown: ``Table.to_pyarrow_dataset``
(snapshots without unmerged logs) and ``Table.to_polars`` (a Polars IO source over
``Scan``, merge-on-read included).

Every query runs in the real engines and is compared, over many random filters, with the
same engine evaluating the same filter over ``t.to_arrow()`` (the whole table read
through lakeline's own merge, loaded into the engine): pushing filters down may prune
files but never change a result. Pruning itself is shown by the source's ``Scan.explain()``
counters and by the dataset's fragment selection.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from lakeline.table import LakelineError, SnapshotExpiredError, Table, UnsupportedOperationError
from lakeline.table.read.polars_source import PolarsSource, to_arrow_filter
from lakeline.timeline.errors import UnmergedLogsError

duckdb = pytest.importorskip("duckdb")
pl = pytest.importorskip("polars")

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("day", pa.string()),
        pa.field("v", pa.int64()),
        pa.field("s", pa.string()),
        pa.field("f", pa.float64()),
        pa.field("ok", pa.bool_()),
    ]
)
COLS = SCHEMA.names
DAYS = ["d0", "d1", "d2", None]
ROWS_PER_DAY = 150
#: Merge-on-read inserts start a group each instead of filling small groups through logs.
NO_FILL = {"write.small-file-limit-bytes": 0}


def _rows(rng: random.Random, ids: list[int]) -> pa.Table:
    """Rows whose ids are contiguous per partition, so files have disjoint key ranges."""
    return pa.table(
        {
            "id": ids,
            "day": [DAYS[min(i // ROWS_PER_DAY, len(DAYS) - 1)] for i in ids],
            "v": [rng.choice([None, rng.randint(0, 99)]) for _ in ids],
            "s": [rng.choice(["x", "y", "z", None]) for _ in ids],
            "f": [rng.choice([None, round(rng.uniform(-1, 1), 3)]) for _ in ids],
            "ok": [rng.choice([True, False, None]) for _ in ids],
        },
        schema=SCHEMA,
    )


def _build(path: Path, table_type: str, compact: bool) -> Table:
    """Insert, upsert, delete and insert more: a mor table ends with logs on most slices."""
    rng = random.Random(5)
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        partition_by=["day"],
        table_type=table_type,
        properties={"write.target-file-size-bytes": 1200},
    )
    n = ROWS_PER_DAY * len(DAYS)
    t.insert(_rows(rng, list(range(n))))
    t.upsert(_rows(rng, sorted(rng.sample(range(n), 80))))
    t.delete(pa.table({"id": pa.array(sorted(rng.sample(range(n), 30)), pa.int64())}))
    t.upsert(_rows(rng, list(range(n, n + 20))))
    if compact:
        assert t.services.compact().instant is not None
    return t


@pytest.fixture(scope="module")
def mor_logs(tmp_path_factory: pytest.TempPathFactory) -> Table:
    t = _build(tmp_path_factory.mktemp("pushdown") / "mor", "mor", compact=False)
    assert any(s.logs for s in t.scan().slices)
    return t


@pytest.fixture(scope="module", params=["cow", "mor_compacted"])
def merged(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Table:
    kind = str(request.param)
    return _build(tmp_path_factory.mktemp("pushdown") / kind, kind.split("_")[0], compact=kind != "cow")


# -- random filters, in the three languages -------------------------------------------------------


@dataclass(frozen=True)
class Filter:
    arrow: pc.Expression
    polars: Any  # pl.Expr
    sql: str
    #: no ``is_in`` under a negation: Polars' own pyarrow translation (``scan_pyarrow_dataset``)
    #: turns ``~is_in`` into Arrow's, which is true on nulls where Polars' is null
    arrow_safe: bool = True


def _lit_sql(v: Any) -> str:
    return f"'{v}'" if isinstance(v, str) else str(v)


_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "=": lambda a, b: a == b,
    "<>": lambda a, b: a != b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


def _leaf(rng: random.Random) -> Filter:
    col = rng.choice(["id", "id", "day", "day", "v", "s", "f", "ok"])
    pick: Callable[[], Any] = {
        "id": lambda: rng.randint(-5, ROWS_PER_DAY * len(DAYS) + 30),
        "day": lambda: rng.choice(["d0", "d1", "d2", "d9"]),
        "v": lambda: rng.randint(0, 99),
        "s": lambda: rng.choice(["x", "y", "z"]),
        "f": lambda: round(rng.uniform(-1, 1), 2),
        "ok": lambda: rng.choice([True, False]),
    }[col]
    kind = rng.choices(["cmp", "isin", "null", "between", "bool"], weights=[6, 2, 1, 1, 1])[0]
    if kind == "bool" or (col == "ok" and kind in ("cmp", "between")):
        return Filter(pc.field("ok"), pl.col("ok"), "ok")
    if kind == "null":
        if rng.random() < 0.5:
            return Filter(pc.field(col).is_null(), pl.col(col).is_null(), f"{col} IS NULL")
        return Filter(pc.field(col).is_valid(), pl.col(col).is_not_null(), f"{col} IS NOT NULL")
    if kind == "isin":
        vals = sorted({pick() for _ in range(rng.randint(1, 3))}, key=str)
        return Filter(
            pc.field(col).isin(vals), pl.col(col).is_in(vals), f"{col} IN ({', '.join(_lit_sql(v) for v in vals)})"
        )
    if kind == "between":
        lo, hi = sorted([pick(), pick()], key=lambda x: (str(type(x)), x))
        return Filter(
            (pc.field(col) >= lo) & (pc.field(col) <= hi),
            pl.col(col).is_between(pl.lit(lo), pl.lit(hi)),
            f"{col} BETWEEN {_lit_sql(lo)} AND {_lit_sql(hi)}",
        )
    op, value = rng.choice(list(_OPS)), pick()
    fn = _OPS[op]
    return Filter(fn(pc.field(col), value), fn(pl.col(col), value), f"{col} {op} {_lit_sql(value)}")


def random_filter(rng: random.Random, depth: int = 2) -> Filter:
    if depth == 0 or rng.random() < 0.3:
        return _leaf(rng)
    kind = rng.choice(["and", "and", "or", "not"])
    a = random_filter(rng, depth - 1)
    if kind == "not":
        return Filter(~a.arrow, ~a.polars, f"NOT ({a.sql})", a.arrow_safe and "is_in" not in str(a.polars))
    b = random_filter(rng, depth - 1)
    if kind == "and":
        return Filter(a.arrow & b.arrow, a.polars & b.polars, f"({a.sql}) AND ({b.sql})", a.arrow_safe and b.arrow_safe)
    return Filter(a.arrow | b.arrow, a.polars | b.polars, f"({a.sql}) OR ({b.sql})", a.arrow_safe and b.arrow_safe)


def _sorted_rows(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(rows, key=lambda r: r[0])


def _pl_rows(frame: Any) -> list[tuple[Any, ...]]:
    return _sorted_rows(frame.select(COLS).rows())


def _arrow_rows(table: pa.Table) -> list[tuple[Any, ...]]:
    return _sorted_rows(list(zip(*(table.column(c).to_pylist() for c in COLS))))


def _sql(con: Any, relation: str, where: str) -> list[tuple[Any, ...]]:
    return _sorted_rows(con.sql(f"SELECT {', '.join(COLS)} FROM {relation} WHERE {where}").fetchall())


def _native(table: pa.Table) -> Any:
    """A DuckDB connection holding ``table`` as a native DuckDB table ``expected``: the
    reference evaluation of each SQL filter, with no Arrow scan involved."""
    con = duckdb.connect()
    con.register("whole", table)
    con.execute("CREATE TABLE expected AS SELECT * FROM whole")
    con.unregister("whole")
    return con


# -- to_pyarrow_dataset ----------------------------------------------------------------------------


def test_dataset_queries_equal_the_table(merged: Table) -> None:
    whole = merged.to_arrow()
    dset = merged.to_pyarrow_dataset()
    assert isinstance(dset, ds.Dataset)
    assert _arrow_rows(dset.to_table()) == _arrow_rows(whole)
    con = _native(whole)
    con.register("lake", dset)  # DuckDB scans the dataset, pushing filters and projections
    eager = pl.from_arrow(whole)
    lazy = pl.scan_pyarrow_dataset(dset)
    rng = random.Random(21)
    nonempty = 0
    for _ in range(30):
        f = random_filter(rng)
        want_sql = _sql(con, "expected", f.sql)
        assert _sql(con, "lake", f.sql) == want_sql, f.sql
        if f.arrow_safe:
            want_pl = _pl_rows(eager.filter(f.polars))
            assert _pl_rows(lazy.filter(f.polars).collect()) == want_pl, str(f.polars)
        assert _arrow_rows(dset.to_table(filter=f.arrow)) == _arrow_rows(merged.to_arrow(filter=f.arrow)), str(f.arrow)
        nonempty += bool(want_sql)
    assert nonempty >= 5  # the filters are not all trivially empty


def test_dataset_fragments_carry_partition_values_and_key_ranges(merged: Table) -> None:
    dset = merged.to_pyarrow_dataset()
    frags = list(dset.get_fragments())
    assert len(frags) == len(merged.scan().files()) and len(frags) > len(DAYS)
    by_day = list(dset.get_fragments(filter=pc.field("day") == "d1"))
    assert 0 < len(by_day) < len(frags)
    assert all("d1" in str(f.partition_expression) for f in by_day)
    # the key range prunes inside a partition, before any file is opened
    narrow = list(dset.get_fragments(filter=(pc.field("day") == "d1") & (pc.field("id") < ROWS_PER_DAY + 10)))
    assert 0 < len(narrow) < len(by_day)
    assert list(dset.get_fragments(filter=pc.field("day") == "nowhere")) == []
    con = duckdb.connect()
    con.register("lake", dset)
    got = con.sql(f"SELECT count(*) FROM lake WHERE day = 'd1' AND id < {ROWS_PER_DAY + 10}").fetchone()
    want = merged.to_arrow(filter=(pc.field("day") == "d1") & (pc.field("id") < ROWS_PER_DAY + 10)).num_rows
    assert got == (want,) and want > 0


def test_dataset_refuses_unmerged_logs(mor_logs: Table) -> None:
    with pytest.raises(UnmergedLogsError) as exc:
        mor_logs.to_pyarrow_dataset()
    assert isinstance(exc.value, LakelineError) and isinstance(exc.value, UnsupportedOperationError)
    assert "compact" in str(exc.value) and "scan" in str(exc.value)


def test_dataset_time_travel_and_retention(tmp_path: Path) -> None:
    rng = random.Random(3)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"], table_type="mor")
    first = t.insert(_rows(rng, list(range(100)))).instant
    old_files = t.scan().files()
    second = t.upsert(_rows(rng, list(range(0, 100, 7)))).instant
    with pytest.raises(UnmergedLogsError):
        t.to_pyarrow_dataset()
    with pytest.raises(UnmergedLogsError):
        t.to_pyarrow_dataset(as_of=second.id)
    before = t.to_pyarrow_dataset(as_of=first.id)  # inserts wrote base files only
    assert _arrow_rows(before.to_table()) == _arrow_rows(t.to_arrow(as_of=first.id))
    assert _arrow_rows(t.to_pyarrow_dataset(as_of=first.completed_at).to_table()) == _arrow_rows(before.to_table())
    t.services.compact()
    assert _arrow_rows(t.to_pyarrow_dataset().to_table()) == _arrow_rows(t.to_arrow())
    assert _arrow_rows(t.to_arrow()) != _arrow_rows(before.to_table())
    for f in set(old_files) - set(t.scan().files()):
        os.remove(f)  # what a clean of the compacted slices does
    with pytest.raises(SnapshotExpiredError):
        t.to_pyarrow_dataset(as_of=first.id)


# -- to_polars -------------------------------------------------------------------------------------


def test_polars_source_over_merge_on_read_equals_the_table(mor_logs: Table) -> None:
    whole = mor_logs.to_arrow()
    eager = pl.from_arrow(whole)
    source = PolarsSource(mor_logs.context())
    lazy = source.lazy_frame()
    assert _pl_rows(mor_logs.to_polars().collect()) == _pl_rows(eager)
    con = _native(whole)
    con.register("lake", lazy)  # DuckDB pushes its filter into the Polars frame, then into the source
    rng = random.Random(34)
    pushed = pruned = 0
    for _ in range(30):
        f = random_filter(rng)
        before = len(source.explains)
        assert _pl_rows(lazy.filter(f.polars).collect()) == _pl_rows(eager.filter(f.polars)), str(f.polars)
        assert _sql(con, "lake", f.sql) == _sql(con, "expected", f.sql), f.sql
        new = source.explains[before:]
        assert new, "the source was not called"
        pushed += any(e["filter"] is not None for e in new)
        pruned += any(int(str(e["files_after_bloom_pruning"])) < int(str(e["files_total"])) for e in new)
    assert pushed >= 10 and pruned >= 5


def test_polars_source_prunes_partitions_and_key_ranges(mor_logs: Table) -> None:
    source = PolarsSource(mor_logs.context())
    hi = ROWS_PER_DAY + 10
    got = source.lazy_frame().filter((pl.col("day") == "d1") & (pl.col("id") < hi)).select("id", "v").collect()
    want = mor_logs.to_arrow(filter=(pc.field("day") == "d1") & (pc.field("id") < hi), columns=["id", "v"])
    assert sorted(got.rows()) == sorted(zip(want.column("id").to_pylist(), want.column("v").to_pylist()))
    (ex,) = source.explains
    assert ex["exact"] is True and "d1" in str(ex["filter"])
    assert ex["columns"] == ["id", "day", "v"]  # projection plus the predicate's columns
    total, by_partition, by_range = (
        int(str(ex[k])) for k in ("files_total", "files_after_partition_pruning", "files_after_stats_pruning")
    )
    assert 0 < by_range < by_partition < total


def test_polars_projection_and_row_limit(mor_logs: Table) -> None:
    source = PolarsSource(mor_logs.context())
    lazy = source.lazy_frame()
    head = lazy.filter(pl.col("day") == "d2").head(7).collect()
    assert head.height == 7 and set(head["day"].to_list()) == {"d2"}
    only_s = lazy.select("s").collect()
    assert only_s.columns == ["s"] and only_s.height == mor_logs.to_arrow().num_rows
    assert source.explains[-1]["columns"] == ["s"]


def test_polars_untranslatable_predicates_are_still_applied(mor_logs: Table) -> None:
    eager = pl.from_arrow(mor_logs.to_arrow())
    lazy = mor_logs.to_polars()
    for pred in [
        (pl.col("v") * 2 > 100) & (pl.col("day") == "d0"),  # half translated: the day part is pushed
        pl.col("s").str.starts_with("x") | (pl.col("id") < 5),  # an untranslated side: nothing pushed
        ~((pl.col("v") + 1 > 50) & (pl.col("id") > 10)),  # a negation of a partial: nothing pushed
        pl.col("id").cast(pl.Int32) == 7,
    ]:
        assert _pl_rows(lazy.filter(pred).collect()) == _pl_rows(eager.filter(pred)), str(pred)


def test_translation_is_sound_for_nan_and_nulls(tmp_path: Path) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type="mor")
    rows = pa.table(
        {
            "id": [1, 2, 3, 4],
            "day": ["a", None, "b", "c"],
            "v": [1, None, 3, 4],
            "s": ["x", None, "y", "x"],
            "f": [0.9, float("nan"), None, 0.1],
            "ok": [True, None, False, True],
        },
        schema=SCHEMA,
    )
    t.insert(rows)
    t.upsert(rows.slice(3))
    eager = pl.from_arrow(t.to_arrow())
    lazy = t.to_polars()
    # Polars orders NaN above every number: the NaN row matches, so nothing is pushed.
    assert to_arrow_filter(pl.col("f") > 0.5, SCHEMA) == (None, False)
    got = lazy.filter(pl.col("f") > 0.5).collect()
    assert sorted(got["id"].to_list()) == [1, 2] == sorted(eager.filter(pl.col("f") > 0.5)["id"].to_list())
    for pred in [~pl.col("s").is_in(["x"]), ~(pl.col("v") > 2), pl.col("day").is_null(), ~pl.col("ok")]:
        got_ids = sorted(lazy.filter(pred).collect()["id"].to_list())  # ids: NaN != NaN in rows
        assert got_ids == sorted(eager.filter(pred)["id"].to_list()), str(pred)
    assert to_arrow_filter(pl.col("v") == 10**30, SCHEMA)[0] is None


def test_polars_time_travel_is_pinned(tmp_path: Path) -> None:
    rng = random.Random(8)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"], table_type="mor")
    first = t.insert(_rows(rng, list(range(50)))).instant
    pinned = t.to_polars()
    t.upsert(_rows(rng, list(range(40, 60))))
    assert _pl_rows(pinned.collect()) == _arrow_rows(t.to_arrow(as_of=first.id))
    assert _pl_rows(t.to_polars(as_of=first.id).collect()) == _arrow_rows(t.to_arrow(as_of=first.id))
    assert _pl_rows(t.to_polars().collect()) == _arrow_rows(t.to_arrow())


def test_importing_lakeline_table_does_not_import_duckdb_or_polars() -> None:
    code = (
        "import sys, lakeline.table; bad = [m for m in ('duckdb', 'polars') if m in sys.modules]; assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_polars_source_uses_the_ready_indexes(tmp_path: Path) -> None:
    """Files whose key ranges all overlap: only the indexes can prune them, and do so
    through the source (column stats for ``w``, bloom filters for ``id ==``)."""
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("w", pa.int64())])
    # A group per insert (small groups not filled through logs): a slice is pruned only
    # when none of its files may match.
    t = Table.create(tmp_path / "t", schema, record_key="id", table_type="mor", properties=NO_FILL)
    for batch in range(4):  # each write: ids spread over the whole range, w one block per write
        ids = list(range(batch, 400, 4))
        t.insert(pa.table({"id": ids, "w": [batch * 1000 + i for i in range(len(ids))]}, schema=schema))
    t.indexes.create("column_stats", columns=["w"], wait=True)
    t.indexes.create("bloom_filters", columns=["id"], wait=True)
    eager = pl.from_arrow(t.to_arrow())
    source = PolarsSource(t.context())
    lazy = source.lazy_frame()
    for pred, stage in [
        (pl.col("w") < 1050, "files_after_stats_pruning"),
        (pl.col("id") == 201, "files_after_bloom_pruning"),
    ]:
        assert sorted(lazy.filter(pred).collect().rows()) == sorted(eager.filter(pred).rows())
        ex = source.explains[-1]
        assert int(str(ex[stage])) < int(str(ex["files_total"])) == 4, ex
