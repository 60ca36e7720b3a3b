"""The scheduled service runner (docs/runner.md): a daemon, or a one-shot pass, that keeps
many tables healthy.

The rooms: the :class:`Runner` itself (:mod:`.runner`), its TOML config (:mod:`.config`)
and schedules (:mod:`.schedules`), the queue of due work (:mod:`.due_queue`), the tables
it keeps open and their leases (:mod:`.tables`), backlog stats and run outcomes
(:mod:`.stats`), its Prometheus metrics (:mod:`.metrics`) and the apscheduler triggers of
its schedules (:mod:`.triggers`).

``from lakeline.services.runner import Runner`` imports apscheduler (only :mod:`.runner`
and :mod:`.triggers` do); the config, schedules and stats import without it, so this package loads the
runner module only when one of its names is asked for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .runner import ABORTABLE_ON_STOP, LEASE_PREFIX, Runner
    from .stats import ABORTED, DONE, FAILED, IDLE, SKIPPED, RunOutcome, TableStatus
    from .triggers import trigger_of

_FROM_RUNNER = frozenset({"ABORTABLE_ON_STOP", "LEASE_PREFIX", "Runner"})
_FROM_STATS = frozenset({"ABORTED", "DONE", "FAILED", "IDLE", "SKIPPED", "RunOutcome", "TableStatus"})


def __getattr__(name: str) -> Any:
    if name in _FROM_RUNNER:
        from . import runner

        return getattr(runner, name)
    if name == "trigger_of":
        from .triggers import trigger_of

        return trigger_of
    if name in _FROM_STATS:
        from . import stats

        return getattr(stats, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ABORTABLE_ON_STOP",
    "ABORTED",
    "DONE",
    "FAILED",
    "IDLE",
    "LEASE_PREFIX",
    "SKIPPED",
    "RunOutcome",
    "Runner",
    "TableStatus",
    "trigger_of",
]
