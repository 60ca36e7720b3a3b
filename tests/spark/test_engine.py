"""``SparkEngine``: the table services and index builds run their tasks on executors and
leave the same table as the local engine."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.spark import SparkEngine
from lakeline.table import Table
from lakeline.timeline.errors import SnapshotExpiredError, UnsupportedOperationError

from tests.table.model import table_rows

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("day", pa.string()), ("v", pa.string())])


def _pid(_: int) -> int:
    return os.getpid()


def _fail(_: int) -> int:
    raise SnapshotExpiredError("a file of the snapshot was cleaned")


def build(path: Path) -> Table:
    t = Table.create(
        str(path),
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type="mor",
        properties={"clean.retain": 1, "clean.orphan-age-ms": 0},
    )
    for ts in range(4):
        ids = list(range(ts * 50, ts * 50 + 400))
        t.upsert(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "ts": pa.array([ts] * len(ids), pa.int64()),
                    "day": [f"d{i % 3}" for i in ids],
                    "v": [f"v{ts}-{i}" for i in ids],
                }
            )
        )
    t.delete(pa.table({"id": pa.array(list(range(0, 400, 9)), pa.int64())}))
    return t


def shape(t: Table) -> list[tuple[str, int, bool]]:
    """(partition, rows, has logs) of every latest slice: the layout, without ids."""
    return sorted((s.partition, sum(f.rows for f in s.files), bool(s.logs)) for s in t.view(t.timeline).latest_slices())


def test_map_runs_on_executors_in_input_order_with_typed_errors(spark: Any) -> None:
    engine = SparkEngine(spark)
    assert engine.map(lambda x: x * x, list(range(7))) == [x * x for x in range(7)]
    assert set(engine.map(_pid, list(range(4)))).isdisjoint({os.getpid()})
    assert engine.map(_pid, []) == []
    with pytest.raises(SnapshotExpiredError, match="cleaned"):
        engine.map(_fail, [1, 2])
    with pytest.raises(UnsupportedOperationError):
        import pickle

        pickle.dumps(engine)
    assert "local" in repr(engine)


def test_services_on_spark_leave_the_same_table(spark: Any, tmp_path: Path) -> None:
    local, remote = build(tmp_path / "local"), build(tmp_path / "spark")
    remote.engine = SparkEngine(spark)
    tracker = spark.sparkContext.statusTracker()

    def jobs() -> int:
        return len(tracker.getJobIdsForGroup(None))

    for n, step in enumerate(
        (
            lambda t: t.indexes.create("column_stats", columns=["id", "v"]),
            lambda t: t.indexes.create("bloom_filters", columns=["id"]),
            lambda t: t.services.compact(),
            lambda t: t.services.cluster(sort_by=["id"]),
            lambda t: t.services.clean(dry_run=False),
        )
    ):
        step(local)
        before = jobs()
        out = step(remote)
        assert jobs() > before, f"step {n} ran no Spark job: {out}"
    cols = ["day", "id", "ts", "v"]
    assert table_rows(Table.open(remote.path).to_arrow(), cols) == table_rows(Table.open(local.path).to_arrow(), cols)
    assert shape(Table.open(remote.path)) == shape(Table.open(local.path))
    for name in ("column_stats", "bloom_filters"):
        before = jobs()
        report = remote.indexes.validate(name)
        assert jobs() > before and report["mismatches"] == [] and report["files_checked"] > 0, report
