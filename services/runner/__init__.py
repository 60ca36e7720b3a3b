"""The scheduled service runner (docs/runner.md): a daemon, or a one-shot pass, that keeps
many tables healthy.

The rooms: the :class:`Runner` itself (:mod:`.runner`), its TOML config (:mod:`.config`)
and schedules (:mod:`.schedules`), the queue of due work (:mod:`.due_queue`), the tables
it keeps open and their leases (:mod:`.tables`), backlog stats and run outcomes
(:mod:`.stats`) and its Prometheus metrics (:mod:`.metrics`).

``from lakeline.services.runner import Runner`` imports apscheduler (only :mod:`.runner`
does); the config, schedules and stats import without it, so this package loads the
runner module only when one of its names is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runner import ABORTABLE_ON_STOP, LEASE_PREFIX, Runner, trigger_of
    from .stats import ABORTED, DONE, FAILED, IDLE, SKIPPED, RunOutcome, TableStatus

_FROM_RUNNER = frozenset({"ABORTABLE_ON_STOP", "LEASE_PREFIX", "Runner", "trigger_of"})
_FROM_STATS = frozenset({"ABORTED", "DONE", "FAILED", "IDLE", "SKIPPED", "RunOutcome", "TableStatus"})


def __getattr__(name: str) -> Any:
    if name in _FROM_RUNNER:
        from . import runner

        return getattr(runner, name)
    if name in _FROM_STATS:
        from . import stats

        return getattr(stats, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ABORTABLE_ON_STOP", "ABORTED", "DONE", "FAILED", "IDLE", "LEASE_PREFIX", "SKIPPED", "RunOutcome", "Runner",
           "TableStatus", "trigger_of"]
