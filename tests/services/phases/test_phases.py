"""The service framework: schedule under the lock, execute exactly once, re-run after a
crash, abort on failure, one result type; niced engine threads for background work."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from lakeline.services import Service, ServiceAbortedError, ServiceResult
from lakeline.services.phases import execute, schedule
from lakeline.table import Table
from lakeline.table.engine import LocalEngine
from lakeline.timeline.diagnostics import faults, metrics
from lakeline.timeline.errors import FaultInjectedError, ServiceBusyError, ServiceStateError, UnknownServiceError
from lakeline.timeline.instant import Action, Instant
from lakeline.timeline.timeline import Timeline

SCHEMA = pa.schema([("id", pa.int64())])


@dataclass(frozen=True)
class CountingPlan:
    """The toy service's typed plan (a service's ``plan()`` returns one; the framework writes it)."""

    n: int

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n}


class Counting(Service):
    """A toy service on the ``savepoint`` action: its plan names a marker file it creates."""

    name = "counting"
    action = Action.SAVEPOINT
    runs: list[int] = []

    def plan(self, table: Table, snapshot: Timeline, **options: Any) -> CountingPlan | None:
        return None if options.get("nothing") else CountingPlan(len(snapshot))

    def execute(self, table: Table, instant: Instant, progress: Any = None) -> dict[str, Any]:
        Counting.runs.append(instant.id)
        if instant.plan.get("n", 0) < 0:
            raise ServiceAbortedError("inputs changed")
        faults.point("counting.work")
        return {"done": True}


@pytest.fixture
def table(tmp_path: Path) -> Table:
    Counting.runs = []
    faults.disarm_all()
    yield Table.create(
        tmp_path / "t", SCHEMA, properties={"heartbeat.interval-ms": 50, "heartbeat.tolerable-misses": 1}
    )
    faults.disarm_all()


def test_schedule_then_execute_once(table: Table) -> None:
    with metrics.recording() as sink:
        inst = schedule(table, Counting())
    lock_hold_s = sink.values("service.lock_hold_seconds")
    assert inst is not None and inst.state == "requested" and inst.plan["service"] == "counting"
    assert lock_hold_s and max(lock_hold_s) < 5
    r = execute(table, Counting(), inst.id)
    assert isinstance(r, ServiceResult) and r.instant.state == "completed" and r.stats == {"done": True}
    again = execute(table, Counting(), inst.id)  # completed: returned, not run again
    assert again.instant.id == inst.id and Counting.runs == [inst.id]
    assert schedule(table, Counting(), nothing=True) is None


def test_failure_aborts_and_crash_leaves_it_for_a_rerun(table: Table) -> None:
    inst = schedule(table, Counting())
    faults.arm("counting.work", "raise")
    with pytest.raises(FaultInjectedError):
        execute(table, Counting(), inst.id)
    assert table.timeline.get(inst.id).state == "rolled_back"
    with pytest.raises(ServiceStateError):
        execute(table, Counting(), inst.id)


def test_abort_is_a_result_not_an_error(table: Table) -> None:
    req = table.log.append(Action.SAVEPOINT, *_requested({"service": "counting", "n": -1}))
    r = execute(table, Counting(), req.instant)
    assert r.aborted == "inputs changed" and r.instant.state == "rolled_back"


def _requested(plan: dict[str, Any]) -> tuple[Any, ...]:
    from lakeline.timeline.instant import State

    return (State.REQUESTED, plan)


def test_a_live_executor_is_not_taken_over_but_a_dead_one_is(table: Table) -> None:
    from lakeline.timeline.heartbeat import Heartbeat
    from lakeline.timeline.instant import State

    inst = schedule(table, Counting())
    table.log.append(Action.SAVEPOINT, State.INFLIGHT, {}, instant=inst.id)
    beat = Heartbeat(table.log.store, inst.id, 50).start()  # someone is on it
    try:
        with pytest.raises(ServiceBusyError):
            execute(table, Counting(), inst.id)
    finally:
        beat.stop(clear=False)  # ... and dies: its last beat stays
    time.sleep(0.2)
    assert execute(table, Counting(), inst.id).instant.state == "completed"


def test_unknown_services(table: Table) -> None:
    from lakeline.services.table_services import SERVICES

    assert set(SERVICES) == {"indexing", "rollback", "compaction", "clustering", "cleaning", "archival"}
    with pytest.raises(UnknownServiceError, match="unknown service 'nope'; known: indexing"):
        table.services.run("nope")
    with pytest.raises(UnknownServiceError):
        table.services.schedule("vacuum")
    assert table.services.run("rollback") == []
    [dry] = table.services.run("rollback", dry_run=True)
    assert dry.instant is None and dry.plan is None


def test_background_engine_threads_are_niced(table: Table) -> None:
    def prio(_: int) -> int:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    assert set(LocalEngine(2, nice=5).map(prio, [1, 2, 3])) == {prio(0) + 5}
    assert isinstance(table.service_engine, LocalEngine) and table.service_engine.nice == 10
    custom = LocalEngine(1)
    table.engine = custom
    assert table.service_engine is custom  # a chosen engine (Spark...) is used as it is
