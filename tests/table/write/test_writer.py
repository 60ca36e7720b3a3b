"""The attempt loop of a write (lakeline.table.write.writer.run_write / run_attempts).

A conflict at completion rolls the attempt back and replays the whole write on a fresh
snapshot; replays stop after ``commit.max-retries``; an empty plan appends nothing; a
planning error surfaces before anything is written; a failure after ``begin`` rolls the
attempt back and is raised. The concurrent commit is a real write through a second
``Table`` handle, made while the first write plans.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.table.context import TableContext
from lakeline.table.write.operations import plan_delete, plan_upsert
from lakeline.table.write.plan import WritePlan
from lakeline.table.write.writer import completion_rule, run_attempts, run_write, write_files
from lakeline.timeline.errors import CommitConflictError, DuplicateKeyError
from lakeline.timeline.instant import Action, State

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])

pytestmark = pytest.mark.usefixtures("no_faults")


def rows(ids: list[int], v: str) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "v": [v] * len(ids)}, schema=SCHEMA)


def table(tmp_path: Path, **props: object) -> Table:
    t = Table.create(
        tmp_path / "t", SCHEMA, record_key="id", table_type="cow", properties={"engine.parallelism": 1, **props}
    )
    t.insert(rows([1, 2, 3], "seed"))
    return t


def values(t: Table) -> dict[int, str]:
    return {r["id"]: r["v"] for r in Table.open(t.path).to_arrow().to_pylist()}


def racing_upsert(t: Table, seen: list[int]) -> Callable[[TableContext], WritePlan]:
    """A planner of ``upsert id=1 -> ours`` that, on its first attempt only, lets another
    handle upsert the same key first (a copy-on-write rewrite of the same file group)."""
    other = Table.open(t.path)

    def planner(ctx: TableContext) -> WritePlan:
        seen.append(ctx.snapshot.last_seq)
        if len(seen) == 1:
            other.upsert(rows([1], "theirs"))
        return plan_upsert(ctx, rows([1], "ours"))

    return planner


def states(t: Table) -> list[State]:
    return [i.state for i in t.log.refresh().instants()]


def test_a_conflict_rolls_the_attempt_back_and_replays_on_a_fresh_snapshot(tmp_path: Path) -> None:
    t = table(tmp_path)
    seen: list[int] = []
    result = run_write(t.context, "upsert", Action.COMMIT, racing_upsert(t, seen))
    assert len(seen) == 2, "one replay"
    assert seen[1] > seen[0], "the replay planned on a newer snapshot"
    assert result.instant is not None and result.instant.state == State.COMPLETED
    assert result.stats["updated"] == 1
    assert values(t) == {1: "ours", 2: "seed", 3: "seed"}
    assert states(t).count(State.ROLLED_BACK) == 1  # the first attempt


def test_replays_stop_after_commit_max_retries(tmp_path: Path) -> None:
    t = table(tmp_path, **{"commit.max-retries": 0})
    seen: list[int] = []
    with pytest.raises(CommitConflictError, match="gave up after 0 retries"):
        run_write(t.context, "upsert", Action.COMMIT, racing_upsert(t, seen))
    assert len(seen) == 1
    assert values(t) == {1: "theirs", 2: "seed", 3: "seed"}
    assert states(t).count(State.ROLLED_BACK) == 1
    assert not [s for s in states(t) if s.is_pending]


def test_an_empty_plan_appends_nothing(tmp_path: Path) -> None:
    t = table(tmp_path)
    before = t.log.refresh().last_seq
    result = run_write(
        t.context, "delete", Action.COMMIT, lambda ctx: plan_delete(ctx, pa.table({"id": pa.array([99], pa.int64())}))
    )
    assert result.instant is None
    assert result.stats == {"deleted": 0}
    assert "total_s" in result.timings
    assert t.log.refresh().last_seq == before


def test_a_planning_error_surfaces_before_anything_is_written(tmp_path: Path) -> None:
    t = table(tmp_path)
    before = t.log.refresh().last_seq

    def refuses(ctx: TableContext) -> WritePlan:
        raise DuplicateKeyError("planned and refused")

    with pytest.raises(DuplicateKeyError, match="planned and refused"):
        run_write(t.context, "insert", Action.COMMIT, refuses)
    assert t.log.refresh().last_seq == before


def test_a_failure_after_begin_rolls_the_attempt_back_and_is_raised(tmp_path: Path) -> None:
    t = table(tmp_path)

    def write_then_fail(ctx: TableContext, instant: int, plan: WritePlan):  # type: ignore[no-untyped-def]
        write_files(ctx, instant, plan)
        raise RuntimeError("the engine died")

    with pytest.raises(RuntimeError, match="the engine died"):
        run_attempts(
            t.context,
            "upsert",
            Action.COMMIT,
            lambda ctx: plan_upsert(ctx, rows([2], "lost")),
            write_then_fail,
            completion_rule,
        )
    (last,) = t.log.refresh().instants()[-1:]
    assert last.state == State.ROLLED_BACK
    assert values(t) == {1: "seed", 2: "seed", 3: "seed"}


def test_the_result_counts_what_the_commit_wrote(tmp_path: Path) -> None:
    t = table(tmp_path)
    result = run_write(t.context, "upsert", Action.COMMIT, lambda ctx: plan_upsert(ctx, rows([3, 4], "new")))
    assert result.instant is not None
    files = result.instant.metadata["files"]
    assert result.stats["files_added"] == len(files) >= 1
    assert result.stats["bytes_written"] == sum(f["bytes"] for f in files)
    assert {k: result.stats[k] for k in ("inserted", "updated")} == {"inserted": 1, "updated": 1}
    assert {"plan_s", "write_s", "commit_s", "total_s"} <= set(result.timings)
