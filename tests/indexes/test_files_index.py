"""The files index: checkpoints of the file-system view, and the upkeep that writes them.

The view a fresh handle builds from a checkpoint plus the commits after it must be
exactly the view a full replay of the timeline builds, for every snapshot, on both
table types and both stores, whatever writes came before; and losing a checkpoint, or
failing to write one, may cost time but never a row.
"""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.indexes import files_index
from lakeline.indexes.files_index import FILES, KEEP_CHECKPOINTS, state_from_rows, validate_checkpoint, view_rows
from lakeline.indexes.metadata_table import MetadataTable
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.view.fs_view import FileSystemView

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("v", pa.int64())])
DAYS = ["a", "b", "c"]


def _rows(rng: random.Random, ids: list[int], ts: int) -> pa.Table:
    return pa.table(
        {"id": ids, "ts": [ts] * len(ids), "day": [DAYS[i % 3] for i in ids], "v": [rng.randint(0, 100) for _ in ids]},
        schema=SCHEMA,
    )


def _random_history(t: Table, rng: random.Random, steps: int) -> None:
    """Inserts, upserts, deletes, delete_where and overwrites, checked after each one."""
    next_id = 0
    for step in range(steps):
        op = rng.choice(["insert", "upsert", "upsert", "delete", "delete_where", "overwrite"]) if step else "insert"
        if op == "insert":
            ids = list(range(next_id, next_id + rng.randint(1, 30)))
            next_id = ids[-1] + 1
            t.insert(_rows(rng, ids, step))
        elif op == "upsert":
            ids = rng.sample(range(next_id + 10), rng.randint(1, 15))
            next_id = max(next_id, max(ids) + 1)
            t.upsert(_rows(rng, ids, step))
        elif op == "delete":
            t.delete(pa.table({"id": pa.array(rng.sample(range(next_id + 1), 5), pa.int64())}))
        elif op == "delete_where":
            t.delete_where(pc.field("v") < rng.randint(0, 20))
        else:
            ids = list(range(next_id, next_id + 5))
            next_id += 5
            t.overwrite(_rows(rng, ids, step).filter(pc.field("day") == rng.choice(DAYS)))
        _check_views(t)


def _check_views(t: Table) -> None:
    tl = t.timeline
    fresh = Table.open(t.path, timeline=t.timeline_url)
    loaded = fresh.view(fresh.timeline)
    assert loaded.seq == tl.last_seq
    assert loaded.state() == FileSystemView(tl).state()
    assert validate_checkpoint(t.storage, tl)["mismatches"] == []


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_views_from_checkpoints_equal_a_full_replay(tmp_path: Path, kind: str) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=kind,
        properties={"metadata.files.checkpoint-commits": 3, "write.target-file-size-bytes": 2048},
    )
    _random_history(t, random.Random(7 if kind == "cow" else 8), 40)
    checkpoints = MetadataTable(t.storage).bases(FILES)
    assert 1 <= len(checkpoints) <= KEEP_CHECKPOINTS
    # Every earlier snapshot, read through a fresh handle, matches a replay of its prefix,
    # including those older than the oldest checkpoint left.
    full = t.timeline
    for inst in full.completed():
        fresh = Table.open(t.path)
        snap = full.as_of_seq(inst.completed_seq or 0)
        assert fresh.view(snap).state() == FileSystemView(snap).state()
        assert fresh.to_arrow(as_of=inst.id).sort_by("id") == t.to_arrow(as_of=inst.id).sort_by("id")


def test_checkpoints_on_a_postgresql_timeline(tmp_path: Path, pg_url: str) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type="mor",
        properties={"metadata.files.checkpoint-commits": 2},
        timeline=pg_url,
    )
    _random_history(t, random.Random(3), 12)
    assert MetadataTable(t.storage).bases(FILES)


def test_checkpoint_rows_round_trip(tmp_path: Path) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type="mor",
        properties={"write.target-file-size-bytes": 2048},
    )
    _random_history(t, random.Random(11), 15)
    view = t.view(t.timeline)
    assert state_from_rows(view_rows(view)) == view.state()
    # A log's delete count is no part of a file's equality: compare it on its own.
    deletes = lambda state: {f.path: f.deletes for v in state.values() for s in v for f in s.files}  # noqa: E731
    assert deletes(state_from_rows(view_rows(view))) == deletes(view.state())
    assert any(deletes(view.state()).values())


def test_a_checkpoint_from_before_log_delete_counts_reads_them_as_not_known(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Checkpoints written before the ``deletes`` column still load: every file's count
    reads as 0 ("not known"), which only makes a read take a delete-only log whole."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type="mor")
    t.insert(
        pa.table({"id": list(range(100)), "ts": [1] * 100, "day": ["a"] * 100, "v": list(range(100))}, schema=SCHEMA)
    )
    t.delete_where(pc.field("id") < 10)
    view = t.view(t.timeline)
    logs = [f for slices in view.state().values() for s in slices for f in s.logs]
    assert logs and all(f.deletes == f.rows > 0 for f in logs)
    old = state_from_rows(view_rows(view).drop_columns(["deletes"]))
    assert all(f.deletes == 0 for slices in old.values() for s in slices for f in s.files)
    assert {k: [replace(f, deletes=0) for s in v for f in s.files] for k, v in view.state().items()} == {
        k: [f for s in v for f in s.files] for k, v in old.items()
    }
    # Validation takes such a checkpoint as good: a count that is not known is no mismatch.
    real = files_index.view_rows
    monkeypatch.setattr(files_index, "view_rows", lambda v: real(v).drop_columns(["deletes"]))
    files_index.write_checkpoint(t.storage, t.view(t.timeline))
    monkeypatch.undo()
    assert files_index.validate_checkpoint(t.storage, Table.open(t.path).timeline)["mismatches"] == []


def test_a_lost_or_damaged_checkpoint_costs_time_not_rows(tmp_path: Path) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type="cow",
        properties={"metadata.files.checkpoint-commits": 2},
    )
    _random_history(t, random.Random(5), 10)
    expected = t.to_arrow().sort_by("id")
    checkpoints = MetadataTable(t.storage).bases(FILES)
    assert checkpoints
    # The newest checkpoint is garbage: the handle falls back to an older one, or a replay.
    Path(checkpoints[-1][1]).write_bytes(b"not parquet")
    assert Table.open(t.path).to_arrow().sort_by("id") == expected
    for _, p in checkpoints:
        Path(p).unlink()
    fresh = Table.open(t.path)
    assert fresh.view(fresh.timeline).state() == FileSystemView(fresh.timeline).state()
    assert fresh.to_arrow().sort_by("id") == expected


def test_commits_list_the_checkpoints_only_when_one_may_be_due(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A handle lists the checkpoints when it loads its first view; after that a commit
    extends its cached view and counts commits from the newest checkpoint it knows of
    (that count is never too small), so it lists again only when a checkpoint may be
    due, and the checkpoints are still written every ``checkpoint-commits``."""
    listings: list[int] = []
    listed = files_index._checkpoints

    def counting(storage: object) -> list[tuple[int, str]]:
        listings.append(1)
        return listed(storage)  # type: ignore[arg-type]

    monkeypatch.setattr(files_index, "_checkpoints", counting)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", properties={"metadata.files.checkpoint-commits": 4})
    rng = random.Random(3)
    per_commit = []
    for i in range(8):
        listings.clear()
        t.insert(_rows(rng, [i], i))
        per_commit.append(len(listings))
    assert per_commit[0] == 1  # the handle's first view
    assert sum(per_commit[1:3]) == 0  # none due: no listing
    assert len(MetadataTable(t.storage).bases(FILES)) == 2  # written when due, after 4 and 8
    fresh = Table.open(t.path)
    assert fresh.view(fresh.timeline).state() == FileSystemView(fresh.timeline).state()


def test_failed_upkeep_never_fails_the_commit(tmp_path: Path) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        properties={"metadata.files.checkpoint-commits": 1},
    )
    faults.arm("metadata.upkeep", "raise")
    try:
        r = t.insert(_rows(random.Random(1), [1, 2, 3], 1))
    finally:
        faults.disarm_all()
    assert r.instant is not None and r.instant.state == "completed"
    assert t.to_arrow().num_rows == 3
    assert not MetadataTable(t.storage).bases(FILES)  # nothing was saved, and nothing is missing
    t.insert(_rows(random.Random(1), [4], 2))
    assert MetadataTable(t.storage).bases(FILES)


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_index_deltas_are_folded_automatically(tmp_path: Path, kind: str) -> None:
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=kind,
        # A group per write (merge-on-read would fill the small ones through logs), so
        # the bloom filters have files to prune.
        properties={"metadata.compact.max-deltas": 3, "write.small-file-limit-bytes": 0},
    )
    t.indexes.create("column_stats")
    t.indexes.create("bloom_filters")
    rng = random.Random(2)
    for step in range(12):
        t.insert(_rows(rng, list(range(step * 10, step * 10 + 10)), step))
    mt = MetadataTable(t.storage)
    for name in (d.partition for d in t.indexes.list()):  # <name>@<creating instant>
        assert mt.delta_count(name) <= 3 + 1  # the fold happens once the limit is passed
        assert len(mt.bases(name)) == 1
    assert t.indexes.validate()["mismatches"] == []
    s = t.scan(filter=pc.field("id") == 57)
    assert s.to_arrow().column("id").to_pylist() == [57]
    assert s.explain()["files_after_bloom_pruning"] == 1


def test_files_index_is_validated_rebuilt_and_cannot_be_created_or_dropped(tmp_path: Path) -> None:
    from lakeline.timeline.errors import InvalidIndexError

    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type="mor",
        properties={"metadata.files.checkpoint-commits": 2},
    )
    _random_history(t, random.Random(9), 8)
    t.indexes.create("column_stats")
    report = t.indexes.validate("files")
    assert report["mismatches"] == [] and report["files_checked"] == len(t.scan().files())
    assert [d.name for d in t.indexes.list()] == ["column_stats"]  # the files index is not a user index
    with pytest.raises(InvalidIndexError):
        t.indexes.create("bloom_filters", name="files")
    with pytest.raises(InvalidIndexError):
        t.indexes.drop("files")
    # A checkpoint that disagrees with the timeline is reported, and rebuild repairs it.
    mt = MetadataTable(t.storage)
    seq, path = mt.bases(FILES)[-1]
    rows = mt.read_file(path)
    Path(path).unlink()
    mt.write_base(FILES, seq, rows.slice(1))
    bad = t.indexes.validate()
    assert bad["mismatches"] and bad["mismatches"][0]["index"] == FILES
    rebuilt = t.indexes.rebuild()
    assert len(rebuilt) == 2
    assert t.indexes.validate()["mismatches"] == []
