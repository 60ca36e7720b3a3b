"""Small named scenarios for exhaustive enumeration (2-3 actors, a few operations).

Each is the shape of a known hazard: the explorer enumerates every interleaving of it
within a preemption bound, so it finds the bad order without being told which it is.
"""

from __future__ import annotations

from tests.table.model import Pred

from .explorer import RunSpec
from .ops import Op

K = 0  # the lowest key: the lower end of its file group's key range


def _up(key: int, ts: int = 1, day: str = "2026-01-01", v: int = 50, extra: bool = False) -> Op:
    return Op("upsert", rows=((key, ts, day, v),), extra=extra)


SCENARIOS: dict[str, RunSpec] = {
    # Item 1: D deletes k from its snapshot; A deletes k and B re-inserts it in a new
    # group; D completes last.
    "lost_delete": RunSpec(
        "mor", ((Op("delete", keys=(1,)),), (Op("delete", keys=(1,)),), (_up(1),)), granularity="coarse"
    ),
    # Item 2: U upserts k through a log and pauses; k is deleted and its group compacted
    # without it; U completes; a later upsert of k must find it.
    "revived_key": RunSpec(
        "mor", ((_up(K), _up(K, ts=2, v=60)), (Op("delete", keys=(K,)), Op("compact"))), granularity="coarse"
    ),
    # Two writers on the same key in both table types, with a crash allowed.
    "upsert_delete_cow": RunSpec("cow", ((_up(2),), (Op("delete", keys=(2,)),)), granularity="coarse"),
    "insert_insert_mor": RunSpec(
        "mor",
        ((Op("insert", rows=((30, 1, "2026-01-01", 1),)),), (Op("insert", rows=((30, 2, "2026-01-01", 2),)),)),
        granularity="coarse",
    ),
    # A writer and a crash-prone service with the rollback service behind them.
    "crash_rollback": RunSpec("mor", ((_up(3), _up(4)), (Op("compact"), Op("rollback"))), granularity="coarse"),
    # A savepoint racing a clean.
    "savepoint_clean": RunSpec("cow", ((Op("savepoint"),), (_up(5), Op("clean"))), granularity="coarse"),
    # An index built while a writer lands.
    "index_write": RunSpec(
        "mor", ((Op("index_create", name="bloom"),), (_up(6), Op("delete", keys=(6,)))), granularity="coarse"
    ),
    # Two writers racing with one (app, version), and a replay of an older version:
    # exactly one of the first two lands, the replay never does.
    "txn_txn": RunSpec(
        "mor",
        (
            (Op("txn_upsert", rows=((8, 1, "2026-01-01", 1),), version=1),),
            (
                Op("txn_upsert", rows=((9, 1, "2026-01-01", 2),), version=1),
                Op("txn_upsert", rows=((8, 2, "2026-01-01", 3),), version=0),
            ),
        ),
        granularity="coarse",
    ),
    "delete_where_upsert": RunSpec(
        "mor", ((Op("delete_where", pred=Pred("isin", col="id", values=(7,))),), (_up(7, ts=3),)), granularity="coarse"
    ),
    # Issue 29: an upsert builds its rows under the names it read (``s``, and the added
    # column ``x``) while a rename of ``s`` lands: it must fail typed (its rows still use
    # the old name) or land conformed, never land under a schema it does not fit.
    "rename_upsert": RunSpec(
        "mor", ((_up(2, extra=True),), (Op("schema", name="rename"),)), granularity="coarse", setup_schema=("add",)
    ),
    # Issue 29: the added column is widened and dropped under an upsert that carries it:
    # the widening replays it conformed (int32 values into int64), the drop refuses it.
    "widen_drop_upsert": RunSpec(
        "cow",
        ((_up(3, extra=True),), (Op("schema", name="widen"), Op("schema", name="drop"))),
        granularity="coarse",
        setup_schema=("add",),
    ),
    # Issue 30: the record index built while an upsert lands and a clustering rewrites
    # the groups it indexes (Hudi lost its record index to clustering, apache/hudi#13996).
    "record_index_build": RunSpec(
        "mor", ((Op("index_create", name="record"),), (_up(6), Op("cluster"))), granularity="coarse"
    ),
    # Issue 29 x indexes: a column_stats index over every column built between a rename
    # of s and its rename back; every ready index must still validate (it did not while
    # entries were read from data files by name, not field id: README, "Findings").
    "rename_stats_rename": RunSpec(
        "cow",
        ((Op("schema", name="rename"), Op("index_create", name="stats"), Op("schema", name="rename")),),
        granularity="coarse",
    ),
}
