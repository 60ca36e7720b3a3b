"""Schedule and execute table services: the two phases every service goes through.

*Schedule* takes the table lock, reads the timeline, asks the service for a plan and
appends it as the ``requested`` event. The lock keeps planners from racing each other
(two compaction plans over the same file groups, two creations of one index) and is
held only for the planning itself; safety does not depend on it, because the event is
appended with the service's :meth:`~.plugin.Service.check_plan` run against the
exact log prefix it lands on.

*Execute* runs a scheduled plan in any process, later: ``inflight``, the work under a
heartbeat, then ``completed`` with the service's metadata. Exactly once: the
``inflight`` and ``completed`` transitions are put-if-absent events, so of two
executors only one moves the instant. An executor that dies leaves the instant inflight
with a heartbeat that stops; once it has expired any process may execute the instant
again (services make their work idempotent). An execution that fails with an error,
or whose service gives up (:class:`~lakeline.timeline.errors.ServiceAbortedError`), is ended as
``rolled_back`` and cleaned up: a service never makes a writer fail.

*Fencing* (issue 11, item 3). Each execution attempt has an id, recorded in the event
that claims the instant: the first ``inflight``, or a re-claim (``inflight`` again) of
an instant whose current attempt stopped beating. A claim is appended with the check
that the attempt the claimant saw still holds the instant, so of two claimants of one
round exactly one wins. Every later event of an attempt (``completed``,
``rolled_back``) is appended with the check that it still holds the instant
(:func:`~.plugin.fence`), and a service's clean-up (:meth:`Service.abort`) runs
only after the attempt's own ``rolled_back`` event landed. A stale attempt (one that
stalled past its heartbeat while another took over) can therefore neither complete,
abort nor clean up, whatever the timing. Its heartbeat is its own (the store keeps
beats per attempt), so neither it nor the loser of a claim race can clear the holder's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..timeline.conflicts import Conflict
from ..timeline.diagnostics import faults, metrics
from ..timeline.errors import (
    CommitOutcomeUnknownError,
    InvalidTransitionError,
    ServiceAbortedError,
    ServiceBusyError,
    ServiceStateError,
    StaleAttemptError,
)
from ..timeline.heartbeat import Heartbeat, attempt_expired
from ..timeline.instant import Instant, State
from ..timeline.plans import SERVICE
from ..timeline.timeline import Timeline
from .plugin import ATTEMPT, Attempt, Progress, Service, ServiceResult, claim_of, running

if TYPE_CHECKING:
    from ..table.table import Table

#: The table lock's name in the store (one per table).
TABLE_LOCK = "table"


@contextmanager
def table_lock(table: Table) -> Iterator[None]:
    """Hold the table lock (a lease, renewed by nobody: keep the body short).

    Each hold is reported to the metrics sink as ``service.lock_hold_seconds``.

    Raises:
        LockTimeoutError: not acquired within ``lock.acquire-timeout-ms``.
    """
    props = table.config.props
    lock = table.log.store.lock(TABLE_LOCK, props.lock_lease_ms)
    lock.acquire(timeout_s=props.lock_acquire_timeout_ms / 1000.0)
    try:
        with metrics.timed("service.lock_hold_seconds"):
            yield
    finally:
        lock.release()


def schedule(table: Table, service: Service, **options: Any) -> Instant | None:
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
        ev = log.append(
            service.action,
            State.REQUESTED,
            {SERVICE: service.name, **plan.to_dict()},
            check=lambda tl: service.check_plan(tl, plan),
        )
    faults.point(f"{service.name}.after_requested")
    return log.timeline.get(ev.instant)


def _heartbeat_settings(table: Table) -> tuple[int, int]:
    props = table.config.props
    return props.heartbeat_interval_ms, props.heartbeat_tolerable_misses


def claimable(table: Table, instant: Instant, timeline: Timeline | None = None) -> bool:
    """Whether this process may execute ``instant`` now: requested, or inflight with the
    holding attempt's heartbeat expired (its executor died or stalled)."""
    if instant.state is State.REQUESTED:
        return True
    if instant.state is not State.INFLIGHT:
        return False
    attempt, since_us = claim_of(timeline if timeline is not None else table.log.refresh(), instant.id)
    interval, misses = _heartbeat_settings(table)
    return attempt_expired(
        instant, attempt or "", max(since_us, instant.requested_us), table.log.store.beats(), interval, misses
    )


def _claim(table: Table, service: Service, instant_id: int, seen: str | None) -> tuple[Attempt, Heartbeat]:
    """Append the claiming ``inflight`` event of a new attempt, checked against the exact
    log prefix it lands on: the attempt ``seen`` when the claim was decided must still
    hold the instant (None: nobody did), so of two claimants exactly one wins.

    Raises:
        ServiceBusyError: another claimant won.
    """
    attempt = Attempt(instant_id, uuid.uuid4().hex)

    def nobody_else(tl: Timeline) -> None:
        if claim_of(tl, instant_id)[0] != seen:
            raise StaleAttemptError(f"instant {instant_id} was claimed by another executor")

    interval, _ = _heartbeat_settings(table)
    # The beat starts before the claim (a fresh claim must not look expired) and is this
    # attempt's own: a lost race clears nobody else's.
    heartbeat = Heartbeat(table.log.store, instant_id, interval, attempt.id).start()
    try:
        table.log.append(service.action, State.INFLIGHT, {ATTEMPT: attempt.id}, instant=instant_id, check=nobody_else)
    except (InvalidTransitionError, StaleAttemptError):
        heartbeat.stop(clear=True)
        raise ServiceBusyError(f"{service.name} instant {instant_id} was claimed by another process") from None
    except BaseException:
        heartbeat.stop(clear=True)
        raise
    return attempt, heartbeat


def execute(table: Table, service: Service, instant_id: int, progress: Progress | None = None) -> ServiceResult:
    """Execute the scheduled instant ``instant_id`` of ``service``.

    A completed instant is not run again: its result is returned as it stands (also
    when another executor completed it while this one stalled).

    Raises:
        ServiceBusyError: another live process is executing it.
        ServiceStateError: it was rolled back, or is not this service's.
        StaleAttemptError: this execution stalled, another took the instant over and
            has not completed it; nothing of this execution took effect.
        InstantNotFoundError: no such instant.
    """
    log = table.log
    tl = log.refresh()
    inst = tl.get(instant_id)
    if inst.action is not service.action or not service.owns(inst):
        raise ServiceStateError(f"instant {instant_id} is a {inst.action}, not a {service.name} instant")
    if inst.state is State.COMPLETED:
        return ServiceResult.of(service.name, inst)
    if inst.state is State.ROLLED_BACK:
        raise ServiceStateError(f"{service.name} instant {instant_id} was rolled back")
    if not claimable(table, inst, tl):
        raise ServiceBusyError(f"{service.name} instant {instant_id} is being executed by a live process")
    attempt, heartbeat = _claim(table, service, instant_id, claim_of(tl, instant_id)[0])
    token = running.set(attempt)
    try:
        faults.point(f"{service.name}.after_inflight")
        inst = log.refresh().get(instant_id)
        try:
            metadata = service.execute(table, inst, progress)
            done = service.complete(table, inst, metadata)
        except ServiceAbortedError as e:
            return _abort(table, service, inst, attempt, str(e), e.conflict)
        except (StaleAttemptError, InvalidTransitionError) as e:
            # Another attempt holds or ended the instant: nothing of ours takes effect.
            now = log.refresh().get(instant_id)
            if now.state is State.COMPLETED:
                return ServiceResult.of(service.name, now)
            if now.state is State.ROLLED_BACK and service.abortable(now):
                # Ended for good: whatever any attempt wrote is garbage, ours included
                # (written after the abort cleaned up, so nobody else will delete it).
                service.abort(table, now, f"stale attempt {attempt.id} after the instant was rolled back")
            raise StaleAttemptError(
                f"{service.name} instant {instant_id}: attempt {attempt.id} is stale ({now.state}): {e}"
            ) from e
        except Exception as e:
            # A failed execution gives up cleanly; a crash (the process gone) leaves the
            # instant inflight for another process to run again.
            if service.abortable(inst):
                ended = _abort_after(table, service, inst, attempt, e)
                if ended.instant is not None and ended.instant.state is State.COMPLETED:
                    # The completion whose answer was lost had landed: the abort's
                    # conditional append found the instant completed, so it succeeded.
                    return ServiceResult.of(service.name, ended.instant)
            raise
        return ServiceResult.of(service.name, done)
    finally:
        running.reset(token)
        heartbeat.stop(clear=True)


def _abort_after(table: Table, service: Service, inst: Instant, attempt: Attempt, error: Exception) -> ServiceResult:
    """:func:`_abort` after ``error`` failed the execution; what the caller reports is
    ``error``, not the abort's failure (a store that went away usually fails both).

    Raises:
        CommitOutcomeUnknownError: ``error`` was the completion's unknown outcome and the
            abort failed too: the message says both (nothing was deleted; an instant that
            did not complete is finished or rolled back by a later run).
        Exception: the abort's error otherwise, with ``error`` as its cause noted.
    """
    try:
        return _abort(table, service, inst, attempt, f"failed: {error!r}")
    except Exception as abort_error:
        if isinstance(error, CommitOutcomeUnknownError):
            raise CommitOutcomeUnknownError(
                f"{service.name} instant {inst.id}: whether it completed is unknown ({error}), and rolling it "
                f"back failed too ({abort_error}); nothing was deleted (if it did not complete, a later run "
                "finishes it or rolls it back)"
            ) from error
        error.add_note(f"rolling {service.name} instant {inst.id} back failed too: {abort_error!r}")
        raise error from abort_error


def _abort(
    table: Table, service: Service, inst: Instant, attempt: Attempt, reason: str, conflict: Conflict | None = None
) -> ServiceResult:
    """End ``inst`` as rolled back by ``attempt`` and clean up, only if that event is
    ours: an instant ended by someone else, or re-claimed by another attempt, is not
    this attempt's to clean up."""
    try:
        table.log.append(
            service.action,
            State.ROLLED_BACK,
            {"reason": reason, ATTEMPT: attempt.id},
            instant=inst.id,
            check=attempt.check,
        )
    except (InvalidTransitionError, StaleAttemptError):
        now = table.log.refresh().get(inst.id)
        return ServiceResult(now, {"stale": True}, reason, service.name, conflict)
    faults.point(f"{service.name}.before_abort")
    service.abort(table, inst, reason)
    return ServiceResult(table.log.refresh().get(inst.id), {}, reason, service.name, conflict)


def run_pending(table: Table, service: Service, progress: Progress | None = None) -> list[ServiceResult]:
    """Execute every pending instant of ``service`` this process may claim, oldest first
    (others are skipped: a live process is on them)."""
    out = []
    tl = table.log.refresh()
    for inst in service.pending(tl):
        if not claimable(table, inst, tl):
            continue
        try:
            out.append(execute(table, service, inst.id, progress))
        except ServiceBusyError:
            continue
    return out
