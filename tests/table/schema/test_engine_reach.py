"""DuckDB and Polars reach a table after renames, drops, widenings and nested changes
(issue 29 item 3's "DuckDB/Polars/pyarrow-dataset reach"), without a file rewritten.

A ``pyarrow.dataset.Dataset`` maps files' columns by name, so ``to_pyarrow_dataset``
still refuses such a table and names the routes; ``t.to_duckdb()`` (a DuckDB relation
over the files grouped by physical schema, each projected by field id) and
``t.to_polars()`` (lakeline's scan) must give exactly the rows ``t.to_arrow()`` gives,
with and without filters that DuckDB pushes into the file scans, now and ``as_of``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table, UnsupportedOperationError
from lakeline.timeline import table_config
from lakeline.timeline.errors import UnmergedLogsError

S = pa.struct([("a", pa.int64()), ("b", pa.string())])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("day", pa.string()),
        ("qty", pa.int32()),
        ("legacy", pa.string()),
        ("s", S),
    ]
)


def _rows(ids: range) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"id": i, "day": f"d{i % 2}", "qty": i, "legacy": f"l{i}", "s": None if i == 2 else {"a": i, "b": f"b{i}"}}
            for i in ids
        ],
        schema=SCHEMA,
    )


def _evolve(t: Table) -> None:
    with t.update_schema() as u:
        u.rename_column("qty", "quantity")
        u.update_column("quantity", pa.int64())
        u.delete_column("legacy")
        u.add_column("legacy", pa.string())  # same name, new id: null in old files
        u.rename_column("s.a", "alpha")
        u.delete_column("s.b")


def _sorted(rows: pa.Table) -> list[dict[str, Any]]:
    return sorted(rows.to_pylist(), key=lambda r: r["id"])


def _duck(rel: duckdb.DuckDBPyRelation, where: str = "true") -> list[dict[str, Any]]:
    return _sorted(duckdb.sql(f"SELECT * FROM rel WHERE {where}").to_arrow_table())


FILTERS = [
    ("true", None),
    ("quantity >= 3 AND day = 'd1'", (pc.field("quantity") >= 3) & (pc.field("day") == "d1")),
    ("legacy IS NULL", pc.field("legacy").is_null()),
    ("s.alpha > 2", pc.field("s", "alpha") > 2),
    ("id IN (1, 4, 9)", pc.field("id").isin([1, 4, 9])),
]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_duckdb_and_polars_read_a_renamed_dropped_widened_table_by_id(tmp_path: Path, table_type: str) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"], table_type=table_type)
    t.insert(_rows(range(6)))
    before = t.timeline.last_completed().id
    _evolve(t)
    new = {"id": 9, "day": "d1", "quantity": 2**40, "legacy": "new", "s": {"alpha": 9}}
    t.insert(pa.Table.from_pylist([new], schema=t.schema))  # a file in the new names beside the old ones
    if table_type == "mor":
        t.upsert(pa.Table.from_pylist([{**new, "id": 1}], schema=t.schema))
        with pytest.raises(UnmergedLogsError):
            t.to_duckdb()
        t.services.compact()
    with pytest.raises(UnsupportedOperationError, match=r"t\.to_duckdb\(\)"):
        t.to_pyarrow_dataset()
    rel = t.to_duckdb()
    for where, expr in FILTERS:
        want = _sorted(t.to_arrow(filter=expr))
        assert _duck(rel, where) == want, where
        lazy = t.to_polars() if expr is None else t.to_polars().filter(pl.sql_expr(where))
        assert sorted(lazy.collect().to_dicts(), key=lambda r: r["id"]) == want, where
    assert duckdb.sql("SELECT * FROM rel").to_arrow_table().schema.names == t.schema.names
    old = t.to_duckdb(as_of=before)  # the old schema: old names, the dropped values
    assert _duck(old) == _sorted(t.to_arrow(as_of=before)) == _sorted(_rows(range(6)))
    assert _duck(old, "qty = 4") == [_rows(range(4, 5)).to_pylist()[0]]


def test_duckdb_reads_files_from_before_ids_under_their_old_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "t"
    with monkeypatch.context() as m:
        m.setattr(table_config, "assign_ids", lambda fields, last, keep=True: (list(fields), 0))
        Table.create(path, SCHEMA, record_key="id", table_type="cow")
    t = Table.open(path)
    t.insert(_rows(range(4)))
    _evolve(t)
    rel = t.to_duckdb()
    assert _duck(rel) == _sorted(t.to_arrow())
    assert [r["s"] for r in _duck(rel)] == [{"alpha": 0}, {"alpha": 1}, None, {"alpha": 3}]
    empty = Table.create(tmp_path / "e", SCHEMA, record_key="id")
    rel = empty.to_duckdb()
    assert duckdb.sql("SELECT count(*) FROM rel").fetchall() == [(0,)]
