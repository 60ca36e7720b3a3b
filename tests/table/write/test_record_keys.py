"""Record keys: a null key, a delete without key columns or with keys of another type, and
an insert of a key the table holds are refused with a typed error and leave no trace; a key
repeated inside one insert is deduplicated; upsert and delete need a keyed table (split out
of ``test_records.py``)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import (
    DuplicateKeyError,
    LakelineError,
    NullKeyError,
    SchemaMismatchError,
    Table,
    UnsupportedOperationError,
)

from tests.table.model import SCHEMA, to_arrow
from tests.table.write.records_helpers import ROWS, nothing_written, table, write_ops  # noqa: F401 (table: a fixture)


@pytest.mark.parametrize("op", ["insert", "upsert", "overwrite", "delete"])
def test_null_record_key_is_refused(table: tuple[Table, Path], op: str) -> None:
    t, path = table
    data = to_arrow(
        [
            {"id": 8, "ts": 1, "day": "2026-01-01", "v": 1, "s": "x"},
            {"id": None, "ts": 1, "day": "2026-01-01", "v": 2, "s": "y"},
        ]
    )
    call = t.delete if op == "delete" else write_ops(t)[op]
    if op == "delete":
        data = data.select(["id"])
    with nothing_written(t, path), pytest.raises(NullKeyError) as exc:
        call(data)
    assert isinstance(exc.value, LakelineError) and isinstance(exc.value, ValueError)


def test_delete_without_key_columns_is_a_schema_mismatch(table: tuple[Table, Path]) -> None:
    t, path = table
    with nothing_written(t, path), pytest.raises(SchemaMismatchError):
        t.delete(pa.table({"day": ["2026-01-01"]}))


@pytest.mark.parametrize(
    "keys",
    [pa.table({"id": ["1"]}), pa.table({"id": [1.0]}), pa.table({"id": pa.array([1], pa.date32())})],
    ids=["string-for-int", "float-for-int", "date-for-int"],
)
def test_delete_with_keys_of_another_type_is_a_schema_mismatch(table: tuple[Table, Path], keys: pa.Table) -> None:
    """Issue 11 item 9: keys are held to the rule upserts follow (lossless casts within a
    type family only); before, they were cast and a string key matched nothing, silently."""
    t, path = table
    with nothing_written(t, path), pytest.raises(SchemaMismatchError, match="'id'"):
        t.delete(keys)
    t.delete(pa.table({"id": pa.array([1], pa.int32())}))  # a lossless widening is fine
    assert 1 not in t.to_arrow().column("id").to_pylist()


def test_delete_of_string_keys_with_int_values_is_refused(tmp_path: Path) -> None:
    t = Table.create(tmp_path / "s", pa.schema([("id", pa.string()), ("v", pa.int64())]), record_key="id")
    t.insert(pa.table({"id": ["1", "2"], "v": [1, 2]}))
    with nothing_written(t, tmp_path / "s"), pytest.raises(SchemaMismatchError):
        t.delete(pa.table({"id": [1]}))
    t.delete(pa.table({"id": ["1"]}))
    assert t.to_arrow().column("id").to_pylist() == ["2"]


def test_insert_of_held_key_raises_duplicate_key_and_writes_nothing(table: tuple[Table, Path]) -> None:
    t, path = table
    batch = to_arrow(
        [
            {"id": 50, "ts": 1, "day": "2026-01-01", "v": 1, "s": "x"},
            {"id": 2, "ts": 9, "day": "2026-01-01", "v": 99, "s": "dup"},
        ]
    )
    with nothing_written(t, path), pytest.raises(DuplicateKeyError) as exc:
        t.insert(batch)
    assert isinstance(exc.value, LakelineError)
    # A key held in another partition is another record: accepted.
    t.insert(to_arrow([{"id": 2, "ts": 1, "day": "2026-01-02", "v": 7, "s": "other"}]))
    assert sorted((r["day"], r["id"]) for r in t.to_arrow(filter=pc.field("id") == 2).to_pylist()) == [
        ("2026-01-01", 2),
        ("2026-01-02", 2),
    ]
    # Deleted keys may be inserted again.
    t.delete(pa.table({"id": [1]}))
    t.insert(to_arrow([{"id": 1, "ts": 0, "day": "2026-01-01", "v": 1, "s": "back"}]))
    assert t.to_arrow(filter=pc.field("id") == 1).column("s").to_pylist() == ["back"]


def test_repeated_key_inside_one_insert_is_deduplicated_not_refused(table: tuple[Table, Path]) -> None:
    t, _ = table
    t.insert(
        to_arrow(
            [
                {"id": 60, "ts": 2, "day": "2026-01-01", "v": 1, "s": "a"},
                {"id": 60, "ts": 3, "day": "2026-01-01", "v": 2, "s": "b"},
                {"id": 60, "ts": 3, "day": "2026-01-01", "v": 3, "s": "c"},
                {"id": 60, "ts": 1, "day": "2026-01-01", "v": 4, "s": "d"},
                {"id": 60, "ts": 0, "day": "2026-01-02", "v": 5, "s": "e"},
            ]
        )
    )
    got = sorted(t.to_arrow(filter=pc.field("id") == 60).to_pylist(), key=lambda r: r["day"])
    assert [(r["day"], r["s"]) for r in got] == [("2026-01-01", "c"), ("2026-01-02", "e")]


def test_upsert_and_delete_on_append_only_table_are_unsupported(tmp_path: Path) -> None:
    path = tmp_path / "t"
    t = Table.create(path, SCHEMA, partition_by=["day"])
    t.insert(to_arrow(ROWS + ROWS))  # no key: duplicates are kept
    assert t.to_arrow().num_rows == 6
    with nothing_written(t, path):
        with pytest.raises(UnsupportedOperationError) as exc:
            t.upsert(to_arrow(ROWS))
        with pytest.raises(UnsupportedOperationError):
            t.delete(pa.table({"id": [1]}))
    assert isinstance(exc.value, LakelineError)
