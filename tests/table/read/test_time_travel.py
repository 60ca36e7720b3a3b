"""Time travel reads: ``as_of`` an unknown or rolled-back instant is refused with a typed
error, ``as_of`` a wall-clock time picks the snapshot of that moment, and a snapshot whose
files were deleted is reported as expired (split out of ``test_scan.py``)."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.compute as pc
import pytest
from lakeline.table import LakelineError, SnapshotExpiredError, Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import FaultInjectedError, InstantNotFoundError

from tests.table.model import COLUMNS, SCHEMA, table_rows, to_arrow


@pytest.fixture
def small(tmp_path: Path) -> Table:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts")
    t.insert(to_arrow([{"id": 1, "ts": 1, "day": "d", "v": 1, "s": "a"}]))
    t.upsert(to_arrow([{"id": 1, "ts": 2, "day": "d", "v": 2, "s": "b"}]))
    return t


def test_as_of_unknown_instant(small: Table) -> None:
    for bad in (10_000, -1):
        with pytest.raises(InstantNotFoundError) as exc:
            small.to_arrow(as_of=bad)
        assert isinstance(exc.value, LookupError) and isinstance(exc.value, LakelineError)
        with pytest.raises(InstantNotFoundError):
            small.scan(as_of=bad)
        with pytest.raises(InstantNotFoundError):
            small.changes(bad)
    with pytest.raises(InstantNotFoundError):
        small.to_arrow(as_of=datetime(2001, 1, 1, tzinfo=UTC))


def test_as_of_a_rolled_back_instant(small: Table) -> None:
    rows = table_rows(small.to_arrow(), COLUMNS)
    faults.arm("commit.before_complete", "raise")
    try:
        with pytest.raises(FaultInjectedError):
            small.upsert(to_arrow([{"id": 1, "ts": 3, "day": "d", "v": 3, "s": "c"}]))
    finally:
        faults.disarm_all()
    failed = small.timeline.instants()[-1]
    assert failed.state == "rolled_back"
    with pytest.raises(InstantNotFoundError):
        small.to_arrow(as_of=failed.id)
    assert table_rows(small.to_arrow(), COLUMNS) == rows


def test_as_of_times(small: Table) -> None:
    done = small.timeline.completed()
    create, first, second = done
    assert small.to_arrow(as_of=create.id).num_rows == 0
    assert small.to_arrow(as_of=first.completed_at).column("v").to_pylist() == [1]
    assert small.to_arrow(as_of=second.completed_at - timedelta(microseconds=1)).column("v").to_pylist() == [1]
    assert small.to_arrow(as_of=second.completed_at).column("v").to_pylist() == [2]
    assert small.to_arrow(as_of=datetime.now(UTC)).column("v").to_pylist() == [2]
    assert small.to_arrow(as_of=datetime.now()).column("v").to_pylist() == [2]  # naive = local time


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_snapshot_whose_files_were_deleted_is_expired(tmp_path: Path, table_type: str) -> None:
    path = tmp_path / "t"
    t = Table.create(path, SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    rows = [{"id": i, "ts": 1, "day": "d", "v": i, "s": "a"} for i in range(10)]
    first = t.insert(to_arrow(rows)).instant
    old_files = t.scan().files()
    if table_type == "cow":
        second = t.upsert(to_arrow([{**r, "ts": 2, "v": -1} for r in rows])).instant
    else:
        second = t.overwrite(to_arrow([{**r, "ts": 2, "v": -1} for r in rows])).instant
    current = t.to_arrow()
    gone = set(old_files) - set(t.scan().files())
    assert gone
    for f in gone:
        os.remove(f)
    for when in (first.id, first.completed_at):
        with pytest.raises(SnapshotExpiredError) as exc:
            t.to_arrow(as_of=when)
        assert isinstance(exc.value, LakelineError) and isinstance(exc.value, LookupError)
        with pytest.raises(SnapshotExpiredError):
            t.scan(as_of=when)
    with pytest.raises(SnapshotExpiredError):
        t.to_arrow(as_of=first.id, filter=pc.field("id") == 1, columns=["id"])
    assert table_rows(t.to_arrow(as_of=second.id), COLUMNS) == table_rows(current, COLUMNS)
    assert table_rows(t.to_arrow(), COLUMNS) == table_rows(current, COLUMNS)
