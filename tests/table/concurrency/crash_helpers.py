"""What the crash tests (``test_crash.py``, ``test_marker_crash.py``, and
``tests/spark/test_crash.py``, ``tests/services/test_staging_cleanup.py``) share: the table
they crash writers on, a writer child killed at a fault point, and the state they compare."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
from lakeline.table import Table
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE

from tests.children.table_workers import WORKERS_PY, data_files_on_disk, referenced_files
from tests.helpers import run_script

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
EXPIRY_S = 0.1 * (1 + 1)
SEED = {i: "seed" for i in range(10)}
# Updates 5-9 (a log on, or a rewrite of, the seed's file group) and inserts 10-14 (a new
# file group: small-file filling is off so that copy-on-write writes two files as well).
WRITE = {i: "crashed" for i in range(5, 15)}

COMMIT_POINTS = [
    "commit.before_requested",
    "commit.after_requested",
    "commit.after_inflight",
    "commit.before_complete",
    "commit.after_complete",
]
STATE_AT_CRASH = {
    "commit.after_requested": "requested",
    "commit.after_inflight": "inflight",
    "commit.before_complete": "inflight",
    "commit.after_complete": "completed",
}


def make_table(tmp: Path, table_type: str, timeline: str | None, location: str | None = None, **props: Any) -> Table:
    """The seeded table, in ``tmp`` or at ``location`` (an object store's: options from the environment)."""
    path = location or str(tmp / "table")
    properties = {**HEARTBEAT, "write.small-file-limit-bytes": 0, "engine.parallelism": 1, **props}
    Table.create(path, SCHEMA, record_key="id", table_type=table_type, properties=properties, timeline=timeline)
    t = Table.open(path, timeline=timeline)
    t.insert(rows(SEED))
    return t


def rows(values: dict[int, str]) -> pa.Table:
    return pa.table({"id": pa.array(list(values), pa.int64()), "v": pa.array(list(values.values()))})


def upsert_spec(values: dict[int, str]) -> dict[str, Any]:
    return {"op": "upsert", "rows": [{"id": k, "v": v} for k, v in values.items()]}


def state(t: Table) -> dict[int, str]:
    table = t.to_arrow()
    ids = table.column("id").to_pylist()
    assert len(ids) == len(set(ids)), f"a key appears twice: {sorted(ids)}"
    return dict(zip(ids, table.column("v").to_pylist()))


def crash_writer(t: Table, faults: str, spec: dict[str, Any] | None = None) -> None:
    """Run one upsert in a child that dies at ``faults``."""
    rc, out, err = run_script(WORKERS_PY, ["op", t.path, t.timeline_url, spec or upsert_spec(WRITE)], faults=faults)
    assert rc == CRASH_EXIT_CODE, f"the writer did not die at {faults}: rc={rc}\n{out}\n{err[-3000:]}"


def pending_writes(t: Table) -> list[Any]:
    return [i for i in t.timeline.pending() if i.action.writes_data]


def orphan_files(t: Table) -> set[str]:
    """Files on disk that no completed instant added."""
    return data_files_on_disk(t) - referenced_files(t)


def kill_writer_and_recover(t: Table, point: str) -> None:
    """A writer child killed at commit fault ``point``; then the rollback service, and the
    checks: nothing pending, the table as if the write never started (or finished, when
    it died after completing), no file of it left, and the next write commits."""
    from lakeline.timeline.markers import list_markers

    from tests.children.table_workers import check_files_on_disk, data_instants

    before = {i.id for i in t.timeline.instants()}
    crash_writer(t, f"{point}=crash")
    new = [i for i in data_instants(t.timeline) if i.id not in before]
    if point == "commit.before_requested":
        assert new == []
    else:
        assert len(new) == 1
        failed = new[0]
        assert failed.state == STATE_AT_CRASH[point]
        if point == "commit.before_complete":
            assert orphan_files(t), "the writer died after writing its files: some must be on disk"
            assert list_markers(t.storage, failed.id), "each file it wrote has a marker"

    time.sleep(EXPIRY_S + 0.2)
    result = t.services.rollback_failed()

    tl = t.timeline
    assert tl.pending() == [], f"left pending: {tl.pending()}"
    expected = dict(SEED)
    if point == "commit.after_complete":
        assert tl.get(failed.id).state == "completed"
        expected.update(WRITE)
    elif new:
        assert tl.get(failed.id).state == "rolled_back"
        assert result.instant is not None and result.instant.state == "completed"
        assert failed.id in result.stats["instants"]
        assert tl.get(failed.id).id not in {i.id for i in tl.completed()}
    else:
        assert result.instant is None
    assert state(t) == expected
    assert orphan_files(t) == set(), "files of the failed write are still on disk"
    check_files_on_disk(t)
    # The table goes on: the next write commits and sees the same state.
    t.upsert(rows({0: "after"}))
    expected[0] = "after"
    assert state(t) == expected
