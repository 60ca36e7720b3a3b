"""The key check across file groups, and tagging that never misses a live key.

Why: the conflict rules per file group cannot see a key that two commits touch in two
different groups; only the key check at completion can (table/write/key_check.py). Each case
here is a history that, before issue 11's fixes, left the table different from the
committed writes applied in completion order, or held a key twice. The concurrent commit
is interleaved at an exact step of the protocol with an in-process fault hook
(``faults.on``), so every case is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def rows(t: Table) -> dict[int, str]:
    out = t.to_arrow().to_pylist()
    ids = [r["id"] for r in out]
    assert len(ids) == len(set(ids)), f"a key is in the table twice: {sorted(ids)}"
    return {r["id"]: r["v"] for r in out}


def make(tmp_path: Path, table_type: str, ids: list[int], **props: object) -> str:
    path = str(tmp_path / "t")
    Table.create(
        path, SCHEMA, record_key="id", table_type=table_type, properties={"write.small-file-limit-bytes": 0, **props}
    )
    Table.open(path).insert(pa.table({"id": ids, "v": ["seed"] * len(ids)}, schema=SCHEMA))
    return path


def meanwhile(point: str, fn: Callable[[], None]) -> None:
    """Run ``fn`` (other handles' commits) once, when this process reaches ``point``."""

    def run() -> None:
        faults.disarm_all()  # fn's own writes pass the same points
        fn()

    faults.on(point, run)


def rolled_back_ops(t: Table) -> list[str]:
    return [i.plan.get("operation", "") for i in t.timeline.instants() if i.state == "rolled_back"]


# -- item 2: a log revives a key outside the compacted base's range ------------------------


def test_upsert_finds_a_key_a_log_revived_outside_the_compacted_base_range(tmp_path: Path) -> None:
    """U updates key 4 (the group's largest) and pauses before completing; meanwhile key
    4 is deleted and a compaction writes the group's new base without it (range 1-3). U
    completes: its log joins the new slice and revives key 4 there. A later upsert of key
    4 must find it in that group (the slice's range includes its logs); before the fix it
    pruned the group by the base range, inserted key 4 into a new group, and the table
    held key 4 twice (a later delete then removed one copy only)."""
    path = make(tmp_path, "mor", [1, 2, 3, 4])
    u, other = Table.open(path), Table.open(path)

    def delete_and_compact() -> None:
        other.delete(pa.table({"id": [4]}))
        assert other.services.compact().instant is not None

    meanwhile("commit.before_complete", delete_and_compact)
    u.upsert(pa.table({"id": [4], "v": ["U"]}, schema=SCHEMA))
    t = Table.open(path)
    assert rows(t) == {1: "seed", 2: "seed", 3: "seed", 4: "U"}  # completion order: delete, U
    groups_before = {s.file_group for s in t.view(t.timeline).latest_slices("")}
    t.upsert(pa.table({"id": [4], "v": ["later"]}, schema=SCHEMA))
    assert rows(t) == {1: "seed", 2: "seed", 3: "seed", 4: "later"}
    assert {s.file_group for s in t.view(t.timeline).latest_slices("")} == groups_before  # no new group
    with pytest.raises(Exception, match="already holds"):
        t.insert(pa.table({"id": [4], "v": ["dup"]}, schema=SCHEMA))  # the insert key check sees it too
    t.delete(pa.table({"id": [4]}))
    assert rows(t) == {1: "seed", 2: "seed", 3: "seed"}


# -- item 1 and its relatives: deletes applied last ------------------------------------------


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_delete_of_a_key_its_snapshot_lacked_retries_after_a_concurrent_insert(tmp_path: Path, table_type: str) -> None:
    """D deletes keys 1 and 9; 9 is not in its snapshot. Meanwhile B inserts 9. D
    completes last, so 9 must be gone: D's key check finds B's insert of a key it names,
    and the replay deletes it."""
    path = make(tmp_path, table_type, [1, 2])
    d, b = Table.open(path), Table.open(path)
    meanwhile("commit.before_complete", lambda: b.insert(pa.table({"id": [9], "v": ["B"]}, schema=SCHEMA)))
    r = d.delete(pa.table({"id": [1, 9]}))
    t = Table.open(path)
    assert rows(t) == {2: "seed"}
    assert t.timeline.last_completed().id == r.instant.id
    assert rolled_back_ops(t) == ["delete"]


def test_mor_delete_and_upsert_of_one_key_in_one_group_merge_by_completion(tmp_path: Path) -> None:
    """The exception to the delete rule: a concurrent upsert of the key into the very
    group our delete record goes to needs no retry, since logs of one group merge in
    completion order (upsert, then our delete: the key is gone)."""
    path = make(tmp_path, "mor", [1, 2])
    d, b = Table.open(path), Table.open(path)
    meanwhile("commit.before_complete", lambda: b.upsert(pa.table({"id": [1], "v": ["B"]}, schema=SCHEMA)))
    d.delete(pa.table({"id": [1]}))
    t = Table.open(path)
    assert rows(t) == {2: "seed"}
    assert rolled_back_ops(t) == []


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_delete_where_retries_when_a_concurrent_insert_matches_its_predicate(tmp_path: Path, table_type: str) -> None:
    """delete_where(v == "x") completes after B inserted a row with v == "x": applied
    last, the delete removes B's row too."""
    path = make(tmp_path, table_type, [1, 2])
    Table.open(path).upsert(pa.table({"id": [1], "v": ["x"]}, schema=SCHEMA))
    d, b = Table.open(path), Table.open(path)
    meanwhile("commit.before_complete", lambda: b.insert(pa.table({"id": [7], "v": ["x"]}, schema=SCHEMA)))
    d.delete_where(pc.field("v") == "x")
    t = Table.open(path)
    assert rows(t) == {2: "seed"}
    assert rolled_back_ops(t) == ["delete_where"]


def test_mor_delete_where_retries_when_a_concurrent_update_no_longer_matches(tmp_path: Path) -> None:
    """delete_where(v == "x") saw key 1 matching; meanwhile B updates key 1 to "y". In
    completion order (B, then the delete) key 1 no longer matches and stays: the delete
    retries instead of deleting B's row through its log."""
    path = make(tmp_path, "mor", [1, 2])
    Table.open(path).upsert(pa.table({"id": [1], "v": ["x"]}, schema=SCHEMA))
    d, b = Table.open(path), Table.open(path)
    meanwhile("commit.before_complete", lambda: b.upsert(pa.table({"id": [1], "v": ["y"]}, schema=SCHEMA)))
    r = d.delete_where(pc.field("v") == "x")
    t = Table.open(path)
    assert rows(t) == {1: "y", 2: "seed"}
    assert r.instant is None  # the replay found nothing to delete
    assert rolled_back_ops(t) == ["delete_where"]


def test_mor_delete_where_retries_when_a_concurrent_update_starts_to_match(tmp_path: Path) -> None:
    """The other way: B updates key 2 to "x" after the delete's snapshot; applied last,
    delete_where(v == "x") removes it."""
    path = make(tmp_path, "mor", [1, 2])
    Table.open(path).upsert(pa.table({"id": [1], "v": ["x"]}, schema=SCHEMA))
    d, b = Table.open(path), Table.open(path)
    meanwhile("commit.before_complete", lambda: b.upsert(pa.table({"id": [2], "v": ["x"]}, schema=SCHEMA)))
    d.delete_where(pc.field("v") == "x")
    assert rows(Table.open(path)) == {}


def test_append_only_delete_where_retries_when_a_concurrent_append_matches(tmp_path: Path) -> None:
    path = str(tmp_path / "t")
    Table.create(path, SCHEMA)
    Table.open(path).insert(pa.table({"id": [1, 2], "v": ["x", "y"]}, schema=SCHEMA))
    d, b = Table.open(path), Table.open(path)
    meanwhile("commit.before_complete", lambda: b.insert(pa.table({"id": [3], "v": ["x"]}, schema=SCHEMA)))
    d.delete_where(pc.field("v") == "x")
    t = Table.open(path)
    assert t.to_arrow().to_pylist() == [{"id": 2, "v": "y"}]
    assert rolled_back_ops(t) == ["delete_where"]


def test_delete_where_ignores_a_concurrent_write_it_does_not_meet(tmp_path: Path) -> None:
    """No retry for nothing: a concurrent insert whose rows do not match the predicate."""
    path = make(tmp_path, "mor", [1, 2])
    Table.open(path).upsert(pa.table({"id": [1], "v": ["x"]}, schema=SCHEMA))
    d, b = Table.open(path), Table.open(path)
    meanwhile("commit.before_complete", lambda: b.insert(pa.table({"id": [8], "v": ["z"]}, schema=SCHEMA)))
    d.delete_where(pc.field("v") == "x")
    t = Table.open(path)
    assert rows(t) == {2: "seed", 8: "z"}
    assert rolled_back_ops(t) == []


# -- item 8, the key check's half: a concurrent file cleaned before it is read -------------


def test_key_check_meeting_a_cleaned_file_retries(tmp_path: Path) -> None:
    """The key check reads files of concurrent commits; a clean may remove one first (it
    was replaced by a later commit). That is a conflict (the replay sees the table as it
    is), never an untyped FileNotFoundError."""
    path = make(tmp_path, "mor", [1, 2])
    d, b = Table.open(path), Table.open(path)

    def insert_then_lose_the_file() -> None:
        r = b.insert(pa.table({"id": [9], "v": ["B"]}, schema=SCHEMA))
        f = r.instant.metadata["files"][0]["path"]
        b.storage.delete(b.storage.path(f))  # as a clean of a replaced file would
        b.overwrite(pa.table({"id": [1, 2, 9], "v": ["o", "o", "o"]}, schema=SCHEMA))

    meanwhile("commit.before_complete", insert_then_lose_the_file)
    d.delete(pa.table({"id": [1, 9]}))
    t = Table.open(path)
    assert rows(t) == {2: "o"}
    assert "delete" in rolled_back_ops(t)


# -- item 7, the write path's half: clean-up after the commit never fails the write ---------


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_a_failing_clean_up_after_completed_does_not_fail_the_write(tmp_path: Path, table_type: str) -> None:
    """The index upkeep and the removal of stale index entries follow the ``completed``
    event. Their failure used to surface as a failed write, and a caller retrying an
    insert would then write its rows twice."""
    path = make(tmp_path, table_type, [1, 2])
    t = Table.open(path)
    faults.arm("commit.cleanup", "raise")
    r = t.insert(pa.table({"id": [3], "v": ["new"]}, schema=SCHEMA))
    faults.disarm_all()
    assert r.instant is not None and r.instant.state == "completed"
    assert rows(Table.open(path)) == {1: "seed", 2: "seed", 3: "new"}
    Table.open(path).upsert(pa.table({"id": [3], "v": ["again"]}, schema=SCHEMA))  # and the table goes on
    assert rows(Table.open(path))[3] == "again"
