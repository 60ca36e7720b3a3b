"""``spark.readStream.format("lakeline")``: the table's changes as a stream.

Why: a downstream pipeline reads a table's changes continuously. Each micro-batch must
hold exactly the changes of the instants completed since the last one (completion
order, offsets are instant ids), bounded by ``max_instants_per_batch``, and a query
restarted on its checkpoint must go on where it stopped: nothing skipped, nothing twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


def rows(ids: list[int], ts: int) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{ts}"] * len(ids)}, schema=SCHEMA)


def changes_of(t: Table, start: int, end: int) -> list[tuple[Any, ...]]:
    return sorted((r["id"], r["ts"], r["v"], r["_op"]) for r in t.changes(start, end).to_pylist())


def run(spark: Any, path: str, checkpoint: Path, seen: list[tuple[int, list[tuple[Any, ...]]]]) -> None:
    """Read every change available now, one instant per micro-batch, then stop."""

    def collect(df: Any, batch_id: int) -> None:
        got = sorted((r["id"], r["ts"], r["v"], r["_op"]) for r in df.collect())
        if got:
            seen.append((batch_id, got))

    query = (
        spark.readStream.format("lakeline")
        .option("starting_instant", "earliest")
        .option("max_instants_per_batch", "1")
        .load(path)
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()


@pytest.mark.parametrize("table_type", ["mor"])
def test_a_stream_reads_each_instant_once_across_a_restart(spark: Any, tmp_path: Path, table_type: str) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    created = t.timeline.completed()[0].id
    ids = [t.insert(rows([1, 2, 3], 1)).instant, t.upsert(rows([2, 4], 2)).instant]
    ids.append(t.delete(pa.table({"id": pa.array([1], pa.int64())})).instant)
    assert all(i is not None for i in ids)
    seen: list[tuple[int, list[tuple[Any, ...]]]] = []
    run(spark, t.path, tmp_path / "ckpt", seen)
    bounds = [created] + [i.id for i in ids if i is not None]
    assert [got for _, got in seen] == [changes_of(t, a, b) for a, b in zip(bounds, bounds[1:])]
    # A restart on the same checkpoint reads only what completed since.
    later = t.upsert(rows([3, 5], 3)).instant
    assert later is not None
    again: list[tuple[int, list[tuple[Any, ...]]]] = []
    run(spark, t.path, tmp_path / "ckpt", again)
    assert [got for _, got in again] == [changes_of(t, bounds[-1], later.id)]
    assert again[0][0] > seen[-1][0]  # the batch ids go on
    # The same options make a batch read of the changes since the start.
    batch = spark.read.format("lakeline").option("starting_instant", str(bounds[1])).load(t.path)
    assert sorted((r["id"], r["ts"], r["v"], r["_op"]) for r in batch.collect()) == changes_of(t, bounds[1], later.id)
