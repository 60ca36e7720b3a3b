"""Several writer processes on one table, checked against a model afterwards.

Why: safety never depends on a lock (DESIGN.md sections 2-3): every completion is a
put-if-absent after the conflict rules ran against everything that completed after the
writer's snapshot. Only real processes racing on a real store show that this holds:
four processes upsert and delete random keys of a 64-key space, on a merge-on-read and
a copy-on-write table, on both timeline stores. Each worker logs every batch it wrote
and how it ended (committed with its instant id, CommitConflictError, or nothing to do).

The model replays the committed instants in completion order (``t.timeline.completed()``)
with the data their workers logged. Each write acts on what its snapshot showed (its
``snapshot_seq``), which is what snapshot isolation promises: an upsert updates the
*incarnation* of a key it saw live (the copy in the file group it tagged), or starts a
new incarnation of a key it saw absent; a delete ends the incarnation it saw and
ignores a key it did not see. A copy of a key that another writer re-inserted
meanwhile is a second incarnation; the model keeps both, and the separate
"no key twice" check then fails, so a lost or duplicated key cannot hide.

Then: no key appears twice, no row of an aborted batch is visible, no instant is left
pending, every ``rolled_back`` instant's files are gone, and every data file on disk
belongs to a completed instant.
"""

from __future__ import annotations

import bisect
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lakeline.table import Table
from lakeline.timeline.instant import Instant
from tests.helpers import finish, start_script, wait_for_files
from tests.table.workers import (
    WORKERS_PY,
    check_files_on_disk,
    data_instants,
)

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string())])
KEYS = 64
MAX_RETRIES = 5


@pytest.fixture(params=["filesystem", pytest.param("postgresql", marks=pytest.mark.postgres)])
def timeline(request: pytest.FixtureRequest) -> str | None:
    """None for the filesystem store, else the URL of the test PostgreSQL server."""
    return request.getfixturevalue("pg_url") if request.param == "postgresql" else None


# -- the model ---------------------------------------------------------------------------


@dataclass
class Incarnation:
    key: int
    value: str
    live: bool = True


class ConcurrentModel:
    """Replays committed writes in completion order, each against its own snapshot."""

    def __init__(self) -> None:
        self.incs: list[Incarnation] = []
        self._seqs: list[int] = []  # completed_seq of each replayed instant
        self._states: list[list[tuple[int, str, bool]]] = []  # incarnations after it

    def _live_at(self, seq: int) -> dict[int, list[int]]:
        """key -> indexes of incarnations live right after event ``seq``."""
        n = bisect.bisect_right(self._seqs, seq)
        out: dict[int, list[int]] = {}
        if n:
            for idx, (key, _, live) in enumerate(self._states[n - 1]):
                if live:
                    out.setdefault(key, []).append(idx)
        return out

    def apply(self, inst: Instant, rec: dict[str, Any]) -> None:
        seen = self._live_at(int(inst.metadata["snapshot_seq"]))
        if rec["op"] == "upsert":
            for row in rec["rows"]:
                hits = seen.get(row["id"])
                if hits:
                    for idx in hits:  # the copy this writer tagged, even if ended meanwhile
                        self.incs[idx].value, self.incs[idx].live = row["v"], True
                else:
                    self.incs.append(Incarnation(row["id"], row["v"]))
        elif rec["op"] == "delete":
            for k in rec["keys"]:
                for idx in seen.get(k["id"], []):
                    self.incs[idx].live = False
        else:
            raise AssertionError(f"unexpected op {rec['op']}")
        assert inst.completed_seq is not None
        self._seqs.append(inst.completed_seq)
        self._states.append([(i.key, i.value, i.live) for i in self.incs])

    def rows(self) -> list[tuple[int, str]]:
        return sorted((i.key, i.value) for i in self.incs if i.live)

    def rows_at(self, seq: int) -> list[tuple[int, str]]:
        """The rows of the snapshot right after event ``seq`` (for time-travel checks)."""
        n = bisect.bisect_right(self._seqs, seq)
        return sorted((key, value) for key, value, live in (self._states[n - 1] if n else ()) if live)


# -- the run -----------------------------------------------------------------------------


def run_workers(
    tmp_path: Path,
    table_type: str,
    timeline: str | None,
    workers: int,
    commits: int,
    properties: dict[str, Any] | None = None,
    seed: int = 0,
    timeout: float = 600.0,
) -> tuple[Table, list[dict[str, Any]]]:
    """Create a table, race ``workers`` processes on it, return it and their records."""
    path = str(tmp_path / f"table-{table_type}")
    props = {"commit.max-retries": MAX_RETRIES, "engine.parallelism": 1, **(properties or {})}
    Table.create(path, SCHEMA, record_key="id", table_type=table_type, properties=props, timeline=timeline)
    go = tmp_path / "go"
    procs, ready, logs = [], [], []
    for w in range(workers):
        ready.append(tmp_path / f"ready-{w}")
        logs.append(tmp_path / f"worker-{w}.jsonl")
        procs.append(start_script(WORKERS_PY, ["stress", path, timeline, w, commits, seed * 1000 + w,
                                               str(logs[-1]), str(ready[-1]), str(go), KEYS]))
    try:
        wait_for_files(ready, timeout=120)
    except AssertionError:
        for p in procs:
            p.kill()
        raise
    go.write_text("go")
    deadline = time.monotonic() + timeout
    for w, p in enumerate(procs):
        rc, _, err = finish(p, timeout=max(1.0, deadline - time.monotonic()))
        assert rc == 0, f"worker {w} failed (rc={rc}):\n{err[-4000:]}"
    records = [json.loads(line) for log in logs for line in log.read_text().splitlines()]
    assert len(records) == workers * commits
    return Table.open(path, timeline=timeline), records


def check_against_model(t: Table, records: list[dict[str, Any]]) -> Counter[str]:
    """Every check of the module docstring; returns counts for the failure message."""
    outcomes = Counter(r["outcome"] for r in records)
    errors = [r for r in records if r["outcome"] not in ("committed", "conflict", "noop")]
    assert not errors, f"workers hit unexpected errors: {errors[:3]}"
    committed = {r["instant"]: r for r in records if r["outcome"] == "committed"}
    assert len(committed) == outcomes["committed"], "two writes reported the same instant"

    tl = t.timeline
    assert tl.pending() == [], f"instants left pending: {tl.pending()}"
    done = [i for i in tl.completed() if i.action_kind.writes_data]
    assert [i.id for i in done if i.id not in committed] == [], "completed instants no worker reported"
    assert sorted(committed) == sorted(i.id for i in done), "reported commits missing from the timeline"
    rolled_back = [i for i in data_instants(tl) if i.state == "rolled_back"]
    retries = int(t.config.resolved_properties()["commit.max-retries"])
    assert len(rolled_back) >= (retries + 1) * outcomes["conflict"], (
        "each CommitConflictError ends max-retries + 1 attempts, each rolled back"
    )
    assert len(done) + len(rolled_back) == len(data_instants(tl))

    model = ConcurrentModel()
    for inst in done:
        model.apply(inst, committed[inst.id])

    table = t.to_arrow()
    ids = table.column("id").to_pylist()
    twice = sorted(k for k, n in Counter(ids).items() if n > 1)
    assert not twice, f"keys twice in the table: {twice}"
    actual = sorted(zip(ids, table.column("v").to_pylist()))
    assert actual == model.rows()

    visible = set(table.column("v").to_pylist())
    written = {r["tag"] for r in committed.values() if r["op"] == "upsert"}
    assert visible <= written, f"rows of batches that never committed: {sorted(visible - written)}"

    check_files_on_disk(t)
    overlapped = sum(1 for i in done if any(
        j.completed_seq is not None and int(i.metadata["snapshot_seq"]) < j.completed_seq < (i.completed_seq or 0)
        for j in done))
    assert overlapped > 0, "no commit completed while another was in flight: the run proved nothing"
    outcomes["rolled_back"] = len(rolled_back)
    outcomes["overlapped"] = overlapped
    return outcomes


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_four_writers_match_the_model(tmp_path: Path, table_type: str, timeline: str | None) -> None:
    t, records = run_workers(tmp_path, table_type, timeline, workers=4, commits=50)
    counts = check_against_model(t, records)
    print(f"{table_type} {'pg' if timeline else 'fs'}: {dict(counts)}")


@pytest.mark.soak
@pytest.mark.parametrize("table_type", ["mor", "cow"])
@pytest.mark.parametrize("seed", [1, 2])
def test_soak_many_writers_match_the_model(tmp_path: Path, table_type: str, timeline: str | None,
                                           seed: int) -> None:
    t, records = run_workers(tmp_path, table_type, timeline, workers=6, commits=150, seed=seed,
                             properties={"commit.max-retries": 8}, timeout=1800)
    counts = check_against_model(t, records)
    print(f"{table_type} {'pg' if timeline else 'fs'} seed {seed}: {dict(counts)}")
