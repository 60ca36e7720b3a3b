"""The change feed's before-images from merge-on-read positions (table/read/log_changes.py).

Why: a feed that reads every touched file group whole, before and after each instant,
costs two merged reads of each group per instant; a merge-on-read upsert already
records, for each key it finds in the base, the base row it replaces. These tests check
that the feed built from those positions is exactly the feed of the plain reads (every
engine, with and without an ordering field, compaction and clustering at random points,
keys updated again and again in logs, deleted and inserted again), and that it reads
only the base row groups the positions point into.
"""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.table.read import changes as changes_module
from lakeline.table.read import log_changes

from tests.table.merge_engines.test_engine_model import ENGINES, SCHEMA, _batch, _create


def _sorted(t: pa.Table) -> list[tuple[Any, ...]]:
    """The feed's rows as tuples, ordered by instant and then by value (within an
    instant the two ways may list rows in another order; the instants' order is fixed)."""
    rows = [tuple(r.values()) for r in t.to_pylist()]
    return sorted(rows, key=lambda r: (r[-1] if "_instant" in t.column_names else 0, repr(r)))


def _reference(t: Table, start: int, end: int | None = None, images: bool = False) -> pa.Table:
    return changes_module.changes(t.context(), t.view, start, end, images, reference=True)


@pytest.mark.parametrize("ordering", ["ts", None])
@pytest.mark.parametrize("engine", ENGINES)
def test_the_feed_from_positions_is_the_feed_of_whole_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str, ordering: str | None
) -> None:
    by_position = []
    real_log_change = changes_module.log_change

    def counted(task: log_changes.LogChange) -> log_changes.KeyVersions | None:
        by_position.append(real_log_change(task) is not None)
        return real_log_change(task)

    monkeypatch.setattr(changes_module, "log_change", counted)
    seed = zlib.crc32(f"log changes {engine} {ordering}".encode()) % 10_000
    rng = random.Random(seed)
    t = _create(tmp_path / "t", engine, "mor", ordering)
    first = t.upsert(pa.Table.from_pylist(_batch(rng), schema=SCHEMA)).instant
    assert first is not None
    ids = [first.id]
    for _ in range(24):
        roll = rng.random()
        r: Any
        if roll < 0.15:
            r = t.delete(pa.table({"day": ["d1", "d2", "d1"], "id": [rng.randrange(10), rng.randrange(10), 99]}))
        elif roll < 0.22:
            r = t.delete_where(pc.field("id") == rng.randrange(10))
        elif roll < 0.3 and engine in ("deduplicate", "partial-update"):
            r = t.update(pc.field("id") < rng.randrange(10), {"l": f"u{rng.randrange(99)}"})
        elif roll < 0.4:
            r = t.services.compact()
        elif roll < 0.45:
            r = t.services.cluster(sort_by=["id"])
        else:
            r = t.upsert(pa.Table.from_pylist(_batch(rng), schema=SCHEMA))
        if r.instant is not None:
            ids.append(r.instant.id)
    fast = t.changes(first.id, images=True)
    assert fast.num_rows > 0, f"seed {seed}: no change at all"
    assert _sorted(fast) == _sorted(_reference(t, first.id, images=True)), f"seed {seed}"
    assert sum(by_position) >= 5, f"seed {seed}: the positions were used {sum(by_position)} times"
    for _ in range(6):  # net diffs of random sub-ranges
        a, b = sorted(rng.sample(ids, 2))
        assert _sorted(t.changes(a, b)) == _sorted(_reference(t, a, b)), f"seed {seed}: ({a}, {b}]"


def test_a_log_commit_reads_only_the_base_row_groups_its_positions_point_into(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
    t = Table.create(
        tmp_path / "t",
        schema,
        record_key="id",
        ordering_field="ts",
        table_type="mor",
        properties={"write.row-group-rows": 1024},
    )
    t.insert(pa.table({"id": range(8192), "ts": [0] * 8192, "v": ["base"] * 8192}, schema=schema))
    (group,) = [s.file_group for s in t.view(t.context().snapshot).latest_slices()]
    up = lambda ids, ts, v: t.upsert(pa.table({"id": ids, "ts": [ts] * len(ids), "v": [v] * len(ids)}, schema=schema))  # noqa: E731
    one = up([2500, 5001], 1, "one").instant  # rows of row groups 2 and 4
    two = up([2500, 7777], 2, "two").instant  # 2500 again: its live version is in a log
    gone = t.delete(pa.table({"id": [5001]})).instant
    back = up([5001], 3, "back").instant  # a deleted key: a new group takes it
    assert one and two and gone and back

    groups_read: list[tuple[int, ...]] = []
    real_read_groups, real_read_slice = log_changes.read_groups, changes_module.read_slice

    def counting(
        storage: Any, path: str, names: Any, schema: pa.Schema, groups: Any, threads: bool, size: int | None = None
    ) -> pa.Table:
        groups_read.append(tuple(groups))
        return real_read_groups(storage, path, names, schema, groups, threads, size)

    def no_whole_read(task: Any) -> pa.Table:
        # Only the group ``back`` created has no earlier slice to extend: it is read.
        assert task.slice.file_group != group, "the large group was read whole"
        return real_read_slice(task)

    monkeypatch.setattr(log_changes, "read_groups", counting)
    monkeypatch.setattr(changes_module, "read_slice", no_whole_read)
    feed = t.changes(one.id, back.id, images=True).to_pylist()
    got = [(r["_instant"], r["_op"], r["id"], r["ts"], r["v"]) for r in feed]
    assert sorted(got) == sorted(
        [
            (two.id, "update_before", 2500, 1, "one"),  # the before-image from the earlier log
            (two.id, "update_after", 2500, 2, "two"),
            (two.id, "update_before", 7777, 0, "base"),  # from the base row its position names
            (two.id, "update_after", 7777, 2, "two"),
            (gone.id, "delete", 5001, 1, "one"),
            (back.id, "insert", 5001, 3, "back"),  # deleted, then written again
        ]
    )
    for n, row in enumerate(got):
        if row[1] == "update_before":
            assert got[n + 1][1:3] == ("update_after", row[2])
    # Each instant decoded only the groups its keys' base rows are in (of 8).
    assert groups_read and all(set(g) <= {2, 4, 7} and len(g) <= 2 for g in groups_read), groups_read


def test_the_feed_across_a_rename_reads_old_logs_and_bases_by_field_id(tmp_path: Path) -> None:
    """Files written before a rename carry the old name; the feed reads them by field id
    under the new name, from positions as from whole reads (issue 29)."""
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
    t = Table.create(tmp_path / "t", schema, record_key="id", ordering_field="ts", table_type="mor")
    start = t.insert(pa.table({"id": range(100), "ts": [0] * 100, "v": ["a"] * 100}, schema=schema)).instant
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "v": ["b", "b"]}, schema=schema))
    with t.update_schema() as u:
        u.rename_column("v", "w")
    renamed = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("w", pa.string())])
    t.upsert(pa.table({"id": [2, 3], "ts": [2, 2], "w": ["c", "c"]}, schema=renamed))
    assert start is not None
    fast = t.changes(start.id, images=True)
    assert "w" in fast.column_names and "v" not in fast.column_names
    assert _sorted(fast) == _sorted(_reference(t, start.id, images=True))
    befores = {(r["id"], r["w"]) for r in fast.to_pylist() if r["_op"] == "update_before"}
    assert befores == {(1, "a"), (2, "a"), (2, "b"), (3, "a")}
