"""A writer killed while writing a marker (issue 11, item 5), and what a rollback deletes.

Why: docs/format.md (markers). A writer can die between creating its marker file and
writing its content; the rollback must still find the files of the instant (from markers
written by an older version too) and delete only those: never a file of another instant,
and only names ``is_instant_file`` accepts (split out of ``test_crash.py``).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.markers import is_instant_file, list_markers, marker_dir
from lakeline.timeline.storage.event_log.filesystem import event_file_name

from tests.children.table_workers import check_files_on_disk, referenced_files
from tests.table.concurrency.crash_helpers import (
    EXPIRY_S,
    HEARTBEAT,
    SEED,
    WRITE,
    crash_writer,
    make_table,
    orphan_files,
    pending_writes,
    rows,
    state,
)

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
