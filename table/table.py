"""The ``Table`` handle: the user-facing surface of a lakeline table.

Modelled on delta-rs's ``DeltaTable``: a light handle over a location that reads the
timeline afresh whenever it needs the table's state, and delegates the work to the
write path (:mod:`.writer`), the read path (:mod:`.scan`) and the services.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import datetime
from typing import Any, Mapping

import pyarrow as pa

from ..timeline import faults
from ..timeline.errors import TableExistsError, TableNotFoundError
from ..timeline.instant import Action, State
from ..timeline.log import EventLog
from ..timeline.storage import Storage
from ..timeline.stores import META_DIR, check_timeline_arg, open_store, pointer_path, read_pointer
from ..timeline.table_config import TableConfig
from ..timeline.timeline import Timeline


class Table:
    """A lakeline table at a location. Create with :meth:`create`, open with :meth:`open`."""

    def __init__(self, storage: Storage, log: EventLog, timeline_url: str | None) -> None:
        self.storage = storage
        self.log = log
        self.timeline_url = timeline_url
        self._config: TableConfig | None = None
        self._config_seq = -2

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        schema: pa.Schema,
        record_key: str | list[str] | None = None,
        ordering_field: str | None = None,
        partition_by: list[str] | None = None,
        table_type: str = "cow",
        properties: Mapping[str, Any] | None = None,
        timeline: str | None = None,
    ) -> "Table":
        """Create a new table.

        Args:
            path: local path or ``pyarrow.fs`` URI of the table's base folder.
            schema: the Arrow schema of the rows.
            record_key: key column(s); None makes an append-only table.
            ordering_field: when two versions of a key meet, the larger value wins.
            partition_by: Hive-style partition columns.
            table_type: ``"cow"`` (copy-on-write) or ``"mor"`` (merge-on-read).
            properties: table properties (see ``config/defaults.toml``).
            timeline: None for the filesystem store, or a ``postgresql://`` URL.

        Returns:
            The new table.

        Raises:
            TableExistsError: a table already exists there.
            SchemaMismatchError, UnknownColumnError, InvalidPropertyError: bad arguments
                (nothing is written).
        """
        storage = Storage.for_uri(path)
        table_uuid = uuid.uuid4().hex
        config = TableConfig.build(
            schema, record_key, ordering_field, partition_by, table_type, properties, table_uuid
        )
        store = open_store(storage, timeline, table_uuid)
        pointer = {
            "format": 1,
            "table_uuid": table_uuid,
            "timeline": store.kind,
            "location": storage.uri,
        }
        _write_pointer(storage, pointer)
        log = EventLog(store)

        def must_be_empty(tl: Timeline) -> None:
            if tl.last_seq >= 0:
                raise TableExistsError(f"a table already exists at {storage.uri}")

        req = log.append(Action.SCHEMA, State.REQUESTED, {"change": "create"}, check=must_be_empty)
        faults.point("create.after_requested")
        log.append(Action.SCHEMA, State.INFLIGHT, instant=req.instant)
        log.append(Action.SCHEMA, State.COMPLETED, {"config": config.to_dict()}, instant=req.instant)
        return cls(storage, log, timeline)

    @classmethod
    def open(cls, path: str | os.PathLike[str], timeline: str | None = None) -> "Table":
        """Open an existing table.

        Raises:
            TableNotFoundError: no table at ``path``.
            TimelineConfigError: the timeline argument does not match the table.
            InvalidPropertyError: the stored properties are not valid for this version.
        """
        storage = Storage.for_uri(path)
        pointer = read_pointer(storage)
        check_timeline_arg(pointer, timeline, storage.uri)
        store = open_store(storage, timeline, pointer["table_uuid"])
        table = cls(storage, EventLog(store), timeline)
        if TableConfig.from_timeline(table.timeline) is None:
            raise TableNotFoundError(f"the table at {storage.uri} has no completed schema instant")
        return table

    # -- state -----------------------------------------------------------------------

    @property
    def path(self) -> str:
        return self.storage.uri

    @property
    def timeline(self) -> Timeline:
        """The timeline as it is now (read again on each access)."""
        return self.log.refresh()

    @property
    def config(self) -> TableConfig:
        """The table configuration from the latest completed schema instant."""
        tl = self.timeline
        if self._config is None or tl.last_seq != self._config_seq:
            cfg = TableConfig.from_timeline(tl)
            if cfg is None:
                raise TableNotFoundError(f"the table at {self.storage.uri} has no configuration")
            self._config, self._config_seq = cfg, tl.last_seq
        return self._config

    @property
    def schema(self) -> pa.Schema:
        return self.config.schema

    def __repr__(self) -> str:
        return f"Table({self.storage.uri!r})"


def _write_pointer(storage: Storage, pointer: dict[str, Any]) -> None:
    path = pointer_path(storage)
    data = json.dumps(pointer, indent=2).encode()
    if storage.is_local:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            raise TableExistsError(f"a table already exists at {storage.uri}") from None
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return
    if storage.exists(path):
        raise TableExistsError(f"a table already exists at {storage.uri}")
    storage.write_bytes(path, data)


__all__ = ["Table", "META_DIR", "datetime"]
