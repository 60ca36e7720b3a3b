"""Commit metadata (timeline/commit_metadata.py): ``from_dict(to_dict())`` loses nothing,
the footprint the conflict rules read, and damaged records refused as corrupt events."""

from __future__ import annotations

from typing import Any

import pytest
from lakeline.timeline.commit_metadata import CommitMetadata, Operation, WriteStat, file_paths
from lakeline.timeline.errors import CorruptEventError
from lakeline.timeline.view.file_group import FileKind

BASE = WriteStat("day=1/a.parquet", "day=1", "g1", FileKind.BASE, rows=10, bytes=100, key_min=1, key_max=9)
LOG = WriteStat("day=2/b.log.parquet", "day=2", "g2", FileKind.LOG, rows=4, bytes=40, deletes=1, inserts=True)
META = CommitMetadata(
    operation=Operation.UPSERT,
    snapshot_seq=7,
    files=(BASE, LOG),
    replaced={"day=3": ("g3", "g4")},
    rewritten=(("day=1", "g0"),),
    replaced_partitions=("day=5",),
    stats={"inserted": 3, "updated": 1},
)


def test_round_trip_loses_nothing() -> None:
    raw = META.to_dict()
    assert raw["files"][1]["kind"] == "log" and raw["operation"] == "upsert"
    assert CommitMetadata.from_dict(raw) == META
    assert CommitMetadata.from_dict(raw).to_dict() == raw


def test_footprint() -> None:
    assert META.groups_written() == {("day=1", "g1"), ("day=2", "g2")}
    assert META.groups_replaced() == {("day=3", "g3"), ("day=3", "g4")}
    assert META.partitions_written() == {"day=1", "day=2", "day=3", "day=5"}


def test_file_paths_reads_only_paths_with_the_same_checks() -> None:
    assert file_paths(META.to_dict()) == ["day=1/a.parquet", "day=2/b.log.parquet"]
    with pytest.raises(CorruptEventError, match="lacks"):
        file_paths({"files": [{"path": "x"}]})


@pytest.mark.parametrize(
    "change",
    [
        {"snapshot_seq": True},
        {"operation": 3},
        {"files": "a.parquet"},
        {"files": [{**BASE.to_dict(), "kind": "middle"}]},
        {"files": [{**BASE.to_dict(), "rows": "ten"}]},
        {"replaced": {"day=3": "g3"}},
        {"rewritten": [["day=1"]]},
        {"replaced_partitions": [1]},
    ],
)
def test_damaged_record_is_corrupt(change: dict[str, Any]) -> None:
    with pytest.raises(CorruptEventError, match="commit metadata"):
        CommitMetadata.from_dict({**META.to_dict(), **change})
