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

The steps and the run they act on are in ``model_steps.py``; one deterministic case per
rule of the semantics in ``test_write_semantics.py``.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.table import DuplicateKeyError, LakelineError, Table, UnsupportedOperationError

from tests.table.model import COLUMNS, SCHEMA, ModelDuplicateKey, TableModel, sorted_rows, table_rows, to_arrow
from tests.table.model_steps import APPEND_STEPS, KEYED_STEPS, Run, Snap, Step, disk_files, step_insert

TARGET_FILE_SIZE = 2048
STEPS = 14

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
