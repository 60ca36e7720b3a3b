"""Key-range pruning (lakeline.table.read.key_pruning): a slice whose record-key range
lies outside the filter is skipped, a filter that does not constrain the key keeps all."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from lakeline.table import Table
from lakeline.table.read.key_pruning import prune_key_ranges

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.string())])


def _table(tmp_path: Path) -> Table:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"])
    # Two partitions: keys 1..3 in "a", keys 100..102 in "b".
    t.insert(pa.table({"id": [1, 2, 3], "day": ["a"] * 3, "v": ["x"] * 3}, schema=SCHEMA))
    t.insert(pa.table({"id": [100, 101, 102], "day": ["b"] * 3, "v": ["y"] * 3}, schema=SCHEMA))
    return t


def _kept(t: Table, filter: pc.Expression | None) -> list[str]:
    ctx = t.context()
    return sorted(s.partition for s in prune_key_ranges(ctx, ctx.view.latest_slices(), filter))


def test_a_slice_outside_the_key_filter_is_dropped(tmp_path: Path) -> None:
    t = _table(tmp_path)
    assert _kept(t, None) == ["day=a", "day=b"]
    assert _kept(t, pc.field("id") == 2) == ["day=a"]
    assert _kept(t, pc.field("id") >= 50) == ["day=b"]
    assert _kept(t, (pc.field("id") > 3) & (pc.field("id") < 100)) == []
    assert _kept(t, pc.field("id").isin([1, 101])) == ["day=a", "day=b"]


def test_a_filter_that_does_not_constrain_the_key_keeps_every_slice(tmp_path: Path) -> None:
    t = _table(tmp_path)
    assert _kept(t, pc.field("v") == "nothing") == ["day=a", "day=b"]
    assert _kept(t, (pc.field("id") == 2) | (pc.field("v") == "y")) == ["day=a", "day=b"]
