"""Index definitions and bloom filter entries follow field ids (issue 29 item 3): a
bloom-indexed column renamed keeps pruning under its new name, a column-stats index
with named columns follows a rename and forgets a dropped column, and dropping a
bloom-indexed column is refused, naming ``t.indexes.drop``.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline import table_config
from lakeline.timeline.errors import SchemaMismatchError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("a", pa.string()), ("b", pa.int32())])


def _table(path: Path, table_type: str, kind: str = "bloom_filters", columns: list[str] | None = None) -> Table:
    t = Table.create(
        path, SCHEMA, record_key="id", table_type=table_type, properties={"write.small-file-limit-bytes": 0}
    )
    t.indexes.create(kind, columns=columns or ["a"], wait=True)
    for lo in (0, 100, 200, 300):  # four files; "a" values interleave, so only a bloom filter prunes them
        ids = list(range(lo, lo + 10))
        t.insert(pa.table({"id": ids, "a": [f"k{i:04d}" for i in ids], "b": pa.array(ids, pa.int32())}))
    return t


def _validate_clean(t: Table, name: str) -> None:
    report = t.indexes.validate(name)
    assert report["mismatches"] == [], report


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_renamed_bloom_column_keeps_pruning_under_its_new_name(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type)
    before = t.scan(filter=pc.field("a") == "k0105").explain()
    assert before["files_after_bloom_pruning"] == 1 < before["files_total"]
    with t.update_schema() as u:
        u.rename_column("a", "key")
    s = t.scan(filter=pc.field("key") == "k0105")
    ex = s.explain()
    assert ex["files_after_bloom_pruning"] == 1 < ex["files_total"]
    assert s.to_arrow().to_pylist() == [{"id": 105, "key": "k0105", "b": 105}]
    got = t.to_arrow(filter=pc.field("key").isin(["k0003", "k0307", "nope"]))
    assert sorted(got.column("id").to_pylist()) == [3, 307]
    # A file written after the rename is indexed under the column's id too.
    t.insert(pa.table({"id": [500], "key": ["k0500"], "b": pa.array([500], pa.int32())}))
    ex = t.scan(filter=pc.field("key") == "k0500").explain()
    assert ex["files_after_bloom_pruning"] == 1 < ex["files_total"]
    assert t.to_arrow(filter=pc.field("key") == "k0500").column("id").to_pylist() == [500]
    _validate_clean(t, "bloom_filters")
    assert t.indexes.list()[0].columns == ("a",)  # the definition is as created; it resolves by id


def test_a_dropped_and_readded_name_is_not_probed_with_old_entries(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow")
    with t.update_schema() as u:
        u.rename_column("a", "key")
        u.add_column("a", pa.string())  # a new column under the old name: null in every file
    assert t.to_arrow(filter=pc.field("a") == "k0105").num_rows == 0
    assert t.to_arrow(filter=pc.field("key") == "k0105").column("id").to_pylist() == [105]
    _validate_clean(t, "bloom_filters")


def test_dropping_a_bloom_column_is_refused_naming_the_index_drop(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow")
    before = len(t.timeline.completed())
    with pytest.raises(SchemaMismatchError, match=r"t\.indexes\.drop\('bloom_filters'\)"):
        with t.update_schema() as u:
            u.delete_column("a")
    assert len(t.timeline.completed()) == before
    t.indexes.drop("bloom_filters")
    with t.update_schema() as u:
        u.delete_column("a")
    assert t.schema.names == ["id", "b"]


def test_a_named_stats_index_follows_a_rename_and_forgets_a_dropped_column(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow", kind="column_stats", columns=["a", "b"])
    with t.update_schema() as u:
        u.rename_column("b", "n")
    ex = t.scan(filter=pc.field("n") == 205).explain()
    assert ex["files_after_stats_pruning"] == 1 < ex["files_total"]
    _validate_clean(t, "column_stats")
    with t.update_schema() as u:
        u.delete_column("a")  # the index keeps its other column, as Delta and Iceberg drop stats
    t.insert(pa.table({"id": [600], "n": pa.array([600], pa.int32())}))
    ex = t.scan(filter=pc.field("n") == 205).explain()
    assert ex["files_after_stats_pruning"] == 1 < ex["files_total"]
    assert t.to_arrow(filter=pc.field("n") == 600).column("id").to_pylist() == [600]
    _validate_clean(t, "column_stats")


def test_a_table_from_before_ids_keeps_the_by_name_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An index defined before the table had ids names its columns only: they stay
    fixed. Defined after the table's first ``update_schema`` (which gives ids), it
    follows a rename; entries of files from before ids, which record none, are asked by
    name only, so they are not asked under the new name, and rows stay right."""
    with monkeypatch.context() as m:
        m.setattr(table_config, "assign_ids", lambda fields, last, keep=True: (list(fields), 0))
        Table.create(tmp_path / "t", SCHEMA, record_key="id", properties={"write.small-file-limit-bytes": 0})
    t = Table.open(tmp_path / "t")
    t.indexes.create("bloom_filters", columns=["a"], wait=True)
    for lo in (0, 100):
        t.insert(pa.table({"id": [lo, lo + 1], "a": [f"k{lo}", f"k{lo + 1}"], "b": pa.array([lo, lo], pa.int32())}))
    assert t.indexes.list()[0].field_ids == ()
    with pytest.raises(SchemaMismatchError, match="index 'bloom_filters'"), t.update_schema() as u:
        u.rename_column("a", "key")
    with t.update_schema() as u:
        u.add_column("c", pa.int32())  # the table's ids, and their names in its old files
    t.indexes.drop("bloom_filters")
    t.indexes.create("bloom_filters", columns=["a"], wait=True)
    t.insert(pa.table({"id": [200], "a": ["k200"], "b": pa.array([0], pa.int32()), "c": pa.array([1], pa.int32())}))
    assert t.indexes.list()[0].field_ids != ()
    with t.update_schema() as u:
        u.rename_column("a", "key")
    # The file with ids is pruned by id; the two from before ids are kept (not asked).
    ex = t.scan(filter=pc.field("key") == "nope").explain()
    assert (ex["files_total"], ex["files_after_bloom_pruning"]) == (3, 2)
    assert t.to_arrow(filter=pc.field("key") == "k100").column("id").to_pylist() == [100]
    _validate_clean(t, "bloom_filters")


def test_a_widened_bloom_column_is_probed_only_in_files_of_its_new_type(tmp_path: Path) -> None:
    t = _table(tmp_path / "t", "cow", columns=["b"])
    with t.update_schema() as u:
        u.update_column("b", pa.int64())
    # Older entries recorded int32: not asked (kept), rows right; a new file prunes.
    assert t.to_arrow(filter=pc.field("b") == 105).column("id").to_pylist() == [105]
    t.insert(pa.table({"id": [900], "a": ["k0900"], "b": pa.array([2**40], pa.int64())}))
    ex = t.scan(filter=pc.field("b") == 105).explain()
    assert (ex["files_total"], ex["files_after_bloom_pruning"]) == (5, 4)
    assert t.to_arrow(filter=pc.field("b") == 2**40).column("id").to_pylist() == [900]
    _validate_clean(t, "bloom_filters")
