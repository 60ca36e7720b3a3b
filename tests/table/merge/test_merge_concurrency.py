"""MERGEs beside concurrent writers, in separate processes: every MERGE that returns is
applied exactly once, as if the commits ran one after another in completion order.

Each worker MERGEs a counting source into the same keys (``n = target.n + 1`` when
matched, the row with ``n = 1`` when not) while another upserts into them; a lost
update, a double insert or a MERGE applied on a stale read shows as a count other than
the number of MERGEs that committed, or as a key on two rows."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("n", pa.int64()), ("m", pa.int64())])
KEYS = list(range(6))
MERGES = 3


def _merge_worker(path: str, start: Any, out: Any) -> None:
    t = Table.open(path)
    start.wait()
    done = 0
    for _ in range(MERGES):
        source = pa.table({"id": KEYS, "n": [1] * len(KEYS), "m": [0] * len(KEYS)})
        (
            t.merge(source)
            .when_matched_update(set={"n": pc.field("target.n") + pc.field("source.n")})
            .when_not_matched_insert()
            .execute()
        )
        done += 1
    out.put(("merge", done))


def _upsert_worker(path: str, start: Any, out: Any) -> None:
    """Touches column ``m`` only of rows that exist, through a read then an update:
    a MERGE that ran on the row before it must not undo it (nor it the MERGE's)."""
    t = Table.open(path)
    start.wait()
    for _ in range(MERGES):
        t.update(where=pc.field("id") < 3, set={"m": pc.field("m") + 1})
    out.put(("update", MERGES))


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_concurrent_merges_apply_exactly_once(tmp_path: Any, table_type: str) -> None:
    path = str(tmp_path / "t")
    t = Table.create(path, SCHEMA, record_key="id", table_type=table_type)
    t.insert(pa.table({"id": [0, 1, 2], "n": [0, 0, 0], "m": [0, 0, 0]}))
    ctx = mp.get_context("spawn")
    start, out = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_merge_worker, args=(path, start, out)) for _ in range(2)]
    procs.append(ctx.Process(target=_upsert_worker, args=(path, start, out)))
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=240)
    assert all(p.exitcode == 0 for p in procs), [p.exitcode for p in procs]
    results = [out.get(timeout=5) for _ in procs]
    merges = sum(n for kind, n in results if kind == "merge")
    rows = Table.open(path).to_arrow().sort_by("id").to_pylist()
    assert [r["id"] for r in rows] == KEYS  # no key twice, none lost
    for r in rows:
        # Keys 0-2 existed: every MERGE added 1. Keys 3-5: the first MERGE inserted 1.
        assert r["n"] == merges, rows
        assert r["m"] == (MERGES if r["id"] < 3 else 0), rows
