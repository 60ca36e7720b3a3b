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

from ...timeline.diagnostics import faults
from ...timeline.errors import CommitConflictError
from ...timeline.field_ids import NAME_WITHOUT_IDS, assign_ids, field_id, has_ids, without_ids_marked
from ...timeline.instant import Action, State
from ...timeline.log import EventLog
from ...timeline.plans import SchemaChangePlan
from ...timeline.table_config import TableConfig
from ...timeline.timeline import Timeline
from ..merge_engine import MergeEngine


def commit_schema(
    log: EventLog,
    change: SchemaChangePlan,
    config: TableConfig,
    check: Callable[[Timeline], None] | None = None,
    fault: str | None = None,
    recheck: bool = False,
) -> int:
    """Append a schema instant whose completion makes ``config`` the table's; ``check``
    guards the ``requested`` append (and the ``completed`` one with ``recheck``: the
    instant is then rolled back when it fails there with CommitConflictError), ``fault``
    names a fault point right after it. Returns the instant id.

    Raises:
        ImmutablePropertyError: ``config`` folds a key's versions differently from the
            table's configuration (``merge.engine``, ``merge.<column>.aggregate`` are
            fixed at creation; columns matched by field id, so a rename that carried its
            setting along is no change); checked on the log the ``requested`` event
            lands on, so nothing is written.
        InvalidMergeEngineError: ``config``'s merge settings do not fit its schema.
    """
    engine = MergeEngine.of(config)

    def guarded(tl: Timeline) -> None:
        if check is not None:
            check(tl)
        current = TableConfig.from_timeline(tl)
        if current is not None:
            MergeEngine.of(current).check_unchanged(engine, current.schema, config.schema)

    req = log.append(Action.SCHEMA, State.REQUESTED, change.to_dict(), check=guarded)
    if fault is not None:
        faults.point(fault)
    log.append(Action.SCHEMA, State.INFLIGHT, instant=req.instant)
    try:
        # ``check`` again on the log the completion lands on: two changes both requested
        # on one schema must not both complete (the later would undo the earlier).
        again = check if recheck else None
        log.append(Action.SCHEMA, State.COMPLETED, {"config": config.to_dict()}, instant=req.instant, check=again)
    except CommitConflictError as e:
        log.append(Action.SCHEMA, State.ROLLED_BACK, {"reason": str(e)}, instant=req.instant)
        raise
    return req.instant


def add_columns(log: EventLog, config: TableConfig, new_fields: list[pa.Field]) -> TableConfig:
    """Add ``new_fields`` to the schema (``write.schema-evolution = add-columns``), with
    fresh field ids on a table that has ids; returns the new configuration.

    Raises:
        CommitConflictError: the table's schema is no longer ``config``'s (another
            schema instant completed since the write read it); landing this one would
            undo that change, so nothing is written and the write can be run again.
    """
    evolved = replace(config, schema=pa.schema(list(config.schema) + new_fields))
    if has_ids(config.schema):
        fields, last = fresh_fields(config, new_fields)
        evolved = replace(config, schema=pa.schema(list(config.schema) + fields), last_column_id=last)

    def still_ours(tl: Timeline) -> None:
        current = TableConfig.from_timeline(tl)
        if current is not None and _columns(current.schema) != _columns(config.schema):
            raise CommitConflictError(
                "the table's schema changed while this write with new columns planned; nothing was written, "
                f"run it again (the table now has {current.schema.names})"
            )

    commit_schema(log, SchemaChangePlan("add-columns", tuple(f.name for f in new_fields)), evolved, check=still_ours)
    return evolved


def _columns(schema: pa.Schema) -> list[tuple[str, str, int | None]]:
    return [(f.name, str(f.type), field_id(f)) for f in schema]


def fresh_fields(config: TableConfig, new_fields: list[pa.Field]) -> tuple[list[pa.Field], int]:
    """``new_fields`` with ids after the table's last (any they carry dropped), marked
    absent from files without ids when the table has such files; and the new last id."""
    fields, last = assign_ids(new_fields, config.last_column_id, keep=False)
    if any(NAME_WITHOUT_IDS in (f.metadata or {}) for f in config.schema):
        fields = [without_ids_marked(f, "") for f in fields]
    return fields, last
