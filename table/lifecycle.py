"""Creating and opening a table's event log: the steps behind ``Table.create`` and
``Table.open``.

Creating claims the location first (:func:`~lakeline.timeline.storage.ownership.claim_location`:
where a table may live, the pointer written whole or an abandoned one adopted), then
appends the schema instant with a check that the log was empty, so of racing creators
exactly one wins. Opening reads the pointer, refuses a timeline argument of the wrong
kind and a copied PostgreSQL table (:func:`~lakeline.timeline.storage.event_log.pointer.check_identity`),
and needs a completed schema instant.
"""

from __future__ import annotations

import dataclasses

from ..timeline.archive import EventArchive
from ..timeline.errors import TableExistsError, TableNotFoundError
from ..timeline.log import EventLog
from ..timeline.plans import SchemaChangePlan
from ..timeline.storage.event_log import check_timeline_arg, open_store
from ..timeline.storage.event_log.pointer import check_identity, read_pointer
from ..timeline.storage.filesystem import Storage
from ..timeline.storage.ownership import claim_location
from ..timeline.storage.probe import require_safe
from ..timeline.table_config import TableConfig
from ..timeline.timeline import Timeline
from .schema.change import commit_schema


def create_log(storage: Storage, config: TableConfig, timeline: str | None) -> EventLog:
    """The log of a new table at ``storage`` with ``config`` (its schema instant completed).

    Raises:
        TableExistsError: a table already exists there.
        UnsafeLocationError: a table may not live there (docs/safety.md).
        TimelineConfigError, StorageNotSupportedError: a bad ``timeline`` (nothing written).
        UnsafeStorageError: an object store whose conditional puts are not atomic.
        StorageAccessError: an object store that cannot be reached or refuses the credentials.
    """
    store = open_store(storage, timeline, config.table_uuid)  # a bad timeline is refused before any write
    if storage.objects is not None and store.kind == "object_store":
        require_safe(storage.objects, storage.base)  # docs/object-storage.md: checked before it holds a log
    table_uuid = claim_location(storage, timeline, store.kind, config.table_uuid)  # docs/safety.md
    if table_uuid != config.table_uuid:  # an abandoned create's pointer, adopted
        store.close()
        config = dataclasses.replace(config, table_uuid=table_uuid)
        store = open_store(storage, timeline, table_uuid)
    log = EventLog(store, archive=EventArchive(storage))
    if table_uuid == config.table_uuid:
        log.assume_empty()  # a location this call claimed: the schema instant goes to slot 0 unread

    def must_be_empty(tl: Timeline) -> None:
        if tl.last_seq >= 0:
            raise TableExistsError(f"a table already exists at {storage.uri}")

    commit_schema(log, SchemaChangePlan("create"), config, check=must_be_empty, fault="create.after_requested")
    return log


def open_log(storage: Storage, timeline: str | None) -> EventLog:
    """The log of the existing table at ``storage``.

    Raises:
        TableNotFoundError: no table there, or its creation did not finish.
        TableIdentityError: a copy of a table whose timeline is in PostgreSQL.
        TimelineConfigError: the timeline argument does not match the table.
    """
    pointer = read_pointer(storage)
    check_timeline_arg(pointer, timeline, storage.uri)
    check_identity(pointer, storage)
    log = EventLog(open_store(storage, timeline, pointer["table_uuid"]), archive=EventArchive(storage))
    current = log.refresh()
    if TableConfig.from_timeline(current) is None:
        how = (
            "Table.create at the same location completes it"
            if not current.instants()
            else "remove its folder's .lakeline to create it again"
        )
        raise TableNotFoundError(
            f"the table at {storage.uri} has no completed schema instant (its creation did not finish; {how})"
        )
    return log


__all__ = ["create_log", "open_log"]
