"""Clustering against concurrent writers (docs/concurrency.md section 2): a write into an
input group while a clustering runs aborts it, inserts landing meanwhile are kept, writers
racing a completed clustering follow the conflict rules, and groups in a pending compaction
are not clustered (split out of ``test_clustering.py``, whose table and helpers it uses)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from lakeline.table import Table
from lakeline.timeline.commit_metadata import CommitMetadata
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.markers import list_markers

from tests.children.table_workers import check_files_on_disk
from tests.services.test_clustering import make_table, model_for, small_files
from tests.services.test_compaction import check, keys, row  # noqa: F401 (fixtures)
from tests.table.model import DAYS, TableModel, to_arrow

pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


@pytest.mark.parametrize("kind, op", [("cow", "upsert"), ("mor", "upsert"), ("mor", "overwrite")])
def test_a_write_into_an_input_group_while_it_runs_aborts_it(tmp_path: Path, kind: str, op: str) -> None:
    t = make_table(tmp_path, kind)
    model = TableModel()
    small_files(t, model, kind, batches=4)
    other = Table.open(t.path)
    late = [row(i, 9, v=-9) for i in (0, 1, 2, 3, 1000)]
    faults.on("clustering.before_complete", lambda: getattr(other, op)(to_arrow(late)))
    r = t.services.cluster(sort_by=["id"])
    faults.disarm_all()
    getattr(model, op)(late)
    assert r.aborted and "replaced or wrote" in r.aborted and r.instant.state == "rolled_back"
    assert r.instant.action == "replacecommit"
    check(t, model)  # the upsert is kept, nothing of the clustering is visible
    check_files_on_disk(t)  # its files and markers are gone
    assert list_markers(t.storage, r.instant.id) == []
    again = t.services.cluster(sort_by=["id"])
    assert again.instant.state == "completed"
    check(t, model)


def test_an_upsert_between_schedule_and_execute_aborts_it(tmp_path: Path) -> None:
    t = make_table(tmp_path, "mor")
    model = TableModel()
    small_files(t, model, "mor", batches=3)
    inst = t.services.schedule("clustering", scope="all", sort_by=["id"])
    assert inst is not None and inst.action == "replacecommit" and inst.state == "requested"
    t.delete(keys([5]))
    model.delete([{"id": 5, "day": DAYS[1]}], with_partition=True)
    r = t.services.execute(inst)
    assert r.aborted and r.instant.state == "rolled_back"
    check(t, model)
    check_files_on_disk(t)


@pytest.mark.parametrize("kind", ["append", "mor"])
def test_inserts_landing_while_it_runs_are_kept(tmp_path: Path, kind: str) -> None:
    t = make_table(tmp_path, kind)
    model = model_for(kind)
    small_files(t, model, kind, batches=4)
    other = Table.open(t.path)
    landed: list[Any] = []
    fresh = [row(i, 1) for i in range(10_000, 10_300)]

    def append() -> None:
        landed.append(other.insert(to_arrow(fresh)))

    faults.on("clustering.mid_write", append)
    r = t.services.run("clustering")[0]
    faults.disarm_all()
    model.insert(fresh)
    assert r.aborted is None and r.instant.state == "completed"
    new_groups = CommitMetadata.from_dict(landed[0].instant.metadata).groups_written()
    live = {(s.partition, s.file_group) for s in t.view(t.timeline).latest_slices()}
    assert new_groups and new_groups <= live, "the appended groups were touched"
    check(t, model)
    check_files_on_disk(t)


def _race(tmp_path: Path, kind: str, a: dict[str, Any], retries: int = 5) -> tuple[str, Any]:
    """Writer A (a child) pauses right before completing; a clustering of every group
    completes here; A goes on. Returns A's outcome and the race (tests/table/concurrency/test_conflicts.py)."""
    from tests.table.concurrency.test_conflicts import Race, apply, table_state, tagged

    r = Race(tmp_path, kind, None, {"commit.max-retries": retries})
    a = tagged(a, "A")
    paused = r.pause(a)
    c = r.t.services.cluster(sort_by=["id"])
    assert c.instant.state == "completed"
    res = r.release(paused)
    attempts = r.rolled_back()
    assert all(i.plan.get("operation") == a["op"] for i in attempts), "only A may have been rolled back"
    if res["ok"]:
        outcome = "retried" if attempts else "ok"
        apply(r.model, a)
    else:
        outcome = res["error"]
    assert r.t.timeline.pending() == []
    assert table_state(r.t) == r.model
    check_files_on_disk(r.t)
    return outcome, r


@pytest.mark.parametrize(
    "kind, op, expect",
    [
        ("mor", "upsert", "retried"),
        ("cow", "upsert", "retried"),
        ("mor", "delete", "retried"),
        ("cow", "delete", "retried"),
        ("mor", "insert", "ok"),
        ("cow", "insert", "ok"),
        ("cow", "overwrite", "retried"),
    ],
)
def test_writers_vs_a_completed_clustering(tmp_path: Path, kind: str, op: str, expect: str) -> None:
    """docs/concurrency.md section 2: an upsert/delete/overwrite planned before a
    clustering that replaced its group completed retries (its replay targets the new group); an insert into new
    groups is ok."""
    from tests.table.concurrency.test_conflicts import dele, ins, ovw, ups

    spec = {"upsert": ups(1), "delete": dele(2), "insert": ins(5), "overwrite": ovw(8)}[op]
    outcome, _ = _race(tmp_path, kind, spec)
    assert outcome == expect


def test_writer_vs_clustering_without_retries_is_a_commit_conflict(tmp_path: Path) -> None:
    from tests.table.concurrency.test_conflicts import ups

    outcome, _ = _race(tmp_path, "mor", ups(1), retries=0)
    assert outcome == "CommitConflictError"


def test_groups_in_a_pending_compaction_are_not_clustered(tmp_path: Path) -> None:
    t = make_table(tmp_path, "mor")
    model = TableModel()
    small_files(t, model, "mor", batches=4)
    comp = t.services.schedule("compaction", trigger="all")
    held = {(g["partition"], g["file_group"]) for g in comp.plan["groups"]}
    inst = t.services.schedule("clustering", scope="all", sort_by=["id"])
    assert held and not held & {(g["partition"], g["file_group"]) for g in inst.plan["groups"]}
    assert t.services.schedule("compaction", trigger="all") is None  # and the other way round
    assert t.services.execute(inst).instant.state == "completed"
    assert t.services.execute(comp).instant.state == "completed"
    check(t, model)
