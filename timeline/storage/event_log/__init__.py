"""Timeline stores: where a table's event log lives, as a family of plug-ins.

The protocol every store implements is :class:`~.protocol.TimelineStore`;
:mod:`.filesystem` keeps the log next to the data, :mod:`.postgresql` in PostgreSQL (with
its lease lock, :mod:`.postgresql_lock`), and :mod:`.pointer` is the table's pointer file,
which records which store a table uses.

``timeline=None`` keeps the event log next to the data (filesystem store; the base path
must be local because only a local filesystem can put-if-absent here);
``timeline="postgresql://…"`` keeps it in PostgreSQL, keyed by the table's uuid, so one
database holds many tables. Opening a table without saying where its timeline is fails
with a clear error (:func:`check_timeline_arg`) instead of silently reading an empty log.
"""

from __future__ import annotations

from typing import Any

from ...diagnostics.redact import redact
from ...errors import StorageNotSupportedError, TimelineConfigError
from ..filesystem import META_DIR, Storage
from .protocol import TimelineStore


def open_store(storage: Storage, timeline: str | None, table_uuid: str) -> TimelineStore:
    """The store for a table.

    Raises:
        StorageNotSupportedError: filesystem store on storage that cannot put-if-absent.
        TimelineConfigError: an unknown kind of timeline location.
    """
    if (timeline is None or timeline == "object_store") and storage.objects is not None:
        from .object_store import ObjectStoreLog

        return ObjectStoreLog(storage, storage.path(META_DIR))
    if timeline is None or timeline == "filesystem":
        if not storage.is_local:
            raise StorageNotSupportedError(
                f"{storage.uri} cannot put-if-absent, so it cannot hold the event log; "
                "keep the timeline in PostgreSQL (timeline='postgresql://...')"
            )
        from .filesystem import FileSystemStore

        return FileSystemStore(storage.path(META_DIR))
    if timeline.startswith(("postgresql://", "postgres://")):
        from .postgresql import PostgresStore  # psycopg is imported only here

        return PostgresStore(timeline, table_uuid, storage.uri)
    # Most likely a DSN with a typo in its scheme, password and all: shown redacted.
    raise TimelineConfigError(f"timeline must be None or a postgresql:// URL, not {redact(repr(timeline))}")


def check_timeline_arg(pointer: dict[str, Any], timeline: str | None, where: str) -> None:
    """Refuse opening a table with a timeline location of the wrong kind."""
    kind = pointer.get("timeline", "filesystem")
    if kind == "postgresql" and not timeline:
        raise TimelineConfigError(
            f"the table at {where} keeps its timeline in PostgreSQL; pass timeline='postgresql://...'"
        )
    if kind in ("filesystem", "object_store") and timeline:
        on = "on the filesystem" if kind == "filesystem" else "on its object store"
        raise TimelineConfigError(f"the table at {where} keeps its timeline {on}, next to its data; pass timeline=None")


__all__ = ["TimelineStore", "check_timeline_arg", "open_store"]
