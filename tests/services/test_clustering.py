"""The clustering service (issue 6, point 2) on copy-on-write, merge-on-read and
append-only tables.

Why: clustering rewrites rows into new file groups and retires the old ones in a
``replacecommit``, so it must leave the rows exactly as they were (docs/design.md,
"Protocols": every service leaves the rows as they were), gather small files into files of about the
target size, order rows by the sort columns so range filters prune files (z-order: on
several columns at once), keep the indexes exact, give up when a concurrent write
touched one of its input groups while never touching the groups appends create meanwhile,
make writers that planned against a replaced group retry, and be safe to run again
after its process was killed at any fault point. Rows are checked against
:class:`tests.table.model.TableModel`, on both timeline stores where marked. The races
with concurrent writers are in ``test_clustering_conflicts.py``.
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import InvalidPropertyError, UnknownColumnError
from lakeline.timeline.markers import list_markers

from tests.children.service_child import SERVICE_CHILD
from tests.children.table_workers import check_files_on_disk
from tests.helpers import run_script
from tests.services.test_compaction import check, keys, row  # noqa: F401 (fixtures)
from tests.table.model import DAYS, SCHEMA, TableModel, table_rows, to_arrow

pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test

HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
TARGET = 32 * 1024  # about 2,000 rows of SCHEMA; an insert of 400 rows per partition is small
COLUMNS = SCHEMA.names


def make_table(tmp: Path, kind: str, timeline: str | None = None, **props: Any) -> Table:
    """``kind``: cow, mor, or append (no record key). Inserts always start new groups."""
    path = str(tmp / "t")
    props = {
        **HEARTBEAT,
        "engine.parallelism": 2,
        "write.target-file-size-bytes": TARGET,
        "write.small-file-limit-bytes": 0,
        **props,
    }
    if kind == "append":
        Table.create(path, SCHEMA, partition_by=["day"], properties=props, timeline=timeline)
    else:
        Table.create(
            path,
            SCHEMA,
            record_key="id",
            ordering_field="ts",
            partition_by=["day"],
            table_type=kind,
            properties=props,
            timeline=timeline,
        )
    return Table.open(path, timeline=timeline)


def model_for(kind: str) -> TableModel:
    return TableModel(key=(), ordering=None) if kind == "append" else TableModel()


def small_files(t: Table, model: TableModel, kind: str, batches: int = 8, seed: int = 3) -> None:
    """Inserts of 400 rows per partition (small files), then on keyed tables upserts and
    deletes of the first two inserts' keys (merge-on-read: logs on their slices;
    copy-on-write: rewrites)."""
    rng = random.Random(seed)
    for b in range(batches):
        batch = [row(i, 1, v=rng.randrange(1000)) for i in rng.sample(range(b * 800, b * 800 + 800), 800)]
        t.insert(to_arrow(batch))
        model.insert(batch)
    if kind == "append":
        return
    ups = [row(i, 2, v=-1) for i in rng.sample(range(1600), 30)]
    t.upsert(to_arrow(ups))
    model.upsert(ups)
    gone = rng.sample(range(1600), 10)
    t.delete(keys(gone))
    model.delete([{"id": i, "day": DAYS[i % 2]} for i in gone], with_partition=True)


def live_files(t: Table) -> list[Any]:
    return t.view(t.timeline).files()


def indexes_for(t: Table, kind: str) -> None:
    if kind != "append":
        t.indexes.create("bloom_filters")
    t.indexes.create("column_stats")


# -- rows, sizes, indexes --------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["cow", "mor", "append"])
def test_scheduled_run_gathers_small_files_and_keeps_rows(tmp_path: Path, kind: str) -> None:
    t = make_table(tmp_path, kind)
    indexes_for(t, kind)
    model = model_for(kind)
    small_files(t, model, kind)
    before_id = t.timeline.last_completed().id
    before = live_files(t)
    groups = len(t.view(t.timeline).latest_slices())
    assert len(before) >= 16 and all(f.bytes < 0.6 * TARGET for f in before if f.kind == "base")
    [r] = t.services.run("clustering")
    assert r.aborted is None and r.instant.action == "replacecommit" and r.instant.state == "completed"
    assert r.instant.plan["service"] == "clustering" and r.instant.metadata["operation"] == "cluster"
    check(t, model)
    after = live_files(t)
    assert len(after) <= len(before) // 2, f"{len(before)} files became {len(after)}"
    # Logs folded in; at most one small group per partition left alone by the packing.
    assert len([f for f in after if f.instant != r.instant.id]) <= 2
    sizes = sorted(f.bytes for f in after)
    assert sizes[-1] <= 1.5 * TARGET and sizes[len(sizes) // 2] >= 0.5 * TARGET, sizes
    # Every small group, but perhaps one left alone per partition by the packing.
    assert r.stats["file_groups_clustered"] >= groups - 2
    # The snapshot before is still readable, the indexes exact, nothing left over.
    assert table_rows(t.to_arrow(as_of=before_id), COLUMNS) == model.sorted()
    assert t.indexes.validate()["mismatches"] == []
    check_files_on_disk(t)
    assert list_markers(t.storage, r.instant.id) == []
    if kind != "append":
        assert t.changes(before_id).num_rows == 0  # moving rows is not a change
    # Its output is not small: nothing to do the next time.
    assert t.services.run("clustering") == []


def test_a_lone_small_group_is_left_alone_and_dry_run_appends_nothing(tmp_path: Path) -> None:
    t = make_table(tmp_path, "mor")
    t.insert(to_arrow([row(i, 1) for i in range(0, 800, 2)]))  # one small group in DAYS[0]
    n = len(t.timeline)
    assert t.services.run("clustering") == [] and len(t.timeline) == n
    t.insert(to_arrow([row(i, 1) for i in range(800, 1600, 2)]))
    [dry] = t.services.run("clustering", dry_run=True)
    assert dry.instant is None and len(dry.plan["groups"]) == 2 and len(t.timeline) == n + 1


def test_explicit_cluster_takes_every_group_on_both_stores(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, "mor", timeline, **{"write.target-file-size-bytes": 128 * 1024})
    t.indexes.create("column_stats")
    model = TableModel()
    small_files(t, model, "mor", batches=4)
    groups_before = {(s.partition, s.file_group) for s in t.view(t.timeline).latest_slices()}
    r = t.services.cluster(sort_by=["v", "id"], strategy="linear")
    assert r.instant.state == "completed" and r.instant.action == "replacecommit"
    replaced = {(p, g) for p, gs in r.instant.metadata["replaced"].items() for g in gs}
    assert replaced == groups_before
    check(t, model)
    # linear: every new file is sorted by (v, id)
    for f in live_files(t):
        rows = pq.read_table(t.storage.path(f.path), columns=["v", "id"]).to_pylist()
        assert rows == sorted(rows, key=lambda x: (x["v"], x["id"])), f.path
    assert t.indexes.validate()["mismatches"] == []
    check_files_on_disk(t)
    assert t.services.cluster().instant.state == "completed"  # again: every group, by the record key
    check(t, model)
    assert [i.action for i in t.services.pending()] == []


def test_append_only_changes_do_not_report_moved_rows(tmp_path: Path) -> None:
    """changes() on an append-only table reports the rows of the groups a range created;
    a clustering creates groups too, but only moves rows that were there already."""
    t = make_table(tmp_path, "append")
    model = model_for("append")
    small_files(t, model, "append", batches=3)
    start = t.timeline.last_completed().id
    added = [row(1, 1), row(1, 1), row(99_999, 1)]  # copies of a row that was there, too
    t.insert(to_arrow(added))
    t.services.cluster()
    assert sorted(t.changes(start).column("id").to_pylist()) == [1, 1, 99_999]
    mid = t.timeline.last_completed().id
    t.services.cluster(sort_by=["v"])
    assert t.changes(mid).num_rows == 0


def test_unknown_strategy_or_column_is_refused_before_anything_is_appended(tmp_path: Path) -> None:
    t = make_table(tmp_path, "cow")
    t.insert(to_arrow([row(i, 1) for i in range(10)]))
    n = len(t.timeline)
    with pytest.raises(InvalidPropertyError, match="strategy"):
        t.services.cluster(sort_by=["id"], strategy="hilbert")
    with pytest.raises(UnknownColumnError, match="nope"):
        t.services.cluster(sort_by=["id", "nope"], strategy="zorder")
    with pytest.raises(InvalidPropertyError, match="at least one"):
        t.services.cluster(sort_by=[], strategy="zorder")
    with pytest.raises(InvalidPropertyError):
        t.services.schedule("clustering", sort_by=["id"], sideways=True)
    with pytest.raises(InvalidPropertyError):
        Table.create(tmp_path / "bad", SCHEMA, record_key="id", properties={"clustering.strategy": "hilbert"})
    assert len(t.timeline) == n


# -- z-order ---------------------------------------------------------------------------------


def test_zorder_makes_range_filters_on_two_columns_read_fewer_files(tmp_path: Path) -> None:
    path = str(tmp_path / "z")
    schema = pa.schema([("id", pa.int64()), ("x", pa.float64()), ("y", pa.int64()), ("tag", pa.string())])
    t = Table.create(
        path,
        schema,
        record_key="id",
        table_type="cow",
        properties={"write.target-file-size-bytes": 8 * 1024, "write.small-file-limit-bytes": 0},
    )
    rng = random.Random(11)
    ids = list(range(8000))
    rng.shuffle(ids)  # written in random order: every file spans the whole space
    rows = {
        "id": ids,
        "x": [rng.random() for _ in ids],
        "y": [rng.randrange(10**6) for _ in ids],
        "tag": [f"t{rng.randrange(50)}" if rng.random() > 0.05 else None for _ in ids],
    }
    for start in range(0, 8000, 500):
        t.insert(pa.table({k: v[start : start + 500] for k, v in rows.items()}, schema=schema))
    t.indexes.create("column_stats")
    filters = {"both": (pc.field("x") < 0.25) & (pc.field("y") < 250_000), "only_y": pc.field("y") >= 900_000}
    expect = {n: sorted(t.scan(filter=f).to_arrow().column("id").to_pylist()) for n, f in filters.items()}

    def files_read() -> dict[str, int]:
        out = {}
        for n, f in filters.items():
            s = t.scan(filter=f)
            assert sorted(s.to_arrow().column("id").to_pylist()) == expect[n]
            assert len(s.files()) == s.explain()["files_after_bloom_pruning"]
            out[n] = len(s.files())
        return out

    before = files_read()
    total = t.scan().explain()["files_total"]
    # Random order: nothing prunes, but for a leftover file of a few rows that may miss
    # the top tenth of y (the file sizing cut one of 12 rows since field ids made
    # footers a little longer).
    assert before["both"] == total and before["only_y"] >= total - 1, "random order: nothing prunes"
    r = t.services.cluster(sort_by=["x", "y"], strategy="zorder")
    assert r.instant.state == "completed"
    after_total = t.scan().explain()["files_total"]
    assert after_total >= 8
    after = files_read()
    # A quarter of each axis is about a sixteenth of the space; y alone, a tenth of it.
    assert after["both"] <= after_total // 3, (after, after_total)
    assert after["only_y"] < after_total, (after, after_total)
    assert t.indexes.validate()["mismatches"] == []
    assert sorted(t.to_arrow().column("id").to_pylist()) == list(range(8000))


# -- crashes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "point",
    ["clustering.after_requested", "clustering.after_inflight", "clustering.mid_write", "clustering.before_complete"],
)
def test_killed_clustering_is_finished_by_the_next_run(tmp_path: Path, point: str) -> None:
    t = make_table(tmp_path, "mor")
    indexes_for(t, "mor")
    model = TableModel()
    small_files(t, model, "mor", batches=4)
    rc, out, err = run_script(
        SERVICE_CHILD,
        [t.path, None, "cluster", {"sort_by": ["v", "id"], "strategy": "zorder"}],
        faults=f"{point}=crash",
    )
    assert rc == CRASH_EXIT_CODE, f"the clustering did not die at {point}: rc={rc}\n{out}\n{err[-3000:]}"
    [pending] = t.timeline.pending()
    assert pending.action == "replacecommit" and pending.plan["service"] == "clustering"
    check(t, model)  # a pending clustering changes no read
    time.sleep(0.3)  # its heartbeat expires: interval 100 ms x (1 + 1)
    results = t.services.run("clustering")
    assert results[0].instant.id == pending.id and results[0].instant.state == "completed"
    check(t, model)
    assert all(f.kind == "base" for f in live_files(t))
    assert t.indexes.validate()["mismatches"] == []
    check_files_on_disk(t)  # the dead attempt's files went with its markers
    assert list_markers(t.storage, pending.id) == []
