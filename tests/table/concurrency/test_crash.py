"""Writers that die, stall or crash mid-rollback, and the recovery that follows.

Why: docs/concurrency.md section 4 (failed writes). A writer can die at any step of the commit;
its instant must then end as ``rolled_back`` once its heartbeat expires, with every
file it wrote deleted, and the table must read as if the write never started (or, if
it died after completing, as if it had finished normally). A writer that only *stalls*
past its heartbeat and wakes after its rollback must not complete. A single-writer
table does not wait for the heartbeat. A rollback that itself dies is finished by the
next run.

The writers are child processes killed by ``LAKELINE_FAULTS="<point>=crash"`` (an
``os._exit``: no cleanup runs); a stalled writer is paused with the ``wait`` fault and
frozen with SIGSTOP so its heartbeat thread stops too. Tables use
``heartbeat.interval-ms=100`` and ``heartbeat.tolerable-misses=1``: a writer is failed
200 ms after its last beat.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.markers import is_instant_file, list_markers, marker_dir
from lakeline.timeline.storage.event_log.filesystem import event_file_name

from tests.children.table_workers import (
    WORKERS_PY,
    check_files_on_disk,
    data_files_on_disk,
    data_instants,
    referenced_files,
)
from tests.helpers import finish, run_script, start_script, wait_for_files

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


# -- a writer killed at each commit fault point ---------------------------------------------


@pytest.mark.parametrize("point", COMMIT_POINTS)
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_writer_killed_at_commit_point_is_rolled_back(
    tmp_path: Path, table_type: str, point: str, timeline: str | None
) -> None:
    t = make_table(tmp_path, table_type, timeline)
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


def test_rollback_leaves_a_live_writer_alone(tmp_path: Path) -> None:
    """A writer paused before completing keeps beating: it is not failed, whatever the
    rollback service runs meanwhile, and it completes afterwards."""
    t = make_table(tmp_path, "mor", None)
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    proc = start_script(
        WORKERS_PY,
        ["op", t.path, None, upsert_spec(WRITE)],
        faults="commit.before_complete=wait",
        env={"LAKELINE_FAULT_DIR": str(fault_dir)},
    )
    wait_for_files([fault_dir / "commit.before_complete.reached"])
    time.sleep(EXPIRY_S * 3)
    assert t.services.rollback_failed().instant is None
    assert len(pending_writes(t)) == 1
    (fault_dir / "commit.before_complete.release").write_text("go")
    rc, out, err = finish(proc)
    assert rc == 0, err
    assert json.loads(out)["ok"]
    assert state(t) == {**SEED, **WRITE}
    check_files_on_disk(t)


# -- a stale writer wakes up after its rollback ---------------------------------------------


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_stale_writer_cannot_complete_after_its_rollback(tmp_path: Path, table_type: str, timeline: str | None) -> None:
    t = make_table(tmp_path, table_type, timeline)
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    proc = start_script(
        WORKERS_PY,
        ["op", t.path, timeline, upsert_spec(WRITE)],
        faults="commit.before_complete=wait",
        env={"LAKELINE_FAULT_DIR": str(fault_dir)},
    )
    try:
        wait_for_files([fault_dir / "commit.before_complete.reached"])
        os.kill(proc.pid, signal.SIGSTOP)  # its heartbeat thread stops too: a long GC pause, a VM freeze
        [stale] = pending_writes(t)
        assert orphan_files(t)
        time.sleep(EXPIRY_S + 0.3)
        result = t.services.rollback_failed()
        assert result.stats["instants"] == [stale.id]
        assert t.timeline.get(stale.id).state == "rolled_back"
        assert orphan_files(t) == set(), "rollback deleted the stale writer's files"
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    (fault_dir / "commit.before_complete.release").write_text("go")
    rc, out, err = finish(proc)
    assert rc == 0, err
    res = json.loads(out)
    assert res["ok"] is False and res["error"] == "InvalidTransitionError", res

    tl = t.timeline
    assert tl.get(stale.id).state == "rolled_back"
    assert stale.id not in {i.id for i in tl.completed()}
    assert tl.pending() == []
    assert state(t) == SEED
    assert orphan_files(t) == set()
    check_files_on_disk(t)
    assert stale.id not in t.log.store.last_beats(), "the woken writer left a heartbeat behind"


# -- single-writer tables do not wait for the heartbeat -------------------------------------


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_single_writer_rolls_back_a_pending_write_eagerly(
    tmp_path: Path, table_type: str, timeline: str | None
) -> None:
    t = make_table(
        tmp_path, table_type, timeline, **{"write.concurrency-mode": "single-writer", "heartbeat.interval-ms": 60_000}
    )
    crash_writer(t, "commit.before_complete=crash")
    [dead] = pending_writes(t)
    assert orphan_files(t)
    r = t.upsert(rows({0: "next"}))  # long before the heartbeat (60 s) could expire
    tl = t.timeline
    assert tl.get(dead.id).state == "rolled_back"
    assert tl.get(r.instant.id).state == "completed"
    assert tl.pending() == []
    assert state(t) == {**SEED, 0: "next"}
    assert orphan_files(t) == set()
    check_files_on_disk(t)


def test_optimistic_writer_leaves_a_pending_write_alone(tmp_path: Path) -> None:
    """The contrast: with several writers allowed, a pending write may be alive; the next
    write neither waits for it nor touches it, and only the rollback service ends it."""
    t = make_table(tmp_path, "mor", None, **{"heartbeat.interval-ms": 60_000})
    crash_writer(t, "commit.before_complete=crash")
    [dead] = pending_writes(t)
    t.upsert(rows({0: "next"}))
    assert t.timeline.get(dead.id).state == "inflight"
    assert t.services.rollback_failed().instant is None  # its heartbeat has not expired
    assert state(t) == {**SEED, 0: "next"}


# -- the rollback itself crashes ------------------------------------------------------------


ROLLBACK_POINTS = [
    "rollback.after_inflight=crash",  # the target is not ended yet
    "rollback.after_event=crash",  # ended (rolled_back), no file deleted
    "rollback.mid_delete=crash",  # ended, about to delete the first file
    "rollback.mid_delete=crash@2",  # ended, one file deleted
]


@pytest.mark.parametrize("faults", ROLLBACK_POINTS)
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_rollback_killed_midway_is_finished_by_the_next_run(
    tmp_path: Path, table_type: str, faults: str, timeline: str | None
) -> None:
    t = make_table(tmp_path, table_type, timeline)
    crash_writer(t, "commit.before_complete=crash")
    [dead] = pending_writes(t)
    written = orphan_files(t)
    assert len(written) == 2
    time.sleep(EXPIRY_S + 0.2)

    rc, out, err = run_script(WORKERS_PY, ["rollback", t.path, timeline], faults=faults)
    assert rc == CRASH_EXIT_CODE, f"the rollback did not die at {faults}: rc={rc}\n{out}\n{err[-3000:]}"
    left = orphan_files(t)
    if faults.endswith("@2"):
        assert len(left) == 1, "one file deleted before the crash"
    else:
        assert left == written
    ended = t.timeline.get(dead.id).state
    assert ended == ("inflight" if "after_inflight" in faults else "rolled_back")

    time.sleep(EXPIRY_S + 0.2)
    again = t.services.rollback_failed()
    assert again.instant is not None and again.instant.state == "completed"

    tl = t.timeline
    assert tl.get(dead.id).state == "rolled_back"
    assert tl.pending() == [], f"left pending: {[(i.id, i.action, i.state) for i in tl.pending()]}"
    assert state(t) == SEED
    assert orphan_files(t) == set()
    check_files_on_disk(t)
    assert t.services.rollback_failed().instant is None, "a third run has nothing left to do"


# -- a writer killed while writing a marker (issue 11, item 5) -------------------------------


def make_partitioned(tmp: Path, table_type: str, timeline: str | None) -> Table:
    path = str(tmp / "ptable")
    schema = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string()), pa.field("day", pa.string())])
    Table.create(
        path,
        schema,
        record_key="id",
        partition_by=["day"],
        table_type=table_type,
        properties={**HEARTBEAT, "write.small-file-limit-bytes": 0, "engine.parallelism": 1},
        timeline=timeline,
    )
    t = Table.open(path, timeline=timeline)
    t.insert(pa.table({"id": pa.array(list(SEED), pa.int64()), "v": list(SEED.values()), "day": ["d1"] * len(SEED)}))
    return t


def day_spec(values: dict[int, str]) -> dict[str, Any]:
    return {"op": "upsert", "rows": [{"id": k, "v": v, "day": "d1"} for k, v in values.items()]}


def day_state(t: Table) -> dict[int, str]:
    table = t.to_arrow()
    return dict(zip(table.column("id").to_pylist(), table.column("v").to_pylist()))


def marker_files(t: Table, instant: int) -> list[Path]:
    folder = Path(marker_dir(t.storage, instant))
    return sorted(p for p in folder.rglob("*.marker"))


@pytest.mark.parametrize("partitioned", [False, True], ids=["flat", "partitioned"])
@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_writer_killed_between_creating_and_writing_a_marker(
    tmp_path: Path, table_type: str, partitioned: bool, timeline: str | None
) -> None:
    """A kill between creating a marker and writing it leaves an empty marker; the
    rollback still knows which file it covers (its name), never deletes anything else
    (before the fix it tried to delete the table root and failed every run), and the
    table takes the next write."""
    t = make_partitioned(tmp_path, table_type, timeline) if partitioned else make_table(tmp_path, table_type, timeline)
    crash_writer(t, "marker.after_create=crash", day_spec(WRITE) if partitioned else None)
    [dead] = pending_writes(t)
    [marker] = marker_files(t, dead.id)
    assert marker.stat().st_size == 0, "the kill came between creating the marker and writing it"
    assert list_markers(t.storage, dead.id) == [
        t.storage.relative(str(marker))[len(f".lakeline/markers/{dead.id}/") : -len(".marker")]
    ]
    time.sleep(EXPIRY_S + 0.2)
    result = t.services.rollback_failed()
    assert result.stats["instants"] == [dead.id]
    assert t.timeline.get(dead.id).state == "rolled_back"
    assert t.timeline.pending() == []
    assert not Path(marker_dir(t.storage, dead.id)).exists()
    read = day_state if partitioned else state
    assert read(t) == SEED
    check_files_on_disk(t)
    if partitioned:
        t.upsert(pa.table({"id": pa.array([0], pa.int64()), "v": ["after"], "day": ["d1"]}))
    else:
        t.upsert(rows({0: "after"}))
    assert read(t) == {**SEED, 0: "after"}


def test_old_format_markers_still_roll_back(tmp_path: Path) -> None:
    """Markers of the older format (flat ``<file>.marker`` holding the relative path) of
    a partitioned table name the right files."""
    t = make_partitioned(tmp_path, "cow", None)
    crash_writer(t, "commit.before_complete=crash", day_spec(WRITE))
    [dead] = pending_writes(t)
    written = orphan_files(t)
    assert written and all(p.startswith("day=d1/") for p in written)
    folder = Path(marker_dir(t.storage, dead.id))
    for m in marker_files(t, dead.id):
        m.unlink()
    for rel in written:
        (folder / (rel.rsplit("/", 1)[-1] + ".marker")).write_text(rel)
    assert list_markers(t.storage, dead.id) == sorted(written)
    time.sleep(EXPIRY_S + 0.2)
    t.services.rollback_failed()
    assert orphan_files(t) == set()
    assert day_state(t) == SEED
    check_files_on_disk(t)


def test_rollback_deletes_only_files_of_the_instant(tmp_path: Path) -> None:
    """Whatever a damaged marker names (the table root, a live file of another instant,
    the timeline, a path outside the table), rollback skips it and reports it; the
    instant's own files still go."""
    t = make_table(tmp_path, "mor", None)
    live = sorted(referenced_files(t))
    crash_writer(t, "commit.before_complete=crash")
    [dead] = pending_writes(t)
    folder = Path(marker_dir(t.storage, dead.id))
    outside = tmp_path / "outside.parquet"
    outside.write_text("keep")
    event = ".lakeline/timeline/" + event_file_name(0)
    bad = {
        "root.marker": "",  # an empty flat marker: before the fix, the table root
        f"{live[0]}.marker": live[0],  # a live file of the seed's instant
        f"{event}.marker": event,  # the timeline
        "outside.parquet.marker": "../outside.parquet",
    }  # outside the table
    for name, content in bad.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(content)
    time.sleep(EXPIRY_S + 0.2)
    result = t.services.rollback_failed()
    assert result.stats["instants"] == [dead.id]
    assert sorted(result.stats["refused"]) == sorted(["root", live[0], event, "../outside.parquet"])
    assert Path(t.storage.path(event)).exists()
    assert outside.read_text() == "keep"
    assert all(Path(t.storage.path(p)).exists() for p in live)
    assert state(t) == SEED
    assert orphan_files(t) == set()
    check_files_on_disk(t)


@pytest.mark.parametrize(
    "rel, ok",
    [
        ("", False),
        (".", False),
        ("/abs/x.parquet", False),
        ("../x.parquet", False),
        ("day=1/../x.parquet", False),
        (".lakeline/timeline/x.json", False),
        ("0123456789abcdef0123456789abcdef_7_0123abcd.parquet", True),
        ("day=1/0123456789abcdef0123456789abcdef_7_0123abcd.log.parquet", True),
        ("0123456789abcdef0123456789abcdef_8_0123abcd.parquet", False),  # another instant's
        (".lakeline/metadata/files/delta_7_0123abcd.parquet", True),
        (".lakeline/metadata/files/delta_8_0123abcd.parquet", False),
        (".lakeline/metadata/files/base_7_0123abcd.parquet", False),
        (".lakeline/0123456789abcdef0123456789abcdef_7_0123abcd.parquet", False),
    ],
)
def test_is_instant_file(rel: str, ok: bool) -> None:
    assert is_instant_file(rel, 7) is ok
