"""The merge rule (lakeline.table.merge): versions of a key folded in commit order, as
copy-on-write rewrites and merge-on-read reads both apply it.

An upsert replaces the current version unless that one has a strictly larger ordering
value (on equal ordering the later arrival wins); a delete removes the key whatever its
ordering value; a key upserted after its delete comes back. Each case folds real Arrow
tables through :func:`fold`, :func:`fold_few` or :func:`merge_onto`.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from lakeline.table.merge import ORD, fold, fold_few, merge_onto, with_order
from lakeline.table.write.records import OP, OP_DELETE, OP_UPSERT

KEY = ("id",)


def versions(*rows: tuple[int, int | None, str, str]) -> pa.Table:
    """Versions in arrival order: (id, ts, v, op), numbered by :func:`with_order`."""
    t = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "ts": pa.array([r[1] for r in rows], pa.int64()),
            "v": pa.array([r[2] for r in rows], pa.string()),
            OP: pa.array([r[3] for r in rows], pa.string()),
        }
    )
    return with_order(t, 0)


def by_id(t: pa.Table) -> dict[int, tuple[int | None, str]]:
    return {r["id"]: (r["ts"], r["v"]) for r in t.to_pylist()}


U, D = OP_UPSERT, OP_DELETE


@pytest.mark.parametrize("fold_fn", [fold, fold_few])
def test_the_larger_ordering_value_wins_whatever_arrives_last(fold_fn) -> None:
    merged = fold_fn(versions((1, 5, "newer", U), (1, 3, "late but older", U)), KEY, "ts")
    assert by_id(merged) == {1: (5, "newer")}


@pytest.mark.parametrize("fold_fn", [fold, fold_few])
def test_on_equal_ordering_the_later_arrival_wins(fold_fn) -> None:
    merged = fold_fn(versions((1, 5, "first", U), (1, 5, "second", U), (2, 1, "alone", U)), KEY, "ts")
    assert by_id(merged) == {1: (5, "second"), 2: (1, "alone")}


def test_without_an_ordering_field_the_last_version_wins() -> None:
    merged = fold(versions((1, 9, "first", U), (1, 1, "last", U)), KEY, None)
    assert by_id(merged) == {1: (1, "last")}


@pytest.mark.parametrize("fold_fn", [fold, fold_few])
def test_a_delete_removes_the_key_whatever_its_ordering_value(fold_fn) -> None:
    merged = fold_fn(versions((1, 9, "big", U), (1, None, "", D), (2, 1, "kept", U)), KEY, "ts")
    assert by_id(merged) == {2: (1, "kept")}


def test_a_key_upserted_after_its_delete_comes_back_even_with_a_smaller_ordering() -> None:
    merged = fold(versions((1, 9, "before", U), (1, None, "", D), (1, 2, "revived", U)), KEY, "ts")
    assert by_id(merged) == {1: (2, "revived")}


def test_fold_drops_the_bookkeeping_columns() -> None:
    merged = fold(versions((1, 1, "a", U)), KEY, "ts")
    assert merged.column_names == ["id", "ts", "v"]
    assert OP not in merged.column_names and ORD not in merged.column_names


def test_merge_onto_passes_untouched_base_rows_and_folds_the_touched_ones() -> None:
    base = pa.table(
        {"id": pa.array([1, 2, 3], pa.int64()), "ts": pa.array([5, 5, 5], pa.int64()), "v": ["one", "two", "three"]}
    )
    changes = pa.table(
        {
            "id": pa.array([1, 2, 4], pa.int64()),
            "ts": pa.array([6, 4, 1], pa.int64()),
            "v": ["one v2", "two stale", "four"],
            OP: [U, U, U],
        }
    )
    merged = merge_onto(base, changes, KEY, "ts")
    assert merged.schema == base.schema
    assert by_id(merged) == {1: (6, "one v2"), 2: (5, "two"), 3: (5, "three"), 4: (1, "four")}


def test_merge_onto_applies_deletes_and_a_composite_key_matches_on_every_column() -> None:
    base = pa.table(
        {"id": pa.array([1, 1], pa.int64()), "day": ["a", "b"], "ts": pa.array([1, 1], pa.int64()), "v": ["1a", "1b"]}
    )
    changes = pa.table(
        {
            "id": pa.array([1], pa.int64()),
            "day": ["b"],
            "ts": pa.array([None], pa.int64()),
            "v": pa.array([None], pa.string()),
            OP: [D],
        }
    )
    merged = merge_onto(base, changes, ("id", "day"), "ts")
    assert merged.to_pylist() == [{"id": 1, "day": "a", "ts": 1, "v": "1a"}]
