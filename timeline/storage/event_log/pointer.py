"""The table pointer: ``.lakeline/table.json``, the one file that says a table is here.

It holds the table's uuid and which timeline store keeps its event log, so opening a
table finds its log (and refuses a ``timeline`` argument of the wrong kind). It is
written once, when the table is created, whole and with create-exclusive semantics
where the storage has them (link(2) of a finished file): of two processes creating a
table at one location, one fails, and neither reads the other's pointer half-written.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ...errors import StorageConfigError, TableExistsError, TableIdentityError, TableNotFoundError
from ..filesystem import META_DIR, Storage

POINTER = "table.json"
#: Version of the pointer file's layout.
POINTER_FORMAT = 1
_UUID = re.compile(r"[0-9a-f]{32}")


def pointer_path(storage: Storage) -> str:
    return storage.path(META_DIR, POINTER)


def read_pointer(storage: Storage) -> dict[str, Any]:
    """The pointer file of an existing table.

    Raises:
        TableNotFoundError: no table at this location.
    """
    path = pointer_path(storage)
    try:
        pointer = json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        raise TableNotFoundError(f"no lakeline table at {storage.uri}") from None
    except (NotADirectoryError, IsADirectoryError):
        raise TableNotFoundError(f"no lakeline table at {storage.uri}: it is not a folder") from None
    except StorageConfigError:
        raise  # a ValueError too, but the store's options are wrong, not the table missing
    except ValueError as e:
        raise TableNotFoundError(f"{path} is not a lakeline pointer: {e}") from None
    _check(pointer, path)
    return pointer


def _check(pointer: Any, path: str) -> None:
    """Refuse a pointer of another shape or a format this version does not know."""
    if not isinstance(pointer, dict):
        raise TableNotFoundError(f"{path} is not a lakeline pointer: a JSON object was expected")
    fmt = pointer.get("format")
    if fmt != POINTER_FORMAT or isinstance(fmt, bool):
        raise TableNotFoundError(
            f"{path} has pointer format {fmt!r}; this lakeline reads format {POINTER_FORMAT} "
            "(a newer lakeline wrote it, or it is damaged)"
        )
    table_uuid = pointer.get("table_uuid")
    if not isinstance(table_uuid, str) or not _UUID.fullmatch(table_uuid):
        raise TableNotFoundError(f"{path} is not a lakeline pointer: no valid table_uuid")
    if pointer.get("timeline", "filesystem") not in ("filesystem", "object_store", "postgresql"):
        raise TableNotFoundError(f"{path} names an unknown timeline store {pointer.get('timeline')!r}")
    if not isinstance(pointer.get("location", ""), str):
        raise TableNotFoundError(f"{path} is not a lakeline pointer: location is not a string")


def check_identity(pointer: dict[str, Any], storage: Storage) -> None:
    """Refuse to open a copy of a table whose event log is not in its folder.

    A filesystem timeline travels with a copied folder, so the copy is a table of its own.
    A PostgreSQL timeline is found by the table's uuid, which the copy shares: writing
    through it would put the copy's files into the original's log (and the original's
    reads would then name files it does not have). The pointer records where the table
    was created; a PostgreSQL table opened anywhere else is that copy.

    Raises:
        TableIdentityError: the pointer's location is not ``storage``'s.
    """
    location = pointer.get("location")
    if pointer.get("timeline") != "postgresql" or not location or location == storage.uri:
        return
    raise TableIdentityError(
        f"the folder {storage.uri} is a copy of the table at {location}, whose timeline is in PostgreSQL and "
        "is shared by uuid: a copy may not write it. Open the table at its own location (restore the copy "
        "there), or create a new table and insert the copy's rows into it"
    )


def write_pointer(storage: Storage, table_uuid: str, store_kind: str) -> None:
    """Write the pointer of a new table.

    Raises:
        TableExistsError: a table already exists at this location.
    """
    pointer = {"format": POINTER_FORMAT, "table_uuid": table_uuid, "timeline": store_kind, "location": storage.uri}
    path = pointer_path(storage)
    data = json.dumps(pointer, indent=2).encode()
    try:
        # Written whole and create-only (link(2) of a finished file, or a create-only
        # put): of racing creators one wins, and none reads a half-written pointer.
        storage.create_bytes(path, data)
    except FileExistsError:
        raise TableExistsError(f"a table already exists at {storage.uri}") from None
