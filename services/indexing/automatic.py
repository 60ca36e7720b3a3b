"""The record index a keyed table builds by itself, before a write, once its keys show
random (issue 30, item 2; the rule: :mod:`lakeline.indexes.record_index.auto`).

It is an ``indexing`` instant like any other, marked ``automatic`` in its plan, built
in the writing process before the write plans, so that write's key check already uses
it. Building it is upkeep, never the write's failure: whatever goes wrong is logged and
the write reads the data, as without an index. A build whose process died leaves the
index ``building``; the next write finishes it (once its heartbeat expired), so a table
without a runner is not left paying for an index nobody reads. A user's
``t.indexes.create("record_index")`` adopts it (:meth:`.TableIndexes.create`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from ...indexes.record_index.auto import dropped_before, keys_look_random
from ...indexes.states import IndexKind, IndexState, index_states
from ...timeline.commit_metadata import Operation
from ...timeline.errors import IndexExistsError, ServiceBusyError
from ..phases import claimable

if TYPE_CHECKING:
    from ...table.context import TableContext
    from .table_indexes import TableIndexes

log = logging.getLogger(__name__)

RECORD_INDEX = IndexKind.RECORD_INDEX.value


def build_if_keys_random(indexes: TableIndexes, operation: Operation, rows: Callable[[TableContext], pa.Table]) -> None:
    """Before a write of ``rows`` into ``indexes.table``: build the record index when the
    table's keys show random, or finish such a build whose builder died. Never raises
    an ``Exception`` (``KeyboardInterrupt`` and ``SystemExit`` still stop the process)."""
    table = indexes.table
    cfg = table.config
    min_rows = cfg.props.index_record_index_auto_rows
    # Set either way, the property is the user's choice: built at creation, or never.
    if len(cfg.record_key) != 1 or min_rows <= 0 or "index.record-index" in cfg.properties:
        return
    try:
        # The timeline as last read, not read again: a write reads it anyway, and a rule
        # of thumb may run a write late (a build it races is refused, typed, below).
        tl = table.log.timeline
        built = [d for d in index_states(tl).values() if d.kind == IndexKind.RECORD_INDEX]
        if built:
            d = built[0]
            if d.automatic and d.state == IndexState.BUILDING.value and claimable(table, tl.get(d.instant), tl):
                indexes.finish(d, wait=False)  # its builder died; a writer never waits for one
            return
        if dropped_before(tl):
            return
        if operation == Operation.INSERT and not cfg.props.write_insert_key_check:
            return  # an insert that checks no key reads none: an index would not serve it
        inserted = rows(table.context(tl)).column(cfg.record_key[0]) if operation == Operation.INSERT else None
        if keys_look_random(table.view(tl).latest_slices(), inserted, min_rows):
            indexes.create_definition(RECORD_INDEX, RECORD_INDEX, None, {}, wait=True, automatic=True)
    except (IndexExistsError, ServiceBusyError):
        pass  # another writer got there first: its build is as good
    except Exception as e:  # noqa: BLE001 - upkeep never fails the write, whatever it raises (a bug too)
        # Logged with its traceback: a bug here must be visible, only not to the write.
        log.warning("the record index the table would build by itself was not built: %r", e, exc_info=True)
