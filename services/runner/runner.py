"""The scheduled service runner: a daemon (or a one-shot pass) that keeps many tables healthy.

``Runner.from_toml(path)`` reads a config (:mod:`.config`); each table, listed by
path or found in a catalog, gets a schedule per service (:mod:`.schedules`). When a
schedule fires, the (table, service) pair is queued, and ``threads`` worker threads
run queued pairs through :meth:`TableServices.run` (finish plans whose executor died,
then plan and execute what the service's trigger says is due). Why the design is what
it is:

* **apscheduler 3 only fires; our queue decides the order** (:mod:`.due_queue`):
  jobs put pairs on a queue instead of running services themselves, so when more is
  due than there are threads, missed ticks and then the biggest backlog go first
  (:mod:`.stats`), and no table starves.
* **Several runners over the same tables are safe.** Each scheduled instant executes
  once whatever the runners do: that is the framework's claims and fencing
  (:mod:`..phases`); a :class:`ServiceBusyError` means another runner has the instant
  and counts as a skip, not a failure. What the runner adds is that planning does not
  stampede: a run holds a named lease of the table (``runner-<service>``, the table's
  own lock store, ``lock.lease-ms``, renewed while it runs), and a runner that finds it
  held skips that run; a runner that dies loses the lease when it expires, and the
  next run elsewhere finishes its instant once its heartbeat expired.
* **One bad table never stops the others.** Every run is its own error boundary: an
  error is logged, counted (``lakeline_runner_failures_total``), the table's handle is
  dropped (a broken connection is reopened) and the pair runs again on its next tick.
* **Stopping** (:meth:`stop`, SIGTERM in the CLI): no new work is taken, running
  services get ``grace_seconds`` to finish; in the last quarter of it, compaction and
  clustering (long rewrites) are asked to give up at their next batch, which ends
  their instant as rolled back through the framework (files deleted). A service that
  still runs at the deadline is left to the process's exit: its instant stays
  inflight, its heartbeat stops, and a later run (of any runner) re-executes it or the
  rollback service rolls it back; the timeline never holds a half state, because every
  transition is one put-if-absent event.

Companions: which tables and their open handles (:mod:`.tables`), the metrics
(:mod:`.metrics`), the apscheduler triggers of the schedules (:mod:`.triggers`). Only this
module and :mod:`.triggers` import apscheduler (docs/architecture.md, "Import direction"):
the triggers check the config's cron expressions when the runner is built, and the
scheduler is imported by :meth:`Runner.start` (a one-shot pass needs none).
"""

from __future__ import annotations

import os
import threading
import time
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING

from apscheduler.triggers.interval import IntervalTrigger

from ...timeline.diagnostics.redact import redact, redacting_logger
from ...timeline.errors import (
    LakelineError,
    RunnerConfigError,
    ServiceAbortedError,
    ServiceBusyError,
    StaleAttemptError,
)
from ...timeline.instant import State
from ..plugin import Progress, ServiceResult
from .config import RunnerConfig
from .due_queue import DueQueue
from .metrics import METRICS_HOST, RunnerMetrics
from .schedules import Every
from .stats import ABORTED, DONE, FAILED, IDLE, SKIPPED, RunOutcome, TableStats, TableStatus, table_stats
from .tables import TableHandles, Target, held_lease
from .triggers import check_triggers, trigger_of

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

# Its lines name tables and catalogs by DSN and quote driver errors: redacted at the source.
log = redacting_logger("lakeline.runner")

#: Services a stopping runner asks to give up at their next batch once the grace period
#: is nearly over: long rewrites whose abort (rolled back, new files deleted) is cheap and
#: whose work the next run simply redoes. The others are short, or not undoable halfway.
ABORTABLE_ON_STOP = ("compaction", "clustering")
#: How often catalogs are listed again for tables created or dropped meanwhile, and how
#: often every table's stats (backlog, gauges) are refreshed besides after its own runs.
CATALOG_REFRESH_S, STATS_REFRESH_S = 30.0, 10.0
#: Name of the lease a run holds in the table's lock store: ``runner-compaction``, ...
LEASE_PREFIX = "runner-"


class Runner:
    """Runs table services on schedules over many tables (see the module docstring).

    Build it with :meth:`from_toml` (or from a checked :class:`RunnerConfig`); then
    either :meth:`run_once` (one pass over every schedule, for cron or Airflow) or
    :meth:`start` ... :meth:`stop` (the daemon).
    """

    def __init__(self, config: RunnerConfig) -> None:
        """Raises:
        RunnerConfigError: a cron expression out of range (checked before anything runs).
        """
        check_triggers(config)
        self.config = config
        self.metrics = RunnerMetrics()
        self._tables = TableHandles(config, self.metrics)
        self._queue = DueQueue()
        self._mutex = threading.Lock()
        self._targets: dict[str, Target] = {}
        self._stats: dict[str, TableStats] = {}
        self._stats_errors: dict[str, str] = {}
        self._last: dict[tuple[str, str], RunOutcome] = {}
        self._outcomes: list[RunOutcome] = []
        self._stopping = threading.Event()
        self._abort = threading.Event()
        self._workers: list[threading.Thread] = []
        self._scheduler: BackgroundScheduler | None = None

    @classmethod
    def from_toml(cls, path: str | os.PathLike[str], metrics_port: int | None = None) -> Runner:
        """A runner for the config file at ``path``; ``metrics_port`` overrides
        ``[runner] metrics_port``.

        Raises:
            RunnerConfigError: the file is missing, not TOML, or any key is wrong.
        """
        return cls(RunnerConfig.from_toml(path).with_metrics_port(metrics_port))

    def targets(self) -> list[Target]:
        """Every table of the config, catalogs listed now (see :class:`TableHandles`)."""
        return self._tables.targets()[0]

    def refresh_stats(self, target: Target, role: str = "stats") -> TableStats | None:
        """Read ``target``'s stats now, export them and keep them for the queue's order;
        None (logged) when the table cannot be read. ``role``: whose handle reads them; a
        worker passes its own service's (a handle serves one thread at a time), the
        ``"stats"`` handle is the scheduler's reads thread's (and a one-shot pass's)."""
        try:
            stats = table_stats(self._tables.get(target, role))
        except Exception as e:  # noqa: BLE001 - a table that cannot be read is reported, not fatal
            log.warning("%s: stats not read: %r", target.name, e)
            self._tables.drop(target.name, role)
            with self._mutex:
                # Shown by `runner status`: a driver's message may quote the DSN.
                self._stats_errors[target.name] = redact(f"{type(e).__name__}: {e}")
            return None
        with self._mutex:
            self._stats[target.name] = stats
            self._stats_errors.pop(target.name, None)
        self.metrics.record_stats(target.name, stats)
        return stats

    # -- runs ----------------------------------------------------------------------------

    def _enqueue(self, target: Target, service: str) -> None:
        with self._mutex:
            stats = self._stats.get(target.name)
        self._queue.put(target, service, stats.backlog if stats is not None else 0)

    def _work(self, wait: bool) -> None:
        while (due := self._queue.take(wait)) is not None:
            try:
                outcome = self.run_service(due.target, due.service)
            finally:
                self._queue.done(due)
            with self._mutex:
                self._outcomes.append(outcome)

    def _progress(self, service: str) -> Progress | None:
        if service not in ABORTABLE_ON_STOP:
            return None

        def give_up_when_stopping(done: int, total: int) -> None:
            if self._abort.is_set():
                raise ServiceAbortedError(f"runner stopping: grace period over ({done}/{total} done)")

        return give_up_when_stopping

    def run_service(self, target: Target, service: str) -> RunOutcome:
        """One run of ``service`` on ``target`` under the runner's lease, logged and
        counted; never raises (a failure is its outcome)."""
        t0 = time.monotonic()
        results: list[ServiceResult] = []
        outcome, error = IDLE, None
        try:
            table = self._tables.get(target, service)
            lease = table.log.store.lock(f"{LEASE_PREFIX}{service}", table.config.props.lock_lease_ms)
            if not lease.try_acquire():
                outcome = SKIPPED  # another runner is running this service on this table
            else:
                with held_lease(lease):
                    results = table.services.run(service, progress=self._progress(service))
        except (ServiceBusyError, StaleAttemptError) as e:
            # Another runner claimed the instant (or took over a stalled attempt of ours):
            # it is being done, and nothing of ours took effect.
            outcome, error = SKIPPED, redact(e)
        except Exception as e:  # noqa: BLE001 - the error boundary of one run: log, count, retry next tick
            # The error is printed by --once and status, and logged: a driver's message
            # may quote the DSN it refused.
            outcome, error = FAILED, redact(f"{type(e).__name__}: {e}")
            log.warning("%s: %s failed: %s", target.name, service, error, exc_info=not isinstance(e, LakelineError))
            self._tables.drop(target.name, service)
        completed = tuple(
            r.instant.id
            for r in results
            if r.instant is not None and r.aborted is None and r.instant.state is State.COMPLETED
        )
        aborted = [str(r.aborted) for r in results if r.aborted is not None]
        if outcome == IDLE and aborted:
            outcome, error = ABORTED, "; ".join(aborted)
        elif outcome == IDLE and completed:
            outcome = DONE
        seconds = time.monotonic() - t0
        self.metrics.record_run(
            target.name,
            service,
            seconds,
            failed=outcome == FAILED,
            skipped=outcome == SKIPPED,
            aborted=len(aborted),
            completed=len(completed),
        )
        result = RunOutcome(target.name, service, outcome, completed, error, seconds)
        with self._mutex:
            self._last[(target.name, service)] = result
        if outcome in (DONE, ABORTED):
            log.info(
                "%s: %s %s, instant(s) %s, %.2fs%s",
                target.name,
                service,
                outcome,
                ",".join(map(str, completed)) or "-",
                seconds,
                f" ({error})" if error else "",
            )
            self.refresh_stats(target, service)
        else:
            log.debug("%s: %s %s, %.2fs", target.name, service, outcome, seconds)
        return result

    def run_once(self) -> list[RunOutcome]:
        """Run every scheduled service of every table once, ``threads`` at a time, biggest
        backlog first; each service's trigger strategy decides whether it plans new work
        (cron or Airflow own the timing). Returns the outcomes in the order the runs
        ended; failures are in it, never raised."""
        targets = self.targets()
        for target in targets:
            self.refresh_stats(target)
        with self._mutex:
            self._outcomes = []
        for target in targets:
            for service in target.schedules:
                self._enqueue(target, service)
        workers = [
            threading.Thread(target=self._work, args=(False,), name=f"lakeline-runner-{n}")
            for n in range(self.config.runner.threads)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        self._tables.close()
        return self.outcomes()

    @property
    def giving_up(self) -> bool:
        """Whether a stopping runner's grace period is nearly over, so compaction and
        clustering are being asked to give up."""
        return self._abort.is_set()

    def outcomes(self) -> list[RunOutcome]:
        """Every run since :meth:`start` (or the last :meth:`run_once`), in the order they ended."""
        with self._mutex:
            return list(self._outcomes)

    # -- the daemon ----------------------------------------------------------------------

    def start(self) -> None:
        """Serve metrics (when a port is set), start the schedules and the worker threads,
        and return; :meth:`stop` ends them.

        Raises:
            RunnerConfigError: this runner was started before.
        """
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        if self._scheduler is not None:
            raise RunnerConfigError("this runner was already started; build a new one")
        if self.config.runner.metrics_port:
            port = self.metrics.serve(self.config.runner.metrics_port)
            log.info("metrics on http://%s:%d/metrics", METRICS_HOST, port)
        # Jobs only queue pairs (instant); stats reads and catalog listings touch stores
        # and get a thread of their own, so a slow store never delays a schedule.
        self._scheduler = BackgroundScheduler(
            executors={"default": ThreadPoolExecutor(1), "reads": ThreadPoolExecutor(1)},
            job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": None},
        )
        self._sync_targets()
        self._scheduler.add_job(
            self._refresh_all_stats, IntervalTrigger(seconds=STATS_REFRESH_S), id="stats", executor="reads"
        )
        if self.config.catalogs:
            self._scheduler.add_job(
                self._sync_targets, IntervalTrigger(seconds=CATALOG_REFRESH_S), id="catalogs", executor="reads"
            )
        self._workers = [
            threading.Thread(target=self._work, args=(True,), name=f"lakeline-runner-{n}", daemon=True)
            for n in range(self.config.runner.threads)
        ]
        for w in self._workers:
            w.start()
        self._scheduler.start()
        log.info("runner started: %d table(s), %d thread(s)", len(self._targets), self.config.runner.threads)

    def _sync_targets(self) -> None:
        """Add the jobs of tables that appeared (in a catalog), remove those of tables gone."""
        assert self._scheduler is not None
        listed, failed = self._tables.targets()
        now = {t.name: t for t in listed}
        # A catalog that could not be listed this time keeps the tables we knew of it.
        now.update({n: t for n, t in self._targets.items() if t.catalog in failed and n not in now})
        for name, target in now.items():
            if name in self._targets:
                continue
            self.refresh_stats(target)
            for service, sched in target.schedules.items():
                # An interval's first run is now (a restarted runner does not wait a whole
                # period); a cron expression fires at its own times.
                first = {"next_run_time": datetime.now(UTC)} if isinstance(sched, Every) else {}
                self._scheduler.add_job(
                    self._enqueue,
                    trigger_of(sched, f"{name} {service}"),
                    args=(target, service),
                    id=f"{name}\x00{service}",
                    **first,
                )
        for name in set(self._targets) - set(now):
            for service in self._targets[name].schedules:
                try:
                    self._scheduler.remove_job(f"{name}\x00{service}")
                except LookupError:
                    pass
            self._tables.drop(name)
        self._targets = now

    def _refresh_all_stats(self) -> None:
        for target in list(self._targets.values()):
            if self._stopping.is_set():
                return
            self.refresh_stats(target)

    def stop(self, grace_seconds: float | None = None) -> bool:
        """Stop taking work and let running services finish within ``grace_seconds``
        (default ``[runner] grace_seconds``); in its last quarter (at most its last 5 s)
        compaction and clustering are asked to give up, which rolls their instants back
        cleanly. Returns whether every running service ended in time; the others are left
        to the process's exit (see the module docstring)."""
        grace = self.config.runner.grace_seconds if grace_seconds is None else grace_seconds
        t0 = time.monotonic()
        self._stopping.set()
        self._queue.close()
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)
        abort_at = t0 + grace - min(5.0, grace / 4)
        for w in self._workers:
            w.join(max(0.0, abort_at - time.monotonic()))
        if any(w.is_alive() for w in self._workers):
            log.warning("grace period nearly over: asking %s to give up", sorted(self._queue.running()))
            self._abort.set()
        for w in self._workers:
            w.join(max(0.0, t0 + grace - time.monotonic()))
        running = self._queue.running()
        self.metrics.close()
        self._tables.close(keep=running)
        if running:
            log.warning("still running after %.1fs, left to the exit: %s", grace, sorted(running))
        return not running

    # -- status --------------------------------------------------------------------------

    def status(self) -> list[TableStatus]:
        """Every table with fresh stats and the runs this runner knows of."""
        out = []
        for target in self.targets():
            stats = self.refresh_stats(target)
            with self._mutex:
                last = {s: o for (name, s), o in self._last.items() if name == target.name}
                error = None if stats is not None else self._stats_errors.get(target.name, "could not be read")
            out.append(TableStatus(target, stats, error, MappingProxyType(last)))
        self._tables.close(keep=self._queue.running())
        return out


__all__ = ["Runner", "RunOutcome", "TableStatus", "Target"]
