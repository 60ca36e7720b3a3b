"""Pruning stays right across schema changes (issue 29 item 3): column statistics, bloom
filters and row-group statistics that files recorded under a name describe the column
that had the name then. After a rename, a drop and re-add of a name, or a widening, a
filter on the column's present name must never drop a file that holds a match.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.int32()), ("b", pa.int32())])


def _table(path: Path, table_type: str) -> Table:
    t = Table.create(
        path, SCHEMA, record_key="id", table_type=table_type, properties={"write.small-file-limit-bytes": 0}
    )
    t.indexes.create("column_stats", wait=True)
    for lo in (0, 100, 200):  # three files with disjoint ranges of a and b
        ids = range(lo, lo + 10)
        t.insert(
            pa.table(
                {"id": list(ids), "a": pa.array(ids, pa.int32()), "b": pa.array([i + 1000 for i in ids], pa.int32())}
            )
        )
    return t


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_filter_on_a_renamed_or_swapped_column_keeps_every_matching_file(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type)
    assert t.scan(filter=pc.field("a") == 105).explain()["files_after_stats_pruning"] == 1  # pruning works
    with t.update_schema() as u:  # swap the names of a and b
        u.rename_column("a", "tmp")
        u.rename_column("b", "a")
        u.rename_column("tmp", "b")
    # "a" now holds the values 1000.. that files recorded under "b".
    got = t.to_arrow(filter=pc.field("a") == 1105)
    assert got.to_pylist() == [{"id": 105, "a": 1105, "b": 105}]
    assert t.to_arrow(filter=pc.field("b") == 205).column("id").to_pylist() == [205]
    assert t.to_arrow(filter=(pc.field("a") >= 1000) & (pc.field("b") < 5)).num_rows == 5


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_dropped_and_added_name_is_null_in_old_files_whatever_their_stats_say(
    tmp_path: Path, table_type: str
) -> None:
    t = _table(tmp_path / "t", table_type)
    with t.update_schema() as u:
        u.delete_column("a")
        u.add_column("a", pa.int32())
    # Old stats say "a" never null and in 0..209: the new "a" is null in every old row.
    assert t.to_arrow(filter=pc.field("a").is_null()).num_rows == 30
    assert t.to_arrow(filter=pc.field("a") == 5).num_rows == 0
    t.upsert(pa.table({"id": [5], "b": pa.array([7], pa.int32()), "a": pa.array([999], pa.int32())}))
    assert t.to_arrow(filter=pc.field("a") == 999).column("id").to_pylist() == [5]


def test_a_widened_column_filters_by_its_new_type(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow")
    with t.update_schema() as u:
        u.update_column("a", pa.float64())
    assert t.to_arrow(filter=pc.field("a") == 105.0).column("id").to_pylist() == [105]
    assert t.to_arrow(filter=pc.field("a") > 208.5).column("id").to_pylist() == [209]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_stats_built_between_a_rename_and_its_reversal_validate_and_prune_right(
    tmp_path: Path, table_type: str
) -> None:
    """Found by the schedule explorer (scenario rename_stats_rename): stats built while
    ``a`` was called ``x`` have no entry under ``a`` for files written before; after
    the rename back, ``validate`` asked for one. Names a rename moved are never asked by
    pruning, and validate no longer demands them either; reads stay exact."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type=table_type)
    t.insert(pa.table({"id": [1, 2, 3], "a": pa.array([10, 20, 30], pa.int32()), "b": pa.array([1, 2, 3], pa.int32())}))
    with t.update_schema() as u:
        u.rename_column("a", "x")
    t.indexes.create("column_stats", wait=True)
    assert t.indexes.validate()["mismatches"] == []
    with t.update_schema() as u:
        u.rename_column("x", "a")
    assert t.indexes.validate()["mismatches"] == []
    assert t.to_arrow(filter=pc.field("a") == 20).column("id").to_pylist() == [2]
    t.insert(pa.table({"id": [4], "a": pa.array([40], pa.int32()), "b": pa.array([4], pa.int32())}))
    assert t.indexes.validate()["mismatches"] == []
    assert sorted(t.to_arrow(filter=pc.field("a") >= 20).column("id").to_pylist()) == [2, 3, 4]


# Column statistics record each column's field id and type (issue 29 item 3): pruning
# asks an entry for its id's column while the type is unchanged, whatever its name now.


def _stats_kept(t: Table, expr: pc.Expression) -> int:
    return int(t.scan(filter=expr).explain()["files_after_stats_pruning"])


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_stats_follow_a_rename_by_field_id_and_keep_pruning(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type)
    with t.update_schema() as u:  # swap the names of a and b
        u.rename_column("a", "tmp")
        u.rename_column("b", "a")
        u.rename_column("tmp", "b")
    assert _stats_kept(t, pc.field("a") == 1105) == 1
    assert _stats_kept(t, pc.field("b") == 205) == 1
    assert t.to_arrow(filter=pc.field("a") == 1105).column("id").to_pylist() == [105]
    assert t.indexes.validate()["mismatches"] == []


def test_a_name_dropped_and_added_again_prunes_on_the_new_columns_entries_only(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow")
    with t.update_schema() as u:
        u.delete_column("a")
        u.add_column("a", pa.int32())
    t.insert(pa.table({"id": [500, 501], "b": pa.array([1, 2], pa.int32()), "a": pa.array([500, 501], pa.int32())}))
    # The new file's entries (the new id) prune it; the old files' "a" entries (the old
    # id) are not asked, so those files stay (they read "a" as null).
    assert _stats_kept(t, pc.field("a") == 999) == 3
    assert _stats_kept(t, pc.field("a") == 5) == 3
    assert t.to_arrow(filter=pc.field("a") == 5).num_rows == 0
    assert t.to_arrow(filter=pc.field("a") == 501).column("id").to_pylist() == [501]


def test_entries_of_a_narrower_type_are_not_asked_after_a_widening(tmp_path: Path) -> None:
    """float32 0.1 is 0.10000000149011612 as a float64; its stats text "0.1" read as a
    float64 is 0.1, below it: the old file would be pruned for ``p > 0.1``."""
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("p", pa.float32())])
    t = Table.create(tmp_path / "t", schema, record_key="id", properties={"write.small-file-limit-bytes": 0})
    t.indexes.create("column_stats", wait=True)
    t.insert(pa.table({"id": [1], "p": pa.array([0.1], pa.float32())}))
    with t.update_schema() as u:
        u.update_column("p", pa.float64())
    assert t.to_arrow(filter=pc.field("p") > 0.1).column("id").to_pylist() == [1]
    t.insert(pa.table({"id": [2], "p": pa.array([6.0], pa.float64())}))
    assert _stats_kept(t, pc.field("p") > 7.0) == 1  # the new file's entries (float64) prune it


def test_entries_written_before_ids_were_recorded_prune_by_name_and_validate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lakeline.indexes import column_stats

    with monkeypatch.context() as m:  # entries as lakeline wrote them before 2026-11-27
        m.setattr(column_stats, "field_id", lambda f: None)
        t = _table(tmp_path / "t", "cow")
    assert _stats_kept(t, pc.field("a") == 105) == 1
    assert t.indexes.validate()["mismatches"] == []
    with t.update_schema() as u:
        u.rename_column("a", "x")
    assert _stats_kept(t, pc.field("x") == 105) == 3  # no id: a moved name is not asked
    assert t.to_arrow(filter=pc.field("x") == 105).column("id").to_pylist() == [105]
