"""A model test of schema evolution (issue 29's proof): random schema changes (add
anywhere, rename, drop, re-add a dropped name, widen; add, rename, drop and re-add
fields inside the struct column) interleaved with inserts, upserts, deletes,
compaction, clustering and time travel, on both table types, checked after every step
against a pure-Python model of rows as dicts.

The model knows nothing of field ids: a rename renames the key of every row's dict (of
the struct's dict, for a field inside it), a drop deletes it, an add (even of a name
dropped before) sets None, a widening changes nothing in the values. Copy-on-write tables are read through DuckDB too
(``to_duckdb``, by field id), and a column statistics index prunes a random filter's
read after every step. Time travel compares ``as_of`` an earlier instant with the
model's copy from then, under the names and types of then.
"""

from __future__ import annotations

import copy
import random
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

TYPES = {
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "string": pa.string(),
}
WIDER = {"int32": "int64", "float32": "float64"}


class Model:
    """Rows by key, the columns in order with their type names."""

    def __init__(self) -> None:
        self.columns: list[tuple[str, str]] = [
            ("id", "int64"),
            ("a", "int32"),
            ("b", "string"),
            ("s", "struct"),
            ("c", "float32"),
        ]
        self.fields: list[tuple[str, str]] = [("x", "int32"), ("y", "string")]  # the struct's
        self.rows: dict[int, dict[str, Any]] = {}
        self.dropped: list[str] = []
        self.dropped_fields: list[str] = []
        self.fresh = 0

    def type(self, typ: str) -> pa.DataType:
        return pa.struct([(n, TYPES[t]) for n, t in self.fields]) if typ == "struct" else TYPES[typ]

    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(n, self.type(t), nullable=n != "id") for n, t in self.columns])

    def value(self, rng: random.Random, typ: str) -> Any:
        if rng.random() < 0.15:
            return None
        if typ == "struct":
            return {n: self.value(rng, t) for n, t in self.fields}
        if typ.startswith("int"):
            return rng.randrange(-1000, 1000)
        if typ.startswith("float"):
            return rng.randrange(-64, 64) / 4  # exact in float32
        return rng.choice(["x", "y", "zz", ""])

    def batch(self, rng: random.Random, keys: list[int]) -> pa.Table:
        rows = [{n: (k if n == "id" else self.value(rng, t)) for n, t in self.columns} for k in keys]
        return pa.Table.from_pylist(rows, schema=self.schema())

    def name(self, rng: random.Random) -> str:
        if self.dropped and rng.random() < 0.5:
            return self.dropped.pop(rng.randrange(len(self.dropped)))  # a dropped name, again
        self.fresh += 1
        return f"n{self.fresh}"

    def field_name(self, rng: random.Random) -> str:
        if self.dropped_fields and rng.random() < 0.5:
            return self.dropped_fields.pop(rng.randrange(len(self.dropped_fields)))
        self.fresh += 1
        return f"f{self.fresh}"

    def struct_name(self) -> str:
        return next(n for n, t in self.columns if t == "struct")


def _nested_step(u: Any, m: Model, rng: random.Random) -> str:
    """A change inside the struct column: add, rename or drop (not its last) a field."""
    s = m.struct_name()
    kinds = ["add", "rename"] + (["delete"] if len(m.fields) > 1 else [])
    kind = rng.choice(kinds)
    structs = [r[s] for r in m.rows.values() if r[s] is not None]
    if kind == "add":
        name, typ = m.field_name(rng), rng.choice(["int32", "string"])
        u.add_column(f"{s}.{name}", TYPES[typ])
        m.fields.append((name, typ))
        for v in structs:
            v[name] = None
    elif kind == "rename":
        old = rng.choice(m.fields)[0]
        new = m.field_name(rng)
        u.rename_column(f"{s}.{old}", new)
        m.fields = [(new if n == old else n, t) for n, t in m.fields]
        m.dropped_fields.append(old)
        for v in structs:
            v[new] = v.pop(old)
    else:
        gone = rng.choice(m.fields)[0]
        u.delete_column(f"{s}.{gone}")
        m.fields = [(n, t) for n, t in m.fields if n != gone]
        m.dropped_fields.append(gone)
        for v in structs:
            del v[gone]
    return f"nested {kind}"


def _schema_step(t: Table, m: Model, rng: random.Random) -> str:
    values = [n for n, _ in m.columns if n != "id"]
    droppable = [n for n, ty in m.columns if n != "id" and ty != "struct"]
    kinds = ["add", "rename", "widen", "nested", "nested"] + (["delete"] if len(droppable) > 1 else [])
    kind = rng.choice(kinds)
    with t.update_schema() as u:
        if kind == "nested":
            return _nested_step(u, m, rng)
        if kind == "add":
            name, typ = m.name(rng), rng.choice(["int32", "string", "float32"])
            at = rng.randrange(len(m.columns))
            u.add_column(name, TYPES[typ], after=m.columns[at][0])
            m.columns.insert(at + 1, (name, typ))
            for r in m.rows.values():
                r[name] = None
        elif kind == "rename":
            old = rng.choice(values)
            new = m.name(rng)
            u.rename_column(old, new)
            m.columns = [(new if n == old else n, ty) for n, ty in m.columns]
            m.dropped.append(old)
            for r in m.rows.values():
                r[new] = r.pop(old)
        elif kind == "delete":
            gone = rng.choice(droppable)
            u.delete_column(gone)
            m.columns = [(n, ty) for n, ty in m.columns if n != gone]
            m.dropped.append(gone)
            for r in m.rows.values():
                del r[gone]
        else:
            widenable = [(n, ty) for n, ty in m.columns if ty in WIDER]
            if not widenable:
                return "widen (none)"
            name, typ = rng.choice(widenable)
            u.update_column(name, TYPES[WIDER[typ]])
            m.columns = [(n, WIDER[ty] if n == name else ty) for n, ty in m.columns]
    return kind


def _data_step(t: Table, m: Model, rng: random.Random, table_type: str) -> str:
    live = sorted(m.rows)
    kind = rng.choice(["insert", "upsert", "upsert", "delete", "service"])
    if kind == "insert":
        start = max(live, default=-1) + 1
        keys = list(range(start, start + rng.randrange(1, 6)))
        data = m.batch(rng, keys)
        t.insert(data)
    elif kind == "upsert":
        keys = sorted(set(rng.sample(live, min(len(live), 3)) + [max(live, default=0) + rng.randrange(1, 4)]))
        data = m.batch(rng, keys)
        t.upsert(data)
    elif kind == "delete" and live:
        keys = rng.sample(live, min(len(live), 2))
        t.delete(pa.table({"id": pa.array(keys, pa.int64())}))
        for k in keys:
            del m.rows[k]
        return kind
    else:
        if table_type == "mor" and rng.random() < 0.6:
            t.services.compact()
        else:
            t.services.cluster(sort_by=["id"], strategy=rng.choice(["linear", "zorder"]))
        return "service"
    for r in data.to_pylist():
        m.rows[r["id"]] = r
    return kind


def _check(t: Table, m: Model, what: str, as_of: int | None = None) -> None:
    got = t.to_arrow(as_of=as_of)
    assert got.schema.names == [n for n, _ in m.columns], what
    assert [str(f.type) for f in got.schema] == [str(f.type) for f in m.schema()], what
    rows = sorted(got.to_pylist(), key=lambda r: r["id"])
    assert rows == [m.rows[k] for k in sorted(m.rows)], what
    if t.config.table_type == "cow":  # DuckDB reads every file by field id (no logs to merge)
        rel = t.to_duckdb(as_of=as_of, connection=duckdb.connect())
        assert sorted(rel.to_arrow_table().to_pylist(), key=lambda r: r["id"]) == rows, f"duckdb: {what}"


def _check_filtered(t: Table, m: Model, rng: random.Random, what: str) -> None:
    """A filter on a random top-level column, pruned by the column stats index (asked by
    field id, issue 29 item 3), against the model."""
    name, typ = rng.choice([(n, ty) for n, ty in m.columns if ty != "struct"])
    live = [r[name] for r in m.rows.values()]
    value = rng.choice(live) if live and rng.random() < 0.8 else m.value(rng, typ)
    if value is None:
        expr, keep = pc.field(name).is_null(), [k for k, r in m.rows.items() if r[name] is None]
    else:
        expr = pc.field(name) >= value
        keep = [k for k, r in m.rows.items() if r[name] is not None and r[name] >= value]
    got = t.to_arrow(filter=expr).column("id").to_pylist()
    assert sorted(got) == sorted(keep), f"{what}; filter {expr}"


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_schema_changes_with_writes_services_and_time_travel_match_the_model(
    tmp_path: Path, table_type: str, seed: int
) -> None:
    rng = random.Random(seed)
    m = Model()
    t = Table.create(
        tmp_path / "t",
        m.schema(),
        record_key="id",
        table_type=table_type,
        properties={"write.target-file-size-bytes": 2048, "write.small-file-limit-bytes": 0},
    )
    t.indexes.create("column_stats", wait=True)
    history: list[tuple[int, Model]] = []
    steps: list[str] = []
    for i in range(36):
        step = _schema_step(t, m, rng) if rng.random() < 0.3 else _data_step(t, m, rng, table_type)
        steps.append(step)
        what = f"seed {seed}, step {i}: {steps}"
        _check(t, m, what)
        _check_filtered(t, m, rng, what)
        last = t.timeline.last_completed()
        history.append((last.id, copy.deepcopy(m)))
        if history and rng.random() < 0.25:
            at, then = rng.choice(history)
            _check(t, then, f"{what}; as_of {at}", as_of=at)
    _check(Table.open(tmp_path / "t"), m, f"reopened, seed {seed}")
    assert t.indexes.validate()["mismatches"] == []
