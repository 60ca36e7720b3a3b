"""Fixtures of the CLI tests: a click runner, a Parquet file to take a schema from, and
a table with a few instants of every kind the listing has to show."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from lakeline.table import Table
from lakeline.timeline.instant import Action, State

from tests.cli._data import SCHEMA, rows


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
    t = Table.create(
        tmp_path / "busy", SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type="mor"
    )
    t.upsert(rows([1, 2, 3]))
    t.upsert(rows([2, 4], ts=2))
    failed = t.log.append(Action.DELTA_COMMIT, State.REQUESTED, {"operation": "upsert", "snapshot_seq": 1})
    t.log.append(Action.DELTA_COMMIT, State.ROLLED_BACK, {"reason": "heartbeat expired"}, instant=failed.instant)
    t.log.append(Action.CLEAN, State.REQUESTED, {"policy": "keep_latest_commits", "retain": 10})
    return t
