"""A table on S3 with no other server: writes, reads, every service and the indexes.

Each test makes its table on the SeaweedFS test server (``make_table``) and checks the
rows against what was written, then the store itself: a cleaned or rolled-back file is
gone from the bucket, the event log is objects under ``.lakeline/timeline``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.table.hooks import Hooks, ValidationContext
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import FaultInjectedError
from lakeline.timeline.markers import marker_path
from lakeline.timeline.storage.filesystem import META_DIR, Storage
from lakeline.timeline.storage.object_store import PART_SIZE

from tests.object_storage.s3_tables import rows
from tests.seaweedfs import SeaweedServer


def ids(t: Table) -> list[str]:
    return sorted(t.to_arrow(columns=["id"])["id"].to_pylist())


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_writes_and_reads_land_on_the_store(
    make_table: Callable[..., Table], s3: SeaweedServer, table_type: str
) -> None:
    t = make_table(table_type)
    t.insert(rows(0, 1000))
    t.upsert(rows(500, 1500, ts=2, v=2.0))
    t.delete_where(pc.field("id") < "k0000100")
    again = Table.open(t.path, storage_options=s3.options())
    got = again.to_arrow()
    assert sorted(got["id"].to_pylist()) == [f"k{i:07d}" for i in range(100, 1500)]
    assert pc.sum(got["v"]).as_py() == 400 * 1.0 + 1000 * 2.0
    assert t.storage.objects is not None and again.path.startswith("s3://")
    events = [o for o in t.storage.objects.list(t.storage.path(META_DIR, "timeline")) if o.path.endswith(".json")]
    assert len(events) == len(again.timeline.events_after(-1))


def test_services_compact_cluster_clean_archive_on_the_store(make_table: Callable[..., Table]) -> None:
    t = make_table(
        "mor", properties={"archive.max-active-instants": 4, "archive.min-active-instants": 2, "clean.orphan-age-ms": 0}
    )
    for i in range(4):
        t.upsert(rows(i * 100, i * 100 + 300, ts=i + 1, v=float(i)))
    before = t.to_arrow().sort_by("id")
    assert t.services.compact().instant is not None
    assert t.services.cluster(sort_by=["id"]).instant is not None
    listed = t.services.clean(policy="keep_latest_file_versions", retain=1, dry_run=True)
    doomed = [t.storage.path(p) for p in listed.stats["files"]]
    assert doomed, "compaction and clustering left older slices to clean"
    assert t.services.clean(policy="keep_latest_file_versions", retain=1, dry_run=False).instant is not None
    t.services.archive()
    assert t.to_arrow().sort_by("id").equals(before)
    assert t.storage.missing(doomed) == doomed
    assert t.log.store.archived_through() >= 0  # archival moved the mark on the store


def test_indexes_build_validate_and_drop_on_the_store(make_table: Callable[..., Table]) -> None:
    t = make_table("cow")
    t.insert(rows(0, 2000))
    t.indexes.create("bloom_filters", columns=["id"], wait=True)
    t.indexes.create("column_stats", columns=["ts"], wait=True)
    t.upsert(rows(1500, 2500, ts=2))
    assert t.indexes.validate()["mismatches"] == []
    assert t.to_arrow(filter=pc.field("id") == "k0002100").num_rows == 1
    t.indexes.drop("bloom_filters")
    assert [i.kind for i in t.indexes.list()] == ["column_stats"]


def test_a_failed_write_is_rolled_back_off_the_store(make_table: Callable[..., Table], no_faults: None) -> None:
    t = make_table("cow", properties={"heartbeat.interval-ms": 50, "heartbeat.tolerable-misses": 1})
    t.insert(rows(0, 100))
    faults.arm("commit.before_complete", "raise")
    with pytest.raises(FaultInjectedError):
        t.upsert(rows(50, 150, ts=2))
    faults.disarm_all()
    time.sleep(0.2)  # its heartbeat expires
    t.services.rollback_failed()
    assert ids(t) == [f"k{i:07d}" for i in range(100)]
    assert not t.timeline.pending()


def test_a_commit_removes_its_markers_by_name_and_a_stray_one_waits_for_rollback_failed(
    make_table: Callable[..., Table],
) -> None:
    """A completed commit knows every file behind its markers, so on a store it deletes
    those markers by name (no listing); a marker it did not know of (planted here by a
    validator, between the files and the completion) stays, and ``rollback_failed``,
    which lists the marker folders, removes it without touching the commit's files."""
    t = make_table("cow")
    stray: list[str] = []

    def plant(ctx: ValidationContext) -> None:
        stray.append(marker_path(t.storage, ctx.instant, f"never_{ctx.instant}.parquet"))
        t.storage.objects.put(stray[0], b"")  # type: ignore[union-attr]

    t.insert(rows(0, 100), hooks=Hooks(validators=[plant]))
    left = [o.path for o in t.storage.objects.list(t.storage.path(META_DIR, "markers"))]  # type: ignore[union-attr]
    assert left == stray
    t.services.rollback_failed()
    assert list(t.storage.objects.list(t.storage.path(META_DIR, "markers"))) == []  # type: ignore[union-attr]
    assert ids(t) == [f"k{i:07d}" for i in range(100)]


def test_where_a_table_may_live_on_the_store(make_table: Callable[..., Table], s3: SeaweedServer) -> None:
    """docs/safety.md on a bucket: not a prefix that holds other objects, not inside another
    table, not where a table already is; nothing written when refused."""
    from lakeline.timeline.errors import TableExistsError, UnsafeLocationError

    from tests.object_storage.s3_tables import SCHEMA

    t = make_table("cow")
    t.insert(rows(0, 10))
    with pytest.raises(TableExistsError):
        Table.create(t.path, SCHEMA, record_key="id", storage_options=s3.options())
    with pytest.raises(UnsafeLocationError, match="inside"):
        Table.create(f"{t.path}/nested", SCHEMA, record_key="id", storage_options=s3.options())
    busy = s3.uri("busy")
    assert t.storage.objects is not None
    t.storage.objects.put(f"{busy.removeprefix('s3://')}/someone-elses.csv", b"a,b\n")
    with pytest.raises(UnsafeLocationError):
        Table.create(busy, SCHEMA, record_key="id", storage_options=s3.options())
    assert [o.path.rsplit("/", 1)[-1] for o in t.storage.objects.list(busy.removeprefix("s3://"))] == [
        "someone-elses.csv"
    ]


def test_a_late_owner_beat_never_revives_a_removed_staging_folder(make_table: Callable[..., Table]) -> None:
    """On a store a folder is only the objects under it: a beat after the folder was
    removed must not put the owner object back (it would look like a live write)."""
    import uuid

    from lakeline.timeline.storage.staging_folders import OwnerBeat, folder_of, read_owner, remove

    t = make_table("cow")
    beat = OwnerBeat(t.storage, uuid.uuid4().hex, 20).start()
    try:
        w = beat.owner.write
        time.sleep(0.1)
        assert read_owner(t.storage, w) is not None
        assert remove(t.storage, [w]) == [w]
        time.sleep(0.2)  # several beats
        assert read_owner(t.storage, w) is None
        assert t.storage.objects is not None
        assert list(t.storage.objects.list(t.storage.path(folder_of(w)))) == []
    finally:
        beat.stop()


def test_a_file_larger_than_a_part_goes_up_in_parts_and_reads_back_whole(s3: SeaweedServer) -> None:
    """Parquet files stream to the store in parts of PART_SIZE (the upload overlaps the
    encoding); what lands must be the bytes written, in order."""
    st = Storage.for_uri(s3.uri(), s3.options())
    assert st.objects is not None
    data = os.urandom(2 * PART_SIZE + 12345)
    path = st.path("big.bin")
    with st.fs.open_output_stream(path) as out:
        for at in range(0, len(data), 1 << 20):  # as a writer hands it over: in pieces
            out.write(data[at : at + (1 << 20)])
    assert st.read_bytes(path) == data
    assert st.objects.head(path).size == len(data)
