"""Tables that keep non-nullable columns (issue 46 item 1): every operation works on
them, on copy-on-write and merge-on-read alike, nested non-nullable fields included.

A delete record carries only its key; the other columns are null. Before, those nulls
were cast into the table's schema: a copy-on-write rewrite failed ("Casting field 'ts'
with null values to non-nullable") and a merge-on-read log of a table with a struct of
non-nullable fields too ("nulls in input cannot be viewed as non-nullable"). Each
test below runs every operation through the public API and compares the table with a
model of what it holds, and its schema with the one it was created with.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.table.write.changes import write_changes
from lakeline.table.write.records import delete_records
from lakeline.timeline.errors import SchemaMismatchError
from lakeline.timeline.field_ids import typed_nulls

INNER = pa.struct([pa.field("b", pa.string(), False)])
POINT = pa.struct([pa.field("x", pa.int64(), False), pa.field("inner", INNER, False)])
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), False),
        pa.field("ts", pa.timestamp("us", "UTC"), False),
        pa.field("name", pa.string(), False),
        pa.field("point", POINT, False),
        pa.field("maybe", POINT, True),  # a nullable struct whose fields are not
        pa.field("tags", pa.list_(pa.field("item", pa.string(), False)), False),
        pa.field("props", pa.map_(pa.string(), pa.field("value", pa.int64(), False)), True),
        pa.field("day", pa.string(), False),
    ]
)


def row(i: int, version: int = 0) -> dict[str, Any]:
    return {
        "id": i,
        "ts": 1_000_000 * (i + version),
        "name": f"n{i}v{version}",
        "point": {"x": i, "inner": {"b": f"b{version}"}},
        "maybe": None if i % 3 == 0 else {"x": -i, "inner": {"b": "m"}},
        "tags": [f"t{version}"] * (i % 3),
        "props": None if i % 4 == 0 else [("k", i + version)],
        "day": "d1" if i % 2 else "d2",
    }


def rows(ids: list[int], version: int = 0) -> pa.Table:
    return pa.Table.from_pylist([row(i, version) for i in ids], schema=SCHEMA)


def keys(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


class Model:
    """What the table must hold: id -> row."""

    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}

    def upsert(self, ids: list[int], version: int) -> None:
        self.rows.update({i: row(i, version) for i in ids})

    def delete(self, ids: list[int]) -> None:
        for i in ids:
            self.rows.pop(i, None)


def check(t: Table, model: Model) -> None:
    """Every reader gives the model's rows: a full read, a streamed one, a read by key
    (the key-only merge), a filtered one, Polars'."""
    got = t.to_arrow()
    assert _plain(got.schema) == _plain(SCHEMA)
    want = pa.Table.from_pylist([model.rows[i] for i in sorted(model.rows)], schema=SCHEMA)
    assert got.sort_by("id").to_pylist() == want.to_pylist()
    streamed = pa.Table.from_batches(list(t.scan().to_batches()), schema=got.schema)
    assert streamed.sort_by("id").to_pylist() == want.to_pylist()
    for where in (pc.field("id") == 2, pc.field("name") != "none"):
        filtered = t.to_arrow(filter=where).sort_by("id").to_pylist()
        assert filtered == want.filter(where).to_pylist()
    assert t.to_polars().collect().height == len(model.rows)


def _plain(schema: pa.Schema) -> list[tuple[str, str, bool]]:
    """Names, types (nested nullability included) and nullability, without field ids."""
    from lakeline.timeline.field_ids import strip_ids

    return [(f.name, str(strip_ids(f.type)), f.nullable) for f in schema]


def make(tmp_path: Path, table_type: str, partitioned: bool = False) -> tuple[Table, Model]:
    t = Table.create(
        tmp_path / f"{table_type}{int(partitioned)}",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"] if partitioned else None,
        table_type=table_type,
    )
    model = Model()
    t.insert(rows(list(range(12))))
    model.upsert(list(range(12)), 0)
    return t, model


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("partitioned", [False, True])
def test_every_write_on_a_table_with_non_nullable_columns(tmp_path: Path, table_type: str, partitioned: bool) -> None:
    t, model = make(tmp_path, table_type, partitioned)
    assert t.delete(keys([1, 4])).stats["deleted"] == 2
    model.delete([1, 4])
    check(t, model)
    # Updates and deletes of one slice in logs of their own, then in one log.
    t.upsert(rows([2, 3, 20], 1))
    model.upsert([2, 3, 20], 1)
    t.delete(keys([3, 9]))
    model.delete([3, 9])
    check(t, model)
    t.delete_where(pc.field("id") >= 10)
    model.delete([i for i in model.rows if i >= 10])
    check(t, model)
    t.update(pc.field("id") == 2, {"name": pa.scalar("renamed")})
    model.rows[2]["name"] = "renamed"
    check(t, model)
    # A change batch: deletes and upserts in one write (the data source's sink).
    write_changes(t, rows([5, 30], 2), keys([6]).append_column("day", pa.array(["d2"])), None)
    model.upsert([5, 30], 2)
    model.delete([6])
    check(t, model)
    if table_type == "mor":
        assert t.services.compact().instant is not None
        check(t, model)
    t.delete(keys([0]))
    model.delete([0])
    assert t.services.cluster().instant is not None
    check(t, model)
    t.delete(keys([7]))
    model.delete([7])
    check(t, model)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_changes_name_the_deleted_keys(tmp_path: Path, table_type: str) -> None:
    t, _ = make(tmp_path, table_type)
    start = t.timeline.last_completed().id  # type: ignore[union-attr]
    t.upsert(rows([2], 1))
    t.delete(keys([5, 8]))
    net = t.changes(start).sort_by("id")
    assert net.select(["id", "_op"]).to_pylist() == [
        {"id": 2, "_op": "update"},
        {"id": 5, "_op": "delete"},
        {"id": 8, "_op": "delete"},
    ]
    images = t.changes(start, images=True)
    deletes = images.filter(pc.equal(images.column("_op"), "delete")).sort_by("id")
    assert deletes.column("id").to_pylist() == [5, 8]
    # The delete images carry the row as it was (the before image), every column valid.
    assert deletes.column("name").to_pylist() == ["n5v0", "n8v0"]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_struct_of_non_nullable_fields_added_later(tmp_path: Path, table_type: str) -> None:
    """Files written before a column was added read it as nulls; a struct whose fields
    are not nullable must read so too, and take upserts and deletes after."""
    t, model = make(tmp_path, table_type)
    with t.update_schema() as u:
        u.add_column("extra", POINT)
    got = t.to_arrow().sort_by("id")
    assert got.column("extra").null_count == got.num_rows
    t.delete(keys([3]))
    t.upsert(rows([4], 1).append_column("extra", pa.array([{"x": 1, "inner": {"b": "e"}}], POINT)))
    got = t.to_arrow().sort_by("id")
    assert 3 not in got.column("id").to_pylist()
    assert got.filter(pc.field("id") == 4).column("extra").to_pylist() == [{"x": 1, "inner": {"b": "e"}}]
    assert got.num_rows == len(model.rows) - 1


def test_delete_records_declare_every_other_column_nullable() -> None:
    recs = delete_records(keys([1, 2]), SCHEMA, ("id",))
    assert recs.schema.field("id").nullable is False
    assert all(f.nullable for f in recs.schema if f.name != "id")
    assert [f.type for f in recs.schema] == SCHEMA.types  # nested types unchanged
    assert recs.column("point").null_count == 2
    # Every cast to the table's (nested) types accepts them: nothing non-nullable is null.
    for f in SCHEMA:
        if f.name != "id":
            assert recs.column(f.name).cast(f.type).null_count == 2


def test_typed_nulls_fill_non_nullable_slots_under_the_null() -> None:
    arr = typed_nulls(3, POINT)
    assert arr.null_count == 3
    assert arr.field(0).null_count == 0 and arr.field(1).field(0).null_count == 0
    assert arr.cast(POINT).null_count == 3
    assert typed_nulls(2, pa.int64()).null_count == 2


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_nulls_under_a_null_struct_as_spark_sends_them(tmp_path: Path, table_type: str) -> None:
    """Spark sends ``F.when(c, F.struct(...))`` with a null in the struct's non-nullable
    fields under each null struct; a write takes them (they are no values) and later
    merges, which cast to the table's types, do not fail on them. A null such a field
    holds under a valid struct is still refused."""
    t, model = make(tmp_path, table_type)
    new = rows([2, 40], 1)
    inner = pa.StructArray.from_arrays([pa.nulls(2, pa.string())], fields=list(INNER), mask=pa.array([True, True]))
    maybe = pa.StructArray.from_arrays([pa.array([None, 7]), inner], fields=list(POINT), mask=pa.array([True, False]))
    assert maybe.field(0).null_count == 1  # the premise: a null where POINT declares none
    new = new.set_column(new.schema.get_field_index("maybe"), SCHEMA.field("maybe"), pa.chunked_array([maybe]))
    with pytest.raises(SchemaMismatchError, match="maybe.inner"):
        t.upsert(new)  # under the valid struct of key 40, inner is null: refused
    inner = pa.StructArray.from_arrays([pa.nulls(2, pa.string())], fields=list(INNER), mask=pa.array([True, False]))
    bad = pa.StructArray.from_arrays([pa.array([None, 7]), inner], fields=list(POINT), mask=pa.array([True, False]))
    assert bad.field(1).field(0).null_count == 2
    with pytest.raises(SchemaMismatchError, match="maybe.inner.b"):
        t.upsert(new.set_column(new.schema.get_field_index("maybe"), SCHEMA.field("maybe"), pa.chunked_array([bad])))
    inner = pa.StructArray.from_arrays([pa.array([None, "i"])], fields=list(INNER), mask=pa.array([True, False]))
    good = pa.StructArray.from_arrays([pa.array([None, 7]), inner], fields=list(POINT), mask=pa.array([True, False]))
    t.upsert(new.set_column(new.schema.get_field_index("maybe"), SCHEMA.field("maybe"), pa.chunked_array([good])))
    model.upsert([2, 40], 1)
    model.rows[2]["maybe"] = None
    model.rows[40]["maybe"] = {"x": 7, "inner": {"b": "i"}}
    check(t, model)
    t.upsert(rows([2], 2))
    t.delete(keys([40]))
    model.upsert([2], 2)
    model.delete([40])
    check(t, model)
