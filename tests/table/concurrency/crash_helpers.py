"""What the crash tests (``test_crash.py``, ``test_marker_crash.py``, and
``tests/spark/test_crash.py``, ``tests/services/test_staging_cleanup.py``) share: the table
they crash writers on, a writer child killed at a fault point, and the state they compare."""

from __future__ import annotations

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


def make_table(tmp: Path, table_type: str, timeline: str | None, **props: Any) -> Table:
    path = str(tmp / "table")
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
