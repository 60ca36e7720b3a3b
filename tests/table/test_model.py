"""Model-based tests of the write and read paths.

Seeded random sequences of the five writes (insert, upsert, delete, delete_where,
overwrite) run against a real table and against :class:`tests.table.model.TableModel`
side by side, on copy-on-write and merge-on-read tables, partitioned or not, with and
without an ordering field, and on append-only tables. The target file size is tiny, so
writes cut many files and copy-on-write inserts fill small files.

After every step the table must equal the model, a refused write must leave no trace,
and one earlier snapshot is read again by time travel. At the end of a run every
snapshot is read again by instant id and by wall-clock time, and ``changes`` is
compared with the model's diff for every single instant and for random ranges.

A failure message carries the seed and the trace of steps, so a failing sequence can be
replayed with ``-k`` on its test id.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import DuplicateKeyError, LakelineError, Table, UnsupportedOperationError
from lakeline.timeline.instant import Instant

from tests.table.model import (
    COLUMNS,
    DAYS,
    SCHEMA,
    ModelDuplicateKey,
    Pred,
    Row,
    TableModel,
    random_pred,
    sorted_rows,
    table_rows,
    to_arrow,
)

TARGET_FILE_SIZE = 2048
STEPS = 14
KEY_SPACE = 40

# (table type, partitioned, ordering field, record key: "id", "id+day" or "" for none)
CONFIGS = [
    pytest.param(tt, part, order, "id", id=f"{tt}-{'part' if part else 'flat'}-{'ord' if order else 'noord'}")
    for tt in ("cow", "mor")
    for part in (True, False)
    for order in (True, False)
] + [
    # A two-column key (on an unpartitioned table: the same identities as partitioned).
    pytest.param("cow", False, True, "id+day", id="cow-composite"),
    pytest.param("mor", False, True, "id+day", id="mor-composite"),
    pytest.param("cow", True, False, "", id="append-part"),
    pytest.param("cow", False, False, "", id="append-flat"),
]


# One seed per configuration keeps the default run short; set LAKELINE_MODEL_SEEDS
# (e.g. "1-200" or "5,17") to run many more sequences.
def _seeds() -> list[int]:
    spec = os.environ.get("LAKELINE_MODEL_SEEDS", "")
    if not spec:
        return [11]
    out: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


SEEDS = _seeds()
ANY_DAY = object()


def disk_files(path: Path) -> dict[str, int]:
    """Every file under the table folder, with its size."""
    out = {}
    for root, _, names in os.walk(path):
        for n in names:
            p = os.path.join(root, n)
            out[os.path.relpath(p, path)] = os.path.getsize(p)
    return out


@dataclass
class Snap:
    instant: Instant
    model: TableModel
    operation: str
    inserted: list[Row] = field(default_factory=list)  # rows an insert or overwrite wrote


@dataclass
class Run:
    path: Path
    table: Table
    model: TableModel
    rng: random.Random
    partitioned: bool
    ordering: bool
    keyed: bool
    table_type: str
    composite: bool = False  # the key is (id, day)
    snaps: list[Snap] = field(default_factory=list)
    trace: list[str] = field(default_factory=list)
    serials: int = 0

    def where(self) -> str:
        return "steps so far:\n  " + "\n  ".join(self.trace[-30:])

    # -- random inputs -------------------------------------------------------------------

    def days(self) -> list[str | None]:
        return DAYS if self.composite else DAYS + [None]  # a key column is never null

    def day(self) -> str | None:
        return self.rng.choices(self.days(), weights=[4, 4, 2, 1][: len(self.days())])[0]

    def row(self, id_: int, day: Any = ANY_DAY) -> Row:
        rng = self.rng
        return {
            "id": id_,
            "ts": rng.choice([None, 0, 1, 1, 2, 3]),
            "day": self.day() if day is ANY_DAY else day,
            "v": self.serial()
            if not self.keyed
            else (rng.choice([None, rng.randint(0, 100)]) if rng.random() < 0.2 else rng.randint(0, 100)),
            "s": rng.choice([None, "a", "b", "c", "d"]),
        }

    def serial(self) -> int:
        """Append-only rows carry a unique ``v``, so changes() can be told which rows
        a range wrote."""
        self.serials += 1
        return self.serials

    def held(self) -> list[Row]:
        return self.model.rows()

    def fresh_rows(self, n: int) -> list[Row]:
        """Rows whose identity the table does not hold (duplicates inside the batch
        are allowed: the batch is deduplicated)."""
        out: list[Row] = []
        tries = 0
        while len(out) < n and tries < 20 * n:
            tries += 1
            r = self.row(self.rng.randrange(KEY_SPACE * 2), self.day())
            if self.model.keyed and self.model.ident(r) in self.model.keyed_rows:
                continue
            out.append(r)
            if self.model.keyed and self.rng.random() < 0.15:  # a second version in the batch
                again = self.row(r["id"], r["day"])
                out.append(again)
        return out


# -- steps ------------------------------------------------------------------------------


@dataclass
class Step:
    """One write: what to do to the table and to the model, and the error expected."""

    desc: str
    table: Callable[[], Any]
    model: Callable[[TableModel], None]
    expect: type | None = None
    rows: list[Row] = field(default_factory=list)


def step_insert(run: Run) -> Step:
    rng = run.rng
    rows = run.fresh_rows(rng.randint(1, 30))
    expect = None
    if run.keyed and run.held() and rng.random() < 0.15:
        dup = dict(rng.choice(run.held()))
        dup["v"] = 1000
        rows.insert(rng.randrange(len(rows) + 1), dup)
        expect = DuplicateKeyError
    rng.shuffle(rows)
    data: Any = to_arrow(rows)
    if rng.random() < 0.2:
        data = data.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)  # nullable ints stay ints
    elif rng.random() < 0.2:
        data = pa.RecordBatchReader.from_batches(SCHEMA, to_arrow(rows).to_batches(max_chunksize=7))
    return Step(f"insert {rows}", lambda: run.table.insert(data), lambda m: m.insert(rows), expect, rows)


def step_upsert(run: Run) -> Step:
    rng = run.rng
    rows = []
    held = run.held()
    for _ in range(rng.randint(1, 30)):
        if held and rng.random() < 0.6:
            base = rng.choice(held)
            r = run.row(base["id"], base["day"])
            if rng.random() < 0.2:
                r["ts"] = base["ts"]  # a tie with the stored version
            if rng.random() < 0.1:
                r = dict(base)  # an identical re-upsert
        else:
            r = run.row(rng.randrange(KEY_SPACE * 2), run.day())
        rows.append(r)
        if rng.random() < 0.15:
            rows.append(run.row(r["id"], r["day"]))  # another version in the same batch
    return Step(f"upsert {rows}", lambda: run.table.upsert(to_arrow(rows)), lambda m: m.upsert(rows))


def step_delete(run: Run) -> Step:
    rng = run.rng
    held = run.held()
    keys = []
    for _ in range(rng.randint(1, 12)):
        if held and rng.random() < 0.6:
            r = rng.choice(held)
            keys.append({"id": r["id"], "day": r["day"]})
        else:
            keys.append({"id": rng.randrange(KEY_SPACE * 3), "day": run.day()})  # mostly absent
    with_part = run.partitioned and rng.random() < 0.5
    if with_part or run.composite:
        data = pa.table(
            {
                "id": pa.array([k["id"] for k in keys], pa.int64()),
                "day": pa.array([k["day"] for k in keys], pa.string()),
            }
        )
    else:
        data = pa.table({"id": pa.array([k["id"] for k in keys], pa.int64())})
    desc = f"delete {'with' if with_part else 'without'} partition {keys}"  # composite: (id, day) keys
    return Step(desc, lambda: run.table.delete(data), lambda m: m.delete(keys, with_part))


def step_delete_where(run: Run) -> Step:
    pred: Pred = random_pred(run.rng, run.days())
    return Step(f"delete_where {pred}", lambda: run.table.delete_where(pred.expr()), lambda m: m.delete_where(pred))


def step_overwrite(run: Run) -> Step:
    rng = run.rng
    days = rng.sample(run.days(), rng.randint(1, 2))
    n = 0 if rng.random() < 0.15 else rng.randint(1, 40)
    rows = [run.row(rng.randrange(KEY_SPACE * 2), rng.choice(days)) for _ in range(n)]
    if not run.partitioned:
        return Step(
            f"overwrite {rows}", lambda: run.table.overwrite(to_arrow(rows)), lambda m: m.overwrite(rows), rows=rows
        )
    if rng.random() < 0.6:
        return Step(
            f"overwrite {rows}", lambda: run.table.overwrite(to_arrow(rows)), lambda m: m.overwrite(rows), rows=rows
        )
    # Explicit partitions: those of the data, plus one more that is emptied.
    targets = sorted({r["day"] for r in rows} | {rng.choice(run.days())}, key=lambda d: (d is None, d or ""))
    spec: list[Any] = [
        f"day={d}" if d is not None and d.startswith("2026") and rng.random() < 0.5 else {"day": d} for d in targets
    ]
    return Step(
        f"overwrite {rows} partitions={spec}",
        lambda: run.table.overwrite(to_arrow(rows), partitions=spec),
        lambda m: m.overwrite(rows, [(d,) for d in targets]),
        rows=rows,
    )


KEYED_STEPS = [(step_insert, 3), (step_upsert, 4), (step_delete, 2), (step_delete_where, 2), (step_overwrite, 1)]
APPEND_STEPS = [(step_insert, 4), (step_delete_where, 2), (step_overwrite, 1)]


# -- checks ------------------------------------------------------------------------------


def check_now(run: Run) -> None:
    got = table_rows(run.table.to_arrow(), COLUMNS)
    want = run.model.sorted()
    if got != want:
        missing = [r for r in want if r not in got]
        extra = [r for r in got if r not in want]
        pytest.fail(f"table != model: missing {missing[:10]}, unexpected {extra[:10]}\n{run.where()}")


def check_as_of(run: Run, snap: Snap, when: Any, label: str) -> None:
    got = table_rows(run.table.to_arrow(as_of=when), COLUMNS)
    want = snap.model.sorted()
    assert got == want, f"as_of {label} ({snap.operation}, instant {snap.instant.id}) differs\n{run.where()}"


def run_step(run: Run, make: Callable[[Run], Step]) -> None:
    step = make(run)
    desc, do_table, do_model, expect = step.desc, step.table, step.model, step.expect
    run.trace.append(desc[:400])
    expected = run.model.snapshot()
    try:
        do_model(expected)
    except ModelDuplicateKey:
        expect = DuplicateKeyError
    seq, files = run.table.timeline.last_seq, disk_files(run.path)
    if expect is not None:
        with pytest.raises(expect) as exc:
            do_table()
        assert isinstance(exc.value, LakelineError)
        assert run.table.timeline.last_seq == seq, f"a refused write appended events\n{run.where()}"
        assert disk_files(run.path) == files, f"a refused write left files\n{run.where()}"
        check_now(run)
        return
    result = do_table()
    tl = run.table.timeline
    assert not tl.pending(), f"instants left pending: {tl.pending()}\n{run.where()}"
    if result.instant is None:
        assert expected.sorted() == run.model.sorted(), f"a write that changed the model wrote nothing\n{run.where()}"
        assert tl.last_seq == seq
    else:
        inst = result.instant
        assert inst.state == "completed"
        op = desc.split()[0]
        allowed = {"overwrite": {"replacecommit"}}.get(
            op, {"mor": {"deltacommit"}, "cow": {"commit"}}[run.table_type] if run.keyed else {"commit"}
        )
        assert inst.action in allowed, f"{op} completed as {inst.action}"
        assert tl.last_completed().id == inst.id
        run.snaps.append(Snap(inst, expected, op, step.rows if op in ("insert", "overwrite") else []))
    run.model = expected
    check_now(run)


def check_history(run: Run) -> None:
    """Every snapshot by instant id and by time; changes against the model's diff."""
    t = run.table
    create = t.timeline.completed()[0]
    empty = TableModel(run.model.key, run.model.ordering, run.model.partition_by)
    snaps = [Snap(create, empty, "create")] + run.snaps
    for s in snaps:
        check_as_of(run, s, s.instant.id, f"instant {s.instant.id}")
        # The completion time names the same snapshot as the id (reading its rows again
        # for every snapshot would only repeat the read above; a sample does).
        by_time = t.scan(as_of=s.instant.completed_at).explain()["snapshot_seq"]
        assert by_time == t.scan(as_of=s.instant.id).explain()["snapshot_seq"] == s.instant.completed_seq
    for s in run.rng.sample(snaps, min(4, len(snaps))):
        check_as_of(run, s, s.instant.completed_at, f"time {s.instant.completed_at}")
    for i in run.rng.sample(range(len(snaps) - 1), min(2, len(snaps) - 1)):
        # Between two completions: the earlier snapshot.
        a, b = snaps[i].instant.completed_at, snaps[i + 1].instant.completed_at
        check_as_of(run, snaps[i], a + (b - a) / 2, f"time {a + (b - a) / 2}")
    if run.keyed:
        pairs = [(snaps[i], snaps[i + 1]) for i in range(len(snaps) - 1)]
        for _ in range(4):
            a, b = sorted(run.rng.sample(range(len(snaps)), 2)) if len(snaps) > 1 else (0, 0)
            pairs.append((snaps[a], snaps[b]))
        for a, b in pairs:
            got = table_rows(t.changes(a.instant.id, b.instant.id), COLUMNS + ["_op"])
            assert got == TableModel.diff(a.model, b.model), (
                f"changes({a.instant.id}, {b.instant.id}) after {a.operation} .. {b.operation} differ\n{run.where()}"
            )
        got = table_rows(t.changes(snaps[0].instant.id), COLUMNS + ["_op"])
        assert got == TableModel.diff(snaps[0].model, run.model), f"changes({snaps[0].instant.id}) differ"
    else:
        # Append-only tables: the rows the range wrote that are still there at its end
        # (their ``v`` is unique), as inserts.
        pairs = [(i, i + 1) for i in range(len(snaps) - 1)]
        pairs += [tuple(sorted(run.rng.sample(range(len(snaps)), 2))) for _ in range(4) if len(snaps) > 1]
        for i, j in pairs:
            written = {r["v"] for s in snaps[i + 1 : j + 1] for r in s.inserted}
            want = [{**r, "_op": "insert"} for r in snaps[j].model.rows() if r["v"] in written]
            got = table_rows(t.changes(snaps[i].instant.id, snaps[j].instant.id), COLUMNS + ["_op"])
            assert got == sorted_rows(want, COLUMNS + ["_op"]), (
                f"changes({snaps[i].instant.id}, {snaps[j].instant.id}) after {snaps[i].operation} .. "
                f"{snaps[j].operation} differ\n{run.where()}"
            )


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("table_type,partitioned,ordering,key", CONFIGS)
def test_random_writes_match_model(
    tmp_path: Path, table_type: str, partitioned: bool, ordering: bool, key: str, seed: int
) -> None:
    keyed = bool(key)
    key_cols = tuple(key.split("+")) if key else ()
    path = tmp_path / "t"
    t = Table.create(
        path,
        SCHEMA,
        record_key=list(key_cols) or None,
        ordering_field="ts" if ordering else None,
        partition_by=["day"] if partitioned else None,
        table_type=table_type,
        properties={"write.target-file-size-bytes": TARGET_FILE_SIZE},
    )
    model = TableModel(key_cols, "ts" if ordering else None, ("day",) if partitioned else ())
    rng = random.Random(f"{seed}-{table_type}-{partitioned}-{ordering}-{key}")
    run = Run(path, t, model, rng, partitioned, ordering, keyed, table_type, composite=len(key_cols) > 1)
    steps = KEYED_STEPS if keyed else APPEND_STEPS
    run_step(run, step_insert)  # start with some rows
    for _ in range(STEPS):
        step = rng.choices([s for s, _ in steps], weights=[w for _, w in steps])[0]
        run_step(run, step)
        if run.snaps and rng.random() < 0.25:
            s = rng.choice(run.snaps)
            check_as_of(run, s, s.instant.id, f"instant {s.instant.id}")
    if not keyed:
        for op in (lambda: t.upsert(to_arrow(run.fresh_rows(2))), lambda: t.delete(pa.table({"id": [1]}))):
            seq, files = t.timeline.last_seq, disk_files(path)
            with pytest.raises(UnsupportedOperationError):
                op()
            assert t.timeline.last_seq == seq and disk_files(path) == files
    check_history(run)
    # Tiny target size: the table is spread over many files.
    if len(run.model.rows()) >= 60:
        assert len(t.scan().files()) >= 2
    # A fresh handle sees the same table.
    assert table_rows(Table.open(path).to_arrow(), COLUMNS) == run.model.sorted()


def test_history_datetime_before_creation_has_no_snapshot(tmp_path: Path) -> None:
    from lakeline.timeline.errors import InstantNotFoundError

    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts")
    t.insert(to_arrow([{"id": 1, "ts": 1, "day": "d", "v": 1, "s": "a"}]))
    with pytest.raises(InstantNotFoundError):
        t.to_arrow(as_of=datetime(2000, 1, 1))


# -- the semantics, one deterministic case each ---------------------------------------------


def _rows(*specs: tuple[int, int | None, str | None, int]) -> pa.Table:
    return to_arrow([{"id": i, "ts": ts, "day": d, "v": v, "s": None} for i, ts, d, v in specs])


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_one_key_in_two_partitions_of_one_batch_is_two_records(tmp_path: Path, table_type: str) -> None:
    t = Table.create(
        tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", partition_by=["day"], table_type=table_type
    )
    t.upsert(_rows((1, 1, "a", 10), (1, 1, "b", 20), (1, 0, "b", 30)))
    assert sorted((r["day"], r["v"]) for r in t.to_arrow().to_pylist()) == [("a", 10), ("b", 20)]
    t.insert(_rows((2, 1, "a", 1), (2, 1, "b", 2)))
    assert t.to_arrow(filter=pc.field("id") == 2).num_rows == 2


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_fold_rules(tmp_path: Path, table_type: str) -> None:
    """Strictly larger stored ordering wins; ties and null-vs-null go to the newer
    version; null is the smallest; a delete wins whatever the ordering; re-insert works."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    t.insert(_rows((1, 5, "d", 1), (2, 5, "d", 1), (3, None, "d", 1), (4, 5, "d", 1)))
    t.upsert(_rows((1, 4, "d", 2), (2, 5, "d", 2), (3, None, "d", 2), (4, None, "d", 2)))
    got = {r["id"]: r["v"] for r in t.to_arrow().to_pylist()}
    assert got == {1: 1, 2: 2, 3: 2, 4: 1}
    t.delete(pa.table({"id": [1, 99]}))
    t.upsert(_rows((1, 0, "d", 3)))  # back after the delete, despite the smaller ordering value
    got = {r["id"]: (r["ts"], r["v"]) for r in t.to_arrow().to_pylist()}
    assert got == {1: (0, 3), 2: (5, 2), 3: (None, 2), 4: (5, 1)}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_changes_in_the_null_partition_are_updates(tmp_path: Path, table_type: str) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"], table_type=table_type)
    first = t.insert(_rows((1, 1, None, 1), (2, 1, None, 1), (3, 1, "x", 1))).instant
    t.upsert(_rows((1, 1, None, 2), (2, 1, None, 1)))  # 2 is re-upserted unchanged
    got = t.changes(first.id).select(["id", "day", "v", "_op"]).to_pylist()
    assert got == [{"id": 1, "day": None, "v": 2, "_op": "update"}]


def test_append_only_changes_are_the_net_inserted_rows(tmp_path: Path) -> None:
    """Rows inserted and then deleted inside the range are not changes; a group the range
    created and then rewrote is reported once, as it ended."""
    t = Table.create(tmp_path / "t", SCHEMA, partition_by=["day"])
    start = t.insert(_rows((1, 1, "a", 1), (2, 1, "a", 2))).instant
    t.insert(_rows((3, 1, "a", 3), (4, 1, "b", 4), (4, 1, "b", 4)))
    t.delete_where((pc.field("id") == 3) | (pc.field("id") == 1))
    got = sorted((r["id"], r["_op"]) for r in t.changes(start.id).to_pylist())
    assert got == [(4, "insert"), (4, "insert")]
