"""Position deletes in merge-on-read logs: a log row carries the row its key had in the
slice's base file, the log names that file, and a read of the slice drops those rows by
position instead of comparing every base key with the logs' keys.

The reads must equal the key-comparing merge (which the model stands for) in every
history, including the one that makes positions stale: a compaction writing a new base
for the group between a writer's tagging and its completion.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table
from lakeline.table import merge as merge_module
from lakeline.table.read import log_cache
from lakeline.table.read import slice_read as slice_module
from lakeline.table.write.records import BASE_FILE_KEY, BASE_POS, OP
from lakeline.timeline.diagnostics import faults

SCHEMA = pa.schema(
    [("item", pa.int64()), ("ticket", pa.int64()), ("day", pa.int32()), ("v", pa.string()), ("ts", pa.int64())]
)
KEY = ["item", "ticket"]


def rows(keys: list[tuple[int, int]], ts: int, rng: random.Random) -> pa.Table:
    return pa.table(
        {
            "item": [k[0] for k in keys],
            "ticket": [k[1] for k in keys],
            "day": [rng.randrange(30) for _ in keys],
            "v": [f"v{ts}-{rng.randrange(99)}" for _ in keys],
            "ts": [ts] * len(keys),
        },
        schema=SCHEMA,
    )


def state(t: Table) -> list[tuple[Any, ...]]:
    got = Table.open(t.path).to_arrow()
    return sorted(tuple(r.values()) for r in got.to_pylist())


def logs_of(t: Table) -> list[Any]:
    return [f for s in Table.open(t.path).context().view.latest_slices() for f in s.logs]


@pytest.mark.parametrize("ordering", ["ts", None])
def test_mor_reads_drop_touched_rows_by_position_and_equal_copy_on_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ordering: str | None
) -> None:
    """Random upserts, deletes and delete_where on a composite key: every log carries
    base positions naming its slice's base, the reads take the position path (the
    key-comparing merge is never called), and each read equals a copy-on-write table
    given the same writes. Without an ordering field the touched base rows are not
    folded at all (every change replaces them); slices whose logs are all deletes read
    only the logs' positions."""
    rng = random.Random(5)
    mor = Table.create(str(tmp_path / "mor"), SCHEMA, record_key=KEY, ordering_field=ordering, table_type="mor")
    cow = Table.create(str(tmp_path / "cow"), SCHEMA, record_key=KEY, ordering_field=ordering, table_type="cow")
    universe = [(i, t) for i in range(40) for t in range(50)]
    first = rows(rng.sample(universe, 1500), 1, rng)
    for t in (mor, cow):
        t.insert(first)

    def no_key_merge(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a slice whose logs all hold base positions was merged by key")

    real_read = slice_module.read_snapshot_file
    asked: dict[str, tuple[str, ...] | None] = {}  # the columns each file was read with

    def spy(task: Any) -> pa.Table:
        asked[task.rel_path] = task.columns
        return real_read(task)

    ops = ["delete_where", "delete"] + [rng.choice(["upsert", "delete", "delete_where"]) for _ in range(8)]
    for step, op in enumerate(ops, start=2):
        if op == "upsert":
            data = rows(rng.sample(universe, 200), rng.choice([step, 0]), rng)  # ts 0: an older version loses
            for t in (mor, cow):
                t.upsert(data)
        elif op == "delete":
            keys = pa.table(
                {"item": [k[0] for k in rng.sample(universe, 100)], "ticket": [k[1] for k in rng.sample(universe, 100)]}
            )
            for t in (mor, cow):
                t.delete(keys)
        else:
            lo = rng.randrange(28)
            for t in (mor, cow):
                t.delete_where((pc.field("day") >= lo) & (pc.field("day") < lo + 2))
        logs = logs_of(mor)
        assert logs, "merge-on-read writes left no log"
        for f in logs:
            written = pq.read_schema(str(tmp_path / "mor" / f.path))
            assert BASE_POS in written.names, f"log {f.path} holds no base positions"
        asked.clear()
        with monkeypatch.context() as m:
            m.setattr(slice_module, "merge_onto", no_key_merge)
            m.setattr(slice_module, "read_snapshot_file", spy)
            m.setattr(log_cache, "read_snapshot_file", spy)
            m.setattr(log_cache.LOGS, "max_bytes", 0)  # every log read again, to see its columns
            got = state(mor)
        assert got == state(cow), f"after {op} #{step}"
        for s in Table.open(mor.path).context().view.latest_slices():
            if s.logs and all(f.deletes == f.rows for f in s.logs):
                assert all(asked[f.path] == (OP, BASE_POS) for f in s.logs), "delete-only logs were read whole"
    # The projection of a few columns takes the same path and the same rows.
    with monkeypatch.context() as m:
        m.setattr(slice_module, "merge_onto", no_key_merge)
        few = Table.open(mor.path).to_arrow(columns=["ticket", "v"])
    assert sorted(few.to_pylist(), key=str) == sorted(
        Table.open(cow.path).to_arrow(columns=["ticket", "v"]).to_pylist(), key=str
    )


def test_positions_of_an_older_base_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction writes the group's new base (its rows in another order) while an
    upsert that tagged on the old base is in flight: the upsert's log, landing on the
    new slice, points into the old base, so the read compares keys, and the table
    equals the sequential history."""
    rng = random.Random(9)
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key=KEY, ordering_field="ts", table_type="mor")
    keys = [(i, i * 7 % 13) for i in range(300)]
    t.insert(rows(keys, 1, rng))
    t.upsert(rows(keys[::3], 2, rng))  # a log, so the compaction reorders the base
    late = rows(keys[1::5], 3, rng)
    other = Table.open(t.path)

    def compact() -> None:
        other.services.compact()

    faults.on("commit.before_complete", compact)
    try:
        t.upsert(late)
    finally:
        faults.disarm_all()
    slices = Table.open(t.path).context().view.latest_slices()
    stale = [
        (s, f)
        for s in slices
        for f in s.logs
        if pq.read_schema(str(tmp_path / "t" / f.path)).metadata.get(BASE_FILE_KEY) != s.base.path.encode()
    ]
    assert stale, "the upsert replayed on the new base: the test proved nothing"
    calls: list[int] = []
    real = merge_module.merge_onto

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(slice_module, "merge_onto", counting)
    want = {k: r for k, r in ((tuple(r[c] for c in KEY), r) for r in rows(keys, 1, random.Random(9)).to_pylist())}
    got = {tuple(r[c] for c in KEY): r for r in Table.open(t.path).to_arrow().to_pylist()}
    assert calls, "the stale positions were used"
    assert set(got) == set(want)
    for k, r in got.items():
        expect_ts = 3 if k in {tuple(x[c] for c in KEY) for x in late.to_pylist()} else 2 if k in set(keys[::3]) else 1
        assert r["ts"] == expect_ts, (k, r)
