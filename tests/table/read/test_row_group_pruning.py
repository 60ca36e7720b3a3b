"""Row-group pruning inside merged slices (issue 30 item 5), checked by brute force.

A merge-on-read table whose base files hold several 1,024-row groups (ids in order, so
groups have narrow ranges of ``id``, ``v`` and ``d``), then upserts, deletes and
``delete_where`` whose log rows replace or remove base rows in groups a filter rules
out and in groups it keeps, some with an older ordering value (the base version wins).
For random filters (those of ``test_pruning_soundness``), ``t.to_arrow(filter)`` equals
the whole table read without a filter and filtered by pyarrow, and the scan's
``read_stats`` show base row groups left undecoded.
"""

from __future__ import annotations

import random
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table
from lakeline.table.write.records import BASE_FILE_KEY
from lakeline.timeline.diagnostics import faults

from tests.indexes.expressions.test_pruning_soundness import DAY0, DAYS, REGIONS, SCHEMA, STRINGS, random_filters

GROUP = 1024
BASE_ROWS = 6 * GROUP + 300


def _row(rng: random.Random, i: int, v: int | None) -> dict[str, Any]:
    return {
        "id": i,
        "day": rng.choice(DAYS),
        "region": rng.choice(REGIONS),
        "v": v,
        "s": None if rng.random() < 0.1 else rng.choice(STRINGS),
        "d": None if rng.random() < 0.1 else DAY0 + timedelta(days=rng.randint(0, 5) + i // 120),
    }


def _base(rng: random.Random) -> pa.Table:
    """Rows in id order with ``v`` rising along them: each row group has narrow bounds."""
    rows = [
        _row(rng, i, None if rng.random() < 0.05 else i * 1000 // BASE_ROWS + rng.randint(0, 5))
        for i in range(BASE_ROWS)
    ]
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _changes(rng: random.Random, ids: list[int]) -> pa.Table:
    """New versions with ``v`` anywhere, so a row moves into or out of a filter's range
    (and, with ``v`` as the ordering field, half of them lose to the base version)."""
    return pa.Table.from_pylist(
        [_row(rng, i, None if rng.random() < 0.05 else rng.randint(0, 1000)) for i in ids], schema=SCHEMA
    )


def _create(path: Path, ordering: str | None, rows: pa.Table) -> Table:
    """A merge-on-read table of ``rows`` in 1,024-row groups."""
    t = Table.create(
        path, SCHEMA, record_key="id", ordering_field=ordering, table_type="mor",
        properties={"write.row-group-rows": GROUP},
    )  # fmt: skip
    t.insert(rows)
    return t


def build(path: Path, ordering: str | None, seed: int) -> tuple[Table, int]:
    rng = random.Random(seed)
    t = _create(path, ordering, _base(rng))
    next_id = BASE_ROWS
    for step in range(7):
        op = step % 4
        if op in (0, 2):
            ids = rng.sample(range(next_id), 150) + list(range(next_id, next_id + 20))
            next_id += 20
            t.upsert(_changes(rng, ids))
        elif op == 1:
            t.delete(pa.table({"id": pa.array(rng.sample(range(next_id), 40), pa.int64())}))
        else:
            lo = rng.randrange(next_id)
            t.delete_where((pc.field("id") >= lo) & (pc.field("id") < lo + 30))
    return t, next_id


def _sorted(rows: pa.Table) -> list[dict[str, Any]]:
    return sorted(rows.to_pylist(), key=lambda r: r["id"])


@pytest.mark.parametrize("ordering", [None, "v", "d"])
def test_random_filters_on_merged_slices_equal_brute_force(tmp_path: Path, ordering: str | None) -> None:
    t, max_id = build(tmp_path / "t", ordering, seed=7)
    whole = t.to_arrow()
    assert sorted(whole.column("id").to_pylist()) == sorted(set(whole.column("id").to_pylist()))
    groups = read = merged = 0
    for flt in random_filters(max_id, n=120, seed=11):
        scan = t.scan(filter=flt)
        assert _sorted(scan.to_arrow()) == _sorted(whole.filter(flt)), str(flt)
        merged += scan.read_stats.merged_slices
        groups += scan.read_stats.base_row_groups
        read += scan.read_stats.base_row_groups_read
    assert merged >= 100, "few reads merged a slice: the test proves little"
    # Pruning happens: a good share of the base row groups are never decoded.
    assert read < 0.8 * groups, (read, groups)


def test_streamed_and_projected_reads_prune_alike(tmp_path: Path) -> None:
    """Streamed reads, and reads of two columns (the key and the ordering field not
    among them: a merge by position takes the key from the logs)."""
    t, max_id = build(tmp_path / "t", "v", seed=3)
    whole = t.to_arrow()
    for flt in random_filters(max_id, n=40, seed=5):
        scan = t.scan(filter=flt)
        assert _sorted(scan.to_reader().read_all()) == _sorted(whole.filter(flt)), str(flt)
        few = t.to_arrow(filter=flt, columns=["s", "d"]).to_pylist()
        assert sorted(few, key=str) == sorted(whole.filter(flt).select(["s", "d"]).to_pylist(), key=str), str(flt)


@pytest.mark.parametrize("ordering", [None, "v"])
def test_logs_merged_by_key_prune_alike(tmp_path: Path, ordering: str | None) -> None:
    """A log whose positions point into an older base (a compaction landed between the
    upsert's tagging and its completion) is merged by key: the base's row groups are
    pruned only where a left-out base row cannot win the fold."""
    rng = random.Random(4)
    t = _create(tmp_path / "t", ordering, _base(rng))
    t.upsert(_changes(rng, rng.sample(range(BASE_ROWS), 100)))
    other = Table.open(t.path)
    faults.on("commit.before_complete", lambda: other.services.compact())
    try:
        t.upsert(_changes(rng, rng.sample(range(BASE_ROWS), 300) + list(range(BASE_ROWS, BASE_ROWS + 30))))
    finally:
        faults.disarm_all()
    slices = Table.open(t.path).context().view.latest_slices()
    stale = [
        f
        for s in slices
        for f in s.logs
        if s.base is not None
        and pq.read_schema(str(tmp_path / "t" / f.path)).metadata.get(BASE_FILE_KEY) != s.base.path.encode()
    ]
    assert stale, "the upsert replayed on the new base: the test proves nothing"
    whole = t.to_arrow()
    for flt in random_filters(BASE_ROWS + 30, n=60, seed=9):
        assert _sorted(t.to_arrow(filter=flt)) == _sorted(whole.filter(flt)), str(flt)


def _table(path: Path, ordering: str | None) -> Table:
    """Ids 0..8191 in eight row groups, ``v`` equal to ``id`` (ordering: ``d``)."""
    rng = random.Random(1)
    rows = pa.Table.from_pylist([{**_row(rng, i, i), "d": DAY0} for i in range(8 * GROUP)], schema=SCHEMA)
    return _create(path, ordering, rows)


def _version(i: int, v: int, days: int) -> dict[str, Any]:
    return {"id": i, "day": DAY0, "region": "eu", "v": v, "s": "x", "d": DAY0 + timedelta(days=days)}


@pytest.mark.parametrize("ordering", [None, "d"])
def test_a_key_updated_in_a_pruned_row_group_appears_once_with_its_latest_version(
    tmp_path: Path, ordering: str | None
) -> None:
    t = _table(tmp_path / "t", ordering)
    t.upsert(
        pa.Table.from_pylist(
            [
                _version(10, 7000, 1),  # its base row's group is pruned by v >= 7000; the new version matches
                _version(7100, 5, 1),  # a kept group's row leaves the filter's range
                _version(20, 7500, -1),  # an older version (ordering d): the base row, pruned, wins
                _version(30, 7600, 1),
            ],
            schema=SCHEMA,
        )
    )
    t.upsert(pa.Table.from_pylist([_version(10, 7001, 2)], schema=SCHEMA))  # a second log, the same key
    t.delete(pa.table({"id": pa.array([7050, 30], pa.int64())}))
    flt = pc.field("v") >= 7000
    scan = t.scan(filter=flt)
    got = {r["id"]: r["v"] for r in scan.to_arrow().to_pylist()}
    ids = [r["id"] for r in scan.to_arrow().to_pylist()]
    assert len(ids) == len(set(ids))
    assert got[10] == 7001
    assert 7100 not in got and 7050 not in got and 30 not in got
    assert (20 in got) == (ordering is None)  # with ordering d, the base version (v 20) wins
    assert _sorted(scan.to_arrow()) == _sorted(t.to_arrow().filter(flt))
    assert scan.read_stats.base_row_groups == 8
    assert scan.read_stats.base_row_groups_read < 8


def test_fewer_base_rows_are_decoded_when_row_groups_are_pruned(tmp_path: Path) -> None:
    """A 1,000-key read decodes the two row groups that hold the range, and skips the
    logs whose key range lies outside it (a delete_where elsewhere)."""
    t = _table(tmp_path / "t", "d")
    t.upsert(pa.Table.from_pylist([_version(i, i, 1) for i in range(0, 8 * GROUP, 97)], schema=SCHEMA))
    t.delete_where((pc.field("id") >= 6000) & (pc.field("id") < 6100))
    everything = t.scan()
    everything.to_arrow()
    assert everything.read_stats.base_rows_read == 8 * GROUP
    flt = (pc.field("id") >= 3000) & (pc.field("id") < 4000)  # within groups 2 and 3
    few = t.scan(filter=flt)
    rows = few.to_arrow()
    assert sorted(rows.column("id").to_pylist()) == list(range(3000, 4000))
    assert few.read_stats.base_row_groups == 8
    assert few.read_stats.base_row_groups_read == 2
    assert few.read_stats.base_rows_read == 2 * GROUP
    assert (few.read_stats.logs, few.read_stats.logs_read) == (2, 1)
    assert everything.read_stats.logs_read == 2
