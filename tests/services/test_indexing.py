"""The async indexer, case by case (docs/design.md, "Protocols": async indexing; issue 5).

Each case drives one interleaving of writers and the indexer deterministically with
fault points (in-process callbacks on threads, or kills of child processes), and ends
with ``validate`` finding no mismatch: the index is exact when it becomes ready, and no
writer commit is lost or failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.indexes.metadata_table import MetadataTable
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import IndexExistsError, IndexNotFoundError

from tests.helpers import CHILDREN, finish, run_script, start_script

CHILD = CHILDREN / "indexer_child.py"
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
EXPIRY_S = 0.1 * (1 + 1)


pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def rows(ids: range | list[int], ts: int = 1) -> pa.Table:
    ids = list(ids)
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": [f"v{i}" for i in ids]}, schema=SCHEMA)


def make(tmp: Path, kind: str = "cow") -> Table:
    t = Table.create(
        tmp / "t",
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=kind,
        properties={**HEARTBEAT, "write.small-file-limit-bytes": 0},
    )
    for start in range(0, 300, 100):
        t.insert(rows(range(start, start + 100)))
    return t


def assert_exact(t: Table, *names: str) -> None:
    states = {d.name: d.state for d in t.indexes.list()}
    for n in names:
        assert states.get(n) == "ready", states
    report = t.indexes.validate()
    assert report["mismatches"] == [], report["mismatches"][:5]
    assert report["files_checked"] > 0


class Paused:
    """A writer thread that stops at a fault point until released (its own handle,
    opened before any index existed: it is 'configured without the index')."""

    def __init__(self, t: Table, point: str, write: Callable[[Table], Any]) -> None:
        self.handle = Table.open(t.path)
        self.reached, self.release = threading.Event(), threading.Event()
        self.result: Any = None
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, args=(write,))
        self.point = point

    def _run(self, write: Callable[[Table], Any]) -> None:
        try:
            self.result = write(self.handle)
        except BaseException as e:  # noqa: BLE001 - reported by join()
            self.error = e

    def start(self) -> Paused:
        def hold() -> None:
            self.reached.set()
            assert self.release.wait(30)

        faults.on(self.point, hold)
        self.thread.start()
        assert self.reached.wait(30), f"writer never reached {self.point}"
        return self

    def finish(self) -> Any:
        self.release.set()
        self.thread.join(30)
        if self.error is not None:
            raise self.error
        return self.result


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_commit_between_schedule_and_build(tmp_path: Path, kind: str) -> None:
    t = make(tmp_path, kind)
    other = Table.open(t.path)
    landed: list[Any] = []
    faults.on("indexing.after_requested", lambda: landed.append(other.upsert(rows([5, 150, 400], ts=2))))
    part = t.indexes.create("column_stats").partition
    assert landed and MetadataTable(t.storage).has_updates(part, landed[0].instant.id), (
        "the writer saw the index building and wrote its own entries"
    )
    assert_exact(t, "column_stats")


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_commit_straddling_the_start_of_the_build(tmp_path: Path, kind: str) -> None:
    t = make(tmp_path, kind)
    w = Paused(t, "commit.before_complete", lambda h: h.upsert(rows([7, 107, 500], ts=2))).start()
    # The writer wrote its files before the index existed; it completes while the build runs.
    faults.on("indexing.after_build", lambda: w.finish() and None)
    t.indexes.create("bloom_filters")
    assert w.result.instant.state == "completed"
    assert_exact(t, "bloom_filters")


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_inflight_at_schedule_completes_during_catch_up(tmp_path: Path, kind: str) -> None:
    t = make(tmp_path, kind)
    w = Paused(t, "commit.after_inflight", lambda h: h.insert(rows(range(600, 650)))).start()
    faults.on("indexing.mid_catchup", lambda: w.finish() and None)
    t.indexes.create("column_stats")
    assert w.result.instant.state == "completed"
    assert_exact(t, "column_stats")
    assert t.to_arrow().num_rows == 350


def test_completion_out_of_id_order(tmp_path: Path) -> None:
    t = make(tmp_path, "mor")
    first = Paused(t, "commit.before_complete", lambda h: h.upsert(rows([1, 2], ts=3))).start()
    # The second writer (a higher instant id) completes first, during the build.
    second_handle = Table.open(t.path)
    done: list[Any] = []

    def during_build() -> None:
        done.append(second_handle.insert(rows(range(700, 720))))
        first.finish()

    faults.on("indexing.after_build", during_build)
    t.indexes.create("column_stats")
    assert done[0].instant.id > first.result.instant.id
    assert (done[0].instant.completed_at or 0) < (first.result.instant.completed_at or 0)
    assert_exact(t, "column_stats")


def test_inflight_writer_that_dies_during_catch_up(tmp_path: Path) -> None:
    t = make(tmp_path, "cow")
    rc, out, err = run_script(
        CHILDREN / "table_workers.py",
        ["op", t.path, None, {"op": "upsert", "rows": [{"id": 1, "ts": 9, "v": "dead"}]}],
        faults="commit.before_complete=crash",
    )
    assert rc == CRASH_EXIT_CODE, err[-2000:]
    [dead] = [i for i in t.timeline.pending() if i.action.writes_data]
    faults.on("indexing.mid_catchup", lambda: time.sleep(EXPIRY_S + 0.1))  # its heartbeat expires
    t.indexes.create("column_stats")  # does not wait for the dead writer
    assert_exact(t, "column_stats")
    t.services.rollback_failed()
    assert t.timeline.get(dead.id).state == "rolled_back"
    assert_exact(t, "column_stats")
    assert "dead" not in t.to_arrow().column("v").to_pylist()


INDEXER_POINTS = [
    "indexing.after_requested",
    "indexing.after_inflight",
    "indexing.after_build",
    "indexing.mid_catchup",
    "indexing.before_finalize",
]


@pytest.mark.parametrize("point", INDEXER_POINTS)
def test_indexer_killed_and_run_again(tmp_path: Path, point: str) -> None:
    t = make(tmp_path, "mor")
    rc, out, err = run_script(CHILD, ["create", t.path, "column_stats", None], faults=f"{point}=crash")
    assert rc == CRASH_EXIT_CODE, f"not killed at {point}: {out} {err[-2000:]}"
    assert [d.state for d in t.indexes.list()] == ["building"]
    t.upsert(rows([3, 103, 800], ts=4))  # writers keep writing meanwhile
    time.sleep(EXPIRY_S + 0.1)
    results = t.services.run("indexing")
    assert [r.instant.state for r in results] == ["completed"]  # type: ignore[union-attr]
    assert_exact(t, "column_stats")
    assert t.services.run("indexing") == []  # nothing left


def test_a_live_build_is_not_taken_over(tmp_path: Path) -> None:
    t = make(tmp_path, "cow")
    proc = start_script(CHILD, ["create", t.path, "column_stats", None], faults="indexing.after_build=pause:2")
    deadline = time.monotonic() + 30
    while not t.indexes.list() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    assert t.services.run("indexing") == []  # its heartbeat is fresh: not claimable
    rc, out, err = finish(proc)
    assert rc == 0 and '"ok": true' in out, err[-2000:]
    assert_exact(t, "column_stats")


def test_two_processes_create_the_same_index(tmp_path: Path) -> None:
    t = make(tmp_path, "cow")
    go = tmp_path / "go"
    procs = [start_script(CHILD, ["create", t.path, "bloom_filters", str(go)]) for _ in range(2)]
    time.sleep(1.0)
    go.write_text("")
    outs = [finish(p) for p in procs]
    oks = [o for rc, o, _ in outs if '"ok": true' in o]
    refused = [o for rc, o, _ in outs if "IndexExistsError" in o]
    assert len(oks) == 1 and len(refused) == 1, outs
    assert_exact(t, "bloom_filters")


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_drop_while_writers_write(tmp_path: Path, kind: str) -> None:
    t = make(tmp_path, kind)
    part = t.indexes.create("column_stats").partition
    # A writer that wrote its entries for the index, then waits to complete.
    w = Paused(t, "commit.before_complete", lambda h: h.insert(rows(range(900, 950)))).start()
    t.indexes.drop("column_stats")
    assert t.indexes.list() == []
    w.finish()
    assert w.result.instant.state == "completed"
    assert "column_stats" not in [d.name for d in t.indexes.list()]
    leftovers = [
        p
        for p in MetadataTable(t.storage).indexes_on_storage()
        if list(Path(t.storage.path(MetadataTable(t.storage).rel_dir(p))).glob("*.parquet"))
    ]
    assert part not in leftovers, "the writer's entries for the dropped index were left behind"
    assert t.to_arrow().num_rows == 350
    with pytest.raises(IndexNotFoundError):
        t.indexes.drop("column_stats")
    t.indexes.create("column_stats")  # and it can be created again, exact
    assert_exact(t, "column_stats")


def test_create_without_waiting_returns_building_then_ready(tmp_path: Path) -> None:
    t = make(tmp_path, "mor")
    seen: list[tuple[int, int]] = []
    faults.on("indexing.after_inflight", lambda: time.sleep(0.3))
    d = t.indexes.create("column_stats", wait=False, progress=lambda done, total: seen.append((done, total)))
    assert d.state == "building"
    t.upsert(rows([1, 2, 3], ts=5))  # a writer completes while it builds
    with pytest.raises(IndexExistsError):
        t.indexes.create("column_stats")
    ready = t.indexes.wait("column_stats", timeout_s=60)
    assert ready.state == "ready" and seen and seen[-1][0] == seen[-1][1]
    assert_exact(t, "column_stats")


# -- several processes ---------------------------------------------------------------------


def _build_big(path: Path, kind: str, n_rows: int) -> Table:
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=kind,
        properties={"write.target-file-size-bytes": 4 * 1024 * 1024},
    )
    step = 250_000
    for start in range(0, n_rows, step):
        ids = pa.array(range(start, min(start + step, n_rows)), pa.int64())
        t.insert(
            pa.table(
                {"id": ids, "ts": pa.array([0] * len(ids), pa.int64()), "v": pa.array(["seed"] * len(ids))},
                schema=SCHEMA,
            )
        )
    return t


def writers_while_indexing(tmp_path: Path, kind: str, n_rows: int, writers: int = 4) -> None:
    """``writers`` processes upsert continuously while this process builds column_stats
    and bloom_filters; then the indexes are ready and exact, and the table holds exactly
    the latest version of every row a writer committed."""
    import json

    t = _build_big(tmp_path / "t", kind, n_rows)
    stop, logs = tmp_path / "stop", [tmp_path / f"w{i}.log" for i in range(writers)]
    procs = [start_script(CHILD, ["write", t.path, i, n_rows, str(stop), str(logs[i])]) for i in range(writers)]
    try:
        deadline = time.monotonic() + 60
        while not all(p.exists() and p.read_text().count("\n") >= 1 for p in logs):
            assert time.monotonic() < deadline, "writers did not start committing"
            assert all(p.poll() is None for p in procs), [finish(p) for p in procs if p.poll() is not None]
            time.sleep(0.05)
        t.indexes.create("column_stats", columns=["id", "ts"])
        t.indexes.create("bloom_filters")
        before = sum(p.read_text().count("\n") for p in logs)
        time.sleep(1.0)  # and they keep committing after the indexes are ready
    finally:
        stop.write_text("")
        outs = [finish(p) for p in procs]
    assert all(rc == 0 for rc, _, _ in outs), [e[-2000:] for _, _, e in outs]
    records = [json.loads(line) for p in logs for line in p.read_text().splitlines()]
    committed = [r for r in records if "instant" in r]
    assert len(committed) > before // 2 and len(committed) >= writers
    assert all(r.get("error") == "CommitConflictError" for r in records if "instant" not in r)
    tl = t.timeline
    assert all(tl.get(r["instant"]).state == "completed" for r in committed), "a writer commit did not land"
    assert_exact(t, "column_stats", "bloom_filters")
    # The model: the seed, overwritten by every committed upsert (largest ts wins).
    latest: dict[int, tuple[int, str]] = {}
    for r in committed:
        for i in r["ids"]:
            if i not in latest or latest[i][0] < r["ts"]:
                latest[i] = (r["ts"], r["v"])
    got = t.to_arrow()
    assert got.num_rows == n_rows + sum(1 for i in latest if i >= n_rows)
    changed = got.filter(pa.compute.is_in(got.column("id"), pa.array(list(latest), pa.int64())))
    assert {i: v for i, v in zip(changed.column("id").to_pylist(), changed.column("v").to_pylist())} == {
        i: v for i, (_, v) in latest.items()
    }


@pytest.mark.parametrize("kind", ["mor", "cow"])
def test_four_writer_processes_while_indexes_build(tmp_path: Path, kind: str) -> None:
    writers_while_indexing(tmp_path, kind, 200_000)


@pytest.mark.soak
def test_four_writer_processes_while_indexes_build_on_2m_rows(tmp_path: Path) -> None:
    writers_while_indexing(tmp_path, "mor", 2_000_000)
