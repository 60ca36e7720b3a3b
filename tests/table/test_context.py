"""The table context: one value per write attempt that the steps take instead of the
``Table`` handle, and that pickles so a distributed engine can ship it.

Shipping is proved with a separate process (a process pool engine): the context is
pickled, the planner runs there against the snapshot it carries, and the plan it sends
back is the one the driver would have made.
"""

from __future__ import annotations

import pickle
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.table.context import TableContext
from lakeline.table.engine import LocalEngine
from lakeline.table.read.scan import Scan
from lakeline.table.write.operations import plan_upsert
from lakeline.table.write.writer import PhaseTimer

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.string())])


def _table(tmp_path: Path, timeline: str | None) -> Table:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", partition_by=["day"], table_type="mor", timeline=timeline)
    t.upsert(pa.table({"id": [1, 2, 3], "day": ["a", "a", "b"], "v": ["x", "y", "z"]}, schema=SCHEMA))
    return t


def _plan_in_worker(ctx: TableContext) -> tuple[int, int, int]:
    """Runs in another process: plan an upsert of keys 2 (held) and 9 (new)."""
    plan = plan_upsert(ctx, pa.table({"id": [2, 9], "day": ["a", "a"], "v": ["new", "new"]}, schema=SCHEMA))
    return plan.stats["updated"], plan.stats["inserted"], len(plan.logs)


def _read_in_worker(ctx: TableContext) -> list[int]:
    return sorted(Scan(ctx, filter=pc.field("day") == "a").to_arrow().column("id").to_pylist())


def test_a_context_pickles_and_plans_in_another_process(tmp_path: Path, timeline: str | None) -> None:
    t = _table(tmp_path, timeline)
    ctx = t.context()
    back = pickle.loads(pickle.dumps(ctx))
    assert back.snapshot.last_seq == ctx.snapshot.last_seq
    assert back.config == ctx.config
    with ProcessPoolExecutor(1) as pool:
        assert pool.submit(_plan_in_worker, ctx).result() == (1, 1, 1)
        assert pool.submit(_read_in_worker, ctx).result() == [1, 2]


def test_a_context_keeps_its_snapshot_while_the_table_moves_on(tmp_path: Path) -> None:
    """The steps of an attempt see the attempt's snapshot, never a newer one."""
    t = _table(tmp_path, None)
    ctx = t.context()
    t.upsert(pa.table({"id": [4], "day": ["a"], "v": ["late"]}, schema=SCHEMA))
    assert sorted(Scan(ctx).to_arrow().column("id").to_pylist()) == [1, 2, 3]
    assert sorted(Scan(t.context()).to_arrow().column("id").to_pylist()) == [1, 2, 3, 4]


def test_a_context_runs_on_the_engine_it_was_given(tmp_path: Path) -> None:
    t = _table(tmp_path, None)
    engine = LocalEngine(1, nice=5)
    assert t.context(engine=engine).engine is engine
    assert t.context().engine is t.engine


def test_phases_add_up_per_name_and_time_only_their_block() -> None:
    phases = PhaseTimer()
    for _ in range(2):
        with phases("plan"):
            pass
    with pytest.raises(RuntimeError), phases("write"):
        raise RuntimeError("a failed step is timed all the same")
    assert set(phases.seconds) == {"plan_s", "write_s"}
    assert all(v >= 0 for v in phases.seconds.values())
