"""Races the schedule explorer found on main after issue 11's first fixes.

Why: ``python -m tests.explorer`` (tests/explorer/README.md) checks after every step that
every error is typed and that nothing stays pending after recovery. Two histories broke
that: a write planning on a snapshot whose file a clean removed meanwhile surfaced an
untyped ``FileNotFoundError`` (seed 487), and a savepoint whose creator died between its
``requested`` and ``completed`` events stayed pending forever (seeds 53, 78, 426, ...).
Each is driven here deterministically.
"""

from __future__ import annotations

import time
from pathlib import Path

import lakeline.table.read.scan as scan_module
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import FaultInjectedError, SnapshotExpiredError

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
PROPS = {
    "engine.parallelism": 1,
    "heartbeat.interval-ms": 50,
    "heartbeat.tolerable-misses": 0,
    "clean.orphan-age-ms": 0,
}


pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def make(tmp_path: Path, table_type: str) -> str:
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id", table_type=table_type, properties=PROPS)
    Table.open(path).insert(pa.table({"id": [1, 2, 3], "v": ["x", "y", "x"]}, schema=SCHEMA))
    return path


def clean_under_the_first_read(monkeypatch: pytest.MonkeyPatch, path: str) -> list[int]:
    """Make the first scan meet a real clean between planning its slices and reading
    them: another handle rewrites the table twice and cleans (keeping the latest commit)."""
    real = scan_module.Scan._read
    calls = [0]

    def read(self: scan_module.Scan) -> pa.Table:
        calls[0] += 1
        if calls[0] == 1:
            other = Table.open(path)
            other.overwrite(pa.table({"id": [1, 2, 3], "v": ["x", "y", "x"]}, schema=SCHEMA))
            other.overwrite(pa.table({"id": [1, 2, 3, 4], "v": ["x", "y", "x", "x"]}, schema=SCHEMA))
            r = other.services.clean(policy="keep_latest_commits", retain=1, dry_run=False)
            assert r.stats["files_deleted"] > 0
        return real(self)

    monkeypatch.setattr(scan_module.Scan, "_read", read)
    return calls


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_delete_where_planning_on_a_cleaned_snapshot_plans_again(
    tmp_path: Path, table_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = make(tmp_path, table_type)
    calls = clean_under_the_first_read(monkeypatch, path)
    r = Table.open(path).delete_where(pc.field("v") == "x")
    assert calls[0] > 1  # read again, on a fresh snapshot
    assert r.instant is not None
    assert Table.open(path).to_arrow().to_pylist() == [{"id": 2, "v": "y"}]  # 4 too: it was there


def test_a_scan_meeting_a_cleaned_file_is_a_typed_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = make(tmp_path, "cow")
    clean_under_the_first_read(monkeypatch, path)
    t = Table.open(path)
    s = t.scan()
    with pytest.raises(SnapshotExpiredError, match="cleaned"):
        s.to_arrow()


@pytest.mark.parametrize("point", ["log.before_append.inflight", "log.before_append.completed"])
def test_a_savepoint_whose_creator_died_is_ended_by_rollback_failed(tmp_path: Path, point: str) -> None:
    path = make(tmp_path, "mor")
    t = Table.open(path)
    faults.arm(point, "raise")  # the creator stops there, as if killed
    with pytest.raises(FaultInjectedError):
        t.services.savepoint()
    faults.disarm_all()
    assert [i.action for i in t.timeline.pending()] == ["savepoint"]
    time.sleep(0.2)  # past the heartbeat expiry (50 ms x 1)
    r = t.services.rollback_failed()
    assert r.instant is not None
    assert t.timeline.pending() == []
    assert t.services.savepoints() == []  # it did not happen
    t.upsert(pa.table({"id": [9], "v": ["z"]}, schema=SCHEMA))  # and the table goes on


def test_a_savepoint_release_whose_creator_died_leaves_the_savepoint(tmp_path: Path) -> None:
    path = make(tmp_path, "cow")
    t = Table.open(path)
    sp = t.services.savepoint()
    faults.arm("log.before_append.inflight", "raise")
    with pytest.raises(FaultInjectedError):
        t.services.release_savepoint(sp.id)
    faults.disarm_all()
    time.sleep(0.2)
    t.services.rollback_failed()
    assert t.timeline.pending() == []
    assert [s.id for s in t.services.savepoints()] == [sp.id]  # the release did not happen
    t.services.release_savepoint(sp.id)
    assert t.services.savepoints() == []


def test_a_schema_change_whose_writer_died_is_ended_by_rollback_failed(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA, record_key="id", properties={**PROPS, "write.schema-evolution": "add-columns"})
    t = Table.open(path)
    faults.arm("log.before_append.completed", "raise")
    with pytest.raises(FaultInjectedError):
        t.upsert(pa.table({"id": [1], "v": ["a"], "extra": [1]}))
    faults.disarm_all()
    assert [i.action for i in t.timeline.pending()] == ["schema"]
    time.sleep(0.2)
    t.services.rollback_failed()
    t = Table.open(path)
    assert t.timeline.pending() == []
    assert t.schema.names == ["id", "v"]
    t.upsert(pa.table({"id": [1], "v": ["a"], "extra": [1]}))
    assert Table.open(path).schema.names == ["id", "v", "extra"]


def test_a_rewrite_whose_base_was_cleaned_before_it_ran_replays(tmp_path: Path) -> None:
    """Copy-on-write: the upsert planned to rewrite a base that, before its task read it,
    was replaced by two overwrites and cleaned (explorer seed 487, with clustering there).
    A conflict: the attempt is rolled back and replayed, never an untyped error."""
    path = make(tmp_path, "cow")

    def replace_and_clean() -> None:
        faults.disarm_all()
        other = Table.open(path)
        other.overwrite(pa.table({"id": [1, 2, 3], "v": ["o", "o", "o"]}, schema=SCHEMA))
        other.overwrite(pa.table({"id": [1, 2], "v": ["p", "p"]}, schema=SCHEMA))
        assert other.services.clean(policy="keep_latest_commits", retain=1, dry_run=False).stats["files_deleted"]

    faults.on("commit.after_inflight", replace_and_clean)
    t = Table.open(path)
    r = t.upsert(pa.table({"id": [1], "v": ["u"]}, schema=SCHEMA))
    assert r.instant is not None
    assert sorted(map(tuple, (d.values() for d in Table.open(path).to_arrow().to_pylist()))) == [(1, "u"), (2, "p")]
    assert [i.plan.get("operation") for i in t.timeline.instants() if i.state == "rolled_back"] == ["upsert"]


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_a_stale_writer_leaves_no_file_after_its_rollback(tmp_path: Path, table_type: str) -> None:
    """Explorer seeds 1161 and 1593: a writer stalls after creating a marker and before
    writing the file; its instant is rolled back meanwhile (the rollback deletes what the
    markers name, the file does not exist yet, then the markers); the writer wakes and
    writes the file. The file must not outlive the instant: the writer sees its marker
    gone, deletes the file and stops, refused like any stale writer."""
    from lakeline.table.rollback import rollback_instant
    from lakeline.timeline.errors import InvalidTransitionError

    path = make(tmp_path, table_type)
    t = Table.open(path)

    def roll_it_back() -> None:
        faults.disarm_all()
        other = Table.open(path)
        pending = other.timeline.pending()
        assert len(pending) == 1
        assert rollback_instant(other.log, other.storage, pending[0].id, "as rollback_failed would") is not None

    faults.on("marker.after_create", roll_it_back)
    with pytest.raises(InvalidTransitionError):
        t.upsert(pa.table({"id": [1, 9], "v": ["s", "s"]}, schema=SCHEMA))
    t = Table.open(path)
    gone = [i.id for i in t.timeline.instants() if i.state == "rolled_back"]
    assert len(gone) == 1
    left = [p for p in Path(path).rglob("*.parquet") if f"_{gone[0]}_" in p.name and ".lakeline" not in p.parts]
    assert left == []
    assert t.timeline.pending() == []
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [1, 2, 3]
