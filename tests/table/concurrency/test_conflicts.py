"""The conflict rules of docs/concurrency.md section 2, cell by cell, with two real writers.

Why: the rules decide when a writer may complete after others completed since its
snapshot; a wrong cell either loses an update silently or fails writes for nothing.
Each cell is driven deterministically: writer A (the row of the table, "this commit")
runs in a child process that pauses at ``commit.before_complete`` (the ``wait`` fault,
after all its files are written); writer B (the column, "concurrent") then commits in
this process; then A is released. The outcome is one of

* ``ok``: A completes on its first attempt (no rolled-back instant);
* ``retried``: A's first attempt conflicts, is rolled back (its files deleted), and the
  replay from a fresh snapshot succeeds;
* ``conflict``: with ``commit.max-retries=0`` the same cell ends in CommitConflictError;
* ``DuplicateKeyError``: the replay of an insert finds its key inserted meanwhile.

Every cell also checks the table against a sequential model (B, then A: A's replay
sees B; an A that completed first-time completed last) and that the files on disk
agree with the timeline. docs/concurrency.md lists the cells and these tests.

Cells against compaction and clustering are in tests/services/test_compaction.py and
test_clustering_conflicts.py; the key check across file groups has its own cases in
tests/table/write/test_key_check.py.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import Table

from tests.children.table_workers import WORKERS_PY, check_files_on_disk, data_instants, run_op
from tests.helpers import finish, start_script, wait_for_files

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("v", pa.string()), pa.field("day", pa.string())])
D1, D2 = "d1", "d2"
SEED = [{"id": i, "v": "seed", "day": D1} for i in (1, 2, 3, 4)] + [
    {"id": i, "v": "seed", "day": D2} for i in (11, 12, 13, 14)
]


# -- ops and a sequential model ------------------------------------------------------------


def ins(*ids: int, v: str = "x", day: str = D1) -> dict[str, Any]:
    return {"op": "insert", "rows": [{"id": i, "v": v, "day": day} for i in ids]}


def ups(*ids: int, v: str = "x", day: str = D1) -> dict[str, Any]:
    return {"op": "upsert", "rows": [{"id": i, "v": v, "day": day} for i in ids]}


def dele(*ids: int) -> dict[str, Any]:
    return {"op": "delete", "keys": [{"id": i} for i in ids]}


def ovw(*ids: int, v: str = "x", day: str = D1) -> dict[str, Any]:
    return {"op": "overwrite", "rows": [{"id": i, "v": v, "day": day} for i in ids]}


def tagged(spec: dict[str, Any], v: str) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    for r in out.get("rows", ()):
        r["v"] = v
    return out


def apply(state: dict[tuple[str, int], str], spec: dict[str, Any]) -> None:
    """The sequential semantics: record identity is (day, id)."""
    if spec["op"] == "insert":
        for r in spec["rows"]:
            assert (r["day"], r["id"]) not in state
            state[(r["day"], r["id"])] = r["v"]
    elif spec["op"] == "upsert":
        for r in spec["rows"]:
            state[(r["day"], r["id"])] = r["v"]
    elif spec["op"] == "delete":
        ids = {k["id"] for k in spec["keys"]}
        for ident in [i for i in state if i[1] in ids]:
            del state[ident]
    elif spec["op"] == "overwrite":
        days = {r["day"] for r in spec["rows"]}
        for ident in [i for i in state if i[0] in days]:
            del state[ident]
        for r in spec["rows"]:
            state[(r["day"], r["id"])] = r["v"]


def table_state(t: Table) -> dict[tuple[str, int], str]:
    rows = t.to_arrow().to_pylist()
    idents = [(r["day"], r["id"]) for r in rows]
    assert len(idents) == len(set(idents)), f"a key appears twice: {sorted(idents)}"
    return {(r["day"], r["id"]): r["v"] for r in rows}


# -- the race ------------------------------------------------------------------------------


@dataclass
class Race:
    """A table with seed rows, and helpers to pause a writer before it completes."""

    tmp: Path
    table_type: str
    timeline: str | None
    properties: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.path = str(self.tmp / "table")
        props = {"write.small-file-limit-bytes": 0, "engine.parallelism": 1, **self.properties}
        Table.create(
            self.path,
            SCHEMA,
            record_key="id",
            partition_by=["day"],
            table_type=self.table_type,
            properties=props,
            timeline=self.timeline,
        )
        self.t = Table.open(self.path, timeline=self.timeline)
        self.t.insert(pa.Table.from_pylist(SEED, schema=SCHEMA))
        self.model = {(r["day"], r["id"]): r["v"] for r in SEED}
        self._n = 0

    def pause(self, spec: dict[str, Any]) -> tuple[Any, Path]:
        """Start ``spec`` in a child that stops right before appending ``completed``."""
        self._n += 1
        fault_dir = self.tmp / f"faults-{self._n}"
        fault_dir.mkdir()
        proc = start_script(
            WORKERS_PY,
            ["op", self.path, self.timeline, spec],
            faults="commit.before_complete=wait",
            env={"LAKELINE_FAULT_DIR": str(fault_dir)},
        )
        try:
            wait_for_files([fault_dir / "commit.before_complete.reached"], timeout=120)
        except AssertionError:
            proc.kill()
            raise AssertionError(f"writer never reached commit.before_complete: {finish(proc)}") from None
        return proc, fault_dir

    @staticmethod
    def release(paused: tuple[Any, Path]) -> dict[str, Any]:
        proc, fault_dir = paused
        (fault_dir / "commit.before_complete.release").write_text("go")
        rc, out, err = finish(proc)
        assert rc == 0, f"writer failed (rc={rc}):\n{err[-3000:]}"
        return json.loads(out.strip().splitlines()[-1])

    def commit_here(self, spec: dict[str, Any]) -> None:
        """Commit ``spec`` in this process (it runs alone, so it never conflicts)."""
        r = run_op(self.t, spec)
        assert r.instant is not None
        apply(self.model, spec)

    def rolled_back(self) -> list[Any]:
        return [i for i in data_instants(self.t.timeline) if i.state == "rolled_back"]


def race(
    tmp: Path,
    table_type: str,
    timeline: str | None,
    a: dict[str, Any],
    b: dict[str, Any],
    retries: int = 5,
    properties: dict[str, Any] | None = None,
) -> tuple[str, Race]:
    """A pauses before completing, B commits, A goes on; returns A's outcome."""
    r = Race(tmp, table_type, timeline, {"commit.max-retries": retries, **(properties or {})})
    a, b = tagged(a, "A"), tagged(b, "B")
    paused = r.pause(a)
    r.commit_here(b)
    res = r.release(paused)
    attempts = r.rolled_back()
    assert all(i.plan["operation"] == a["op"] for i in attempts), "only A may have been rolled back"
    if res["ok"]:
        assert len(attempts) <= 1
        outcome = "retried" if attempts else "ok"
        if res["instant"] is not None:
            inst = r.t.timeline.get(res["instant"])
            assert inst.state == "completed"
            assert r.t.timeline.last_completed().id == inst.id  # A completed last
        apply(r.model, a)  # B then A, whether A retried or not
    else:
        outcome = res["error"]
        assert len(attempts) == 1, f"the failed write's attempt is not rolled back: {res}"
    assert r.t.timeline.pending() == []
    assert table_state(r.t) == r.model
    check_files_on_disk(r.t)
    return outcome, r


# -- the cells -----------------------------------------------------------------------------

# (id, table type, this commit A, concurrent commit B, expected outcome, also on PostgreSQL)
# Seed: ids 1-4 are one file group in d1, ids 11-14 one in d2. Inserts create new groups
# (small-file filling is off, see test_cow_insert_filling_a_small_file_is_a_rewrite).
CELLS = [
    # insert (new groups)
    ("insert-vs-insert-other-key", "mor", ins(5), ins(6), "ok", True),
    ("insert-vs-insert-other-key", "cow", ins(5), ins(6), "ok", False),
    ("insert-vs-insert-same-key", "mor", ins(5), ins(5), "DuplicateKeyError", True),
    ("insert-vs-insert-same-key", "cow", ins(5), ins(5), "DuplicateKeyError", True),
    ("insert-vs-upsert-same-group", "mor", ins(5), ups(1), "ok", False),
    ("insert-vs-upsert-same-group", "cow", ins(5), ups(1), "ok", True),
    ("insert-vs-delete-same-group", "mor", ins(5), dele(1), "ok", False),
    ("insert-vs-delete-same-group", "cow", ins(5), dele(1), "ok", False),
    ("insert-vs-overwrite-same-partition", "mor", ins(5), ovw(7), "ok", False),
    ("insert-vs-overwrite-same-partition", "cow", ins(5), ovw(7), "ok", True),
    ("insert-vs-overwrite-same-new-key", "cow", ins(5), ovw(5), "DuplicateKeyError", False),
    # upsert/delete, mor (log append)
    ("upsert-vs-insert", "mor", ups(1), ins(5), "ok", True),
    ("upsert-new-key-vs-insert-same-key", "mor", ups(5), ins(5), "retried", True),
    ("upsert-vs-upsert-same-key", "mor", ups(1), ups(1), "ok", True),
    ("upsert-vs-upsert-same-group", "mor", ups(1), ups(2), "ok", False),
    ("upsert-vs-delete-same-key", "mor", ups(1), dele(1), "ok", False),
    ("upsert-vs-overwrite-same-group", "mor", ups(1), ovw(1, 7), "retried", True),
    ("delete-vs-insert", "mor", dele(1), ins(5), "ok", False),
    ("delete-vs-insert-same-key", "mor", dele(2, 5), ins(5), "retried", True),
    ("delete-vs-upsert-new-key", "mor", dele(2, 5), ups(5), "retried", False),
    ("delete-vs-upsert-same-key", "mor", dele(1), ups(1), "ok", True),
    ("delete-vs-delete-same-group", "mor", dele(1), dele(2), "ok", False),
    ("delete-vs-overwrite-same-group", "mor", dele(1), ovw(1, 7), "retried", False),
    # upsert/delete, cow (rewrite)
    ("upsert-vs-insert", "cow", ups(1), ins(5), "ok", False),
    ("upsert-vs-upsert-other-group", "cow", ups(1), ups(11, day=D2), "ok", False),
    ("upsert-vs-upsert-same-group", "cow", ups(1), ups(2), "retried", False),
    ("upsert-vs-upsert-same-key", "cow", ups(1), ups(1), "retried", True),
    ("upsert-vs-delete-same-group", "cow", ups(1), dele(2), "retried", False),
    ("upsert-vs-overwrite-same-group", "cow", ups(1), ovw(1, 7), "retried", True),
    ("delete-vs-insert", "cow", dele(1), ins(5), "ok", False),
    ("delete-vs-insert-same-key", "cow", dele(2, 5), ins(5), "retried", True),
    ("delete-vs-upsert-same-group", "cow", dele(1), ups(2), "retried", True),
    ("delete-vs-delete-same-group", "cow", dele(1), dele(2), "retried", False),
    ("delete-vs-overwrite-same-group", "cow", dele(1), ovw(1, 7), "retried", False),
    # overwrite (replace partitions)
    ("overwrite-vs-insert-same-partition", "mor", ovw(8), ins(5), "retried", False),
    ("overwrite-vs-insert-same-partition", "cow", ovw(8), ins(5), "retried", True),
    ("overwrite-vs-upsert-same-group", "mor", ovw(8), ups(1), "retried", True),
    ("overwrite-vs-upsert-same-group", "cow", ovw(8), ups(1), "retried", False),
    ("overwrite-vs-delete-same-group", "mor", ovw(8), dele(2), "retried", False),
    ("overwrite-vs-delete-same-group", "cow", ovw(8), dele(2), "retried", False),
    ("overwrite-vs-overwrite-same-partition", "mor", ovw(8), ovw(9), "retried", False),
    ("overwrite-vs-overwrite-same-partition", "cow", ovw(8), ovw(9), "retried", True),
    ("overwrite-vs-insert-other-partition", "cow", ovw(8), ins(15, day=D2), "ok", False),
    ("overwrite-vs-upsert-other-partition", "mor", ovw(8), ups(11, day=D2), "ok", False),
]


def _cells(stores: bool) -> list[Any]:
    out = []
    for cid, tt, a, b, expect, on_pg in CELLS:
        for store in ("filesystem", "postgresql") if stores else ("filesystem",):
            if store == "postgresql" and not on_pg:
                continue
            marks = [pytest.mark.postgres] if store == "postgresql" else []
            out.append(pytest.param(store, tt, a, b, expect, id=f"{store}-{tt}-{cid}", marks=marks))
    return out


@pytest.mark.parametrize("timeline, table_type, a, b, expect", _cells(True), indirect=["timeline"])
def test_cell(
    tmp_path: Path, timeline: str | None, table_type: str, a: dict[str, Any], b: dict[str, Any], expect: str
) -> None:
    outcome, _ = race(tmp_path, table_type, timeline, a, b)
    assert outcome == expect


RETRY_CELLS = [p for p in _cells(False) if p.values[-1] == "retried"]


@pytest.mark.parametrize("timeline, table_type, a, b, expect", RETRY_CELLS, indirect=["timeline"])
def test_cell_without_retries_is_a_commit_conflict(
    tmp_path: Path, timeline: str | None, table_type: str, a: dict[str, Any], b: dict[str, Any], expect: str
) -> None:
    """The retried cells with ``commit.max-retries=0``: CommitConflictError, the attempt
    rolled back (files gone), the table as B left it."""
    outcome, _ = race(tmp_path, table_type, timeline, a, b, retries=0)
    assert outcome == "CommitConflictError"


def test_cow_insert_filling_a_small_file_is_a_rewrite(tmp_path: Path) -> None:
    """With small-file filling on, a copy-on-write insert rewrites the partition's small
    file: it is then a rewrite, and a concurrent upsert of that group makes it retry."""
    outcome, r = race(
        tmp_path, "cow", None, ins(5), ups(1), properties={"write.small-file-limit-bytes": 100 * 1024 * 1024}
    )
    assert outcome == "retried"
    assert r.rolled_back()[0].plan["operation"] == "insert"


# -- two inserts, several processes ---------------------------------------------------------


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_two_inserts_of_the_same_new_key_across_processes(
    tmp_path: Path, table_type: str, timeline: str | None
) -> None:
    """Both writers are children, both paused after writing their files: the first to
    complete lands, the second conflicts, and its replay finds the key: DuplicateKeyError."""
    r = Race(tmp_path, table_type, timeline)
    first = r.pause(tagged(ins(5, 6), "first"))
    second = r.pause(tagged(ins(6, 7), "second"))
    res1 = r.release(first)
    res2 = r.release(second)
    assert res1["ok"] and res1["instant"] is not None
    assert res2 == {"ok": False, "error": "DuplicateKeyError", "message": res2["message"]}
    assert [i.plan["operation"] for i in r.rolled_back()] == ["insert"]
    apply(r.model, tagged(ins(5, 6), "first"))
    assert table_state(r.t) == r.model
    check_files_on_disk(r.t)


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_two_inserts_of_different_keys_across_processes(tmp_path: Path, table_type: str, timeline: str | None) -> None:
    r = Race(tmp_path, table_type, timeline)
    first = r.pause(tagged(ins(5, 6), "first"))
    second = r.pause(tagged(ins(7, 8, day=D2), "second"))
    assert r.release(second)["ok"] and r.release(first)["ok"]
    assert r.rolled_back() == []
    apply(r.model, tagged(ins(7, 8, day=D2), "second"))
    apply(r.model, tagged(ins(5, 6), "first"))
    assert table_state(r.t) == r.model
    check_files_on_disk(r.t)


# -- a key revived in its old group while it is re-inserted elsewhere (merge-on-read) -------


def test_mor_upsert_reviving_a_key_vs_its_reinsert_retries(tmp_path: Path, timeline: str | None) -> None:
    """A updates key 1 in its group; meanwhile B deletes it and C inserts it again, as a
    new key, in a new group. A's log would bring key 1 back in the old group, next to
    C's copy. The key check must stop A (it retries and updates C's copy)."""
    r = Race(tmp_path, "mor", timeline)
    a = tagged(ups(1), "A")
    paused = r.pause(a)
    r.commit_here(dele(1))
    r.commit_here(tagged(ups(1), "C"))  # a new key again: a new file group
    res = r.release(paused)
    assert res["ok"]
    apply(r.model, a)
    assert table_state(r.t) == r.model  # key 1 once, with A's value
    assert [i.plan["operation"] for i in r.rolled_back()] == ["upsert"]
    check_files_on_disk(r.t)


def test_mor_reinsert_vs_upsert_reviving_the_key_retries(tmp_path: Path, timeline: str | None) -> None:
    """The same race the other way round: X (update of key 1 planned before the delete)
    completes first, reviving the key in its old group; Y (planned after the delete, so
    inserting key 1 as new) completes last and must retry, then updates X's copy."""
    r = Race(tmp_path, "mor", timeline)
    x = r.pause(tagged(ups(1), "X"))
    r.commit_here(dele(1))
    y = r.pause(tagged(ups(1), "Y"))
    assert r.release(x)["ok"]
    assert r.release(y)["ok"]
    apply(r.model, tagged(ups(1), "X"))
    apply(r.model, tagged(ups(1), "Y"))
    assert table_state(r.t) == r.model  # key 1 once, with Y's value
    assert [i.plan["operation"] for i in r.rolled_back()] == ["upsert"]
    check_files_on_disk(r.t)


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_delete_beside_a_concurrent_reinsert_retries(tmp_path: Path, table_type: str, timeline: str | None) -> None:
    """Issue 11, item 1 (the lost delete): D deletes key 1 from a snapshot before A
    deleted it; meanwhile B, seeing it gone, inserts it anew in a new group; D completes
    last. In completion order (A, B, D) key 1 is gone, so D must not complete on its
    first attempt: its key check finds B's re-insert of a key it deletes, it retries,
    and the replay deletes B's copy. (Before the fix D completed and key 1 stayed.)"""
    r = Race(tmp_path, table_type, timeline)
    d = r.pause(dele(1))
    r.commit_here(dele(1))
    r.commit_here(tagged(ups(1), "B"))  # a new key again: a new file group
    res = r.release(d)
    assert res["ok"]
    apply(r.model, dele(1))
    assert table_state(r.t) == r.model  # key 1 gone, as in completion order
    assert [i.plan["operation"] for i in r.rolled_back()] == ["delete"]
    assert r.t.timeline.last_completed().id == res["instant"]
    check_files_on_disk(r.t)
