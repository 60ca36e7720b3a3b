"""The fused path of a Spark write's planning (one planning task, up to 8M rows: see
:mod:`.write_tasks`), as the driver runs it: the job goes on a thread of the driver
while the attempt begins its instant, and the task waits in staging for the driver's
``go`` to write its own plan's files, so the rows never leave it.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor

from pyspark.sql import SparkSession

from ..table.write.group_tasks import WriteSettings
from .engine import SparkEngine
from .staging import Staging
from .write_tasks import PlanPart, PlanTask, plan_and_write


class FusedJob:
    """The fused path's planning job (:func:`~.write_tasks.plan_and_write`), run on a
    thread of the driver while the attempt goes on: :meth:`planned` returns once every
    task published its plan, :meth:`go` lets them write and returns what they wrote."""

    def __init__(self, spark: SparkSession, staging: Staging, attempt: str, tasks: list[PlanTask]) -> None:
        self.staging, self.attempt, self.tasks = staging, attempt, len(tasks)
        self.released = False
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakeline-plan")
        self.future: Future[list[PlanPart]] = self.pool.submit(SparkEngine(spark).map, plan_and_write, tasks)

    def planned(self) -> list[PlanPart]:
        """Every task's plan facts, once all are published. A planning error (bad input,
        a duplicate key) fails the job: it is raised here, before the instant begins."""
        parts: dict[int, PlanPart] = {}
        delay = 0.002
        while len(parts) < self.tasks:
            for i in range(self.tasks):
                if i not in parts:
                    found, part = self.staging.peek(f"{self.attempt}/planned-{i}")
                    if found:
                        parts[i] = part
            if len(parts) < self.tasks:
                if self.future.done():
                    self.future.result()  # raises the job's (typed) error
                    raise AssertionError("a planning task ended without publishing its plan")
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
        return [parts[i] for i in range(self.tasks)]

    def go(self, settings: WriteSettings) -> list[PlanPart]:
        """Publish the write settings of the begun instant; every task's outcome."""
        self.staging.publish(f"{self.attempt}/go", settings)
        self.released = True
        try:
            return self.future.result()
        finally:
            self.pool.shutdown()

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.staging.publish(f"{self.attempt}/go", None)
            try:
                self.future.result()
            except Exception:  # noqa: BLE001 - the attempt already failed or was refused
                pass
        self.pool.shutdown()
