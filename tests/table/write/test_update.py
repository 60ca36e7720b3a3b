"""``t.update(where=..., set=...)``: against a model, its refusals, and its conflicts.

Why: an update is a read-modify-write. On keyed tables it becomes an upsert of the keys it
read into the file groups that hold them (merge-on-read: a log; copy-on-write: a rewrite),
on append-only tables a rewrite of the groups holding matching rows. Three things can go
wrong, and each has tests here:

* the values: seeded random tables and updates (expressions over other columns, literals,
  nulls, the ordering field set lower than before) run side by side with the plain-Python
  model of :mod:`tests.table.model`, on cow, mor (with compactions between) and
  append-only tables, partitioned or not; the table must equal the model after every step;
* the refusals: unknown columns, record-key and partition columns, values of another type
  or out of range, a bad ``where``, a malformed ``set``: typed errors, and nothing written
  (no instant on the timeline, no file on disk);
* concurrency: an update computes new values from the rows of its snapshot, so a commit
  that changed one of those rows meanwhile must make it retry (else one of the two writes
  is lost). A paused update process vs an upsert of its key, and two processes racing
  updates and upserts of one key, checked against completion order.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import (
    ImmutableColumnError,
    InvalidFilterError,
    InvalidUpdateError,
    SchemaMismatchError,
    Table,
    UnknownColumnError,
    UnsupportedOperationError,
)

from tests.children.update_worker import WORKER_PY
from tests.helpers import finish, start_script, wait_for_files
from tests.table.model import DAYS, SCHEMA, Pred, Row, TableModel, random_pred, table_rows, to_arrow

KEY_SPACE = 30
STEPS = 12
#: Seeds of the model runs; LAKELINE_UPDATE_SEEDS="1,2,3" runs others.
SEEDS = [int(x) for x in os.environ.get("LAKELINE_UPDATE_SEEDS", "3,8").split(",")]

# -- the model of set ------------------------------------------------------------------------

#: One assignment: (what lakeline gets, what the model computes from the old row).
Assign = tuple[dict[str, Any], Callable[[Row], Row]]


def random_assign(rng: random.Random, ordering: bool) -> Assign:
    """A random ``set``: arithmetic over the row, literals, nulls, the ordering field."""
    k = rng.randint(1, 5)
    lit = rng.choice([None, "a", "b", "z"])
    choices: list[Assign] = [
        ({"v": pc.field("v") + k}, lambda r: {"v": None if r["v"] is None else r["v"] + k}),
        ({"s": lit}, lambda r: {"s": lit}),
        ({"v": pc.field("ts") * 2, "s": "x"}, lambda r: {"v": None if r["ts"] is None else r["ts"] * 2, "s": "x"}),
        ({"v": None}, lambda r: {"v": None}),
        (
            {"s": pc.field("s"), "v": pc.field("v") - 1},
            lambda r: {"s": r["s"], "v": None if r["v"] is None else r["v"] - 1},
        ),
    ]
    if ordering or rng.random() < 0.5:
        # Lower than before as often as higher: the set value must hold either way.
        ts = rng.choice([None, -1, 0, 5])
        choices.append(
            ({"ts": ts, "v": pc.field("v") + 1}, lambda r: {"ts": ts, "v": None if r["v"] is None else r["v"] + 1})
        )
    return rng.choice(choices)


def model_update(m: TableModel, pred: Pred | None, change: Callable[[Row], Row]) -> int:
    """Apply an update to the model; returns how many rows matched."""
    n = 0
    if m.keyed:
        for i, r in list(m.keyed_rows.items()):
            if pred is None or pred.matches(r):
                m.keyed_rows[i] = {**r, **change(r)}
                n += 1
    else:
        for j, r in enumerate(m.plain_rows):
            if pred is None or pred.matches(r):
                m.plain_rows[j] = {**r, **change(r)}
                n += 1
    return n


CONFIGS = [
    pytest.param(tt, part, "id", id=f"{tt}-{'part' if part else 'flat'}")
    for tt in ("cow", "mor")
    for part in (True, False)
] + [
    # A two-column key (day is part of it and so never null; unpartitioned).
    pytest.param("cow", False, "id+day", id="cow-composite"),
    pytest.param("mor", False, "id+day", id="mor-composite"),
    pytest.param("cow", True, "", id="append-part"),
    pytest.param("cow", False, "", id="append-flat"),
]


def _row(rng: random.Random, id_: int, partitioned: bool, keyed: bool, serial: int, composite: bool) -> Row:
    return {
        "id": id_,
        "ts": rng.choice([None, 0, 1, 2, 3]),
        "day": rng.choice(DAYS) if composite else rng.choice(DAYS + [None]) if partitioned else None,
        "v": rng.randint(0, 100) if keyed else serial,
        "s": rng.choice([None, "a", "b", "c"]),
    }


@pytest.mark.parametrize("table_type, partitioned, key", CONFIGS)
@pytest.mark.parametrize("seed", SEEDS)
def test_update_matches_model(tmp_path: Path, table_type: str, partitioned: bool, key: str, seed: int) -> None:
    rng = random.Random(seed)
    keyed = bool(key)
    composite = key == "id+day"
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key=key.split("+") if keyed else None,
        ordering_field="ts" if keyed else None,
        partition_by=["day"] if partitioned else None,
        table_type=table_type,
        properties={"write.target-file-size-bytes": 2048, "engine.parallelism": 1},
    )
    m = TableModel(
        key=tuple(key.split("+")) if keyed else (),
        ordering="ts" if keyed else None,
        partition_by=("day",) if partitioned else (),
    )
    trace: list[str] = []
    serial = 0
    for step in range(STEPS):
        roll = rng.random()
        if step < 2 or roll < 0.3:
            rows = []
            for _ in range(rng.randint(1, 25)):
                serial += 1
                rows.append(_row(rng, rng.randrange(KEY_SPACE), partitioned, keyed, serial, composite))
            if keyed:
                t.upsert(to_arrow(rows))
                m.upsert(rows)
            else:
                t.insert(to_arrow(rows))
                m.insert(rows)
            trace.append(f"write {len(rows)} rows")
        elif table_type == "mor" and roll < 0.4:
            t.services.compact()
            trace.append("compact")
        else:
            pred = (
                None
                if rng.random() < 0.1
                else random_pred(rng, DAYS, partition_col="day" if partitioned or composite else None)
            )
            set_, change = random_assign(rng, keyed)
            trace.append(f"update where {pred} set {set_}")
            r = t.update(where=None if pred is None else pred.expr(), set=set_)
            n = model_update(m, pred, change)
            assert r.stats["updated"] == n, f"seed {seed}: {trace}"
            assert (r.instant is None) == (n == 0)
            if r.instant is not None:
                assert r.instant.plan["operation"] == "update"
                want = "commit" if table_type == "cow" or not keyed else "deltacommit"
                assert r.instant.action == want
        got = t.to_arrow()
        assert table_rows(got, SCHEMA.names) == m.sorted(), f"seed {seed}, steps:\n" + "\n".join(trace)
        if keyed:
            assert got.num_rows == len({(r["day"], r["id"]) for r in got.to_pylist()}), "a key appears twice"


def test_update_example_from_design(tmp_path: Path) -> None:
    """The call of docs/design.md, "Public API", on an int32 counter: ``n + 1`` stays int32."""
    schema = pa.schema([("id", pa.int64()), ("kind", pa.string()), ("n", pa.int32())])
    t = Table.create(tmp_path / "t", schema, record_key="id", table_type="mor")
    t.insert(pa.table({"id": [1, 2, 3], "kind": ["apple", "pear", "apple"], "n": pa.array([1, 2, 3], pa.int32())}))
    r = t.update(where=pc.field("kind") == "apple", set={"kind": "banana", "n": pc.field("n") + 1})
    assert r.stats["updated"] == 2
    got = t.to_arrow().sort_by("id")
    assert got.schema == schema
    assert got.to_pylist() == [
        {"id": 1, "kind": "banana", "n": 2},
        {"id": 2, "kind": "pear", "n": 2},
        {"id": 3, "kind": "banana", "n": 4},
    ]
    assert t.update(where=pc.field("kind") == "cherry", set={"n": 0}).instant is None
    assert t.update(set={"n": pc.field("n") * 10}).stats["updated"] == 3  # where=None: every row
    assert sorted(t.to_arrow().column("n").to_pylist()) == [20, 20, 40]


# -- refusals ------------------------------------------------------------------------------


def _files(path: Path) -> set[str]:
    return {str(p.relative_to(path)) for p in path.rglob("*") if p.is_file()}


@pytest.mark.parametrize("table_type, key", [("cow", "id"), ("mor", "id"), ("cow", None)])
def test_refusals_write_nothing(tmp_path: Path, table_type: str, key: str | None) -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64()),
            pa.field("day", pa.string()),
            pa.field("n", pa.int32()),
            pa.field("s", pa.string()),
            pa.field("must", pa.int64(), nullable=False),
        ]
    )
    path = tmp_path / "t"
    t = Table.create(path, schema, record_key=key, partition_by=["day"], table_type=table_type)
    t.insert(
        pa.table(
            {"id": [1, 2], "day": ["d1", "d2"], "n": pa.array([1, 2], pa.int32()), "s": ["a", "b"], "must": [1, 2]},
            schema=schema,
        )
    )
    before_instants = len(t.timeline.instants())
    before_files = _files(path)
    rows = t.to_arrow().sort_by("id")
    cases: list[tuple[type[Exception], dict[str, Any], Any]] = [
        (UnknownColumnError, {"nope": 1}, None),
        (UnknownColumnError, {"n": pc.field("nope") + 1}, None),
        (UnknownColumnError, {"n": 1}, pc.field("nope") == 1),
        (InvalidFilterError, {"n": 1}, pc.field("s") > 3),
        (InvalidFilterError, {"n": 1}, "id = 1"),
        (ImmutableColumnError, {"day": "d9"}, None),
        (SchemaMismatchError, {"n": "seven"}, None),
        (SchemaMismatchError, {"n": 1.5}, None),
        (SchemaMismatchError, {"s": pc.field("n")}, None),
        (SchemaMismatchError, {"n": 2**40}, None),  # an int, but not one an int32 holds
        (SchemaMismatchError, {"n": pc.field("n") + 2**31}, pc.field("id") == 2),
        (SchemaMismatchError, {"must": None}, None),
        (InvalidUpdateError, {}, None),
        (InvalidUpdateError, {"n": [1, 2]}, None),
        (InvalidUpdateError, {"s": pc.field("s") + 1}, None),
    ]
    if key:
        cases.append((ImmutableColumnError, {"id": 5, "n": 1}, None))
    for err, set_, where in cases:
        with pytest.raises(err):
            t.update(where=where, set=set_)
    with pytest.raises(InvalidUpdateError):
        t.update(where=None, set=None)
    assert issubclass(ImmutableColumnError, UnsupportedOperationError)
    assert len(t.timeline.instants()) == before_instants
    assert _files(path) == before_files
    assert t.to_arrow().sort_by("id").equals(rows)


# -- concurrency ---------------------------------------------------------------------------

COUNTER = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("n", pa.int64())])


def _counter_table(path: Path, table_type: str) -> Table:
    t = Table.create(
        path,
        COUNTER,
        record_key="id",
        ordering_field="ts",
        table_type=table_type,
        properties={"commit.max-retries": 50, "engine.parallelism": 1},
    )
    t.insert(pa.table({"id": [0, 1], "ts": [0, 0], "n": [0, 0]}, schema=COUNTER))
    return t


def _n(t: Table, key: int = 0) -> int:
    rows = t.to_arrow(filter=pc.field("id") == key).to_pylist()
    assert len(rows) == 1, rows
    return int(rows[0]["n"])


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("other", ["upsert", "upsert_away", "update", "delete"])
def test_paused_update_retries_after_a_write_of_its_key(tmp_path: Path, table_type: str, other: str) -> None:
    """An update paused before ``completed`` while another write of its key lands: it
    must replay on the new row (mor logs of one group merge without a file-group
    conflict, so only the key check catches this). ``upsert_away`` gives the row a value
    the update's ``where`` no longer matches: only rule 5 (keys updated) sees that, as
    it does the delete."""
    path = tmp_path / "t"
    t = _counter_table(path, table_type)
    fault_dir = tmp_path / "faults"
    fault_dir.mkdir()
    proc = start_script(
        WORKER_PY,
        ["one", str(path), {"op": "update", "id": 0, "below": 50}],
        faults="commit.before_complete=wait",
        env={"LAKELINE_FAULT_DIR": str(fault_dir)},
    )
    try:
        wait_for_files([fault_dir / "commit.before_complete.reached"], timeout=120)
    except AssertionError:
        proc.kill()
        raise AssertionError(f"the update never reached commit.before_complete: {finish(proc)}") from None
    if other in ("upsert", "upsert_away"):
        t.upsert(pa.table({"id": [0], "ts": [0], "n": [10 if other == "upsert" else 100]}, schema=COUNTER))
    elif other == "update":
        t.update(where=pc.field("id") == 0, set={"n": pc.field("n") + 10})
    else:
        t.delete(pa.table({"id": [0]}))
    (fault_dir / "commit.before_complete.release").write_text("go")
    rc, out, err = finish(proc)
    assert rc == 0, err[-3000:]
    res = json.loads(out.strip().splitlines()[-1])
    assert res["ok"], res
    rolled = [i for i in t.timeline.instants() if i.state == "rolled_back"]
    assert len(rolled) == 1 and rolled[0].plan["operation"] == "update", "the update must have replayed once"
    if other in ("delete", "upsert_away"):
        assert res["instant"] is None and res["stats"]["updated"] == 0  # the replay matched no row
    if other == "delete":
        assert t.to_arrow(filter=pc.field("id") == 0).num_rows == 0
    else:
        assert _n(t) == {"upsert": 11, "upsert_away": 100, "update": 11}[other]
    assert _n(t, 1) == 0


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_racing_updates_and_upserts_lose_nothing(tmp_path: Path, table_type: str) -> None:
    """Two updaters (``n = n + 1``) and one upserter (``n = 1000 * i``) of one key, in
    three processes: replaying the committed writes in completion order gives the
    table's value (no lost increment, no lost upsert)."""
    path = tmp_path / "t"
    t = _counter_table(path, table_type)
    count = int(os.environ.get("LAKELINE_UPDATE_RACE", "6"))
    roles = ["update", "update", "upsert"]
    ready = [tmp_path / f"ready-{i}" for i in range(len(roles))]
    logs = [tmp_path / f"log-{i}.jsonl" for i in range(len(roles))]
    go = tmp_path / "go"
    procs = [
        start_script(WORKER_PY, ["loop", str(path), role, count, str(r), str(go), str(lg)])
        for role, r, lg in zip(roles, ready, logs)
    ]
    wait_for_files(ready, timeout=120)
    go.write_text("go")
    for p in procs:
        rc, _, err = finish(p, timeout=300)
        assert rc == 0, err[-3000:]
    writes: dict[int, dict[str, Any]] = {}
    for lg in logs:
        for line in lg.read_text().splitlines():
            rec = json.loads(line)
            if rec["outcome"] == "committed":
                writes[rec["instant"]] = rec
    n = 0
    applied = 0
    for inst in t.timeline.completed():
        rec = writes.get(inst.id)
        if rec is None:
            continue
        n = n + 1 if rec["op"] == "update" else rec["n"]
        applied += 1
    assert applied == len(writes), "every committed write is a completed instant"
    assert sum(1 for w in writes.values() if w["op"] == "update") >= 1
    assert _n(t) == n
    assert not t.timeline.pending()
