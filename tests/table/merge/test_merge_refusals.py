"""Bad MERGEs are typed errors before anything is written: clauses in an order Delta
refuses, conditions and ``set`` naming unknown columns or of the wrong type, a source
with duplicate, null or missing keys, a source lacking the columns an insert needs, an
update that would move a row to another partition, a merge into an append-only table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import (
    DuplicateKeyError,
    ImmutableColumnError,
    InvalidMergeError,
    NullKeyError,
    SchemaMismatchError,
    UnknownColumnError,
    UnsupportedOperationError,
)

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("n", pa.int64())])
SOURCE = pa.table({"id": [1, 2, 9], "day": ["a", "b", "a"], "n": [10, 20, 90]})


def src(side: str, col: str) -> pc.Expression:
    return pc.field(f"{side}.{col}")


CASES: list[tuple[str, type[Exception], Callable[[Table], Any]]] = [
    ("no clause", InvalidMergeError, lambda t: t.merge(SOURCE).execute()),
    (
        "a matched clause after an unconditional one",
        InvalidMergeError,
        lambda t: t.merge(SOURCE).when_matched_delete().when_matched_update(condition=src("source", "n") > 1),
    ),
    (
        "an insert after an unconditional insert",
        InvalidMergeError,
        lambda t: t.merge(SOURCE).when_not_matched_insert().when_not_matched_insert(src("source", "n") > 1),
    ),
    (
        "an unknown source column",
        UnknownColumnError,
        lambda t: t.merge(SOURCE).when_matched_delete(src("source", "x") > 1),
    ),
    ("an unqualified column", UnknownColumnError, lambda t: t.merge(SOURCE).when_matched_delete(pc.field("n") > 1)),
    (
        "an insert condition reading the target",
        UnknownColumnError,
        lambda t: t.merge(SOURCE).when_not_matched_insert(src("target", "n") > 1),
    ),
    (
        "a by-source condition reading the source",
        UnknownColumnError,
        lambda t: t.merge(SOURCE).when_not_matched_by_source_delete(src("source", "n") > 1),
    ),
    (
        "a condition that is not boolean",
        InvalidMergeError,
        lambda t: t.merge(SOURCE).when_matched_delete(src("source", "n")),
    ),
    (
        "a condition that is not an expression",
        InvalidMergeError,
        lambda t: t.merge(SOURCE).when_matched_delete("n > 1"),
    ),
    ("set of an unknown column", UnknownColumnError, lambda t: t.merge(SOURCE).when_matched_update(set={"x": 1})),
    ("set of the key", ImmutableColumnError, lambda t: t.merge(SOURCE).when_matched_update(set={"id": 1})),
    (
        "set of another type family",
        SchemaMismatchError,
        lambda t: t.merge(SOURCE).when_matched_update(set={"n": src("source", "day")}),
    ),
    (
        "duplicate source keys",
        DuplicateKeyError,
        lambda t: t.merge(pa.table({"id": [1, 1], "day": ["a", "a"], "n": [1, 2]})),
    ),
    ("a null source key", NullKeyError, lambda t: t.merge(pa.table({"id": [1, None], "day": ["a", "a"], "n": [1, 2]}))),
    ("a source without the key", SchemaMismatchError, lambda t: t.merge(pa.table({"n": [1]}))),
    ("a source key of another type", SchemaMismatchError, lambda t: t.merge(pa.table({"id": ["1"], "n": [1]}))),
    (
        "an insert from a source lacking a column",
        SchemaMismatchError,
        lambda t: t.merge(pa.table({"id": [7], "n": [1]})).when_not_matched_insert().execute(),
    ),
    (
        "an update that would move a row to another partition",
        ImmutableColumnError,
        lambda t: t.merge(pa.table({"id": [1], "day": ["b"], "n": [5]})).when_matched_update().execute(),
    ),
    (
        "a value that does not fit its column",
        SchemaMismatchError,
        lambda t: t.merge(SOURCE).when_matched_update(set={"n": pc.scalar(2**62) * 4}).execute(),
    ),
]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_bad_merges_are_refused_before_anything_is_written(tmp_path: Any, table_type: str) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key="id", partition_by=["day"], table_type=table_type)
    t.insert(pa.table({"id": [1, 2, 3], "day": ["a", "b", "a"], "n": [1, 2, 3]}))
    before, rows = t.timeline.last_seq, t.to_arrow().sort_by("id")
    for name, error, call in CASES:
        with pytest.raises(error):
            call(t)
            pytest.fail(f"{name}: accepted")
        fresh = Table.open(t.path)
        assert fresh.timeline.last_seq == before, name
        assert fresh.to_arrow().sort_by("id").equals(rows), name


def test_merge_needs_a_record_key(tmp_path: Any) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA)
    with pytest.raises(UnsupportedOperationError):
        t.merge(SOURCE)


def test_set_on_a_folding_engine_is_refused_and_a_whole_row_update_folds(tmp_path: Any) -> None:
    """On ``aggregation`` a row computed from ``target.*`` would be added to the target
    again: refused, as ``update`` is. Without ``set`` the source row is a version folded
    by the engine, as an upsert's: the sum grows by the source's value."""
    t = Table.create(
        str(tmp_path / "t"),
        pa.schema([("id", pa.int64()), ("n", pa.int64())]),
        record_key="id",
        properties={"merge.engine": "aggregation", "merge.n.aggregate": "sum"},
    )
    t.insert(pa.table({"id": [1, 2], "n": [10, 20]}))
    source = pa.table({"id": [1, 3], "n": [5, 7]})
    with pytest.raises(UnsupportedOperationError):
        t.merge(source).when_matched_update(set={"n": src("target", "n") + 1})
    r = t.merge(source).when_matched_update().when_not_matched_insert().execute()
    assert (r.stats["rows_updated"], r.stats["rows_inserted"]) == (1, 1)
    assert dict(zip(*Table.open(t.path).to_arrow().sort_by("id").to_pydict().values())) == {1: 15, 2: 20, 3: 7}
