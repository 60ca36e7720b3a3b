"""Renames and drops of fields inside struct columns (issue 29): files written before
read under the new nested names by field id, a dropped field is gone (and one added
again under its name is null in old files), on both table types, after upserts,
compaction and ``as_of`` the instant before.

Each change is checked against a rewrite of the same data: a fresh table created with
the changed schema and given the same rows changed as the schema says. Bad changes are
refused typed with the timeline unchanged.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import SchemaMismatchError, Table, UnknownColumnError
from lakeline.timeline import table_config
from lakeline.timeline.field_ids import field_id

from tests.table.write.records_helpers import nothing_written

INNER = pa.struct([("u", pa.int32()), ("v", pa.int32())])
S = pa.struct([("a", pa.int64()), ("b", pa.string()), ("c", INNER)])
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", S), ("n", pa.int32())])


def _rows(ids: list[int], bump: int = 0) -> pa.Table:
    rows = [
        {"id": i, "s": None if i == 2 else {"a": i + bump, "b": f"b{i}", "c": {"u": i, "v": -i}}, "n": i} for i in ids
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _table(path: Path, table_type: str) -> Table:
    t = Table.create(path, SCHEMA, record_key="id", table_type=table_type)
    t.insert(_rows([0, 1, 2, 3, 4]))
    t.upsert(_rows([3, 4, 5], bump=100))  # mor: logs over the base
    return t


def _sorted(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def _data_files(path: Path) -> set[Path]:
    return {p for p in path.rglob("*.parquet") if ".lakeline" not in p.parts}


def _changed(r: dict[str, Any]) -> dict[str, Any]:
    """A row as the changed schema says: s.a renamed alpha, s.b dropped and added again
    (null), s.c.u renamed w."""
    s = r["s"]
    if s is not None:
        s = {"alpha": s["a"], "c": {"w": s["c"]["u"], "v": s["c"]["v"]}, "b": None}
    return {**r, "s": s}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_nested_renames_and_drops_read_old_files_as_a_rewrite_of_the_same_data(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type)
    before = _sorted(t.to_arrow())
    as_of = t.timeline.last_completed().id
    files = _data_files(tmp_path / "t")
    b_id = field_id(t.schema.field("s").type.field("b"))
    with t.update_schema() as u:
        u.rename_column("s.a", "alpha")
        u.delete_column("s.b")
        u.add_column("s.b", pa.string())  # same name, new id: null in old files
        u.rename_column("s.c.u", "w")
    s_type = t.schema.field("s").type
    assert [s_type.field(i).name for i in range(3)] == ["alpha", "c", "b"]
    assert field_id(s_type.field(2)) != b_id
    assert _data_files(tmp_path / "t") == files, "a schema change rewrote files"
    want = [_changed(r) for r in before]
    rewrite = Table.create(tmp_path / "rw", t.schema, record_key="id", table_type=table_type)
    rewrite.insert(pa.Table.from_pylist(want, schema=t.schema))
    assert _sorted(t.to_arrow()) == _sorted(rewrite.to_arrow()) == want
    assert t.to_arrow().schema.equals(rewrite.to_arrow().schema)
    # A filter on a renamed nested field, on old files.
    got = t.to_arrow(filter=pc.field("s", "alpha") >= 100, columns=["id"])
    assert sorted(got.column("id").to_pylist()) == [3, 4, 5]
    assert t.to_arrow(filter=pc.field("s", "b").is_valid()).num_rows == 0
    # ``as_of`` the instant before reads the old nested names and the dropped values.
    assert _sorted(t.to_arrow(as_of=as_of)) == before
    # Writes take the new names; old and new files read together, after services too.
    new = {"id": 1, "s": {"alpha": 7, "c": {"w": 8, "v": 9}, "b": "new"}, "n": 1}
    t.upsert(pa.Table.from_pylist([new], schema=t.schema))
    assert _sorted(t.to_arrow(as_of=as_of)) == before
    t.services.compact() if table_type == "mor" else t.services.cluster(sort_by=["id"])
    assert _sorted(Table.open(tmp_path / "t").to_arrow()) == [new if r["id"] == 1 else r for r in want]
    old_then = t.to_arrow(as_of=as_of)
    assert _sorted(old_then) == before
    # A write under an old nested name is refused (it would lose the field).
    with nothing_written(t, tmp_path / "t"), pytest.raises(SchemaMismatchError):
        t.upsert(_rows([6]))


def test_nested_refusals_are_typed_and_leave_the_timeline_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = Table.create(path, SCHEMA, record_key="id", table_type="mor")
    t.insert(_rows([0, 1]))
    bad = [
        (SchemaMismatchError, lambda u: u.rename_column("s.a", "b")),  # onto a sibling
        (SchemaMismatchError, lambda u: u.rename_column("s.a", "x.y")),  # no plain name
        (SchemaMismatchError, lambda u: u.rename_column("s.a", "")),
        (SchemaMismatchError, lambda u: (u.delete_column("s.c.u"), u.delete_column("s.c.v"))),  # the last field
        (SchemaMismatchError, lambda u: u.rename_column("s.a.z", "y")),  # a is no struct
        (UnknownColumnError, lambda u: u.rename_column("s.zz", "y")),
        (UnknownColumnError, lambda u: u.delete_column("s.zz.u")),
    ]
    for error, step in bad:
        with nothing_written(t, path), pytest.raises(error), t.update_schema() as u:
            step(u)
    # An index follows its columns by field id (since 2026-11-27): the fields of an
    # indexed struct column change, and its older entries, which recorded the struct's
    # type, are no longer asked (tests/table/schema/test_index_renames.py).
    t.indexes.create("column_stats", columns=["s", "n"], wait=True)
    with t.update_schema() as u:
        u.rename_column("s.a", "y")
        u.delete_column("s.b")
    assert t.indexes.validate("column_stats")["mismatches"] == []


def test_a_nested_field_of_a_table_from_before_ids_renames_by_its_old_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files without ids hold a struct's fields by name: a renamed nested field is found
    under the name it had when the table got ids, and a field added again under a
    dropped name is in none of them."""
    path = tmp_path / "t"
    with monkeypatch.context() as m:
        m.setattr(table_config, "assign_ids", lambda fields, last, keep=True: (list(fields), 0))
        Table.create(path, SCHEMA, record_key="id", table_type="cow")
    t = Table.open(path)
    t.insert(_rows([0, 1, 2]))
    before = _sorted(t.to_arrow())
    with t.update_schema() as u:
        u.rename_column("s.a", "alpha")
        u.delete_column("s.b")
        u.add_column("s.b", pa.string())
        u.rename_column("s.c.u", "w")
    assert _sorted(t.to_arrow()) == [_changed(r) for r in before]
    with t.update_schema() as u:
        u.rename_column("s.alpha", "a2")  # a second rename still finds the old files' name
    assert [r["s"] and r["s"]["a2"] for r in _sorted(t.to_arrow())] == [0, 1, None]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_field_inside_a_struct_widens_and_old_files_read_cast(tmp_path: Path, table_type: str) -> None:
    """``update_column("s.c.u", int64)`` (and ``s.a`` to a decimal, after renaming it):
    old files' structs are read by id and the field cast, equal to a rewrite of the
    same data under the widened schema."""
    t = _table(tmp_path / "t", table_type)
    files = _data_files(tmp_path / "t")
    with t.update_schema() as u:
        u.update_column("s.c.u", pa.int64())
        u.rename_column("s.a", "alpha")
        u.update_column("s.alpha", pa.decimal128(24, 2))
    assert _data_files(tmp_path / "t") == files  # no file rewritten
    wide = t.schema.field("s").type
    assert wide.field("c").type.field("u").type == pa.int64()
    big = {"id": 6, "s": {"alpha": 10**20, "b": "b6", "c": {"u": 2**40, "v": 6}}, "n": 6}
    t.upsert(pa.Table.from_pylist([big], schema=t.schema))
    want = [
        {**r, "s": None if r["s"] is None else {"alpha": r["s"]["a"], "b": r["s"]["b"], "c": r["s"]["c"]}}
        for r in _sorted(_table(tmp_path / "plain", table_type).to_arrow())
    ] + [big]
    rewrite = Table.create(tmp_path / "rewrite", t.schema, record_key="id", table_type=table_type)
    rewrite.insert(pa.Table.from_pylist(want, schema=t.schema))
    assert _sorted(t.to_arrow()) == _sorted(rewrite.to_arrow())
    assert t.to_arrow().schema.field("s").type == wide
    if table_type == "mor":
        t.services.compact()  # DuckDB reads base files only
    duck = t.to_duckdb().order("id").arrow().read_all()
    assert duck.to_pylist() == _sorted(rewrite.to_arrow())
    t.services.cluster(sort_by=["id"])
    assert _sorted(Table.open(tmp_path / "t").to_arrow()) == _sorted(rewrite.to_arrow())


def test_widening_a_nested_field_refuses_what_the_top_level_refuses(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = _table(path, "cow")
    bad = [
        (SchemaMismatchError, lambda u: u.update_column("s.a", pa.int32())),  # narrowing
        (SchemaMismatchError, lambda u: u.update_column("s.b", pa.int64())),  # across families
        (SchemaMismatchError, lambda u: u.update_column("s.a.z", pa.int64())),  # a is no struct
        (UnknownColumnError, lambda u: u.update_column("s.zz", pa.int64())),
        (UnknownColumnError, lambda u: u.update_column("s.c.zz", pa.int64())),
    ]
    for error, step in bad:
        with nothing_written(t, path), pytest.raises(error), t.update_schema() as u:
            step(u)
