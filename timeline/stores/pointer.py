"""The table pointer: ``.lakeline/table.json``, the one file that says a table is here.

It holds the table's uuid and which timeline store keeps its event log, so opening a
table finds its log (and refuses a ``timeline`` argument of the wrong kind). It is
written once, when the table is created, with create-exclusive semantics where the
storage has them: of two processes creating a table at one location, one fails.
"""

from __future__ import annotations

import json
import os
from typing import Any

from ..errors import TableExistsError, TableNotFoundError
from ..storage import META_DIR, Storage

POINTER = "table.json"
#: Version of the pointer file's layout.
POINTER_FORMAT = 1


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


def write_pointer(storage: Storage, table_uuid: str, store_kind: str) -> None:
    """Write the pointer of a new table.

    Raises:
        TableExistsError: a table already exists at this location.
    """
    pointer = {"format": POINTER_FORMAT, "table_uuid": table_uuid, "timeline": store_kind, "location": storage.uri}
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
