"""Schema instants: how a table's configuration (schema, key, properties) changes.

The configuration is not a file beside the data: it is the payload of the latest
completed ``schema`` instant, so every reader and writer that reads the same timeline
sees the same configuration. A table starts with one (``create``); a write whose rows
bring new columns adds one (``add-columns``) once it planned without error, so refused
input leaves no trace. Each goes ``requested → inflight → completed`` in one go.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pyarrow as pa

from ..timeline.diagnostics import faults
from ..timeline.instant import Action, State
from ..timeline.log import EventLog
from ..timeline.plans import SchemaChangePlan
from ..timeline.table_config import TableConfig
from ..timeline.timeline import Timeline
from .merge_engine import MergeEngine


def commit_schema(
    log: EventLog,
    change: SchemaChangePlan,
    config: TableConfig,
    check: Callable[[Timeline], None] | None = None,
    fault: str | None = None,
) -> int:
    """Append a schema instant whose completion makes ``config`` the table's; ``check``
    guards the ``requested`` append, ``fault`` names a fault point right after it.
    Returns the instant id.

    Raises:
        ImmutablePropertyError: ``config`` folds a key's versions differently from the
            table's configuration (``merge.engine``, ``merge.<column>.aggregate`` are
            fixed at creation); checked on the log the ``requested`` event lands on, so
            nothing is written.
        InvalidMergeEngineError: ``config``'s merge settings do not fit its schema.
    """
    engine = MergeEngine.of(config)

    def guarded(tl: Timeline) -> None:
        if check is not None:
            check(tl)
        current = TableConfig.from_timeline(tl)
        if current is not None:
            MergeEngine.of(current).check_unchanged(engine)

    req = log.append(Action.SCHEMA, State.REQUESTED, change.to_dict(), check=guarded)
    if fault is not None:
        faults.point(fault)
    log.append(Action.SCHEMA, State.INFLIGHT, instant=req.instant)
    log.append(Action.SCHEMA, State.COMPLETED, {"config": config.to_dict()}, instant=req.instant)
    return req.instant


def add_columns(log: EventLog, config: TableConfig, new_fields: list[pa.Field]) -> TableConfig:
    """Add ``new_fields`` to the schema (``write.schema-evolution = add-columns``);
    returns the new configuration."""
    evolved = replace(config, schema=pa.schema(list(config.schema) + new_fields))
    commit_schema(log, SchemaChangePlan("add-columns", tuple(f.name for f in new_fields)), evolved)
    return evolved
