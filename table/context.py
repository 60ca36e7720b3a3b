"""The table context: what one write attempt (or one read) works with, as one value.

A write attempt reads the timeline once and then works on that snapshot throughout:
the planners tag keys against its view, the file tasks write for it, and the commit
checks what completed after it. :class:`TableContext` holds exactly that (the storage,
the event log, the configuration with its typed properties, the engine, the snapshot
and its file-system view) and is built once per attempt by the ``Table`` handle, which
stays the user-facing facade. The steps of a write take the context, never the handle,
so a step can only see the snapshot its attempt planned on, and the context pickles:
a distributed engine ships it to where the steps run (the PostgreSQL store pickles its
settings, not its connection).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..timeline.log import EventLog
from ..timeline.storage.filesystem import Storage
from ..timeline.table_config import TableConfig
from ..timeline.timeline import Timeline
from ..timeline.view.fs_view import FileSystemView
from .engine import Engine


@dataclass(frozen=True)
class TableContext:
    """One snapshot of a table and what it takes to read or write against it."""

    storage: Storage
    log: EventLog
    config: TableConfig
    engine: Engine
    snapshot: Timeline
    view: FileSystemView

    def with_config(self, config: TableConfig) -> TableContext:
        """The same snapshot under a new configuration (after a schema change the
        incoming rows needed, made between planning and writing)."""
        return replace(self, config=config)
