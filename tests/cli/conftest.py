"""Fixtures of the CLI tests: a click runner, a Parquet file to take a schema from, and
a table with a few instants of every kind the listing has to show."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from lakeline.table import Table
from lakeline.timeline.instant import Action, State

SCHEMA = pa.schema([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("ts", pa.int64()),
    pa.field("day", pa.string()),
    pa.field("region", pa.string()),
    pa.field("amount", pa.float64()),
])


def rows(ids: list[int], ts: int = 1) -> pa.Table:
    return pa.table({
        "id": ids,
        "ts": [ts] * len(ids),
        "day": ["2026-01-01" if i % 2 else "2026-01-02" for i in ids],
        "region": ["eu"] * len(ids),
        "amount": [float(i) for i in ids],
    }, schema=SCHEMA)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def parquet_file(tmp_path: Path) -> Path:
    """A Parquet file with the test schema (and pandas-style metadata to be dropped)."""
    path = tmp_path / "sample.parquet"
    pq.write_table(rows([1, 2]).replace_schema_metadata({b"pandas": b"{}"}), path)
    return path


@pytest.fixture
def busy_table(tmp_path: Path) -> Table:
    """A mor table with: schema (0), two completed writes, a rolled-back instant and a
    pending one, so filters and summaries have something to tell apart."""
    t = Table.create(tmp_path / "busy", SCHEMA, record_key="id", ordering_field="ts",
                     partition_by=["day"], table_type="mor")
    t.upsert(rows([1, 2, 3]))
    t.upsert(rows([2, 4], ts=2))
    failed = t.log.append(Action.DELTA_COMMIT, State.REQUESTED, {"operation": "upsert", "snapshot_seq": 1})
    t.log.append(Action.DELTA_COMMIT, State.ROLLED_BACK, {"reason": "heartbeat expired"}, instant=failed.instant)
    t.log.append(Action.CLEAN, State.REQUESTED, {"policy": "keep_latest_commits", "retain": 10})
    return t
