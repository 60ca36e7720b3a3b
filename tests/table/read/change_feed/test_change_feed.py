"""The change feed: ``changes(start, end, images=True)``.

Why: a downstream job that replicates a table needs every change with its before-image
(what a key held before an update or a delete), in the order the instants completed,
not the net difference of two snapshots. The test keeps a model (the table read after
every write) and checks, for random histories on both table types with compactions
and clusterings in between, that the feed is exactly the model's per-instant
differences, that replaying it onto the start state gives the end state, and that an
update's two rows come side by side.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.errors import SchemaMismatchError

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
Row = tuple[Any, ...]


def state(t: Table) -> dict[int, Row]:
    return {r["id"]: (r["id"], r["ts"], r["v"]) for r in t.to_arrow().to_pylist()}


def feed(t: Table, start: int, end: int | None = None) -> list[tuple[int, str, Row]]:
    got = t.changes(start, end, images=True)
    assert got.column_names == [*SCHEMA.names, "_op", "_instant"]
    return [(r["_instant"], r["_op"], (r["id"], r["ts"], r["v"])) for r in got.to_pylist()]


def expected(before: dict[int, Row], after: dict[int, Row], instant: int) -> list[tuple[int, str, Row]]:
    out = [(instant, "insert", after[k]) for k in after.keys() - before.keys()]
    out += [(instant, "delete", before[k]) for k in before.keys() - after.keys()]
    for k in before.keys() & after.keys():
        if before[k] != after[k]:
            out += [(instant, "update_before", before[k]), (instant, "update_after", after[k])]
    return out


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("seed", [1, 2])
def test_the_feed_is_every_instant_s_change_with_before_images(tmp_path: Path, table_type: str, seed: int) -> None:
    rng = random.Random(seed)
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    start = t.insert(pa.table({"id": [0, 1, 2], "ts": [0, 0, 0], "v": ["a", "b", "c"]}, schema=SCHEMA)).instant
    assert start is not None
    states = [state(t)]
    model: list[tuple[int, str, Row]] = []
    for step in range(1, 16):
        op = rng.choice(["upsert", "upsert", "delete", "delete_where", "update", "compact", "cluster"])
        if op == "upsert":
            ids = rng.sample(range(12), rng.randint(1, 5))
            r = t.upsert(pa.table({"id": ids, "ts": [step] * len(ids), "v": [f"s{step}"] * len(ids)}, schema=SCHEMA))
        elif op == "delete":
            r = t.delete(pa.table({"id": pa.array(rng.sample(range(12), 2), pa.int64())}))
        elif op == "delete_where":
            r = t.delete_where(pc.field("id") == rng.randrange(12))
        elif op == "update":
            r = t.update(pc.field("id") < rng.randrange(12), {"v": f"u{step}"})
        elif op == "compact" and table_type == "mor":
            r = t.services.compact()
        else:
            r = t.services.cluster(sort_by=["id"])
        if r.instant is None:
            continue
        states.append(state(t))
        model += expected(states[-2], states[-1], r.instant.id)
    got = feed(t, start.id)
    # Within an instant the order is inserts, updates (before, after), deletes; across
    # instants, completion order. Compare as multisets, then check the order separately.
    assert sorted(got, key=repr) == sorted(model, key=repr)
    assert [i for i, _, _ in got] == sorted(i for i, _, _ in got)
    for n, (_, op, row) in enumerate(got):
        if op == "update_before":
            assert got[n + 1][1] == "update_after" and got[n + 1][2][0] == row[0]
    # Replaying the feed onto the start state gives the end state.
    replayed = dict(states[0])
    for _, op, row in got:
        if op in ("insert", "update_after"):
            replayed[row[0]] = row
        elif op == "delete":
            del replayed[row[0]]
    assert replayed == states[-1]
    # A sub-range is the model's sub-range; the net diff stays one row per key.
    ids = sorted({i for i, _, _ in model})
    if len(ids) >= 3:
        assert feed(t, ids[0], ids[2]) == [c for c in got if ids[0] < c[0] <= ids[2]]
    assert t.changes(start.id).num_rows == len(set(states[0]) ^ set(states[-1])) + sum(
        1 for k in set(states[0]) & set(states[-1]) if states[0][k] != states[-1][k]
    )


def test_a_table_without_a_key_feeds_its_inserts_per_instant(tmp_path: Path) -> None:
    t = Table.create(tmp_path / "t", SCHEMA)
    first = t.insert(pa.table({"id": [1], "ts": [1], "v": ["a"]}, schema=SCHEMA)).instant
    second = t.insert(pa.table({"id": [2, 3], "ts": [2, 2], "v": ["b", "c"]}, schema=SCHEMA)).instant
    third = t.insert(pa.table({"id": [4], "ts": [3], "v": ["d"]}, schema=SCHEMA)).instant
    assert first is not None and second is not None and third is not None
    assert feed(t, first.id) == [
        (second.id, "insert", (2, 2, "b")),
        (second.id, "insert", (3, 2, "c")),
        (third.id, "insert", (4, 3, "d")),
    ]
    assert feed(t, third.id) == []


def test_a_table_with_an_instant_column_of_its_own_is_refused_the_feed(tmp_path: Path) -> None:
    """``_instant`` stays an ordinary column name (tables made before the feed may use
    it); the feed of such a table is a typed error, the net diff still works."""
    t = Table.create(tmp_path / "t", SCHEMA.append(pa.field("_instant", pa.int64())), record_key="id")
    first = t.insert(pa.table({"id": [1], "ts": [1], "v": ["a"], "_instant": [7]})).instant
    t.insert(pa.table({"id": [2], "ts": [1], "v": ["b"], "_instant": [8]}))
    assert first is not None
    with pytest.raises(SchemaMismatchError):
        t.changes(first.id, images=True)
    assert t.changes(first.id).num_rows == 1
