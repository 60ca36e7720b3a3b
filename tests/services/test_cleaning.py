"""The cleaning service and savepoints (issue 6, points 3 and 5).

Why: the cleaner is the one service that deletes committed files, and Hudi's deletes
files a reader still needs. docs/services.md, "Cleaning": it must never delete a file of a
snapshot inside retention, of a savepoint, of a pending plan or of an inflight writer,
nor anything younger than the orphan age; a read outside retention fails with
``SnapshotExpiredError`` before any row. The expected deletions are computed here
independently of the cleaner, from the files each snapshot's scan reads. Savepoints and
reads outside retention are in ``test_cleaning_savepoints.py``.
"""

from __future__ import annotations

import json
import os
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import InvalidPropertyError, SnapshotExpiredError
from lakeline.timeline.instant import Action, State
from lakeline.timeline.view.file_group import table_tag

from tests.children.service_child import SERVICE_CHILD
from tests.children.table_workers import WORKERS_PY, check_files_on_disk, data_files_on_disk
from tests.helpers import finish, run_script, start_script, wait_for_files

# The store fixture (both timelines), fault reset and row builders of the compaction tests.
from tests.services.test_compaction import keys, row  # noqa: F401
from tests.table.model import DAYS, SCHEMA, TableModel, table_rows, to_arrow

pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test

HEARTBEAT = {"heartbeat.interval-ms": 100, "heartbeat.tolerable-misses": 1}
COLUMNS = SCHEMA.names

CLEAN_RETAIN_1 = {"retain": 1, "dry_run": False}  # the child's clean: ``t.services.clean(**...)``


def make_table(tmp: Path, timeline: str | None = None, table_type: str = "mor", **props: Any) -> Table:
    path = str(tmp / "t")
    Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=table_type,
        properties={**HEARTBEAT, "engine.parallelism": 2, "clean.orphan-age-ms": 0, **props},
        timeline=timeline,
    )
    return Table.open(path, timeline=timeline)


def history(t: Table, model: TableModel, seed: int = 3) -> None:
    """Upserts, deletes, a compaction (mor) and an overwrite: every kind of old version."""
    rng = random.Random(seed)
    first = [row(i, 1) for i in range(30)]
    t.insert(to_arrow(first))
    model.insert(first)
    for n in range(5):
        if n == 2:
            gone = rng.sample(range(30), 4)
            t.delete(keys(gone))
            model.delete([{"id": i, "day": DAYS[i % 2]} for i in gone], with_partition=True)
        else:
            batch = [row(i, n + 2, v=n) for i in rng.sample(range(30), 8)]
            t.upsert(to_arrow(batch))
            model.upsert(batch)
        if n == 3 and t.config.table_type == "mor":
            assert t.services.compact().instant is not None
    fresh = [row(i, 9) for i in range(0, 12, 2)]  # DAYS[0] only: its groups are retired
    t.overwrite(to_arrow(fresh))
    model.overwrite(fresh)
    batch = [row(i, 10, v=-1) for i in range(1, 9, 2)]
    t.upsert(to_arrow(batch))
    model.upsert(batch)


def data_ids(t: Table) -> list[int]:
    return [i.id for i in t.timeline.completed() if i.action.writes_data]


def snapshot_files(t: Table, instant: int) -> set[str]:
    """What a read as of ``instant`` opens (relative paths), by the read path itself."""
    return {t.storage.relative(p) for p in t.scan(as_of=instant).files()}


def reads(t: Table, ids: list[int]) -> dict[int, list[tuple[Any, ...]]]:
    return {i: table_rows(t.to_arrow(as_of=i), COLUMNS) for i in ids}


Recorded = tuple[list[int], dict[int, set[str]], dict[int, list[tuple[Any, ...]]], set[str]]


def recorded(t: Table, model: TableModel) -> Recorded:
    """After :func:`history`: the data instants, each one's snapshot files and rows, and
    the data files on disk, all taken before cleaning."""
    history(t, model)
    ids = data_ids(t)
    return ids, {i: snapshot_files(t, i) for i in ids}, reads(t, ids), data_files_on_disk(t)


def check_after_clean(
    t: Table, before: dict[int, list[tuple[Any, ...]]], files: dict[int, set[str]], retained: list[int]
) -> None:
    """Retained snapshots read as before; every other snapshot raises, even one whose
    files happen to survive (outside retention is a rule, not what was left)."""
    disk = data_files_on_disk(t)
    for i, rows in before.items():
        if i in retained:
            assert files[i] <= disk, f"a file of retained snapshot {i} was deleted"
            assert table_rows(t.to_arrow(as_of=i), COLUMNS) == rows
        else:
            with pytest.raises(SnapshotExpiredError):
                t.to_arrow(as_of=i)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_keep_latest_commits_deletes_exactly_what_no_retained_snapshot_reads(
    tmp_path: Path, timeline: str | None, table_type: str
) -> None:
    t = make_table(tmp_path, timeline, table_type)
    t.indexes.create("bloom_filters")
    model = TableModel()
    ids, files, before, disk = recorded(t, model)
    retained = ids[-3:]
    expected = disk - set().union(*(files[i] for i in retained))
    assert expected, "the history left no old version to clean"
    r = t.services.clean(retain=3, dry_run=False)
    assert r.instant is not None and r.instant.action == "clean" and r.instant.state == "completed"
    assert set(r.stats["files"]) == expected and r.stats["files_deleted"] == len(expected)
    assert r.stats["retain_seq"] == t.timeline.get(retained[0]).completed_seq
    assert data_files_on_disk(t) == disk - expected
    assert table_rows(t.to_arrow(), COLUMNS) == model.sorted()
    check_after_clean(t, before, files, retained)
    with pytest.raises(SnapshotExpiredError):
        t.to_arrow(as_of=ids[0])
    assert t.indexes.validate()["mismatches"] == []
    check_files_on_disk(t)
    assert t.services.clean(retain=3, dry_run=False).instant is None  # nothing left to do


def test_keep_latest_file_versions(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow", **{"write.small-file-limit-bytes": 0})
    model = TableModel()
    ids, files, before, _ = recorded(t, model)
    # Independently: the base files of each group, in commit order, from the commit metadata.
    versions: dict[tuple[str, str], list[str]] = {}
    retired: set[tuple[str, str]] = set()
    for inst in t.timeline.completed():
        if inst.action.writes_data:
            for f in inst.metadata["files"]:
                versions.setdefault((f["partition"], f["file_group"]), []).append(f["path"])
            retired |= {(p, g) for p, gs in inst.metadata.get("replaced", {}).items() for g in gs}
    keep = 2
    expected = {
        p for grp, paths in versions.items() for p in paths[: len(paths) - (keep - 1 if grp in retired else keep)]
    }
    assert expected
    r = t.services.clean(policy="keep_latest_file_versions", retain=keep, dry_run=False)
    assert set(r.stats["files"]) == expected
    assert table_rows(t.to_arrow(), COLUMNS) == model.sorted()
    # The retain point: every snapshot from it on is whole and readable, every one before
    # it is refused.
    retained = [i for i in ids if t.timeline.get(i).completed_seq >= r.stats["retain_seq"]]
    assert ids[-1] in retained and len(retained) < len(ids)
    check_after_clean(t, before, files, retained)


def test_keep_latest_hours(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakeline.services import cleaning

    t = make_table(tmp_path, table_type="cow")
    model = TableModel()
    ids, files, before, disk = recorded(t, model)
    pivot = t.timeline.get(ids[4])
    # "Now" is one hour after the pivot completed: the snapshot as of then is the oldest kept.
    monkeypatch.setattr(cleaning, "_now_ns", lambda: (pivot.completed_us + 3_600_000_000) * 1000 + 500)
    r = t.services.clean(policy="keep_latest_hours", retain=1, dry_run=False)
    assert r.stats["retain_seq"] == pivot.completed_seq
    retained = ids[4:]
    expected = disk - set().union(*(files[i] for i in retained))
    assert set(r.stats["files"]) == expected
    check_after_clean(t, before, files, retained)
    at = datetime.fromtimestamp(pivot.completed_us / 1e6 + 0.0000005, tz=UTC)
    assert table_rows(t.to_arrow(as_of=at), COLUMNS) == before[ids[4]]


def test_dry_run_lists_and_deletes_nothing(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow")
    history(t, TableModel())
    disk, n = data_files_on_disk(t), len(t.timeline)
    dry = t.services.clean(retain=1, dry_run=True)
    assert dry.instant is None and dry.stats["files_to_delete"] == len(dry.stats["files"]) > 0
    [run] = t.services.run("cleaning", dry_run=True, retain=1)
    assert run.instant is None and run.plan["files"]
    assert data_files_on_disk(t) == disk and len(t.timeline) == n
    assert set(t.services.clean(retain=1, dry_run=False).stats["files"]) == set(dry.stats["files"])
    with pytest.raises(InvalidPropertyError):
        t.services.clean(policy="keep_everything", dry_run=False)


def test_pending_compaction_inputs_are_kept(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="mor")
    model = TableModel()
    history(t, model)
    t.upsert(to_arrow([row(i, 20) for i in range(0, 20, 2)]))
    inst = t.services.schedule("compaction", trigger="all")
    inputs = {p for g in inst.plan["groups"] for p in [g["base"], *g["logs"]] if p}
    fresh = [row(i, 30) for i in range(0, 40, 2)]
    t.overwrite(to_arrow(fresh))  # retires the planned groups of DAYS[0]
    model.overwrite(fresh)
    t.upsert(to_arrow([row(1, 31)]))
    model.upsert([row(1, 31)])
    t.services.clean(retain=1, dry_run=False)
    assert inputs <= data_files_on_disk(t), "a pending compaction's inputs were deleted"
    assert t.services.execute(inst).aborted  # the overwrite replaced its groups
    t.services.clean(retain=1, dry_run=False)
    assert not inputs & data_files_on_disk(t) - {f.path for f in t.view(t.timeline).files()}
    assert table_rows(t.to_arrow(), COLUMNS) == model.sorted()


def test_an_inflight_writers_files_are_kept(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow", **{"heartbeat.interval-ms": 10_000})
    model = TableModel()
    history(t, model)
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    batch = [row(i, 40, v=7) for i in range(12)]
    spec = {"op": "upsert", "rows": [{k: v for k, v in r.items()} for r in batch]}
    proc = start_script(
        WORKERS_PY,
        ["op", t.path, None, spec],
        faults="commit.before_complete=wait",
        env={"LAKELINE_FAULT_DIR": str(fault_dir)},
    )
    try:
        wait_for_files([fault_dir / "commit.before_complete.reached"])
        [pending] = t.timeline.pending()
        written = {p for p in data_files_on_disk(t) if f"_{pending.id}_" in p}
        assert written
        t.services.clean(retain=1, dry_run=False)
        assert written <= data_files_on_disk(t), "an inflight writer's files were deleted"
    finally:
        (fault_dir / "commit.before_complete.release").write_text("go")
        rc, out, err = finish(proc)
    assert rc == 0 and json.loads(out)["ok"], err[-2000:]
    model.upsert(batch)
    assert table_rows(t.to_arrow(), COLUMNS) == model.sorted()


def test_orphans_and_rolled_back_leftovers(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow", **{"clean.orphan-age-ms": 60_000})
    t.insert(to_arrow([row(i, 1) for i in range(6)]))
    done = t.timeline.last_completed().id
    failed = t.log.append(Action.COMMIT, State.REQUESTED, {"operation": "upsert", "writer": True}).instant
    t.log.append(Action.COMMIT, State.ROLLED_BACK, {"reason": "test"}, instant=failed)
    folder = Path(t.path) / f"day={DAYS[0]}"
    table = to_arrow([row(0, 1)])

    tag = table_tag(t.config.table_uuid)

    def stray(instant: int, n: int, age_s: float, owner: str = tag) -> str:
        p = folder / f"{n:032x}_{instant}_{n:08x}{'_' + owner if owner else ''}.parquet"
        pq.write_table(table, p)
        os.utime(p, (time.time() - age_s, time.time() - age_s))
        return f"day={DAYS[0]}/{p.name}"

    old_orphan, young_orphan = stray(done, 1, 600), stray(done, 2, 0)
    old_dead, young_dead = stray(failed, 3, 600), stray(failed, 4, 0)
    unknown = stray(10_000, 5, 600)  # an instant this timeline does not know: a writer just starting
    # Unnamed by the timeline and not carrying this table's tag: another table's, or from
    # before names carried one. Never this table's to delete (docs/safety.md).
    foreign, untagged = stray(done, 6, 600, owner="0123456789ab"), stray(done, 7, 600, owner="")
    r = t.services.clean(dry_run=False)
    assert r.instant.plan["reasons"] == {old_orphan: "orphan", old_dead: "rolled_back"}
    left = data_files_on_disk(t)
    assert {young_orphan, young_dead, unknown, foreign, untagged} <= left and not {old_orphan, old_dead} & left
    assert table_rows(t.to_arrow(), COLUMNS) == sorted(table_rows(to_arrow([row(i, 1) for i in range(6)]), COLUMNS))


def test_leftovers_of_a_dropped_index_are_removed(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow")
    t.insert(to_arrow([row(i, 1) for i in range(6)]))
    t.indexes.create("column_stats", wait=True)
    t.indexes.create("bloom_filters", wait=True)
    index = t.indexes.list()[0]
    t.indexes.drop(index.name)
    # Its partition is named by its definition (<name>@<creating instant>).
    leftover = Path(t.path) / ".lakeline" / "metadata" / index.partition / "delta_1_0000abcd.parquet"
    leftover.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"path": ["x"]}), leftover)  # a late writer's entries
    r = t.services.clean(dry_run=False)
    assert r.stats["index_files_deleted"] == 1 and not leftover.exists()
    assert t.indexes.validate()["mismatches"] == []


def test_killed_mid_delete_is_finished_by_the_next_run(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline, table_type="cow")
    model = TableModel()
    history(t, model)
    expected = set(t.services.clean(retain=1, dry_run=True).stats["files"])
    assert len(expected) > 1
    rc, out, err = run_script(
        SERVICE_CHILD, [t.path, timeline, "clean", CLEAN_RETAIN_1], faults="clean.mid_delete=crash"
    )
    assert rc == CRASH_EXIT_CODE, f"the clean did not die mid-delete: rc={rc}\n{out}\n{err[-3000:]}"
    [pending] = t.timeline.pending()
    assert pending.action == "clean" and len(expected & data_files_on_disk(t)) == len(expected) - 1
    time.sleep(0.3)  # its heartbeat expires: interval 100 ms x (1 + 1)
    r = t.services.clean(retain=1, dry_run=False)
    assert r.instant.id == pending.id and r.instant.state == "completed"
    assert r.stats["files_missing"] == 1 and not expected & data_files_on_disk(t)
    assert table_rows(t.to_arrow(), COLUMNS) == model.sorted()
    check_files_on_disk(t)


def test_cli_cleans_only_with_execute(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow", **{"clean.retain": 1})
    history(t, TableModel())
    disk = data_files_on_disk(t)
    runner = CliRunner()
    res = runner.invoke(cli, ["service", "run", t.path, "cleaning"])
    assert res.exit_code == 0, res.output
    assert "--execute" in res.output and data_files_on_disk(t) == disk
    res = runner.invoke(cli, ["service", "run", t.path, "cleaning", "--json"])
    out = json.loads(res.stdout)
    assert out["dry_run"] is True and out["results"][0]["plan"]["files"]
    res = runner.invoke(cli, ["service", "run", t.path, "cleaning", "--execute", "--json"])
    assert res.exit_code == 0, res.output
    [result] = json.loads(res.stdout)["results"]
    assert result["instant"]["action"] == "clean" and result["stats"]["files_deleted"] > 0
    assert data_files_on_disk(t) == disk - set(result["stats"]["deleted"])


def test_each_policy_has_its_own_default_retain_unless_the_table_sets_one(tmp_path: Path) -> None:
    from lakeline.services.cleaning import resolve_retain

    t = make_table(tmp_path / "a", table_type="cow")
    assert [
        resolve_retain(t, p, None) for p in ("keep_latest_commits", "keep_latest_file_versions", "keep_latest_hours")
    ] == [10, 3, 24]
    assert resolve_retain(t, "keep_latest_file_versions", 5) == 5
    u = make_table(tmp_path / "b", table_type="cow", **{"clean.retain": 2})
    history(u, TableModel())
    r = u.services.clean(policy="keep_latest_file_versions", dry_run=True)
    assert r.plan["retain"] == 2 and r.stats["files_to_delete"] > 0
