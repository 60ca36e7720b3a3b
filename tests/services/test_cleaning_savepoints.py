"""Savepoints and retention against the cleaner (issue 6, point 5): a savepoint keeps its
snapshot's files until released, even one made after the clean was planned; the CLI makes
and lists savepoints; a read outside retention is refused by rule, and a savepoint lifts
that (split out of ``test_cleaning.py``, whose table and helpers it uses)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table
from lakeline.timeline.errors import InstantNotFoundError, InvalidBookmarkError, SnapshotExpiredError

from tests.children.table_workers import data_files_on_disk
from tests.services.test_cleaning import COLUMNS, data_ids, history, make_table, reads, snapshot_files
from tests.services.test_compaction import row
from tests.table.model import TableModel, table_rows, to_arrow

pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def test_savepoint_keeps_its_snapshot_until_released(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow")
    history(t, TableModel())
    ids = data_ids(t)
    old = ids[1]
    rows = table_rows(t.to_arrow(as_of=old), COLUMNS)
    sp = t.services.savepoint(old)
    assert sp.action == "savepoint" and sp.state == "completed"
    assert [(s.id, s.instant) for s in t.services.savepoints()] == [(sp.id, old)]
    r = t.services.clean(retain=1, dry_run=False)
    assert r.stats["files_deleted"] > 0
    assert snapshot_files(t, old) <= data_files_on_disk(t)
    assert table_rows(t.to_arrow(as_of=old), COLUMNS) == rows
    with pytest.raises(SnapshotExpiredError):
        t.to_arrow(as_of=ids[0])
    with pytest.raises(SnapshotExpiredError):
        t.services.savepoint(ids[0])  # already cleaned: nothing to pin
    assert [s.id for s in t.services.savepoints()] == [sp.id]
    t.services.release_savepoint(sp.id)
    assert t.services.savepoints() == []
    with pytest.raises(InstantNotFoundError):
        t.services.release_savepoint(sp.id)
    assert t.services.clean(retain=1, dry_run=False).stats["files_deleted"] > 0
    with pytest.raises(SnapshotExpiredError):
        t.to_arrow(as_of=old)
    with pytest.raises(InstantNotFoundError):
        t.services.savepoint(10_000)


def test_a_savepoint_made_after_the_plan_is_respected(tmp_path: Path, timeline: str | None) -> None:
    t = make_table(tmp_path, timeline, table_type="cow")
    history(t, TableModel())
    old = data_ids(t)[1]
    rows = table_rows(t.to_arrow(as_of=old), COLUMNS)
    plan = t.services.schedule("cleaning", retain=1)
    planned = {p for ps in plan.plan["files"].values() for p in ps}
    assert snapshot_files(t, old) & planned
    Table.open(t.path, timeline=timeline).services.savepoint(old)
    r = t.services.execute(plan)
    assert r.instant.state == "completed" and r.stats["files_skipped"] == len(snapshot_files(t, old) & planned)
    assert table_rows(t.to_arrow(as_of=old), COLUMNS) == rows


def test_cli_savepoints(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow", **{"clean.retain": 1})
    history(t, TableModel())
    old = data_ids(t)[1]
    runner = CliRunner()
    res = runner.invoke(cli, ["savepoint", "create", t.path, str(old), "--json"])
    assert res.exit_code == 0, res.output
    sp = json.loads(res.stdout)
    assert sp["action"] == "savepoint" and sp["plan"]["instant"] == old
    listed = json.loads(runner.invoke(cli, ["savepoint", "list", t.path, "--json"]).stdout)
    assert [(s["id"], s["instant"]) for s in listed] == [(sp["id"], old)]
    res = runner.invoke(cli, ["service", "run", t.path, "cleaning", "--execute", "--json"])
    assert json.loads(res.stdout)["results"][0]["stats"]["files_deleted"] > 0
    assert t.to_arrow(as_of=old).num_rows > 0
    res = runner.invoke(cli, ["savepoint", "release", t.path, str(sp["id"])])
    assert res.exit_code == 0 and "released" in res.output
    assert "no active savepoints" in runner.invoke(cli, ["savepoint", "list", t.path]).output
    assert runner.invoke(cli, ["savepoint", "release", t.path, str(sp["id"])]).exit_code == 2


def test_reads_outside_retention_are_refused_by_rule_and_savepoints_lift_it(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow", **{"write.small-file-limit-bytes": 0})
    t.insert(to_arrow([row(i, 1) for i in range(10)]))
    for n in range(3):  # new keys only, each in its own file
        t.insert(to_arrow([row(100 + 10 * n + i, 1) for i in range(5)]))
    inserts = data_ids(t)
    pinned = t.services.savepoint(inserts[1])
    for n in range(3):  # three versions of the first file
        t.upsert(to_arrow([row(0, 2 + n)]))
    ids = data_ids(t)
    before = reads(t, ids)
    r = t.services.clean(retain=2, dry_run=False)
    assert r.instant is not None and r.stats["files_deleted"] == 1  # the first upsert's version
    retain = r.stats["retain_seq"]
    refused = 0
    for i in ids:
        if t.timeline.get(i).completed_seq >= retain or i == inserts[1]:
            assert table_rows(t.to_arrow(as_of=i), COLUMNS) == before[i]
            continue
        # Refused even where every file survived (the inserts after the pinned one).
        with pytest.raises(SnapshotExpiredError):
            t.to_arrow(as_of=i)
        with pytest.raises(SnapshotExpiredError):
            t.changes(i)
        refused += 1
    assert refused == len(ids) - 3
    # inserts[2]'s own file is still there: the refusal above was the rule, not a loss.
    assert {f["path"] for f in t.timeline.get(inserts[2]).metadata["files"]} <= data_files_on_disk(t)
    t.services.release_savepoint(pinned.id)
    with pytest.raises(SnapshotExpiredError):
        t.to_arrow(as_of=inserts[1])


def feed(t: Table, start: int) -> list[tuple[Any, ...]]:
    """The change feed from ``start``, images and all, as sorted tuples."""
    rows = t.changes(start, images=True)
    return sorted(tuple(map(str, r.values())) for r in rows.to_pylist())


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_bookmark_keeps_every_snapshot_from_it_readable(tmp_path: Path, table_type: str) -> None:
    """A consumer's bookmark pins every snapshot from its instant on, so its change feed
    (which reads the snapshot before and after each instant) survives a clean that keeps
    one version; moving it on releases the old position, and the next clean takes it."""
    t = make_table(tmp_path, table_type=table_type)
    history(t, TableModel())
    ids = data_ids(t)
    k = len(ids) - 4  # mor: the compaction; versions before it go for both table types
    start = ids[k]
    expected_feed = feed(t, start)
    expected_reads = reads(t, ids[k:])
    mark = t.services.bookmark("orders-cdc", start)
    assert mark.state == "completed"
    events = len(t.log.refresh().events)
    assert t.services.bookmark("orders-cdc", start).id == mark.id  # already there: nothing written
    assert len(t.log.refresh().events) == events
    assert {c: s.instant for c, s in t.services.bookmarks().items()} == {"orders-cdc": start}
    assert t.services.clean(retain=1, dry_run=False).stats["files_deleted"] > 0  # older versions go
    assert feed(t, start) == expected_feed
    assert reads(t, ids[k:]) == expected_reads
    with pytest.raises(SnapshotExpiredError):
        t.to_arrow(as_of=ids[0])
    t.services.bookmark("orders-cdc", ids[-1])  # the consumer processed the feed
    assert {c: s.instant for c, s in t.services.bookmarks().items()} == {"orders-cdc": ids[-1]}
    assert [s.instant for s in t.services.savepoints()] == [ids[-1]]  # the old pin is released
    assert t.services.clean(retain=1, dry_run=False).stats["files_deleted"] > 0
    with pytest.raises(SnapshotExpiredError):
        t.changes(start, images=True)
    t.services.release_bookmark("orders-cdc")
    assert t.services.bookmarks() == {}
    with pytest.raises(InstantNotFoundError):
        t.services.release_bookmark("orders-cdc")


def test_a_bookmark_behind_the_cleaner_is_refused_and_bad_names_write_nothing(tmp_path: Path) -> None:
    t = make_table(tmp_path, table_type="cow")
    history(t, TableModel())
    ids = data_ids(t)
    assert t.services.clean(retain=1, dry_run=False).stats["files_deleted"] > 0
    events = len(t.log.refresh().events)
    for bad in ("", "   ", None, 7, "x" * 201):
        with pytest.raises(InvalidBookmarkError):
            t.services.bookmark(bad, ids[-1])  # type: ignore[arg-type]
    assert len(t.log.refresh().events) == events
    with pytest.raises(SnapshotExpiredError):
        t.services.bookmark("late", ids[1])  # snapshots after it lost files already
    assert t.services.bookmarks() == {}
    assert t.services.bookmark("late", ids[-1]).state == "completed"
