"""A savepoint made while a clean is deleting (issue 11, item 4).

Why: docs/services.md ("Cleaning") says cleaning never deletes a file of a savepoint. Before the
fix the cleaner read the savepoints once and then deleted: a savepoint landing during
the deletes succeeded, the cleaner deleted the files it pinned, and the savepointed
read failed. Now the clean's plan is fixed in its ``requested`` event, the cleaner
reads the savepoints after its claim, and a savepoint that lands after that claim and
pins a planned file is refused (:class:`SavepointConflictError`) by a check on its own
append; whichever event lands first decides. The tests make the savepoint at the
``clean.mid_delete`` fault point, in-process and from another process, and check that
every savepoint that succeeded still reads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.diagnostics.faults import CRASH_EXIT_CODE
from lakeline.timeline.errors import SavepointConflictError, SnapshotExpiredError

from tests.children.service_child import SERVICE_CHILD
from tests.children.table_workers import check_files_on_disk
from tests.helpers import finish, run_script, start_script, wait_for_files
from tests.services.test_cleaning import CLEAN_RETAIN_1, COLUMNS, data_ids, history, make_table, snapshot_files
from tests.table.model import TableModel, table_rows

pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def prepared(tmp_path: Path, timeline: str | None) -> tuple[Table, int, list[Any]]:
    """A table with old versions, an old instant whose files a ``retain=1`` clean
    deletes, and that snapshot's rows."""
    t = make_table(tmp_path, timeline, table_type="cow")
    history(t, TableModel())
    old = data_ids(t)[1]
    planned = set(t.services.clean(retain=1, dry_run=True).stats["files"])
    assert snapshot_files(t, old) & planned, "the clean would delete files of the old snapshot"
    return t, old, table_rows(t.to_arrow(as_of=old), COLUMNS)


def reads_every_savepoint(t: Table, expected: dict[int, list[Any]]) -> None:
    pinned = {s.instant for s in t.services.savepoints()}
    assert pinned == set(expected)
    for instant, rows in expected.items():
        assert table_rows(t.to_arrow(as_of=instant), COLUMNS) == rows


def test_savepoint_during_the_deletes_is_refused(tmp_path: Path, timeline: str | None) -> None:
    t, old, old_rows = prepared(tmp_path, timeline)
    latest = data_ids(t)[-1]
    latest_rows = table_rows(t.to_arrow(as_of=latest), COLUMNS)
    other = Table.open(t.path, timeline=timeline)
    outcome: dict[str, Any] = {}

    def meanwhile() -> None:
        try:
            outcome["old"] = other.services.savepoint(old)
        except SavepointConflictError as e:
            outcome["old"] = e
        outcome["latest"] = other.services.savepoint(latest)  # files no clean touches

    faults.on("clean.mid_delete", meanwhile)
    r = t.services.clean(retain=1, dry_run=False)
    assert r.instant is not None and r.instant.state == "completed" and r.stats["files_deleted"] > 1
    assert isinstance(outcome["old"], SavepointConflictError), f"a savepoint during the deletes: {outcome['old']}"
    assert outcome["latest"].state == "completed"
    reads_every_savepoint(t, {latest: latest_rows})
    with pytest.raises(SnapshotExpiredError):
        t.to_arrow(as_of=old)  # nobody claims it is pinned
    assert old_rows  # it was readable before the clean
    check_files_on_disk(t)


@contextmanager
def clean_held_mid_delete(tmp_path: Path, t: Table, timeline: str | None) -> Iterator[dict[str, Any]]:
    """A ``retain=1`` clean of ``t`` in another process, held at ``clean.mid_delete``
    for the block; the dict it yields holds the clean's stats once the block is left."""
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    proc = start_script(
        SERVICE_CHILD,
        [t.path, timeline, "clean", CLEAN_RETAIN_1],
        faults="clean.mid_delete=wait",
        env={"LAKELINE_FAULT_DIR": str(fault_dir)},
    )
    stats: dict[str, Any] = {}
    try:
        wait_for_files([fault_dir / "clean.mid_delete.reached"])
        yield stats
    finally:
        (fault_dir / "clean.mid_delete.release").write_text("go")
        rc, out, err = finish(proc)
    assert rc == 0, err[-3000:]
    stats.update(json.loads(out))


def test_savepoint_from_another_process_during_the_deletes(tmp_path: Path, timeline: str | None) -> None:
    t, old, old_rows = prepared(tmp_path, timeline)
    with clean_held_mid_delete(tmp_path, t, timeline) as clean:
        with pytest.raises(SavepointConflictError):
            t.services.savepoint(old)
        assert t.services.savepoints() == []
    assert clean["files_deleted"] > 1
    with pytest.raises(SnapshotExpiredError):
        t.services.savepoint(old)  # the clean finished: that snapshot is gone
    check_files_on_disk(t)


def test_a_snapshot_already_pinned_can_be_pinned_again_during_the_deletes(tmp_path: Path) -> None:
    """The refusal is exact: files a savepoint older than the clean's claim pins are
    skipped by the cleaner, so a second savepoint of them is safe and succeeds."""
    t, old, old_rows = prepared(tmp_path, None)
    plan = t.services.schedule("cleaning", retain=1)  # lists files of the old snapshot
    first = t.services.savepoint(old)  # after the plan, before the claim: the cleaner skips them
    made: list[Any] = []
    faults.on("clean.mid_delete", lambda: made.append(Table.open(t.path).services.savepoint(old)))
    r = t.services.execute(plan)
    assert r.stats["files_deleted"] > 0 and r.stats["files_skipped"] > 0
    [second] = made
    t.services.release_savepoint(first.id)
    assert [s.id for s in t.services.savepoints()] == [second.id]
    reads_every_savepoint(t, {old: old_rows})


def test_a_crashed_clean_keeps_refusing_until_it_is_finished(tmp_path: Path, timeline: str | None) -> None:
    """A clean killed mid-delete stays inflight: a savepoint of a snapshot it is deleting
    is refused until the clean is run again (and then that snapshot is gone)."""
    t, old, _ = prepared(tmp_path, timeline)
    latest = data_ids(t)[-1]
    rc, out, err = run_script(
        SERVICE_CHILD, [t.path, timeline, "clean", CLEAN_RETAIN_1], faults="clean.mid_delete=crash"
    )
    assert rc == CRASH_EXIT_CODE, err[-3000:]
    with pytest.raises(SavepointConflictError):
        t.services.savepoint(old)
    kept = t.services.savepoint(latest)
    time.sleep(0.3)  # the dead clean's heartbeat expires
    t.services.clean(retain=1, dry_run=False)
    assert t.timeline.pending() == []
    assert [s.id for s in t.services.savepoints()] == [kept.id]
    with pytest.raises(SnapshotExpiredError):
        t.services.savepoint(old)
    t.to_arrow(as_of=latest)
    check_files_on_disk(t)


def test_a_bookmark_from_another_process_during_the_deletes(tmp_path: Path, timeline: str | None) -> None:
    """A change-feed bookmark pins every snapshot from its instant on, under the same
    rule: refused while a clean claimed before it deletes files of those snapshots (here
    from another process, paused mid-delete); one made after the plan but before the
    claim is honoured, and the feed from it reads."""
    t, old, _ = prepared(tmp_path, timeline)
    latest = data_ids(t)[-1]
    with clean_held_mid_delete(tmp_path, t, timeline) as clean:
        with pytest.raises(SavepointConflictError):
            t.services.bookmark("feed", old)
        assert t.services.bookmarks() == {}
        assert t.services.bookmark("feed", latest).state == "completed"  # nothing it pins is planned
    assert clean["files_deleted"] > 1
    assert {c: s.instant for c, s in t.services.bookmarks().items()} == {"feed": latest}
    t.changes(latest, images=True)
    check_files_on_disk(t)

    t2, old2, _ = prepared(tmp_path / "second", None)
    plan = t2.services.schedule("cleaning", retain=1)  # lists files of snapshots after old2
    feed_before = t2.changes(old2, images=True).sort_by("id")
    t2.services.bookmark("feed", old2)  # after the plan, before the claim: the cleaner skips them
    r = t2.services.execute(plan)
    assert r.stats["files_skipped"] > 0
    assert t2.changes(old2, images=True).sort_by("id").equals(feed_before)
