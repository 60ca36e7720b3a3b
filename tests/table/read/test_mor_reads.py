"""Merge-on-read scans: file groups with many logs read like the model at every snapshot,
and merged slices read with a projection and a filter return what a full read filtered and
projected returns (split out of ``test_scan.py``)."""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

from tests.table.model import COLUMNS, SCHEMA, TableModel, sorted_rows, table_rows, to_arrow

# -- merged slices ---------------------------------------------------------------------------


@pytest.mark.parametrize("composite", [False, True])
def test_merged_slices_read_only_the_columns_needed_and_equal_a_full_read(tmp_path: Path, composite: bool) -> None:
    """A merge-on-read slice with upsert and delete logs, read with a projection and a
    filter on a column it does not return (and, with a composite key, merged through
    key hashes): the same rows as the full read filtered and projected."""
    schema = pa.schema(
        [
            ("a", pa.int64()),
            ("b", pa.int64()),
            ("ts", pa.int64()),
            ("x", pa.string()),
            ("y", pa.float64()),
            ("z", pa.string()),
        ]
    )
    key = ["a", "b"] if composite else ["a"]
    t = Table.create(str(tmp_path / "t"), schema, record_key=key, ordering_field="ts", table_type="mor")
    rng = random.Random(5)
    n = 2000

    def rows(ids: list[int], ts: int) -> pa.Table:
        return pa.table(
            {
                "a": pa.array([i // 7 if composite else i for i in ids], pa.int64()),
                "b": pa.array([i % 7 if composite else 0 for i in ids], pa.int64()),
                "ts": pa.array([ts] * len(ids), pa.int64()),
                "x": [f"x{rng.randrange(50)}" for _ in ids],
                "y": [rng.random() for _ in ids],
                "z": [f"z{i}-{ts}" for i in ids],
            },
            schema=schema,
        )

    t.insert(rows(list(range(n)), 1))
    t.upsert(rows(rng.sample(range(n + 200), 300), 2))
    t.delete(rows(rng.sample(range(n), 150), 3).select(key))
    t.upsert(rows(rng.sample(range(n), 100), 0))  # older than the base: must lose
    assert any(s.logs for s in t.context().view.latest_slices())
    full = t.to_arrow()
    for flt in [pc.field("x") == "x3", pc.field("y") < 0.25, None]:
        got = t.to_arrow(filter=flt, columns=["a", "z"])
        want = (full if flt is None else full.filter(flt)).select(["a", "z"])
        assert got.sort_by([("z", "ascending")]).equals(want.sort_by([("z", "ascending")]))
        streamed = pa.Table.from_batches(list(t.scan(filter=flt, columns=["a", "z"]).to_batches()), got.schema)
        assert streamed.sort_by([("z", "ascending")]).equals(want.sort_by([("z", "ascending")]))


# -- many logs per file group --------------------------------------------------------------------


@pytest.mark.parametrize("ordering", [True, False])
def test_mor_reads_with_many_logs_per_group(tmp_path: Path, ordering: bool) -> None:
    rng = random.Random(3)
    t = Table.create(
        tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts" if ordering else None, table_type="mor"
    )
    m = TableModel(("id",), "ts" if ordering else None, ())
    rows = [{"id": i, "ts": 1, "day": "d", "v": i, "s": "base"} for i in range(60)]
    t.insert(to_arrow(rows))
    m.insert(rows)
    snaps = []
    for step in range(30):
        live = m.rows()
        if step % 4 == 3 and live:
            gone = [{"id": r["id"], "day": r["day"]} for r in rng.sample(live, min(4, len(live)))]
            inst = t.delete(pa.table({"id": [g["id"] for g in gone]})).instant
            m.delete(gone, with_partition=False)
        else:
            ups = [
                {**r, "ts": rng.choice([None, 0, 1, 2, 3]), "v": rng.randint(0, 99), "s": f"u{step}"}
                for r in rng.sample(live, min(8, len(live)))
            ]
            ups += [{**u, "ts": u["ts"], "v": -step} for u in ups[:2]]  # a second version in the batch
            inst = t.upsert(to_arrow(ups)).instant
            m.upsert(ups)
        snaps.append((inst, m.snapshot()))
    files = t.scan().files()
    logs = [f for f in files if f.endswith(".log.parquet")]
    assert len(files) - len(logs) == 1 and len(logs) == 30, "one file group with a log per write"
    assert table_rows(t.to_arrow(), COLUMNS) == m.sorted()
    for inst, snap in snaps[::5]:
        assert table_rows(t.to_arrow(as_of=inst.id), COLUMNS) == snap.sorted()
    expr = (pc.field("v") > 50) | pc.field("ts").is_null()
    want = [r for r in m.rows() if (r["v"] is not None and r["v"] > 50) or r["ts"] is None]
    got = t.to_arrow(filter=expr, columns=["id", "v"])
    assert table_rows(got, ["id", "v"]) == sorted_rows(want, ["id", "v"])
