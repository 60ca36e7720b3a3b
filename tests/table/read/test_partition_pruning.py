"""Partition pruning (lakeline.table.read.partition_pruning): a folder's values as a
guarantee and as tree values, and the slices a filter skips by their folder alone."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from lakeline.table import Table
from lakeline.table.read.partition_pruning import partition_guarantee, partition_tree_values, prune_slices

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.int32()), ("v", pa.string())])


def _table(tmp_path: Path) -> Table:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"])
    t.insert(pa.table({"id": [1, 2, 3], "day": [1, 2, None], "v": ["a", "b", "c"]}, schema=SCHEMA))
    return t


def _days(t: Table, filter: pc.Expression | None) -> list[str]:
    ctx = t.context()
    return sorted(s.partition for s in prune_slices(ctx, ctx.view.latest_slices(), filter))


def test_a_slice_whose_folder_cannot_match_is_dropped(tmp_path: Path) -> None:
    t = _table(tmp_path)
    every = _days(t, None)
    assert len(every) == 3
    assert _days(t, pc.field("day") == 2) == ["day=2"]
    assert _days(t, pc.field("day") > 5) == []
    assert len(_days(t, pc.field("day").is_null())) == 1
    # A filter on a non-partition column says nothing about folders: every slice stays.
    assert _days(t, pc.field("v") == "zzz") == every


def test_folder_values_parse_to_the_column_type_and_unparsable_ones_are_unknown() -> None:
    assert partition_tree_values(SCHEMA, "day=7") == {"day": 7}
    assert partition_tree_values(SCHEMA, "day=notanint") == {}
    assert partition_tree_values(SCHEMA, "other=1") == {}
    assert partition_guarantee(SCHEMA, "day=7").equals(pc.scalar(True) & (pc.field("day") == pa.scalar(7, pa.int32())))
    # An unparsable value constrains nothing: the guarantee stays "true".
    assert partition_guarantee(SCHEMA, "day=notanint").equals(pc.scalar(True))
