"""``with t.update_schema() as u:`` (issue 29): rename, drop, add anywhere and widen
columns without rewriting a file; files written before read by field id.

Each change is checked against a *rewrite of the same data*: a fresh table created with
the changed schema from the start and given the same rows (renamed, dropped, widened as
the change says). Old files read by id must give exactly what the rewrite holds. Bad
input leaves no trace (the strict check of ``nothing_written``: no event, no file).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeline.table import SchemaMismatchError, Table, UnknownColumnError, UnsupportedOperationError
from lakeline.timeline.field_ids import FIELD_ID_KEY, field_id
from lakeline.timeline.instant import Action

from tests.table.write.records_helpers import nothing_written

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        ("day", pa.string()),
        ("qty", pa.int32()),
        ("price", pa.float32()),
        ("legacy", pa.string()),
        ("tags", pa.list_(pa.string())),
    ]
)


def _rows(ids: range, day: str = "d1", bump: int = 0) -> list[dict[str, Any]]:
    return [{"id": i, "day": day, "qty": i + bump, "price": i / 2, "legacy": f"l{i}", "tags": [f"t{i}"]} for i in ids]


def _table(path: Path, table_type: str, **props: Any) -> Table:
    t = Table.create(
        path, SCHEMA, record_key="id", partition_by=["day"], table_type=table_type, properties=props or None
    )
    t.insert(pa.Table.from_pylist(_rows(range(0, 6)), schema=SCHEMA))
    t.upsert(pa.Table.from_pylist(_rows(range(3, 9), bump=100), schema=SCHEMA))  # mor: logs over bases
    return t


def _sorted(t: pa.Table) -> list[dict[str, Any]]:
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def test_every_column_and_nested_field_has_an_id_in_the_schema_and_in_files(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "mor")
    ids = [field_id(f) for f in t.schema]
    assert ids == [1, 2, 3, 4, 5, 6]
    assert field_id(t.schema.field("tags").type.value_field) == 7
    assert t.config.last_column_id == 7
    for path in (tmp_path / "t").rglob("*.parquet"):
        if ".lakeline" in path.parts:
            continue
        fields = {f.name: f for f in pq.read_schema(path)}
        for f in t.schema:
            assert fields[f.name].metadata[FIELD_ID_KEY] == str(field_id(f)).encode()


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_rename_drop_add_widen_read_old_files_as_a_rewrite_of_the_same_data(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type)
    before = _sorted(t.to_arrow())
    as_of = t.timeline.last_completed().id
    n_files = sum(1 for _ in (tmp_path / "t").rglob("*.parquet"))
    with t.update_schema() as u:
        u.rename_column("qty", "quantity")
        u.delete_column("legacy")
        u.add_column("legacy", pa.string(), after="id")  # same name, new id: null in old files
        u.update_column("quantity", pa.int64())
        u.update_column("price", pa.float64())
        u.add_column("note", pa.string())
    assert t.schema.names == ["id", "legacy", "day", "quantity", "price", "tags", "note"]
    assert sum(1 for _ in (tmp_path / "t").rglob("*.parquet")) == n_files, "a schema change rewrote files"
    # The rewrite: the same rows, changed as the schema says, in a table made that way.
    want = [
        {"id": r["id"], "legacy": None, "day": r["day"], "quantity": r["qty"], "price": r["price"],
         "tags": r["tags"], "note": None}
        for r in before
    ]  # fmt: skip
    rewrite = Table.create(tmp_path / "rw", t.schema, record_key="id", partition_by=["day"], table_type=table_type)
    rewrite.insert(pa.Table.from_pylist(want, schema=t.schema))
    assert _sorted(t.to_arrow()) == _sorted(rewrite.to_arrow()) == want
    assert t.to_arrow().schema.equals(rewrite.to_arrow().schema)
    # Filters and projections by the new names, on old files.
    got = t.to_arrow(filter=pc.field("quantity") >= 100, columns=["id", "quantity"])
    assert sorted(got.column("id").to_pylist()) == [r["id"] for r in want if r["quantity"] >= 100]
    assert t.to_arrow(filter=pc.field("legacy").is_null()).num_rows == len(want)
    # ``as_of`` the old instant reads the old schema: old names, old types, dropped values.
    old = t.to_arrow(as_of=as_of)
    assert old.schema.names == SCHEMA.names and old.schema.field("qty").type == pa.int32()
    assert _sorted(old) == before
    # Writes take the new schema; old files and new ones read together.
    t.upsert(pa.Table.from_pylist([{**want[0], "quantity": 2**40, "legacy": "new", "note": "n"}], schema=t.schema))
    t.services.compact() if table_type == "mor" else t.services.cluster(sort_by=["id"])
    got_rows = {r["id"]: r for r in t.to_arrow().to_pylist()}
    assert got_rows[want[0]["id"]] == {**want[0], "quantity": 2**40, "legacy": "new", "note": "n"}
    assert [got_rows[r["id"]] for r in want[1:]] == want[1:]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_write_with_an_old_name_or_a_narrower_type_is_refused(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type)
    with t.update_schema() as u:
        u.rename_column("qty", "quantity")
        u.update_column("price", pa.float64())
    old_names = pa.Table.from_pylist(_rows(range(20, 22)), schema=SCHEMA)
    with nothing_written(t, tmp_path / "t"), pytest.raises(SchemaMismatchError):
        t.upsert(old_names)
    narrow = old_names.rename_columns(["id", "day", "quantity", "price", "legacy", "tags"]).drop_columns(["legacy"])
    narrow = narrow.set_column(2, "quantity", pa.array([1, 2], pa.int64()))
    with nothing_written(t, tmp_path / "t"), pytest.raises(SchemaMismatchError):
        t.upsert(narrow.cast(pa.schema([f.with_type(pa.float16()) if f.name == "price" else f for f in narrow.schema])))


BAD = {
    "narrowing": lambda u: u.update_column("qty", pa.int16()),
    "cross_family": lambda u: u.update_column("legacy", pa.int64()),
    "float_to_int": lambda u: u.update_column("price", pa.int64()),
    "duplicate_add": lambda u: u.add_column("qty", pa.int64()),
    "rename_onto_existing": lambda u: u.rename_column("qty", "price"),
    "drop_record_key": lambda u: u.delete_column("id"),
    "rename_record_key": lambda u: u.rename_column("id", "key"),
    "drop_partition": lambda u: u.delete_column("day"),
    "rename_partition": lambda u: u.rename_column("day", "date"),
    "widen_key": lambda u: u.update_column("id", pa.float64()),
    "not_a_type": lambda u: u.add_column("x", "int64"),
    "reserved_name": lambda u: u.add_column("_op", pa.string()),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_changes_are_refused_typed_and_leave_the_timeline_unchanged(tmp_path: Path, kind: str) -> None:
    t = _table(tmp_path / "t", "mor")
    events = len(t.timeline.instants())
    with nothing_written(t, tmp_path / "t"), pytest.raises(SchemaMismatchError):
        with t.update_schema() as u:
            u.add_column("fine", pa.int8())  # a good step before the bad one lands nothing either
            BAD[kind](u)
    assert len(t.timeline.instants()) == events
    assert t.schema.equals(SCHEMA.remove_metadata(), check_metadata=False) or t.schema.names == SCHEMA.names


def test_an_unknown_column_is_unknown_and_a_raising_block_writes_nothing(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow")
    with nothing_written(t, tmp_path / "t"), pytest.raises(UnknownColumnError):
        with t.update_schema() as u:
            u.rename_column("nope", "x")
    with nothing_written(t, tmp_path / "t"), pytest.raises(KeyError):
        with t.update_schema() as u:
            u.add_column("x", pa.int64())
            raise KeyError("the caller's own error")


def test_aggregated_columns_are_renamed_with_their_setting(tmp_path: Path) -> None:
    """A rename carries ``merge.<column>.aggregate`` along (tests/table/merge_engines/
    test_engine_renames.py follows it through reads, compaction and time travel)."""
    path = tmp_path / "t"
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int32()), ("m", pa.int64())])
    t = Table.create(
        path, schema, record_key="id", table_type="mor",
        properties={"merge.engine": "aggregation", "merge.n.aggregate": "sum"},
    )  # fmt: skip
    t.upsert(pa.table({"id": [1], "n": [1], "m": [1]}, schema=schema))
    with t.update_schema() as u:
        u.rename_column("m", "latest")  # a column with the default aggregate
        u.rename_column("n", "total")
        u.update_column("total", pa.int64())  # a widened aggregate keeps folding
    assert dict(t.config.props.merge_aggregates) == {"total": "sum"}
    t.upsert(pa.table({"id": [1], "total": [2**40], "latest": [5]}))
    assert t.to_arrow().to_pylist() == [{"id": 1, "total": 2**40 + 1, "latest": 5}]


def test_widenings_delta_allows(tmp_path: Path) -> None:
    import datetime as dt
    import decimal

    schema = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False),
            ("b", pa.int8()),
            ("i", pa.int32()),
            ("d", pa.date32()),
            ("dec", pa.decimal128(5, 2)),
        ]
    )
    t = Table.create(tmp_path / "t", schema, record_key="id")
    t.insert(
        pa.Table.from_pylist(
            [{"id": 1, "b": -3, "i": 7, "d": dt.date(2026, 1, 2), "dec": decimal.Decimal("123.45")}], schema=schema
        )
    )
    with t.update_schema() as u:
        u.update_column("b", pa.int16())
        u.update_column("i", pa.float64())
        u.update_column("d", pa.timestamp("us"))
        u.update_column("dec", pa.decimal128(8, 3))
    with t.update_schema() as u:
        u.update_column("b", pa.decimal128(10, 2))
    assert t.to_arrow().to_pylist() == [
        {"id": 1, "b": decimal.Decimal("-3.00"), "i": 7.0, "d": dt.datetime(2026, 1, 2),
         "dec": decimal.Decimal("123.450")}
    ]  # fmt: skip
    for bad in (pa.decimal128(9, 5), pa.decimal128(7, 3)):  # precision up less than scale; narrower
        with pytest.raises(SchemaMismatchError):
            with t.update_schema() as u:
                u.update_column("dec", bad)


def test_one_schema_instant_per_block_with_its_steps(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow")
    n = len(t.timeline.instants())
    with t.update_schema() as u:
        u.add_column("a", pa.int64())
        u.rename_column("a", "b")
    tl = t.timeline
    assert len(tl.instants()) == n + 1
    inst = tl.last_completed()
    assert inst.action is Action.SCHEMA and inst.plan["change"] == "update"
    assert inst.plan["steps"] == ["add a int64", "rename a to b"]
    # Ids are never reused: a column added after a drop gets a fresh one.
    last = t.config.last_column_id
    with t.update_schema() as u:
        u.delete_column("b")
        u.add_column("b", pa.int64())
    assert field_id(t.schema.field("b")) == last + 1 == t.config.last_column_id
    assert t.to_arrow().column("b").null_count == t.to_arrow().num_rows


def test_polars_reads_by_id_and_a_dataset_refuses_files_it_would_misread(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow")
    with t.update_schema() as u:
        u.rename_column("qty", "quantity")
    want = _sorted(t.to_arrow())
    assert sorted(t.to_polars().collect().to_dicts(), key=lambda r: r["id"]) == want
    with pytest.raises(UnsupportedOperationError, match="by field id"):
        t.to_pyarrow_dataset()
    t.services.cluster(sort_by=["id"])  # rewrites every file group under the new names
    assert _sorted(t.to_pyarrow_dataset().to_table()) == want


def test_two_updates_racing_both_land_one_after_the_other(tmp_path: Path) -> None:
    """B's block runs while A's instant is requested: A then finds another schema
    instant completed at its completion, is rolled back and applies its steps again on
    B's schema; neither change is lost, and a clash is refused typed."""
    from lakeline.timeline.diagnostics import faults

    t = _table(tmp_path / "t", "cow")
    other = Table.open(tmp_path / "t")

    def b() -> None:
        with other.update_schema() as u:
            u.rename_column("legacy", "old")

    faults.on("schema.update.after_requested", b)
    try:
        with t.update_schema() as u:
            u.rename_column("qty", "quantity")
    finally:
        faults.disarm_all()
    assert Table.open(tmp_path / "t").schema.names == ["id", "day", "quantity", "price", "old", "tags"]
    states = [i.state for i in t.timeline.instants() if i.action is Action.SCHEMA]
    assert states.count("rolled_back") == 1

    def clash() -> None:
        with other.update_schema() as u:
            u.rename_column("price", "cost")

    faults.on("schema.update.after_requested", clash)
    try:
        with pytest.raises(UnknownColumnError), t.update_schema() as u:
            u.rename_column("price", "amount")  # re-applied on "cost": price is gone
    finally:
        faults.disarm_all()
    assert "cost" in Table.open(tmp_path / "t").schema.names


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_nested_columns_take_a_field_inside_a_struct(tmp_path: Path, table_type: str) -> None:
    """Struct, list and map columns written, upserted, read, compacted and read as of
    before the change; ``add_column("s.c")`` adds a field (fresh id) inside the struct,
    null in the rows written before."""
    st = pa.struct([("a", pa.int64()), ("b", pa.string())])
    m = pa.map_(pa.string(), pa.float64())
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", st), ("l", pa.list_(pa.int32())), ("m", m)])
    t = Table.create(tmp_path / "t", schema, record_key="id", table_type=table_type)
    t.insert(
        pa.table(
            {
                "id": [1, 2],
                "s": pa.array([{"a": 1, "b": "x"}, None], st),
                "l": pa.array([[1], None], pa.list_(pa.int32())),
                "m": pa.array([[("k", 1.0)], []], m),
            }
        )
    )
    before = t.timeline.last_completed().id
    with t.update_schema() as u:
        u.add_column("s.c", pa.int32(), after="a")
    s_type = t.schema.field("s").type
    assert [s_type.field(i).name for i in range(3)] == ["a", "c", "b"]
    assert field_id(s_type.field(1)) == t.config.last_column_id == 10
    t.upsert(
        pa.table(
            {
                "id": [2],
                "s": pa.array([{"a": 5, "c": 9, "b": "y"}], s_type),
                "l": pa.array([[2, 3]], pa.list_(pa.int32())),
                "m": pa.array([[("q", 2.0)]], m),
            }
        )
    )
    t.services.compact() if table_type == "mor" else t.services.cluster(sort_by=["id"])
    assert _sorted(t.to_arrow()) == [
        {"id": 1, "s": {"a": 1, "c": None, "b": "x"}, "l": [1], "m": [("k", 1.0)]},
        {"id": 2, "s": {"a": 5, "c": 9, "b": "y"}, "l": [2, 3], "m": [("q", 2.0)]},
    ]
    assert _sorted(t.to_arrow(as_of=before))[0]["s"] == {"a": 1, "b": "x"}
    with nothing_written(t, tmp_path / "t"), pytest.raises(SchemaMismatchError), t.update_schema() as u:
        u.add_column("s.a", pa.int8())  # a field the struct has
