"""Schedule and execute table services: the two phases every service goes through.

*Schedule* takes the table lock, reads the timeline, asks the service for a plan and
appends it as the ``requested`` event. The lock keeps planners from racing each other
(two compaction plans over the same file groups, two creations of one index) and is
held only for the planning itself; safety does not depend on it, because the event is
appended with the service's :meth:`~.service.TableService.check_plan` run against the
exact log prefix it lands on.

*Execute* runs a scheduled plan in any process, later: ``inflight``, the work under a
heartbeat, then ``completed`` with the service's metadata. Exactly once: the
``inflight`` and ``completed`` transitions are put-if-absent events, so of two
executors only one moves the instant. An executor that dies leaves the instant inflight
with a heartbeat that stops; once it has expired any process may execute the instant
again (services make their work idempotent). An execution that fails with an error,
or whose service gives up (:class:`~.service.ServiceAbort`), is ended as
``rolled_back`` and cleaned up: a service never makes a writer fail.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..timeline import faults
from ..timeline.errors import InvalidTransitionError, ServiceBusyError, ServiceStateError
from ..timeline.heartbeat import Heartbeat, is_expired
from ..timeline.instant import Instant, State
from ..timeline.timeline import Timeline
from .service import Progress, ServiceAbort, ServiceResult, TableService

if TYPE_CHECKING:
    from ..table.table import Table

#: The table lock's name in the store (one per table).
TABLE_LOCK = "table"


#: Seconds each ``table_lock`` was held in this process (the async-index benchmark reads it).
lock_hold_s: list[float] = []


@contextmanager
def table_lock(table: "Table") -> Iterator[None]:
    """Hold the table lock (a lease, renewed by nobody: keep the body short).

    Raises:
        LockTimeoutError: not acquired within ``lock.acquire-timeout-ms``.
    """
    props = table.config.resolved_properties()
    lock = table.log.store.lock(TABLE_LOCK, int(props["lock.lease-ms"]))
    lock.acquire(timeout_s=int(props["lock.acquire-timeout-ms"]) / 1000.0)
    t0 = time.perf_counter()
    try:
        yield
    finally:
        lock_hold_s.append(time.perf_counter() - t0)
        lock.release()


def schedule(table: "Table", service: TableService, **options: Any) -> Instant | None:
    """Plan ``service`` under the table lock and append its ``requested`` event.

    Returns:
        The requested instant, or None when the service has nothing to do.

    Raises:
        LakelineError: the service refused the request (nothing was appended).
        LockTimeoutError: the table lock could not be had.
    """
    log = table.log
    with table_lock(table):
        snapshot = log.refresh()
        plan = service.plan(table, snapshot, **options)
        if plan is None:
            return None
        plan = {"service": service.name, **plan}
        ev = log.append(service.action, State.REQUESTED, plan, check=lambda tl: service.check_plan(tl, plan))
    faults.point(f"{service.name}.after_requested")
    return log.timeline.get(ev.instant)


def _heartbeat_settings(table: "Table") -> tuple[int, int]:
    props = table.config.resolved_properties()
    return int(props["heartbeat.interval-ms"]), int(props["heartbeat.tolerable-misses"])


def claimable(table: "Table", instant: Instant, timeline: Timeline | None = None) -> bool:
    """Whether this process may execute ``instant`` now: requested, or inflight with an
    expired heartbeat (its executor died)."""
    if instant.state_kind is State.REQUESTED:
        return True
    if instant.state_kind is not State.INFLIGHT:
        return False
    interval, misses = _heartbeat_settings(table)
    return is_expired(instant, table.log.store.last_beats(), interval, misses)


def execute(table: "Table", service: TableService, instant_id: int,
            progress: Progress | None = None) -> ServiceResult:
    """Execute the scheduled instant ``instant_id`` of ``service``.

    A completed instant is not run again: its result is returned as it stands.

    Raises:
        ServiceBusyError: another live process is executing it.
        ServiceStateError: it was rolled back, or is not this service's.
        InstantNotFoundError: no such instant.
    """
    log = table.log
    inst = log.refresh().get(instant_id)
    if inst.action_kind is not service.action or not service.owns(inst):
        raise ServiceStateError(f"instant {instant_id} is a {inst.action}, not a {service.name} instant")
    if inst.state_kind is State.COMPLETED:
        return ServiceResult(inst, dict(inst.metadata))
    if inst.state_kind is State.ROLLED_BACK:
        raise ServiceStateError(f"{service.name} instant {instant_id} was rolled back")
    if not claimable(table, inst):
        raise ServiceBusyError(f"{service.name} instant {instant_id} is being executed by a live process")
    interval, _ = _heartbeat_settings(table)
    heartbeat = Heartbeat(log.store, instant_id, interval).start()
    try:
        if inst.state_kind is State.REQUESTED:
            try:
                log.append(service.action, State.INFLIGHT, {}, instant=instant_id)
            except InvalidTransitionError:
                heartbeat.stop(clear=False)
                raise ServiceBusyError(f"{service.name} instant {instant_id} was claimed by another process") from None
        faults.point(f"{service.name}.after_inflight")
        inst = log.refresh().get(instant_id)
        try:
            metadata = service.execute(table, inst, progress)
            done = service.complete(table, inst, metadata)
        except ServiceAbort as e:
            return _abort(table, service, inst, str(e))
        except Exception as e:
            # A failed execution gives up cleanly; a crash (the process gone) leaves the
            # instant inflight for another process to run again.
            _abort(table, service, inst, f"failed: {e!r}")
            raise
        return ServiceResult(done, dict(done.metadata))
    finally:
        heartbeat.stop(clear=True)


def _abort(table: "Table", service: TableService, inst: Instant, reason: str) -> ServiceResult:
    try:
        table.log.append(service.action, State.ROLLED_BACK, {"reason": reason}, instant=inst.id)
    except InvalidTransitionError:
        pass  # another process ended it first
    service.abort(table, inst, reason)
    return ServiceResult(table.log.refresh().get(inst.id), {"aborted": reason}, aborted=reason)


def run_pending(table: "Table", service: TableService, progress: Progress | None = None) -> list[ServiceResult]:
    """Execute every pending instant of ``service`` this process may claim, oldest first
    (others are skipped: a live process is on them)."""
    out = []
    for inst in service.pending(table.log.refresh()):
        if not claimable(table, inst):
            continue
        try:
            out.append(execute(table, service, inst.id, progress))
        except ServiceBusyError:
            continue
    return out
