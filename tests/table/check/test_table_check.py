"""``t.check()`` (issue 45 item 7): every file the current and the retained snapshots read is
there, of its recorded size, with a footer that reads; the indexes match.

A healthy table (copy-on-write and merge-on-read with logs, partitioned, after a
compaction or rewrites whose retired slices stay readable by time travel) is clean; each
kind of damage to one file (deleted, truncated, footer bytes flipped; base or log; a file
of an older retained snapshot only) is reported naming that file, and several damaged
files are all reported. A file the cleaner rightly deleted is not a problem.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from lakeline.table import Table
from lakeline.table.check import ProblemKind
from lakeline.timeline.view.file_group import FileKind

from tests.cli._data import rows
from tests.table.check._tables import OTHER_DAY, current_file, delete, flip_footer, make, retained_only, truncate

OTHER = OTHER_DAY


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_a_healthy_table_is_clean_and_its_retained_files_are_checked(
    tmp_path: Path, table_type: str, timeline: str | None
) -> None:
    t = make(str(tmp_path / table_type), table_type, timeline)
    t.indexes.create("column_stats")
    report = t.check()
    assert report.ok, [p.line() for p in report.problems]
    current = {f.path for f in t.view(t.timeline).files()}
    # The retired slices are checked too: more files than the current snapshot reads.
    assert report.files_checked > len(current) and report.retained_from == -1
    assert report.indexes is not None and report.indexes["mismatches"] == []
    assert report.to_dict()["ok"] is True


Damage = Callable[[Table, str], None]
CASES: list[tuple[str, str, Damage, set[ProblemKind]]] = [
    ("cow", "base", delete, {ProblemKind.MISSING}),
    ("mor", "base", delete, {ProblemKind.MISSING}),
    ("cow", "base", truncate, {ProblemKind.SIZE_MISMATCH, ProblemKind.UNREADABLE_FOOTER}),
    ("mor", "base", truncate, {ProblemKind.SIZE_MISMATCH, ProblemKind.UNREADABLE_FOOTER}),
    ("cow", "base", flip_footer, {ProblemKind.UNREADABLE_FOOTER}),
    ("mor", "log", flip_footer, {ProblemKind.UNREADABLE_FOOTER}),
    ("mor", "log", delete, {ProblemKind.MISSING}),
    ("mor", "log", truncate, {ProblemKind.SIZE_MISMATCH, ProblemKind.UNREADABLE_FOOTER}),
    ("cow", "retained", delete, {ProblemKind.MISSING}),
    ("mor", "retained", delete, {ProblemKind.MISSING}),
    ("mor", "retained", truncate, {ProblemKind.SIZE_MISMATCH, ProblemKind.UNREADABLE_FOOTER}),
]


def target(t: Table, which: str) -> str:
    if which == "retained":
        return retained_only(t)
    return current_file(t, FileKind.LOG if which == "log" else FileKind.BASE)


@pytest.mark.parametrize("table_type,which,damage,kinds", CASES, ids=[f"{c[0]}-{c[1]}-{c[2].__name__}" for c in CASES])
def test_each_damaged_file_is_named(
    tmp_path: Path, table_type: str, which: str, damage: Damage, kinds: set[ProblemKind]
) -> None:
    t = make(str(tmp_path / table_type), table_type)
    rel = target(t, which)
    damage(t, rel)
    report = t.check(indexes=False)
    assert not report.ok
    assert {p.path for p in report.problems} == {rel}, [p.line() for p in report.problems]
    assert {p.kind for p in report.problems} == kinds
    assert {p.snapshot for p in report.problems} == {"retained" if which == "retained" else "current"}
    assert all(rel in p.line() for p in report.problems)


def test_every_problem_is_reported_not_only_the_first(tmp_path: Path) -> None:
    t = make(str(tmp_path / "mor"), "mor")
    damaged = {
        current_file(t, FileKind.BASE): delete,
        current_file(t, FileKind.LOG, OTHER): truncate,
        retained_only(t, OTHER): flip_footer,
    }
    for rel, damage in damaged.items():
        damage(t, rel)
    seen: list[tuple[int, int]] = []
    report = t.check(indexes=False, progress=lambda done, total: seen.append((done, total)))
    assert {p.path for p in report.problems} == set(damaged)
    assert seen[-1] == (report.files_checked, report.files_checked)


def test_an_index_that_cannot_be_validated_is_a_problem(tmp_path: Path) -> None:
    """A truncated base stops ``t.indexes.validate()`` (it recomputes from the data):
    the check reports that beside the file, and keeps the file's own problems."""
    t = make(str(tmp_path / "cow"), "cow")
    t.indexes.create("column_stats")
    rel = current_file(t, FileKind.BASE)
    truncate(t, rel)
    report = t.check()
    kinds = {p.kind for p in report.problems}
    assert {ProblemKind.SIZE_MISMATCH, ProblemKind.UNREADABLE_FOOTER, ProblemKind.INDEX_UNVERIFIABLE} <= kinds
    (index,) = [p for p in report.problems if p.kind == ProblemKind.INDEX_UNVERIFIABLE]
    assert rel in index.detail and index.snapshot == "index"


def test_files_the_cleaner_deleted_are_not_problems_and_a_savepoint_keeps_its_files(tmp_path: Path) -> None:
    """A clean that keeps only the newest snapshot deletes the retired slices: the check
    is clean after it (it checks what time travel can still read, not every file ever
    written), except for the snapshot a savepoint pins, whose files it still checks."""
    props = {"clean.orphan-age-ms": 0}
    t = Table.create(tmp_path / "t", rows([1]).schema, record_key="id", ordering_field="ts", properties=props)
    t.upsert(rows([1, 2, 3]))
    pinned = t.timeline.last_completed()
    assert pinned is not None
    pinned_files = {f.path for f in t.view(t.timeline).files()}
    t.upsert(rows([1, 2], ts=2))
    middle = {f.path for f in t.view(t.timeline).files()}
    t.services.savepoint(pinned.id)
    t.upsert(rows([1, 2], ts=3))
    everything = t.check(indexes=False)
    assert everything.retained_from == -1 and everything.ok
    assert t.services.clean(policy="keep_latest_commits", retain=1, dry_run=False).instant is not None
    gone = middle - pinned_files - {f.path for f in t.view(t.timeline).files()}
    assert gone and not any(t.storage.exists(t.storage.path(p)) for p in gone)  # the cleaner deleted them
    after = t.check(indexes=False)
    assert after.ok, [p.line() for p in after.problems]
    assert after.retained_from >= 0 and after.savepoints and after.files_checked < everything.files_checked
    (old,) = pinned_files
    delete(t, old)
    report = t.check(indexes=False)
    assert [(p.path, p.kind, p.snapshot) for p in report.problems] == [(old, ProblemKind.MISSING, "retained")]
