"""``t.merge`` against a pure-Python model of Delta's MERGE clause semantics.

Random targets, sources and clause lists (conditions over ``source.`` and ``target.``
columns, ``set`` expressions and literals, null conditions), on copy-on-write and
merge-on-read tables with an ordering field (a matched update wins whatever its
ordering value, as in Delta), several MERGEs in a row on one table, each compared
row for row with the model, and its stats with the model's counts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

SCHEMA = pa.schema(
    [("id", pa.int64()), ("ts", pa.int64()), ("n", pa.int64()), ("v", pa.string()), ("flag", pa.bool_())]
)
Row = dict[str, Any]


@dataclass(frozen=True)
class Cond:
    expr: pc.Expression
    holds: Callable[[Row, Row], bool | None]  # (source, target) -> the model's value


def _f(side: str, col: str) -> pc.Expression:
    return pc.field(f"{side}.{col}")


def _lt(a: Any, b: Any) -> bool | None:
    return None if a is None or b is None else a < b


MATCHED_CONDS = [
    Cond(_f("source", "n") > _f("target", "n"), lambda s, t: _lt(t["n"], s["n"])),
    Cond(_f("source", "n") < 50, lambda s, t: _lt(s["n"], 50)),
    Cond(_f("target", "n") >= 30, lambda s, t: None if t["n"] is None else t["n"] >= 30),
    Cond(_f("source", "flag"), lambda s, t: s["flag"]),
    Cond(pc.equal(_f("target", "v"), "b"), lambda s, t: None if t["v"] is None else t["v"] == "b"),
]
INSERT_CONDS = [
    Cond(_f("source", "n") < 60, lambda s, t: _lt(s["n"], 60)),
    Cond(_f("source", "flag"), lambda s, t: s["flag"]),
]
BY_SOURCE_CONDS = [
    Cond(_f("target", "n") < 20, lambda s, t: _lt(t["n"], 20)),
    Cond(_f("target", "n") > 85, lambda s, t: None if t["n"] is None else t["n"] > 85),
]
SETS: list[tuple[dict[str, Any] | None, Callable[[Row, Row], Row]]] = [
    (None, lambda s, t: {c: s[c] for c in SCHEMA.names}),
    (
        {"n": _f("source", "n") + _f("target", "n")},
        lambda s, t: {**t, "n": None if s["n"] is None or t["n"] is None else s["n"] + t["n"]},
    ),
    ({"v": "x", "ts": _f("source", "ts")}, lambda s, t: {**t, "v": "x", "ts": s["ts"]}),
]


def _clauses(rng: random.Random) -> list[tuple[str, Cond | None, int]]:
    """A clause list Delta accepts: of each group, only the last may be unconditional."""
    groups: list[list[tuple[str, Cond | None, int]]] = []
    for kinds, conds in (
        (("update", "delete"), MATCHED_CONDS),
        (("insert",), INSERT_CONDS),
        (("by_source",), BY_SOURCE_CONDS),
    ):
        n = rng.choice([0, 1, 1, 2, 3])
        group = []
        for i in range(n):
            cond = None if i == n - 1 and rng.random() < 0.4 else rng.choice(conds)
            group.append((rng.choice(kinds), cond, rng.randrange(len(SETS))))
        groups.append(group)
    # Groups interleave freely; the order within a group is what counts.
    out: list[tuple[str, Cond | None, int]] = []
    while any(groups):
        out.append(rng.choice([g for g in groups if g]).pop(0))
    return out


def _model(target: dict[int, Row], source: list[Row], clauses: list[tuple[str, Cond | None, int]]) -> dict[str, int]:
    def first(kinds: tuple[str, ...], s: Row | None, t: Row | None) -> tuple[str, int] | None:
        for kind, cond, set_i in clauses:
            if kind in kinds and (cond is None or cond.holds(s or {}, t or {}) is True):
                return kind, set_i
        return None

    stats = {"rows_updated": 0, "rows_inserted": 0, "rows_deleted": 0}
    keys = {s["id"] for s in source}
    for s in source:
        t = target.get(s["id"])
        if t is not None:
            hit = first(("update", "delete"), s, t)
            if hit and hit[0] == "delete":
                del target[s["id"]]
                stats["rows_deleted"] += 1
            elif hit:
                target[s["id"]] = SETS[hit[1]][1](s, t)
                stats["rows_updated"] += 1
        elif first(("insert",), s, None):
            target[s["id"]] = dict(s)
            stats["rows_inserted"] += 1
    for k in [k for k in target if k not in keys]:
        if first(("by_source",), None, target[k]):
            del target[k]
            stats["rows_deleted"] += 1
    return stats


def _rows(rng: random.Random, ids: list[int]) -> list[Row]:
    return [
        {
            "id": i,
            "ts": rng.randrange(10),
            "n": None if rng.random() < 0.1 else rng.randrange(100),
            "v": rng.choice(["a", "b", None]),
            "flag": rng.choice([True, False, None]),
        }
        for i in ids
    ]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("seed", range(4))
def test_merge_equals_deltas_clause_semantics(tmp_path: Any, table_type: str, seed: int) -> None:
    rng = random.Random(seed * 7 + (table_type == "mor"))
    t = Table.create(str(tmp_path / "t"), SCHEMA, record_key="id", ordering_field="ts", table_type=table_type)
    first = _rows(rng, rng.sample(range(200), 80))
    t.insert(pa.Table.from_pylist(first, schema=SCHEMA))
    model = {r["id"]: r for r in first}
    for _ in range(4):
        source = _rows(rng, rng.sample(range(200), rng.randrange(1, 60)))
        clauses = _clauses(rng)
        if not clauses:
            continue
        m = t.merge(pa.Table.from_pylist(source, schema=SCHEMA))
        for kind, cond, set_i in clauses:
            expr = None if cond is None else cond.expr
            if kind == "update":
                m = m.when_matched_update(set=SETS[set_i][0], condition=expr)
            elif kind == "delete":
                m = m.when_matched_delete(condition=expr)
            elif kind == "insert":
                m = m.when_not_matched_insert(condition=expr)
            else:
                m = m.when_not_matched_by_source_delete(condition=expr)
        result = m.execute()
        expected = _model(model, source, clauses)
        assert {k: result.stats.get(k, 0) for k in expected} == expected, clauses
        got = sorted(Table.open(t.path).to_arrow().to_pylist(), key=lambda r: r["id"])
        assert got == sorted(model.values(), key=lambda r: r["id"]), clauses


def test_merge_on_a_partitioned_table_with_the_record_index(tmp_path: Any) -> None:
    """Keys found through the record index and across partitions: updates stay in their
    partition, new keys land in theirs, by-source deletes reach every partition."""
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("n", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema, record_key="id", partition_by=["day"], table_type="mor")
    t.insert(pa.table({"id": [f"k{i}" for i in range(30)], "day": [f"d{i % 3}" for i in range(30)], "n": range(30)}))
    t.indexes.create("record_index", wait=True)
    source = pa.table({"id": ["k1", "k2", "k40"], "day": ["d1", "d2", "d1"], "n": [100, 200, 400]})
    r = (
        t.merge(source)
        .when_matched_update(set={"n": _f("source", "n") + _f("target", "n")})
        .when_not_matched_insert()
        .when_not_matched_by_source_delete(_f("target", "n") >= 20)
        .execute()
    )
    assert r.stats["rows_updated"] == 2 and r.stats["rows_inserted"] == 1 and r.stats["rows_deleted"] == 10
    got = {row["id"]: (row["day"], row["n"]) for row in Table.open(t.path).to_arrow().to_pylist()}
    assert got["k1"] == ("d1", 101) and got["k2"] == ("d2", 202) and got["k40"] == ("d1", 400)
    assert len(got) == 30 - 10 + 1
    t.indexes.validate("record_index")  # kept exact by the MERGE's commit
