"""A data file lakeline writes keeps no Parquet statistics for a float column holding a
NaN (issue 45, no row lost, for readers lakeline does not control).

Parquet's float min/max leave NaN out: a row group of ``[NaN, 1.0]`` says min = max =
1.0, and pyarrow's dataset scan and DuckDB's Parquet reader, which prune on them, skip
it for ``x != 1.0`` (and DuckDB for ``x > 1.0``: NaN sorts above every number there).
So a leaf holding a NaN is written without statistics (:func:`statistics_columns`), in
bases, logs, compaction's and clustering's rewrites, while the other columns keep theirs
(lakeline's row-group pruning and other readers skip groups on them), and every reader
then sees every NaN row.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from lakeline.indexes.expressions import from_arrow
from lakeline.table import Table
from lakeline.table.encoding import leaf_paths, statistics_columns
from lakeline.table.read.row_groups import row_group_keep

NAN = float("nan")

SCHEMA = pa.schema(
    [
        pa.field("k", pa.int64(), nullable=False),
        pa.field("x", pa.float64()),
        pa.field("y", pa.float32()),  # never NaN: keeps its statistics
        pa.field("s", pa.struct([pa.field("f", pa.float32()), pa.field("g", pa.int64())])),
        pa.field("l", pa.list_(pa.float64())),
    ]
)


def _rows(keys: list[int], xs: list[float | None]) -> pa.Table:
    """Rows whose ``x``, ``s.f`` and list element are ``xs`` (``y`` never NaN)."""
    return pa.table(
        {
            "k": keys,
            "x": xs,
            "y": [float(k) for k in keys],
            "s": [{"f": v, "g": k} for k, v in zip(keys, xs)],
            "l": [[v] for v in xs],
        },
        schema=SCHEMA,
    )


def _footer(path: str) -> dict[str, bool]:
    """Each leaf path of a file: whether every row group keeps its statistics."""
    md = pq.read_metadata(path)
    return {
        md.schema.column(i).path: all(md.row_group(g).column(i).is_stats_set for g in range(md.num_row_groups))
        for i in range(md.num_columns)
    }


def _files(t: Table) -> list[str]:
    """The live data files (bases and logs) of ``t``, as local paths."""
    out = []
    for s in t.scan().slices:
        out += [f"{t.path}/{f.path}" for f in ([s.base] if s.base else []) + list(s.logs)]
    return out


NAN_LEAVES = {"x", "s.f", "l.list.element"}
KEPT = {"k", "y", "s.g"}


def _table(tmp_path: Path, kind: str) -> Table:
    """A first file holding NaN and 1.0 only, a second without NaN; on merge-on-read an
    upsert adds logs (one with a NaN)."""
    t = Table.create(
        tmp_path / "t", SCHEMA, record_key="k", table_type=kind, properties={"write.small-file-limit-bytes": 0}
    )
    t.insert(_rows([0, 1, 2, 3], [NAN, 1.0, 1.0, NAN]))
    t.insert(_rows([4, 5, 6], [7.0, 8.0, None]))
    t.upsert(_rows([1, 5], [NAN, 9.0]))
    return t


def _check_footers(t: Table) -> None:
    """A file holding a NaN keeps no statistics for that leaf and keeps them for the
    others; a NaN-free file keeps all."""
    whole = t.to_arrow()
    seen_nan = seen_clean = False
    for path in _files(t):
        rows = pq.read_table(path)
        holds = bool(pc.any(pc.is_nan(rows.column("x"))).as_py())
        stats = _footer(path)
        assert all(stats[c] for c in KEPT), (path, stats)
        assert all(stats[c] != holds for c in NAN_LEAVES), (path, stats)
        seen_nan, seen_clean = seen_nan or holds, seen_clean or not holds
    assert seen_nan and seen_clean  # both kinds were checked
    assert whole.num_rows == 7


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_a_leaf_holding_nan_is_written_without_statistics(tmp_path: Path, kind: str) -> None:
    t = _table(tmp_path, kind)
    if kind == "mor":
        assert any(s.logs for s in t.scan().slices)
    _check_footers(t)


def test_compaction_and_clustering_rewrite_without_nan_statistics(tmp_path: Path) -> None:
    t = _table(tmp_path, "mor")
    before = set(_files(t))
    t.services.compact()
    assert not any(s.logs for s in t.scan().slices)
    assert set(_files(t)) != before
    _check_footers(t)
    before = set(_files(t))
    t.services.cluster(sort_by="k")
    assert set(_files(t)).isdisjoint(before)  # every file rewritten: one holding NaN and 1.0
    for path in _files(t):
        assert {c for c, kept in _footer(path).items() if not kept} == NAN_LEAVES
    assert t.to_arrow().num_rows == 7


def test_leaf_paths_are_the_footer_paths() -> None:
    """The paths :func:`statistics_columns` names are those ``pq.write_table`` matches
    (a misnamed leaf would only lose its statistics, never keep a NaN leaf's)."""
    schema = pa.schema(
        [
            pa.field("a", pa.int32()),
            pa.field("h", pa.float16()),
            pa.field("s", pa.struct([pa.field("f", pa.float64()), pa.field("t", pa.struct([("u", pa.string())]))])),
            pa.field("l", pa.list_(pa.float32())),
            pa.field("ll", pa.large_list(pa.struct([("v", pa.float64()), ("w", pa.int8())]))),
            pa.field("fl", pa.list_(pa.int64(), 2)),
            pa.field("m", pa.map_(pa.string(), pa.float64())),
            pa.field("d", pa.dictionary(pa.int32(), pa.string())),
            pa.field("dot.name", pa.float64()),
        ]
    )
    sink = pa.BufferOutputStream()
    pq.write_table(schema.empty_table(), sink)
    md = pq.read_metadata(pa.BufferReader(sink.getvalue()))
    ours = [path for f in schema for path, _ in leaf_paths(f.type, f.name)]
    assert ours == [md.schema.column(i).path for i in range(md.num_columns)]


def test_statistics_columns_name_only_the_nan_free_leaves() -> None:
    half = pa.array(np.array([1.0, np.nan], dtype=np.float16))
    rows = pa.table(
        {
            "k": [1, 2],
            "h": half,
            "m": pa.array([{"a": 1.0}, {"b": NAN}], pa.map_(pa.string(), pa.float64())),
            "c": pa.chunked_array([[1.0], [NAN]]),  # the NaN in a later chunk
            "n": pa.array([1.0, None]),  # a null is no NaN
        }
    )
    assert statistics_columns(rows) == ["k", "m.key_value.key", "n"]
    assert statistics_columns(rows.select(["k", "n"])) is True
    written = pa.BufferOutputStream()
    pq.write_table(rows, written, write_statistics=statistics_columns(rows))
    md = pq.read_metadata(pa.BufferReader(written.getvalue())).row_group(0)
    assert [md.column(i).is_stats_set for i in range(md.num_columns)] == [True, False, True, False, False, True]


#: Filters true for the NaN rows (pyarrow: NaN is unordered, != holds).
ARROW_FILTERS = {"ne": pc.field("x") != 1.0, "is_nan": pc.is_nan(pc.field("x")), "nested_ne": pc.field("s", "f") != 1.0}
#: DuckDB's: NaN equals NaN and sorts above every number.
SQL_FILTERS = ["x != 1.0", "x > 1.0", "isnan(x)", "s.f != 1.0", "list_contains(l, 'NaN'::DOUBLE)"]


def _keys(rows: pa.Table) -> list[int]:
    return sorted(rows.column("k").to_pylist())


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_readers_outside_lakeline_keep_the_nan_rows(tmp_path: Path, kind: str) -> None:
    """pyarrow's dataset over the files and DuckDB's own Parquet reader (each pruning on
    the footers with its own filter) find every NaN row; before, each lost the first
    file's rows. Merge-on-read after compaction, when every slice is a base."""
    t = _table(tmp_path, kind)
    if kind == "mor":
        t.services.compact()
    whole = t.to_arrow()
    bases = _files(t)
    con = duckdb.connect()
    listed = ", ".join(f"'{p}'" for p in bases)
    for name, flt in ARROW_FILTERS.items():
        want = _keys(whole.filter(flt))
        assert 0 in want, name
        assert _keys(ds.dataset(bases).to_table(filter=flt)) == want, name
    con.execute("CREATE TABLE w AS SELECT * FROM whole")  # DuckDB's own rows (a filter on
    # the Arrow table would be pushed into Arrow, which orders NaN as pyarrow does)
    for where in SQL_FILTERS:
        want = sorted(k for (k,) in con.execute(f"SELECT k FROM w WHERE {where}").fetchall())
        got = sorted(k for (k,) in con.execute(f"SELECT k FROM read_parquet([{listed}]) WHERE {where}").fetchall())
        assert 0 in want and got == want, where


def test_row_group_pruning_without_float_statistics(tmp_path: Path) -> None:
    """lakeline's row-group pruning of a merged base: a file whose float column has no
    statistics is read (not pruned, no error) for a float filter, and is still pruned
    on the integer column beside it; the reads equal Arrow's filter."""
    flat = pa.schema([SCHEMA.field("k"), SCHEMA.field("x"), SCHEMA.field("y")])
    props = {"write.small-file-limit-bytes": 0, "write.row-group-rows": 1024}
    t = Table.create(tmp_path / "t", flat, record_key="k", table_type="mor", properties=props)
    n = 4096
    t.insert(_rows(list(range(n)), [NAN if k % 7 == 0 else 1.0 for k in range(n)]).select(flat.names))
    t.indexes.create("column_stats")
    t.upsert(_rows([5, 3000], [NAN, 2.0]).select(flat.names))
    (base,) = [f"{t.path}/{s.base.path}" for s in t.scan().slices if s.base]
    md, file_schema = pq.read_metadata(base), pq.read_schema(base)
    assert md.num_row_groups == 4 and not _footer(base)["x"] and _footer(base)["k"]
    whole = t.to_arrow()
    for flt, groups in [
        (pc.field("x") != 1.0, [True] * 4),
        ((pc.field("k") >= 3000) & (pc.field("x") != 1.0), [False, False, True, True]),
        (pc.field("x") > 1.0, [True] * 4),
    ]:
        tree = from_arrow(flt, t.schema)
        assert row_group_keep(md, file_schema, t.schema, tree).tolist() == groups, str(flt)
        assert _keys(whole.filter(flt))  # something to find
        assert _keys(t.to_arrow(filter=flt)) == _keys(whole.filter(flt)), str(flt)
