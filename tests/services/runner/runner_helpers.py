"""What the one-process runner tests (``test_runner.py``, ``test_runner_daemon.py``) share:
small merge-on-read tables that come due for compaction, a config file, a free port."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pyarrow as pa
from lakeline.table import Table
from lakeline.timeline.instant import Action

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
#: Small, fast tables: compaction due after 2 delta commits, short heartbeats.
PROPS = {"compaction.delta-commits": 2, "heartbeat.interval-ms": 200, "engine.parallelism": 1}


def mor_table(path: Path, commits: int, timeline: str | None = None, **props: Any) -> Table:
    """A merge-on-read table with ``commits`` upserts of the same 20 keys (one log each)."""
    t = Table.create(path, SCHEMA, record_key="id", table_type="mor", properties={**PROPS, **props}, timeline=timeline)
    t.insert(pa.table({"id": list(range(20)), "v": ["base"] * 20}, schema=SCHEMA))
    for n in range(commits):
        t.upsert(pa.table({"id": list(range(20)), "v": [f"u{n}"] * 20}, schema=SCHEMA))
    return t


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "runner.toml"
    path.write_text(text)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def completed(t: Table, action: Action) -> list[int]:
    return [i.id for i in t.log.refresh().completed() if i.action is action]
