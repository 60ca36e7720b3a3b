"""The random writes of the model-based tests (``test_model.py``): a :class:`Run` holds a
real table and a :class:`tests.table.model.TableModel` side by side, and each ``step_*``
draws one write (insert, upsert, delete, delete_where, overwrite) as a :class:`Step`: what
to do to the table and to the model, and the error expected."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
from lakeline.table import DuplicateKeyError, Table
from lakeline.timeline.instant import Instant

from tests.table.model import DAYS, SCHEMA, Pred, Row, TableModel, random_pred, to_arrow

KEY_SPACE = 40
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
