"""Choosing and opening a table's timeline store.

``timeline=None`` keeps the event log next to the data (filesystem store; the base path
must be local because only a local filesystem can put-if-absent here);
``timeline="postgresql://…"`` keeps it in PostgreSQL, keyed by the table's uuid, so one
database holds many tables. The choice is recorded in the table's pointer file
``.lakeline/table.json`` so opening a table without saying where its timeline is fails
with a clear error instead of silently reading an empty log.
"""

from __future__ import annotations

import json
from typing import Any

from .errors import StorageNotSupportedError, TableNotFoundError, TimelineError
from .storage import Storage
from .store import TimelineStore

META_DIR = ".lakeline"
POINTER = "table.json"


class TimelineConfigError(TimelineError, ValueError):
    """The timeline argument does not fit the table (e.g. missing PostgreSQL URL)."""


def open_store(storage: Storage, timeline: str | None, table_uuid: str) -> TimelineStore:
    """The store for a table.

    Raises:
        StorageNotSupportedError: filesystem store on storage that cannot put-if-absent.
        TimelineConfigError: an unknown kind of timeline location.
    """
    if timeline is None or timeline == "filesystem":
        if not storage.is_local:
            raise StorageNotSupportedError(
                f"{storage.uri} cannot put-if-absent, so it cannot hold the event log; "
                "keep the timeline in PostgreSQL (timeline='postgresql://...')"
            )
        from .fs_store import FileSystemStore

        return FileSystemStore(storage.path(META_DIR))
    if timeline.startswith(("postgresql://", "postgres://")):
        from .pg_store import PostgresStore  # psycopg is imported only here

        return PostgresStore(timeline, table_uuid, storage.uri)
    raise TimelineConfigError(f"timeline must be None or a postgresql:// URL, not {timeline!r}")


def pointer_path(storage: Storage) -> str:
    return storage.path(META_DIR, POINTER)


def read_pointer(storage: Storage) -> dict[str, Any]:
    """The pointer file of an existing table.

    Raises:
        TableNotFoundError: no table at this location.
    """
    try:
        return json.loads(storage.read_bytes(pointer_path(storage)))
    except FileNotFoundError:
        raise TableNotFoundError(f"no lakeline table at {storage.uri}") from None
    except ValueError as e:
        raise TableNotFoundError(f"{pointer_path(storage)} is not a lakeline pointer: {e}") from None


def check_timeline_arg(pointer: dict[str, Any], timeline: str | None, where: str) -> None:
    """Refuse opening a table with a timeline location of the wrong kind."""
    kind = pointer.get("timeline", "filesystem")
    if kind == "postgresql" and not timeline:
        raise TimelineConfigError(
            f"the table at {where} keeps its timeline in PostgreSQL; pass timeline='postgresql://...'"
        )
    if kind == "filesystem" and timeline:
        raise TimelineConfigError(f"the table at {where} keeps its timeline on the filesystem; pass timeline=None")
