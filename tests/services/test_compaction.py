"""The compaction service (issue 6, point 1) on merge-on-read tables.

Why: compaction rewrites every row of a table's merge-on-read slices, so it must leave
the rows exactly as they were (docs/design.md, "Protocols": "every service leaves the
rows as they were"), keep time travel to older snapshots working, keep the indexes
exact, never lose a log a writer appends while it runs (the log joins the new slice,
section 2), give up when a clustering or overwrite replaced its inputs, and be safe to
run again after its process was killed at any fault point. Rows are checked against
:class:`tests.table.model.TableModel`, on both timeline stores.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import InvalidPropertyError
from lakeline.timeline.markers import list_markers

from tests.children.service_child import SERVICE_CHILD
from tests.children.table_workers import check_files_on_disk
from tests.helpers import run_script
from tests.table.model import DAYS, SCHEMA, TableModel, table_rows, to_arrow

HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
COLUMNS = SCHEMA.names


pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def make_table(tmp: Path, timeline: str | None = None, table_type: str = "mor", **props: Any) -> Table:
    path = str(tmp / "t")
    Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=table_type,
        # These tests reason about file groups: each write's new keys start groups of
        # their own (merge-on-read would fill the small ones through their logs).
        properties={**HEARTBEAT, "engine.parallelism": 2, "write.small-file-limit-bytes": 0, **props},
        timeline=timeline,
    )
    return Table.open(path, timeline=timeline)


def row(i: int, ts: int, v: int | None = None) -> dict[str, Any]:
    return {"id": i, "ts": ts, "day": DAYS[i % 2], "v": v if v is not None else i, "s": f"s{i}-{ts}"}


def keys(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "day": [DAYS[i % 2] for i in ids]})


def check(t: Table, model: TableModel, **read: Any) -> None:
    assert table_rows(t.to_arrow(**read), COLUMNS) == model.sorted()


def seeded(t: Table, model: TableModel, seed: int = 7, writes: int = 6) -> None:
    """Inserts, then random upserts and deletes: slices with several logs each."""
    rng = random.Random(seed)
    first = [row(i, 1) for i in range(40)]
    t.insert(to_arrow(first))
    model.insert(first)
    for n in range(writes):
        ts = n + 2
        if n % 3 == 2:
            gone = rng.sample(range(60), 6)
            t.delete(keys(gone))
            model.delete([{"id": i, "day": DAYS[i % 2]} for i in gone], with_partition=True)
        else:
            batch = [row(i, rng.choice([ts, 0]), v=n) for i in rng.sample(range(60), 12)]
            t.upsert(to_arrow(batch))
            model.upsert(batch)


def logs_left(t: Table) -> int:
    return sum(len(s.logs) for s in t.view(t.timeline).latest_slices())


def test_compaction_keeps_rows_indexes_and_time_travel(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline)
    t.indexes.create("bloom_filters")
    t.indexes.create("column_stats")
    model = TableModel()
    seeded(t, model)
    # A group whose every row is deleted compacts to an empty base (never retired: logs
    # landing meanwhile would go with it).
    t.insert(to_arrow([row(i, 1) for i in (100, 102)]))
    t.delete(keys([100, 102]))
    before_id = t.timeline.last_completed().id
    before = t.to_arrow()
    assert logs_left(t) > 0
    r = t.services.compact()
    assert r.aborted is None and r.instant.action == "compaction" and r.instant.state == "completed"
    assert r.stats["file_groups_compacted"] >= 3 and r.instant.metadata["operation"] == "compact"
    check(t, model)
    assert table_rows(t.to_arrow(), COLUMNS) == table_rows(before, COLUMNS)
    assert logs_left(t) == 0
    for s in t.view(t.timeline).latest_slices():
        assert s.base is not None and s.base_instant in (r.instant.id, s.base.instant)
    assert {s.base.instant for s in t.view(t.timeline).latest_slices() if s.base.rows == 0} == {r.instant.id}
    assert table_rows(t.to_arrow(as_of=before_id), COLUMNS) == table_rows(before, COLUMNS)
    assert t.indexes.validate()["mismatches"] == []
    # Reads pruned by the new bases' indexes find the row.
    hit = t.scan(filter=pc.field("id") == 7)
    assert hit.to_arrow().to_pylist() == [r_ for r_ in model.rows() if r_["id"] == 7]
    assert hit.explain()["files_after_bloom_pruning"] < hit.explain()["files_total"]
    check_files_on_disk(t)
    assert list_markers(t.storage, r.instant.id) == []
    again = t.services.compact()
    assert again.instant is None


def test_compaction_folds_new_keys_that_filled_small_groups_through_logs(tmp_path: Path) -> None:
    """Merge-on-read inserts fill small groups through their logs (the default): the
    new keys live in logs until compaction folds them into the bases, and reads, the
    record index, key-pinned scans and time travel agree before and after."""
    t = make_table(tmp_path, **{"write.small-file-limit-bytes": 4 * 1024 * 1024})
    t.indexes.create("record_index", wait=True)
    t.indexes.create("bloom_filters", wait=True)
    model = TableModel()
    seeded(t, model)
    groups = {s.file_group for s in t.view(t.timeline).latest_slices()}
    fresh = [row(i, 3) for i in range(200, 230)]
    t.upsert(to_arrow(fresh))
    model.upsert(fresh)
    t.delete(keys([201, 204]))  # new keys deleted again before any compaction
    model.delete([{"id": i, "day": DAYS[i % 2]} for i in (201, 204)], with_partition=True)
    slices = t.view(t.timeline).latest_slices()
    assert {s.file_group for s in slices} == groups, "new keys went into the small groups' logs"
    assert any(f.inserts for s in slices for f in s.logs)
    before_id = t.timeline.last_completed().id
    check(t, model)
    assert t.indexes.validate()["mismatches"] == []
    r = t.services.compact()
    assert r.aborted is None and r.instant.state == "completed"
    assert logs_left(t) == 0
    check(t, model)
    check(t, model, as_of=before_id)
    assert t.indexes.validate()["mismatches"] == []
    for i in (200, 201, 229):
        pinned = t.scan(filter=pc.field("id") == i)
        assert pinned.to_arrow().to_pylist() == [r_ for r_ in model.rows() if r_["id"] == i]
    check_files_on_disk(t)


def test_a_log_written_between_schedule_and_execute_joins_the_new_slice(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline)
    model = TableModel()
    seeded(t, model, writes=3)
    inst = t.services.schedule("compaction", trigger="all")
    assert inst is not None and inst.state == "requested"
    planned = {(g["partition"], g["file_group"]) for g in inst.plan["groups"]}
    late = [row(i, 50, v=-1) for i in range(0, 20, 3)]
    w = t.upsert(to_arrow(late))
    model.upsert(late)
    at_upsert = model.snapshot()
    t.delete(keys([1]))
    model.delete([{"id": 1, "day": DAYS[1]}], with_partition=True)
    check(t, model)  # pending compaction: the late logs are merged onto the old slices
    r = t.services.execute(inst)
    assert r.instant.state == "completed"
    check(t, model)
    late_logs = {f.path for s in t.view(t.timeline).latest_slices() for f in s.logs}
    assert late_logs, "the writer's logs left the view"
    for s in t.view(t.timeline).latest_slices():
        if (s.partition, s.file_group) in planned:
            assert s.base_instant == inst.id
            assert all(f.completed_seq > inst.id for f in s.logs)
    check(t, at_upsert, as_of=w.instant.id)  # the snapshot while the compaction was pending
    assert t.services.compact().instant is not None
    assert logs_left(t) == 0
    check(t, model)


def test_a_log_completed_while_planning_is_folded_in(tmp_path: Path) -> None:
    """A log that lands between the plan's snapshot and the requested event belongs to
    the slice the compaction replaces: execution reads the view at the requested event."""
    t = make_table(tmp_path)
    model = TableModel()
    seeded(t, model, writes=2)
    other = Table.open(t.path)
    sneaky = [row(i, 60, v=-7) for i in range(0, 40, 5)]
    faults.on("log.before_append.requested", lambda: other.upsert(to_arrow(sneaky)))
    inst = t.services.schedule("compaction", trigger="all")
    model.upsert(sneaky)
    assert inst is not None and inst.plan["snapshot_seq"] < inst.id - 1  # the upsert landed in between
    t.services.execute(inst)
    check(t, model)
    assert logs_left(t) == 0


@pytest.mark.parametrize(
    "trigger, props, due_after",
    [
        ("delta-commits", {"compaction.delta-commits": 3}, 3),
        # Three one-row logs weigh 0.79 of their group's 10 KiB base, almost all of it
        # footers (since field ids, each names its columns' ids): not due at 0.9.
        ("log-ratio", {"compaction.log-ratio": 0.9}, None),
        ("time", {"compaction.interval-ms": 0}, 1),
        ("time", {"compaction.interval-ms": 3_600_000}, None),
    ],
)
def test_trigger_strategies(tmp_path: Path, trigger: str, props: dict[str, Any], due_after: int | None) -> None:
    t = make_table(tmp_path, **{"compaction.trigger": trigger, **props})
    t.insert(to_arrow([row(i, 1) for i in range(4000)]))
    for n in range(1, 4):
        t.upsert(to_arrow([row(0, n + 1)]))  # one small log on one group per commit
        results = t.services.run("compaction")
        if due_after is not None and n >= due_after:
            assert [r.instant.state for r in results] == ["completed"], f"not compacted after {n} commits"
            assert len(results[0].instant.plan["groups"]) == 1
            return
        assert results == [], f"compacted after {n} commits under {trigger} {props}"
    if trigger == "log-ratio":
        # Logs as large as the base: due.
        t.upsert(to_arrow([row(i, 9) for i in range(0, 4000, 2)]))
        assert [r.instant.state for r in t.services.run("compaction")] == ["completed"]
        return
    assert t.services.compact().instant is not None  # the explicit call ignores triggers
    assert logs_left(t) == 0


def test_trigger_is_checked_and_dry_run_appends_nothing(tmp_path: Path) -> None:
    t = make_table(tmp_path, **{"compaction.delta-commits": 1})
    t.insert(to_arrow([row(i, 1) for i in range(10)]))
    t.upsert(to_arrow([row(1, 2)]))
    with pytest.raises(InvalidPropertyError):
        t.services.schedule("compaction", trigger="sometimes")
    with pytest.raises(InvalidPropertyError):
        Table.create(
            tmp_path / "bad", SCHEMA, record_key="id", table_type="mor", properties={"compaction.trigger": "sometimes"}
        )
    n = len(t.timeline)
    [dry] = t.services.run("compaction", dry_run=True)
    assert dry.instant is None and len(dry.plan["groups"]) == 1 and len(t.timeline) == n


@pytest.mark.parametrize("table_type", ["cow", "append"])
def test_other_table_types_plan_nothing(tmp_path: Path, table_type: str) -> None:
    if table_type == "append":
        t = Table.create(tmp_path / "a", SCHEMA, partition_by=["day"])
        t.insert(to_arrow([row(i, 1) for i in range(10)]))
    else:
        t = make_table(tmp_path, table_type="cow")
        t.insert(to_arrow([row(i, 1) for i in range(10)]))
        t.upsert(to_arrow([row(1, 2)]))
    nothing = t.services.compact()
    assert nothing.instant is None and nothing.stats["file_groups_compacted"] == 0
    assert t.services.run("compaction") == []
    assert t.services.schedule("compaction") is None


def test_overwrite_of_its_groups_meanwhile_aborts_it(tmp_path: Path) -> None:
    t = make_table(tmp_path)
    model = TableModel()
    seeded(t, model, writes=2)
    inst = t.services.schedule("compaction", trigger="all")
    fresh = [row(i, 5) for i in range(0, 30, 2)]  # DAYS[0] only: replaces that partition's groups
    t.overwrite(to_arrow(fresh))
    model.overwrite(fresh)
    r = t.services.execute(inst)
    assert r.aborted and "replaced" in r.aborted and r.instant.state == "rolled_back"
    check(t, model)
    check_files_on_disk(t)
    assert list_markers(t.storage, inst.id) == []
    assert t.services.compact().instant.state == "completed"  # planned again, without them
    check(t, model)


@pytest.mark.parametrize(
    "point",
    ["compaction.after_requested", "compaction.after_inflight", "compaction.mid_write", "compaction.before_complete"],
)
def test_killed_compaction_is_finished_by_the_next_run(tmp_path: Path, point: str) -> None:
    t = make_table(tmp_path)
    t.indexes.create("bloom_filters")
    t.indexes.create("column_stats")
    model = TableModel()
    seeded(t, model)
    rc, out, err = run_script(SERVICE_CHILD, [t.path, None, "compact", {}], faults=f"{point}=crash")
    assert rc == CRASH_EXIT_CODE, f"the compaction did not die at {point}: rc={rc}\n{out}\n{err[-3000:]}"
    [pending] = t.timeline.pending()
    assert pending.action == "compaction"
    check(t, model)  # a pending compaction changes no read
    import time

    time.sleep(0.3)  # its heartbeat expires: interval 100 ms x (1 + 1)
    results = t.services.run("compaction")
    assert [r.instant.id for r in results] == [pending.id] and results[0].instant.state == "completed"
    check(t, model)
    assert logs_left(t) == 0
    assert t.indexes.validate()["mismatches"] == []
    check_files_on_disk(t)  # the dead attempt's files went with its markers
    assert list_markers(t.storage, pending.id) == []


# -- writers completing while a compaction runs (docs/concurrency.md section 2, conflict table)


def _completing_during_compaction(t: Table, write: Any) -> Any:
    """Run ``write`` on ``t``; right before its ``completed`` event, another handle
    compacts every slice with logs. Returns (write result, compaction result)."""
    other = Table.open(t.path)
    done: list[Any] = []
    faults.on("commit.before_complete", lambda: done.append(other.services.compact()))
    return write(), done[0]


def test_a_log_append_completing_after_a_compaction_is_ok(tmp_path: Path) -> None:
    t = make_table(tmp_path)
    model = TableModel()
    seeded(t, model, writes=2)
    batch = [row(i, 70, v=-3) for i in range(0, 10)]
    w, c = _completing_during_compaction(t, lambda: t.upsert(to_arrow(batch)))
    model.upsert(batch)
    assert c.instant.state == "completed" and w.instant.state == "completed"
    assert not [i for i in t.timeline.instants() if i.state == "rolled_back"], "the writer had to retry"
    check(t, model)
    for s in t.view(t.timeline).latest_slices():
        assert all(f.instant == w.instant.id for f in s.logs) and (not s.logs or s.base_instant == c.instant.id)


def test_an_overwrite_completing_after_a_compaction_is_ok(tmp_path: Path) -> None:
    t = make_table(tmp_path)
    model = TableModel()
    seeded(t, model, writes=2)
    fresh = [row(i, 5) for i in range(0, 30, 2)]
    w, c = _completing_during_compaction(t, lambda: t.overwrite(to_arrow(fresh)))
    model.overwrite(fresh)
    assert c.instant.state == "completed" and w.instant.state == "completed"
    assert not [i for i in t.timeline.instants() if i.state == "rolled_back"], "the overwrite had to retry"
    check(t, model)
    check_files_on_disk(t)


def test_groups_in_a_pending_plan_are_not_planned_again(tmp_path: Path) -> None:
    t = make_table(tmp_path)
    model = TableModel()
    seeded(t, model, writes=2)
    first = t.services.schedule("compaction", trigger="all")
    assert t.services.schedule("compaction", trigger="all") is None  # every group is taken
    t.upsert(to_arrow([row(500, 9)]))  # a new group, then a log on it
    t.upsert(to_arrow([row(500, 10)]))
    model.upsert([row(500, 10)])
    second = t.services.schedule("compaction", trigger="all")
    assert [g["file_group"] for g in second.plan["groups"]] == [
        s.file_group for s in t.view(t.timeline).latest_slices() if s.base.key_min == 500
    ]
    assert [r.instant.id for r in t.services.run("compaction")] == [first.id, second.id]
    assert logs_left(t) == 0
    check(t, model)
