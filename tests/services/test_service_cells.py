"""The conflict-table cells against table services that had no test of their own: every
write against a concurrent clean and a concurrent index build, and compaction and
clustering (execute) against a concurrent insert, clean and index build.

Why: docs/concurrency.md section 2 says these cells are "ok": a clean or an index build never
makes a writer (or a compaction) fail, and neither makes it lose rows. Each case pauses "this
commit" right before its ``completed`` event with an in-process fault hook, runs the
concurrent service to completion from another handle, lets the commit go on, and then
checks: it completed on its first attempt (nothing rolled back), the table equals the
writes applied in completion order, no key is twice, and every ready index validates.
docs/concurrency.md links each cell here.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("day", pa.string())])


pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def _rows(ids: list[int], v: str, day: str = "d1") -> pa.Table:
    return pa.table({"id": ids, "v": [v] * len(ids), "day": [day] * len(ids)}, schema=SCHEMA)


def state(t: Table) -> dict[int, str]:
    rows = t.to_arrow().to_pylist()
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), f"a key is in the table twice: {sorted(ids)}"
    return {r["id"]: r["v"] for r in rows}


def seeded(tmp_path: Path, table_type: str) -> tuple[str, dict[int, str]]:
    """Keys 1-4 in one group of d1, updated (and, merge-on-read, compacted) so a clean has
    old versions to remove."""
    path = str(tmp_path / "t")
    Table.create(
        path,
        SCHEMA,
        record_key="id",
        partition_by=["day"],
        table_type=table_type,
        properties={"write.small-file-limit-bytes": 0, "clean.orphan-age-ms": 0, "compaction.delta-commits": 1},
    )
    t = Table.open(path)
    t.insert(_rows([1, 2, 3, 4], "seed"))
    t.upsert(_rows([1, 2], "u1"))
    t.upsert(_rows([1, 3], "u2"))
    if table_type == "mor":
        assert t.services.compact().instant is not None  # old slices for a clean to remove
        t.upsert(_rows([4], "seed"))  # and a log for a compaction to fold
    return path, {1: "u2", 2: "u1", 3: "u2", 4: "seed"}


# -- the concurrent services ---------------------------------------------------------------


def clean(path: str, must_delete: bool = True) -> None:
    r = Table.open(path).services.clean(policy="keep_latest_commits", retain=1, dry_run=False)
    if must_delete or r.instant is not None:
        assert r.instant is not None and r.instant.state == "completed", r


def clean_if_due(path: str) -> None:
    """A clean beside a pending compaction or clustering: its retain point may not pass
    their instant, so it may find nothing to remove; it must not break them either way."""
    clean(path, must_delete=False)


def build_index(path: str) -> None:
    t = Table.open(path)
    t.indexes.create("bloom_filters", columns=["id"], wait=True)
    assert [i.state for i in t.indexes.list() if i.name == "bloom_filters"] == ["ready"]


SERVICES: dict[str, Callable[[str], None]] = {"clean": clean, "indexing": build_index}
_ALL = {**SERVICES, "compaction": lambda path: compact(path)}


# -- writes against clean and indexing -------------------------------------------------------

#: (id, table type, the write, how it changes the expected rows)
WRITES: list[tuple[str, str, Callable[[Table], Any], Callable[[dict[int, str]], None]]] = [
    ("insert", "mor", lambda t: t.insert(_rows([9], "A")), lambda m: m.update({9: "A"})),
    ("insert", "cow", lambda t: t.insert(_rows([9], "A")), lambda m: m.update({9: "A"})),
    ("upsert", "mor", lambda t: t.upsert(_rows([2, 9], "A")), lambda m: m.update({2: "A", 9: "A"})),
    ("delete", "mor", lambda t: t.delete(pa.table({"id": [3]})), lambda m: m.pop(3)),
    ("upsert", "cow", lambda t: t.upsert(_rows([2, 9], "A")), lambda m: m.update({2: "A", 9: "A"})),
    ("delete", "cow", lambda t: t.delete(pa.table({"id": [3]})), lambda m: m.pop(3)),
    ("overwrite", "mor", lambda t: t.overwrite(_rows([7], "A")), lambda m: (m.clear(), m.update({7: "A"}))),
    ("overwrite", "cow", lambda t: t.overwrite(_rows([7], "A")), lambda m: (m.clear(), m.update({7: "A"}))),
]


def compact(path: str) -> None:
    r = Table.open(path).services.compact()
    assert r.instant is not None and r.instant.state == "completed", r


@pytest.mark.parametrize(
    "op, table_type, write, effect", [pytest.param(*w, id=f"{w[1]}-{w[0]}") for w in WRITES if w[1] == "mor"]
)
def test_mor_write_vs_concurrent_compaction_of_its_group_is_ok(
    tmp_path: Path, op: str, table_type: str, write: Callable[[Table], Any], effect: Callable[[dict[int, str]], None]
) -> None:
    """The "compaction same group" column: an insert (new groups), a log append (it
    joins the new slice) and an overwrite (it retires the compacted group too) all land."""
    write_beside(tmp_path, "compaction", table_type, write, effect)


@pytest.mark.parametrize("service", list(SERVICES))
@pytest.mark.parametrize("op, table_type, write, effect", [pytest.param(*w, id=f"{w[1]}-{w[0]}") for w in WRITES])
def test_write_vs_concurrent_service_is_ok(
    tmp_path: Path,
    service: str,
    op: str,
    table_type: str,
    write: Callable[[Table], Any],
    effect: Callable[[dict[int, str]], None],
) -> None:
    write_beside(tmp_path, service, table_type, write, effect)


def write_beside(
    tmp_path: Path,
    service: str,
    table_type: str,
    write: Callable[[Table], Any],
    effect: Callable[[dict[int, str]], None],
) -> None:
    """``write`` pauses before completing while ``service`` runs to completion; then it
    must complete on its first attempt, last, with the rows of completion order."""
    path, model = seeded(tmp_path, table_type)

    def meanwhile() -> None:
        faults.disarm_all()
        _ALL[service](path)

    faults.on("commit.before_complete", meanwhile)
    r = write(Table.open(path))
    assert not faults._armed, "the concurrent service never ran"
    t = Table.open(path)
    assert r.instant is not None and t.timeline.last_completed().id == r.instant.id  # it completed last
    assert [i for i in t.timeline.instants() if i.state == "rolled_back"] == []  # on its first attempt
    effect(model)
    assert state(t) == model
    assert t.indexes.validate()["mismatches"] == []


# -- compaction and clustering (execute) against insert, clean and indexing ------------------


def _insert(path: str) -> None:
    Table.open(path).insert(_rows([9], "new"))


CONCURRENT: dict[str, Callable[[str], None]] = {"insert": _insert, "clean": clean_if_due, "indexing": build_index}


@pytest.mark.parametrize("concurrent", list(CONCURRENT))
@pytest.mark.parametrize("service", ["compaction", "clustering"])
def test_service_execute_vs_concurrent_insert_clean_or_indexing_is_ok(
    tmp_path: Path, service: str, concurrent: str
) -> None:
    path, model = seeded(tmp_path, "mor")

    def meanwhile() -> None:
        faults.disarm_all()
        CONCURRENT[concurrent](path)

    faults.on(f"{service}.before_complete", meanwhile)
    t = Table.open(path)
    r = t.services.compact() if service == "compaction" else t.services.cluster(sort_by=["id"])
    assert not faults._armed, f"{service} never reached its completion"
    assert r.aborted is None and r.instant is not None and r.instant.state == "completed", r
    if concurrent == "insert":
        model[9] = "new"
    t = Table.open(path)
    assert state(t) == model
    assert t.indexes.validate()["mismatches"] == []
    if service == "compaction":  # the groups it compacted have no logs left
        slices = t.view(t.timeline).latest_slices("day=d1")
        compacted = {g["file_group"] for g in r.instant.plan["groups"]}
        assert compacted and all(not s.logs for s in slices if s.file_group in compacted)


def test_a_delete_where_matching_nothing_new_is_ok_beside_a_clean(tmp_path: Path) -> None:
    """delete_where reads concurrent rows for its predicate; a clean writes none."""
    path, model = seeded(tmp_path, "mor")
    faults.on("commit.before_complete", lambda: (faults.disarm_all(), clean(path)))
    Table.open(path).delete_where(pc.field("v") == "u2")
    t = Table.open(path)
    assert [i for i in t.timeline.instants() if i.state == "rolled_back"] == []
    assert state(t) == {2: "u1", 4: "seed"}
