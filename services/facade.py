"""``t.services``: the per-table entry point to table services."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..timeline.instant import Instant
from .rollback import rollback_failed

if TYPE_CHECKING:
    from ..table.table import Table


@dataclass(frozen=True)
class ServiceResult:
    """What a service run did: its instant (None when there was nothing to do) and counts."""

    instant: Instant | None
    stats: dict[str, Any] = field(default_factory=dict)


class TableServices:
    """Services of one table."""

    def __init__(self, table: "Table") -> None:
        self.table = table

    def rollback_failed(self) -> ServiceResult:
        """Roll back every pending write whose heartbeat expired, and finish rollbacks
        that died midway."""
        inst, stats = rollback_failed(self.table)
        return ServiceResult(inst, stats)
