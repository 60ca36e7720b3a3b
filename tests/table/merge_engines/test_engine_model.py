"""Random histories for each merge engine against the pure-Python model, on both table
types, with and without an ordering field: upserts (batches repeating keys, ordering
values out of order and null, null values), deletes and deletes by predicate, with
compaction and clustering run at random points. The same writes into a twin table that
never compacts must end the same: folding does not depend on when compaction ran
(docs/merge-engines.md)."""

from __future__ import annotations

import random
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

from tests.table.merge_engines.engine_model import EngineModel

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("ts", pa.int64()),
        pa.field("day", pa.string()),
        pa.field("n", pa.int64()),
        pa.field("m", pa.int64()),
        pa.field("c", pa.int64()),
        pa.field("f", pa.string()),
        pa.field("l", pa.string()),
        pa.field("b", pa.bool_()),
    ]
)
AGGREGATES = {"n": "sum", "m": "max", "c": "count", "f": "first_non_null", "b": "bool_or"}
ENGINES = ["deduplicate", "partial-update", "aggregation", "first-row"]


def _properties(engine: str) -> dict[str, Any]:
    props: dict[str, Any] = {"merge.engine": engine}
    if engine == "aggregation":
        props.update({f"merge.{c}.aggregate": fn for c, fn in AGGREGATES.items()})
    return props


def _create(path: Path, engine: str, table_type: str, ordering: str | None) -> Table:
    return Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field=ordering,
        partition_by=["day"],
        table_type=table_type,
        properties=_properties(engine),
    )


def _maybe(rng: random.Random, value: Any, nulls: float = 0.3) -> Any:
    return None if rng.random() < nulls else value


def _batch(rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for _ in range(rng.randint(1, 8)):
        rows.append(
            {
                "id": rng.randrange(10),
                "ts": _maybe(rng, rng.randrange(6), 0.2),
                "day": rng.choice(["d1", "d2"]),
                "n": _maybe(rng, rng.randrange(-5, 20)),
                "m": _maybe(rng, rng.randrange(100)),
                "c": _maybe(rng, rng.randrange(3)),
                "f": _maybe(rng, rng.choice("abcde")),
                "l": _maybe(rng, rng.choice("vwxyz")),
                "b": _maybe(rng, rng.random() < 0.3),
            }
        )
    return rows


def _canonical(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    tuples = [tuple(r[c] for c in SCHEMA.names) for r in rows]
    return sorted(tuples, key=lambda t: tuple((v is not None, v if v is not None else 0) for v in t))


def _rows(t: Table) -> list[tuple[Any, ...]]:
    return _canonical(t.to_arrow().to_pylist())


def _model_rows(model: EngineModel) -> list[tuple[Any, ...]]:
    return _canonical(list(model.rows.values()))


@pytest.mark.sampled_matrix
@pytest.mark.parametrize("ordering", ["ts", None])
@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("engine", ENGINES)
def test_random_history_matches_the_model_whenever_compaction_runs(
    tmp_path: Path, engine: str, table_type: str, ordering: str | None
) -> None:
    seed = zlib.crc32(f"{engine} {table_type} {ordering}".encode()) % 10_000
    rng = random.Random(seed)
    t = _create(tmp_path / "t", engine, table_type, ordering)
    twin = _create(tmp_path / "twin", engine, table_type, ordering)
    model = EngineModel(engine, ("day", "id"), ordering, AGGREGATES if engine == "aggregation" else None)
    services = 0
    for step in range(22):
        if model.rows and rng.random() < 0.08:
            # delete_where judges the merged rows (a sum, a partial row), as a read does.
            limit = rng.randrange(5, 25)
            for table in (t, twin):
                table.delete_where(pc.field("n") > limit)
            model.delete([k for k, r in model.rows.items() if r["n"] is not None and r["n"] > limit])
        elif model.rows and rng.random() < 0.25:
            keys = rng.sample(sorted(model.rows), k=min(len(model.rows), rng.randint(1, 3)))
            keys.append(("d1", 99))  # a key the table does not hold
            data = pa.table({"day": [d for d, _ in keys], "id": [i for _, i in keys]})
            for table in (t, twin):
                table.delete(data)
            model.delete(keys)
        else:
            rows = _batch(rng)
            data = pa.Table.from_pylist(rows, schema=SCHEMA)
            for table in (t, twin):
                table.upsert(data)
            model.upsert(rows)
        if table_type == "mor" and rng.random() < 0.35:
            services += t.services.compact().instant is not None
        if rng.random() < 0.12:
            services += t.services.cluster(sort_by=["id"]).instant is not None
        assert _rows(t) == _model_rows(model), f"seed {seed}, step {step}"
    assert services > 0, f"seed {seed}: no service ran"
    assert _rows(twin) == _rows(t) == _model_rows(model)
    if table_type == "mor":
        # And once the twin compacts everything at the end, it still reads the same.
        twin.services.compact()
        assert _rows(twin) == _model_rows(model)
