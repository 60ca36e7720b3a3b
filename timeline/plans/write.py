"""The plan of a write's ``requested`` event: the operation and the snapshot it read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class WriteRequest:
    """The requested event of a write (``commit``, ``deltacommit``, overwrite's
    ``replacecommit``): the operation and the snapshot position the writer read.
    ``writer`` marks an instant a live writer keeps a heartbeat for."""

    operation: str
    snapshot_seq: int | None = None
    writer: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"operation": str(self.operation), "snapshot_seq": self.snapshot_seq, "writer": self.writer}

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> WriteRequest:
        seq = raw.get("snapshot_seq")
        return cls(str(raw.get("operation", "")), seq if isinstance(seq, int) else None, bool(raw.get("writer")))
