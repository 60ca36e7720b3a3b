"""The ``lakeline`` data source's options that open a table: ``path``, ``timeline`` and
the storage options of a table on an object store.

Why a spelling of its own: Spark hands a data source its options as one flat map with
lower-cased keys, next to Spark's and lakeline's own (``path``, ``as_of``,
``operation``...). A storage option is therefore recognised by its name: deltalake's
keys as users already write them (``AWS_ENDPOINT_URL``, ``AWS_SECRET_ACCESS_KEY``,
``GOOGLE_SERVICE_ACCOUNT``, ``AZURE_STORAGE_ACCOUNT_KEY``..., any case), or any other
object-store key after ``storage.`` (``storage.timeout``). Absent keys come from the
environment of the process that opens the store, as for ``Table.open``.

The options live in memory only: in the data source's reader and writer, which Spark
pickles to its Python workers, and in the ``ObjectStore`` the tasks carry.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..table.table import Table
from ..timeline.errors import TableNotFoundError

#: Option prefixes of deltalake's storage keys, passed on as they are.
STORE_PREFIXES = ("aws_", "google_", "azure_")
#: The prefix of any other object-store option (``storage.timeout``, ``storage.allow_http``).
STORAGE_PREFIX = "storage."


def storage_options_of(options: Mapping[str, str]) -> dict[str, str]:
    """The storage options among a data source's options. An unknown key under one of
    these prefixes is refused when the table is opened (``StorageConfigError`` naming
    the key, never its value)."""
    out: dict[str, str] = {}
    for key, value in options.items():
        low = str(key).lower()
        if low.startswith(STORAGE_PREFIX):
            out[low[len(STORAGE_PREFIX) :]] = value
        elif low.startswith(STORE_PREFIXES):
            out[low] = value
    return out


def open_table(path: str | None, options: Mapping[str, str]) -> Table:
    """The table at ``path``, with the ``timeline`` and storage options of ``options``.

    Raises:
        TableNotFoundError: no path, or no table there.
        StorageConfigError: a bad storage option.
    """
    if not path:
        raise TableNotFoundError("the lakeline data source needs a path: load(path) / save(path)")
    return Table.open(path, options.get("timeline"), storage_options_of(options))
