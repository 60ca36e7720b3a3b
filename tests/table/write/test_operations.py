"""The planners of the five writes (lakeline.table.write.operations), on real tables.

An upsert of keys the table holds is a rewrite of their group on copy-on-write and a log
on it on merge-on-read; new keys start new file groups; a delete routes only the keys it
finds, as delete records; an overwrite retires the partition's groups; and planning
writes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.table.write.operations import partition_targets, plan_delete, plan_insert, plan_overwrite, plan_upsert
from lakeline.table.write.plan import PARTITION
from lakeline.table.write.records import BASE_POS, OP, OP_DELETE, OP_UPSERT
from lakeline.timeline.errors import DuplicateKeyError, UnknownColumnError

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.string())])


def rows(ids: list[int], day: str = "a", v: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [day] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def table(tmp_path: Path, table_type: str, small_files: int | None = None) -> Table:
    small = {} if small_files is None else {"write.small-file-limit-bytes": small_files}
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        partition_by=["day"],
        table_type=table_type,
        properties={"engine.parallelism": 1, **small},
    )
    t.insert(rows([1, 2, 3]))
    return t


def test_an_upsert_of_existing_keys_is_a_rewrite_on_copy_on_write(tmp_path: Path) -> None:
    t = table(tmp_path, "cow")
    ctx = t.context()
    (held,) = ctx.view.latest_slices("day=a")
    plan = plan_upsert(ctx, rows([1, 2], v="new"))
    assert plan.logs == [] and plan.new_files == []
    (rewrite,) = plan.rewrites
    assert rewrite.slice.file_group == held.file_group and rewrite.partition == "day=a"
    assert sorted(rewrite.incoming.column("id").to_pylist()) == [1, 2]
    assert set(rewrite.incoming.column(OP).to_pylist()) == {OP_UPSERT}
    assert plan.stats == {"inserted": 0, "updated": 2}


def test_an_upsert_of_existing_keys_is_a_log_append_on_merge_on_read(tmp_path: Path) -> None:
    t = table(tmp_path, "mor")
    ctx = t.context()
    (held,) = ctx.view.latest_slices("day=a")
    plan = plan_upsert(ctx, rows([3, 1], v="new"))
    assert plan.rewrites == [] and plan.new_files == []
    (log,) = plan.logs
    assert log.slice.file_group == held.file_group
    assert log.incoming.column("id").to_pylist() == [3, 1]
    assert set(log.incoming.column(OP).to_pylist()) == {OP_UPSERT}
    # Each row carries the row its key has in the base file (keys 1, 2, 3 were inserted in order).
    assert log.incoming.column(BASE_POS).to_pylist() == [2, 0]
    assert plan.stats == {"inserted": 0, "updated": 2}


def test_new_keys_fill_a_small_group_through_its_log_on_merge_on_read(tmp_path: Path) -> None:
    ctx = table(tmp_path, "mor").context()
    (held,) = ctx.view.latest_slices("day=a")
    plan = plan_upsert(ctx, rows([2, 9], v="new"))
    assert plan.new_files == [] and plan.rewrites == []
    # One log on the small group: the update of 2 (at its base row) and the new key 9
    # (no base row), marked as holding new keys for the key check.
    (log,) = plan.logs
    assert log.slice.file_group == held.file_group and log.inserts
    assert sorted(zip(log.incoming.column("id").to_pylist(), log.incoming.column(BASE_POS).to_pylist())) == [
        (2, 1),
        (9, None),
    ]
    assert plan.new_keys is not None and plan.new_keys.column("id").to_pylist() == [9]
    assert plan.new_keys.column(PARTITION).to_pylist() == ["day=a"]
    assert plan.stats == {"inserted": 1, "updated": 1}


def test_new_keys_start_new_file_groups_on_merge_on_read_without_small_groups(tmp_path: Path) -> None:
    ctx = table(tmp_path, "mor", small_files=0).context()
    plan = plan_upsert(ctx, rows([2, 9], v="new"))
    (new,) = plan.new_files
    assert new.partition == "day=a" and new.rows.column("id").to_pylist() == [9]
    assert [(lg.incoming.column("id").to_pylist(), lg.inserts) for lg in plan.logs] == [([2], False)]
    assert plan.stats == {"inserted": 1, "updated": 1}


def test_copy_on_write_fills_a_small_file_with_new_keys(tmp_path: Path) -> None:
    ctx = table(tmp_path, "cow").context()
    (held,) = ctx.view.latest_slices("day=a")
    plan = plan_insert(ctx, rows([7, 8]))
    assert plan.new_files == []
    (rewrite,) = plan.rewrites
    assert rewrite.slice.file_group == held.file_group and rewrite.inserts and rewrite.new_keys_only


def test_an_insert_of_a_held_key_is_refused(tmp_path: Path) -> None:
    ctx = table(tmp_path, "mor").context()
    with pytest.raises(DuplicateKeyError, match="already holds"):
        plan_insert(ctx, rows([3, 4]))


def test_a_delete_routes_the_keys_it_finds_as_delete_records(tmp_path: Path) -> None:
    ctx = table(tmp_path, "mor").context()
    plan = plan_delete(ctx, pa.table({"id": pa.array([2, 42], pa.int64()), "day": ["a", "a"]}))
    (log,) = plan.logs
    assert log.incoming.column("id").to_pylist() == [2]
    assert log.incoming.column(OP).to_pylist() == [OP_DELETE]
    assert log.incoming.column("v").null_count == 1
    assert plan.stats == {"deleted": 1}
    # Every key it names, found or not, is claimed for the key check.
    assert sorted(plan.deleted_keys.column("id").to_pylist()) == [2, 42]


def test_an_overwrite_retires_the_partitions_groups(tmp_path: Path) -> None:
    t = table(tmp_path, "cow")
    t.insert(rows([5], day="b"))
    ctx = t.context()
    (held,) = ctx.view.latest_slices("day=a")
    plan = plan_overwrite(ctx, rows([100]), None)
    assert plan.replaced == {"day=a": [held.file_group]}
    assert plan.replaced_partitions == ["day=a"]
    assert [nf.rows.column("id").to_pylist() for nf in plan.new_files] == [[100]]
    assert plan.stats["file_groups_replaced"] == 1


def test_planning_writes_nothing(tmp_path: Path) -> None:
    t = table(tmp_path, "mor")
    before = t.timeline.last_seq
    ctx = t.context()
    plan_upsert(ctx, rows([1, 9]))
    plan_delete(ctx, pa.table({"id": pa.array([2], pa.int64())}))
    assert t.log.refresh().last_seq == before
    assert sorted(t.to_arrow().column("id").to_pylist()) == [1, 2, 3]


def test_partition_targets_take_hive_paths_and_dicts_of_the_partition_columns() -> None:
    assert partition_targets(("day",), ["day=a", {"day": "b"}]) == ["day=a", "day=b"]
    with pytest.raises(UnknownColumnError):
        partition_targets(("day",), [{"month": "b"}])
