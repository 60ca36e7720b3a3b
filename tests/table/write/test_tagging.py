"""Tagging (lakeline.table.write.tagging): which file group holds each incoming key.

On real merge-on-read tables (every insert starts new file groups there: small groups
are not filled, ``write.small-file-limit-bytes`` 0): a key the
table holds is routed to its group, a new key to none, a deleted key to none; with
``positions`` a key still in its base file gets its row there; and the key-range
pruning keeps only the slices whose range may hold one of the keys.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from lakeline.table import Table
from lakeline.table.context import TableContext
from lakeline.table.write.tagging import candidate_slices, tag
from lakeline.timeline.view.file_group import FileSlice

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
KEY = ("id",)


def rows(ids: list[int], v: str = "x") -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [v] * len(ids)}, schema=SCHEMA)


def keys(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64())})


def two_groups(tmp_path: Path) -> Table:
    """A merge-on-read table with keys 1-3 in one file group and 10-12 in another."""
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        table_type="mor",
        properties={"engine.parallelism": 1, "write.small-file-limit-bytes": 0},
    )
    t.insert(rows([1, 2, 3]))
    t.insert(rows([10, 11, 12]))
    return t


def slices_of(ctx: TableContext) -> list[FileSlice]:
    return ctx.view.latest_slices("")


def group_holding(ctx: TableContext, key: int) -> str:
    (fg,) = [
        s.file_group
        for s in slices_of(ctx)
        if s.base is not None and key in pq.read_table(ctx.storage.path(s.base.path)).column("id").to_pylist()
    ]
    return fg


def test_an_existing_key_goes_to_its_group_and_a_new_key_to_none(tmp_path: Path) -> None:
    ctx = two_groups(tmp_path).context()
    assert len(slices_of(ctx)) == 2
    groups, positions = tag(ctx.storage, ctx.engine, slices_of(ctx), keys([2, 11, 50]), KEY)
    assert groups.to_pylist() == [group_holding(ctx, 2), group_holding(ctx, 11), None]
    assert group_holding(ctx, 2) != group_holding(ctx, 11)
    assert positions.to_pylist() == [None, None, None]  # not asked for


def test_positions_are_the_keys_rows_in_their_base_files(tmp_path: Path) -> None:
    ctx = two_groups(tmp_path).context()
    groups, positions = tag(ctx.storage, ctx.engine, slices_of(ctx), keys([12, 1, 99]), KEY, positions=True)
    by_group = {s.file_group: s for s in slices_of(ctx)}
    expected = []
    for fg, k in zip(groups.to_pylist()[:2], [12, 1]):
        base = pq.read_table(ctx.storage.path(by_group[fg].base.path)).column("id").to_pylist()
        expected.append(base.index(k))
    assert positions.to_pylist() == [*expected, None]


def test_a_deleted_key_is_in_no_group(tmp_path: Path) -> None:
    t = two_groups(tmp_path)
    t.delete(keys([2]))
    ctx = t.context()
    assert any(s.logs for s in slices_of(ctx)), "the delete is a log on merge-on-read"
    groups, _ = tag(ctx.storage, ctx.engine, slices_of(ctx), keys([2, 3]), KEY)
    assert groups.to_pylist() == [None, group_holding(ctx, 3)]


def test_a_key_upserted_into_a_log_is_found_without_a_base_position(tmp_path: Path) -> None:
    t = two_groups(tmp_path)
    t.upsert(rows([11], "updated"))
    ctx = t.context()
    groups, positions = tag(ctx.storage, ctx.engine, slices_of(ctx), keys([11, 10]), KEY, positions=True)
    fg = group_holding(ctx, 10)
    assert groups.to_pylist() == [fg, fg]
    assert positions.to_pylist()[0] is None  # its live version is in the log
    assert positions.to_pylist()[1] is not None


def test_key_ranges_prune_the_slices_that_cannot_hold_a_key(tmp_path: Path) -> None:
    ctx = two_groups(tmp_path).context()
    high = [
        (s.file_group, mask.tolist() if mask is not None else None)
        for s, mask in candidate_slices(slices_of(ctx), keys([11, 12]), KEY)
    ]
    assert high == [(group_holding(ctx, 11), [True, True])]
    both = candidate_slices(slices_of(ctx), keys([2, 50]), KEY)
    assert [s.file_group for s, _ in both] == [group_holding(ctx, 2)]
    assert candidate_slices(slices_of(ctx), keys([5]), KEY) == []


def test_no_keys_tag_to_empty_arrays(tmp_path: Path) -> None:
    ctx = two_groups(tmp_path).context()
    groups, positions = tag(ctx.storage, ctx.engine, slices_of(ctx), keys([]), KEY)
    assert len(groups) == 0 and len(positions) == 0
