"""How much maintenance a table needs, and what the runner's runs did: the numbers the
runner ranks, serves and prints.

Why one value for three uses: the runner orders due work by the biggest backlog,
exports the same numbers as Prometheus gauges (:mod:`.metrics`), and
``lakeline runner status`` prints them; computing them in one place keeps the three in
agreement. Everything comes from one refreshed timeline and its file-system view (no
file is listed or opened), so a snapshot costs what opening the table costs.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..table_services import SERVICES, service_named

if TYPE_CHECKING:
    from ...table.table import Table
    from .tables import Target


#: Outcomes of one run.
DONE, IDLE, ABORTED, SKIPPED, FAILED = "done", "idle", "aborted", "skipped", "failed"


@dataclass(frozen=True)
class RunOutcome:
    """What one run of a service on a table did.

    ``outcome``: ``done`` (instants completed), ``idle`` (nothing due), ``aborted`` (an
    instant gave up and was rolled back), ``skipped`` (another runner holds it) or
    ``failed`` (``error`` says why; retried on the next tick).
    """

    table: str
    service: str
    outcome: str
    instants: tuple[int, ...] = ()
    error: str | None = None
    seconds: float = 0.0
    ended_at: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "service": self.service,
            "outcome": self.outcome,
            "instants": list(self.instants),
            "error": self.error,
            "seconds": round(self.seconds, 3),
            "ended_at": self.ended_at,
        }


@dataclass(frozen=True)
class TableStatus:
    """One table as ``lakeline runner status`` shows it: its schedules, its stats (None
    when it could not be read: ``error``), and the last run of each service this runner
    knows of."""

    target: Target
    stats: TableStats | None
    error: str | None = None
    last_runs: Mapping[str, RunOutcome] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class TableStats:
    """A table's maintenance backlog as of one timeline read.

    ``small_slices`` counts the file slices that scheduled clustering would gather (below
    ``clustering.small-file-ratio`` of ``write.target-file-size-bytes``), the way Paimon's
    compaction coordinator counts small files; ``last_completed_us`` is the completion time
    of each service's latest completed instant still in the active timeline.
    """

    pending: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    slices: int = 0
    files: int = 0
    log_files: int = 0
    small_slices: int = 0
    last_completed_us: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def pending_total(self) -> int:
        return sum(self.pending.values())

    @property
    def small_file_share(self) -> float:
        """Share of file slices that are small (0.0 for an empty table)."""
        return self.small_slices / self.slices if self.slices else 0.0

    @property
    def logs_per_slice(self) -> float:
        """Log files per file slice on average: what every merge-on-read read merges."""
        return self.log_files / self.slices if self.slices else 0.0

    @property
    def backlog(self) -> int:
        """The runner's priority when more is due than it has threads: pending instants
        (plans waiting for an executor), log files (merge work for every reader) and
        small slices (files every reader opens). Unit-free on purpose: each is one unit of
        work a service removes."""
        return self.pending_total + self.log_files + self.small_slices


def table_stats(table: Table) -> TableStats:
    """The stats of ``table`` now (refreshes its timeline)."""
    tl = table.log.refresh()
    pending: dict[str, int] = {}
    last: dict[str, int] = {}
    services = {name: service_named(name) for name in SERVICES}
    for name, service in services.items():
        pending[name] = len(service.pending(tl))
    # Newest first, stopping once every service has its latest: the active timeline can
    # hold hundreds of instants and most are writes.
    for inst in reversed(tl.completed()):
        for name, service in services.items():
            if name not in last and inst.action is service.action and service.owns(inst):
                last[name] = inst.completed_us or inst.requested_us
        if len(last) == len(services):
            break
    props = table.config.props
    limit = props.clustering_small_file_ratio * props.write_target_file_size_bytes
    slices = table.view(tl).latest_slices()
    return TableStats(
        pending=MappingProxyType(pending),
        slices=len(slices),
        files=sum(len(s.files) for s in slices),
        log_files=sum(len(s.logs) for s in slices),
        small_slices=sum(1 for s in slices if s.bytes < limit),
        last_completed_us=MappingProxyType(last),
    )
