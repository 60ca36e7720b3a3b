"""The record index across processes: built while writer processes write, and a build
killed (``kill -9``, and dying at each of its steps) then taken over by another process,
with nothing wrong left behind. Children: ``tests/children/indexer_child.py``."""

from __future__ import annotations

import json
import os
import posixpath
import signal
import time
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.indexes.record_index.lookup import RecordIndexReader
from lakeline.indexes.record_index.lookup import tag as index_tag
from lakeline.indexes.record_index.store import SPILL_PREFIX, newest_generation, partition_dir
from lakeline.table import Table
from lakeline.table.engine import LocalEngine
from lakeline.table.write.tagging import tag as data_tag
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE

from tests.helpers import CHILDREN, finish, run_script, start_script

CHILD = CHILDREN / "indexer_child.py"
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
EXPIRY_S = 0.2

pytestmark = pytest.mark.usefixtures("no_faults")


def make(tmp: Path, kind: str, n_rows: int, step: int = 20_000) -> Table:
    t = Table.create(
        tmp / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=kind,
        properties={**HEARTBEAT, "write.target-file-size-bytes": 256 * 1024, "metadata.compact.max-deltas": 4},
    )
    for start in range(0, n_rows, step):
        ids = list(range(start, min(start + step, n_rows)))
        t.insert(pa.table({"id": ids, "ts": [0] * len(ids), "v": ["seed"] * len(ids)}, schema=SCHEMA))
    return t


def assert_exact(t: Table, probe: list[int]) -> None:
    assert [(d.name, d.state) for d in t.indexes.list()] == [("record_index", "ready")]
    report = t.indexes.validate("record_index")
    assert report["mismatches"] == [], report["mismatches"][:5]
    snapshot = t.timeline
    reader = RecordIndexReader.open(t.storage, snapshot, t.config.schema, t.config.record_key)
    assert reader is not None
    slices = t.view(snapshot).latest_slices()
    keys = pa.table({"id": pa.array(probe, pa.int64())})
    # Base positions on merge-on-read only: copy-on-write writes never ask them (a
    # rewrite's entries are its changes, which name no row).
    positions = t.config.table_type == "mor"
    want = data_tag(t.storage, LocalEngine(1), slices, keys, ("id",), None, positions)
    got = index_tag(reader, slices, keys, positions)
    assert got[0].to_pylist() == want[0].to_pylist() and got[1].to_pylist() == want[1].to_pylist()


def leftovers(t: Table) -> list[str]:
    """Spill folders and generation folders no manifest names."""
    [d] = t.indexes.list()
    gen = newest_generation(t.storage, d.partition)
    named = {f"gen_{gen.seq}_{gen.token}"} if gen else set()
    out = []
    for info in t.storage.list_entries(t.storage.path(partition_dir(d.partition))):
        name = posixpath.basename(info.path)
        if name.startswith(SPILL_PREFIX) or (name.startswith("gen_") and "." not in name and name not in named):
            out.append(name)
    return out


@pytest.mark.parametrize("kind", ["mor", "cow"])
def test_built_while_writer_processes_write(tmp_path: Path, kind: str) -> None:
    n_rows, writers = 60_000, 2
    t = make(tmp_path, kind, n_rows)
    stop, logs = tmp_path / "stop", [tmp_path / f"w{i}.log" for i in range(writers)]
    procs = [start_script(CHILD, ["write", t.path, i, n_rows, str(stop), str(logs[i])]) for i in range(writers)]
    try:
        deadline = time.monotonic() + 60
        while not all(p.exists() and p.read_text().count("\n") >= 1 for p in logs):
            assert time.monotonic() < deadline, "writers did not start committing"
            assert all(p.poll() is None for p in procs), [finish(p) for p in procs if p.poll() is not None]
            time.sleep(0.05)
        before = sum(p.read_text().count("\n") for p in logs)
        # The build holds a second after its spill, so the writers commit while it builds
        # whatever the machine's load (loaded, a build once finished before either
        # writer's next commit, and the test saw no concurrency to check).
        faults.arm("record_index.after_spill", "pause:1")
        t.indexes.create("record_index", options={"buckets": 8})
        during = sum(p.read_text().count("\n") for p in logs) - before
        time.sleep(1.5)  # and they keep committing (through the index) after it is ready
    finally:
        stop.write_text("")
        outs = [finish(p) for p in procs]
    assert all(rc == 0 for rc, _, _ in outs), [e[-2000:] for _, _, e in outs]
    records = [json.loads(line) for p in logs for line in p.read_text().splitlines()]
    committed = [r for r in records if "instant" in r]
    assert during >= 1, "no writer committed while the index was built"
    assert all(r.get("error") == "CommitConflictError" for r in records if "instant" not in r)
    latest: dict[int, tuple[int, str]] = {}
    for r in committed:
        for i in r["ids"]:
            if i not in latest or latest[i][0] < r["ts"]:
                latest[i] = (r["ts"], r["v"])
    got = t.to_arrow()
    assert got.num_rows == n_rows + sum(1 for i in latest if i >= n_rows)
    assert len(set(got.column("id").to_pylist())) == got.num_rows, "a key twice"
    changed = got.filter(pa.compute.is_in(got.column("id"), pa.array(list(latest), pa.int64())))
    assert dict(zip(changed.column("id").to_pylist(), changed.column("v").to_pylist())) == {
        i: v for i, (_, v) in latest.items()
    }
    assert_exact(t, sorted(latest)[:300] + list(range(0, n_rows, 97)) + [-1, 10**12])


@pytest.mark.parametrize("in_memory_bytes", [0, None], ids=["spilled", "in-memory"])
def test_build_killed_with_sigkill_then_taken_over(tmp_path: Path, in_memory_bytes: int | None) -> None:
    """Killed with its entries spilled (a large table's build) or its bucket files
    written from memory (a small table's, up to ``spill.IN_MEMORY_BYTES``)."""
    t = make(tmp_path, "mor", 40_000)
    args = ["create", t.path, "record_index", None, in_memory_bytes]
    proc = start_script(CHILD, args, faults="record_index.after_spill=pause:30")
    d = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        defs = t.indexes.list()
        if defs and t.storage.exists(t.storage.path(partition_dir(defs[0].partition))):
            names = [
                posixpath.basename(i.path)
                for i in t.storage.list_entries(t.storage.path(partition_dir(defs[0].partition)))
            ]
            if any(n.startswith(SPILL_PREFIX if in_memory_bytes == 0 else "gen_") for n in names):
                d = defs[0]
                break
        time.sleep(0.05)
    assert d is not None, "the build never spilled"
    time.sleep(0.5)  # inside the pause: spill (or bucket) files written, no generation yet
    os.kill(proc.pid, signal.SIGKILL)
    rc, _, _ = finish(proc)
    assert rc == -signal.SIGKILL
    assert [x.state for x in t.indexes.list()] == ["building"] and leftovers(t)
    t.upsert(pa.table({"id": [1, 2, 99_999_999], "ts": [5] * 3, "v": ["after-kill"] * 3}, schema=SCHEMA))
    t.delete(pa.table({"id": [3, 4]}))
    time.sleep(EXPIRY_S + 0.1)
    results = t.services.run("indexing")
    assert [r.instant.state for r in results] == ["completed"]  # type: ignore[union-attr]
    assert leftovers(t) == []
    assert_exact(t, [1, 2, 3, 4, 5, 99_999_999, 39_999, 40_000])


@pytest.mark.parametrize("in_memory_bytes", [0, None], ids=["spilled", "in-memory"])
@pytest.mark.parametrize("point", ["record_index.after_spill", "record_index.before_publish", "indexing.mid_catchup"])
def test_build_dying_at_each_step_restarts_cleanly(tmp_path: Path, point: str, in_memory_bytes: int | None) -> None:
    t = make(tmp_path, "cow", 20_000)
    args = ["create", t.path, "record_index", None, in_memory_bytes]
    rc, out, err = run_script(CHILD, args, faults=f"{point}=crash")
    assert rc == CRASH_EXIT_CODE, f"not killed at {point}: {out} {err[-2000:]}"
    t.upsert(pa.table({"id": [7, 20_000], "ts": [3, 3], "v": ["x", "y"]}, schema=SCHEMA))
    time.sleep(EXPIRY_S + 0.1)
    assert [r.instant.state for r in t.services.run("indexing")] == ["completed"]  # type: ignore[union-attr]
    assert leftovers(t) == []
    assert_exact(t, [7, 8, 20_000, 20_001])
