"""The catalog: tables by name (``namespace.name``) in a PostgreSQL database.

Like pyiceberg's SQL catalog or LakeSoul's table_info/name/path tables, a catalog maps
names to tables; here it lives in the same database as the tables' timelines (every
table created through it keeps its timeline there, ``timeline=dsn``), so one connection
string names a whole set of tables, which is what the runner's ``[[catalogs]]`` and
``lakeline tables`` list.

Why it is built this way:

* The rules are the database's unique constraints (name, location, timeline), not checks
  made before writing, so they hold between processes (:mod:`~lakeline.timeline.storage.event_log.
  postgresql_catalog`, the only module here that talks SQL).
* Creating reserves the name and the location first, in a transaction that stays open
  while the table is created and commits with the table's uuid: of two creators of one
  name, the loser waits, then gets :class:`TableExistsError` without having written a
  file; a failed (or killed) creator leaves neither a name nor a reservation behind.
* Everything a caller can get wrong (the name, the schema, keys, properties, the
  location) is checked before anything is written.
* Dropping removes only the name: the table stays where it is, openable by path
  (``Table.open(location, timeline=dsn)``) or adoptable again with
  :meth:`Catalog.register_table`. ``purge=True`` deletes its own files and timeline too,
  and nothing else (:func:`lakeline.timeline.storage.ownership.purge`).

psycopg is imported only when a catalog is constructed (``import lakeline.table`` stays light).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ..timeline.commit_metadata import file_paths
from ..timeline.diagnostics.redact import redact
from ..timeline.errors import (
    InvalidTableNameError,
    LakelineError,
    LocationInUseError,
    TableExistsError,
    TableIdentityError,
    TableNotFoundError,
    TimelineConfigError,
)
from ..timeline.storage.event_log.pointer import pointer_path, read_pointer
from ..timeline.storage.filesystem import Storage
from ..timeline.storage.ownership import purge as purge_files
from ..timeline.table_config import TableConfig, TableType
from ..timeline.view.file_group import table_tag
from .hooks import property_hooks
from .merge_engine import MergeEngine
from .table import Table

if TYPE_CHECKING:
    from collections.abc import Mapping

    from ..timeline.storage.event_log.postgresql_catalog import CatalogRow, CatalogRows

log = logging.getLogger(__name__)

_PART = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True, order=True)
class TableName:
    """A catalog name: ``namespace.name``, each part ``[A-Za-z0-9_]+`` (case-sensitive)."""

    namespace: str
    name: str

    @classmethod
    def parse(cls, text: object) -> TableName:
        """Raises: InvalidTableNameError: not ``namespace.name`` of the allowed characters."""
        parts = text.split(".") if isinstance(text, str) else []
        if len(parts) != 2 or not all(_PART.fullmatch(p) for p in parts):
            raise InvalidTableNameError(
                f"table name must be namespace.name, each part of letters, digits and _; not {text!r}"
            )
        return cls(parts[0], parts[1])

    def __str__(self) -> str:
        return f"{self.namespace}.{self.name}"


def check_namespace(namespace: object) -> str:
    """Raises: InvalidTableNameError: not ``[A-Za-z0-9_]+``."""
    if not isinstance(namespace, str) or not _PART.fullmatch(namespace):
        raise InvalidTableNameError(f"namespace must be letters, digits and _; not {namespace!r}")
    return namespace


@dataclass(frozen=True)
class CatalogTable:
    """What the catalog knows of one table (:meth:`Catalog.describe`)."""

    name: str  # namespace.name
    namespace: str
    location: str  # the table's base path, as ``Table.path`` spells it
    table_uuid: str
    created_at: datetime  # when the name was recorded (UTC)


class Catalog:
    """Tables by name in the PostgreSQL database at ``dsn`` (a ``postgresql://`` URL).

    Args:
        dsn: the database; tables created here keep their timeline in it.
        lock_timeout_s: how long a creation waits for another process creating the same
            name or location before giving up with ``LockTimeoutError``.

    Thread-safe and picklable; :meth:`close` (or ``with Catalog(...)``) releases its connection.
    Tables it returns hold their own connection (``t.log.store.close()``).
    """

    def __init__(
        self, dsn: str, lock_timeout_s: float = 60.0, storage_options: Mapping[str, str] | None = None
    ) -> None:
        if not isinstance(dsn, str) or not dsn.startswith(("postgresql://", "postgres://")):
            # Most likely a DSN with a typo in its scheme, password and all: shown redacted.
            raise TimelineConfigError(f"a catalog needs a postgresql:// URL, not {redact(repr(dsn))}")
        from ..timeline.storage.event_log.postgresql_catalog import CatalogRows  # psycopg: only now

        self.dsn = dsn
        self.lock_timeout_s = lock_timeout_s
        #: Options of the object store its locations are on (deltalake's keys; the
        #: environment fills what is absent). Never stored in the catalog's rows.
        self.storage_options = dict(storage_options or {})
        self._rows: CatalogRows = CatalogRows(dsn, lock_timeout_s)

    # A catalog may be pickled into a worker process: ship the settings, not the socket.
    def __getstate__(self) -> dict[str, Any]:
        return {"dsn": self.dsn, "lock_timeout_s": self.lock_timeout_s, "storage_options": self.storage_options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["dsn"], state["lock_timeout_s"], state.get("storage_options"))  # type: ignore[misc]

    def __repr__(self) -> str:
        from ..timeline.storage.event_log.postgresql import safe_dsn

        return f"Catalog({safe_dsn(self.dsn)!r})"

    def close(self) -> None:
        self._rows.close()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- tables ------------------------------------------------------------------------

    def create_table(
        self,
        name: str,
        location: str | os.PathLike[str],
        schema: pa.Schema,
        record_key: str | list[str] | None = None,
        ordering_field: str | None = None,
        partition_by: list[str] | None = None,
        table_type: str = TableType.COW,
        properties: Mapping[str, Any] | None = None,
    ) -> Table:
        """Create a table at ``location`` (arguments as for :meth:`Table.create`) and name it.

        Raises:
            InvalidTableNameError: a malformed name.
            SchemaMismatchError, UnknownColumnError, InvalidPropertyError: bad arguments.
            TableExistsError: the name is taken (also when another process won the race).
            LocationInUseError: the location belongs to another name, or holds a table.
            UnsafeLocationError: no table may live there (docs/safety.md: the empty path, a
                root or home folder, a non-empty folder, a file, inside another table).
            LockTimeoutError: another process kept creating this name or location too long.
            Nothing is written when any of these is raised.
        """
        tname = TableName.parse(name)
        config = TableConfig.build(schema, record_key, ordering_field, partition_by, table_type, properties, "")
        property_hooks(config.props)
        MergeEngine.of(config)
        storage = Storage.for_uri(location, self.storage_options)
        self._check_free(storage, tname)
        with self._rows.reserving(tname.namespace, tname.name, storage.uri) as reservation:
            try:
                table = Table.create(
                    storage.uri,
                    schema,
                    record_key=record_key,
                    ordering_field=ordering_field,
                    partition_by=partition_by,
                    table_type=table_type,
                    properties=properties,
                    timeline=self.dsn,
                    storage_options=self.storage_options,
                )
            except TableExistsError:  # a table appeared there meanwhile, outside this catalog
                raise LocationInUseError(f"a table already exists at {storage.uri}") from None
            reservation.table_id = table.config.table_uuid
        return table

    def _check_free(self, storage: Storage, tname: TableName) -> None:
        if self._rows.get(tname.namespace, tname.name) is not None:
            raise TableExistsError(f"a table named {tname} already exists in the catalog")
        if storage.exists(pointer_path(storage)):
            raise LocationInUseError(
                f"a table already exists at {storage.uri}; Catalog.register_table names it if its timeline is here"
            )

    def register_table(self, name: str, location: str | os.PathLike[str]) -> Table:
        """Name an existing table whose timeline is in this database.

        Raises:
            InvalidTableNameError: a malformed name.
            TableNotFoundError: no table at ``location`` with its timeline here.
            TimelineConfigError: the table keeps its timeline on the filesystem.
            TableExistsError, LocationInUseError: the name, or the table, is already named.
        """
        tname = TableName.parse(name)
        table = Table.open(location, timeline=self.dsn, storage_options=self.storage_options)
        try:
            self._rows.insert(tname.namespace, tname.name, table.path, table.config.table_uuid)
        except BaseException:
            table.log.store.close()
            raise
        return table

    def load_table(self, name: str) -> Table:
        """Open the table named ``name``.

        Raises:
            InvalidTableNameError: a malformed name.
            TableNotFoundError: no such name, or its table is gone from its location
                (or was replaced by another table).
        """
        row = self._row(TableName.parse(name))
        try:
            table = Table.open(row.location, timeline=self.dsn, storage_options=self.storage_options)
        except TableNotFoundError as e:
            raise TableNotFoundError(f"{name} is registered at {row.location}, but: {e}") from None
        if table.config.table_uuid != row.table_id:
            table.log.store.close()
            raise TableNotFoundError(
                f"{name} is table {row.table_id}, but the table at {row.location} is {table.config.table_uuid}"
            )
        return table

    def describe(self, name: str) -> CatalogTable:
        """What the catalog records for ``name`` (no access to the table's files).

        Raises:
            InvalidTableNameError, TableNotFoundError.
        """
        return _entry(self._row(TableName.parse(name)))

    def table_exists(self, name: str) -> bool:
        """Raises: InvalidTableNameError."""
        tname = TableName.parse(name)
        return self._rows.get(tname.namespace, tname.name) is not None

    def list_tables(self, namespace: str | None = None) -> list[str]:
        """Names (``namespace.name``) of the tables of ``namespace`` (None: all), sorted.

        Raises:
            InvalidTableNameError: a malformed namespace.
        """
        return [e.name for e in self.describe_tables(namespace)]

    def describe_tables(self, namespace: str | None = None) -> list[CatalogTable]:
        """:meth:`describe` of every table of ``namespace`` (None: all), sorted by name,
        read at once (a listing cannot meet a name dropped meanwhile).

        Raises:
            InvalidTableNameError: a malformed namespace.
        """
        ns = None if namespace is None else check_namespace(namespace)
        return sorted((_entry(r) for r in self._rows.rows(ns)), key=lambda e: e.name)

    def list_namespaces(self) -> list[str]:
        """Namespaces with at least one table, sorted."""
        return sorted(self._rows.namespaces())

    def rename_table(self, name: str, new_name: str) -> None:
        """Rename, atomically (one statement): the table itself is untouched.

        Raises:
            InvalidTableNameError: either name is malformed.
            TableNotFoundError: no table named ``name``.
            TableExistsError: ``new_name`` is taken.
        """
        old, new = TableName.parse(name), TableName.parse(new_name)
        if not self._rows.rename((old.namespace, old.name), (new.namespace, new.name)):
            raise TableNotFoundError(f"no table named {old} in the catalog")

    def drop_table(self, name: str, purge: bool = False) -> CatalogTable:
        """Remove the name; with ``purge``, also the table's files and its timeline rows.
        Returns what the name was.

        Purge deletes only what the table owns (docs/safety.md): its ``.lakeline/``
        folder, the data files its timeline names or whose names carry its tag, then its
        folders left empty. Unrelated files, symbolic links' targets and tables nested in
        its folder stay.

        Without ``purge`` the table stays openable with ``Table.open(location, timeline=dsn)``.

        Raises:
            InvalidTableNameError, TableNotFoundError.
            TableIdentityError: with ``purge``, the location holds another table (nothing
                is dropped).
        """
        tname = TableName.parse(name)
        owned: tuple[Storage, set[str]] | None = None
        if purge:
            # Whose folder it is, before anything changes: the location may hold another
            # table by now (refused), or nothing of this one any more.
            found = self._rows.get(tname.namespace, tname.name)
            owned = self._owned(found) if found is not None else None
        row = self._rows.delete(tname.namespace, tname.name)
        if row is None:
            raise TableNotFoundError(f"no table named {tname} in the catalog")
        if purge:
            # Files first: a purge cut short leaves orphan timeline rows (invisible),
            # never a folder that looks like a table but has no timeline.
            if owned is not None:
                storage, referenced = owned
                purged = purge_files(storage, table_tag(row.table_id), referenced)
                if purged.kept:
                    log.warning(
                        "purged %s at %s; kept %d file(s) there that are not the table's: %s",
                        tname,
                        storage.uri,
                        len(purged.kept),
                        ", ".join(purged.kept[:10]),
                    )
            self._rows.purge_timeline(row.table_id)
        return _entry(row)

    def _owned(self, row: CatalogRow) -> tuple[Storage, set[str]] | None:
        """The table's storage and the files its timeline names, when its folder holds
        it; None when the location holds no table (nothing there is its to delete).

        Raises:
            TableIdentityError: the location holds another table.
        """
        storage = Storage.for_uri(row.location, self.storage_options)
        try:
            pointer = read_pointer(storage)
        except TableNotFoundError:
            return None
        if pointer.get("table_uuid") != row.table_id:
            raise TableIdentityError(
                f"the location {storage.uri} now holds another table (uuid {pointer.get('table_uuid')}, "
                f"not {row.table_id}); nothing was purged or dropped"
            )
        try:
            table = Table.open(storage.uri, timeline=self.dsn, storage_options=self.storage_options)
            try:
                timeline = table.timeline
                return storage, {
                    p for i in timeline.completed() if i.action.writes_data for p in file_paths(i.metadata)
                }
            finally:
                table.log.store.close()
        except LakelineError:  # a damaged table: its tagged files and .lakeline/ are still known
            return storage, set()

    def _row(self, tname: TableName) -> CatalogRow:
        row = self._rows.get(tname.namespace, tname.name)
        if row is None or not row.table_id:
            raise TableNotFoundError(f"no table named {tname} in the catalog")
        return row


def _entry(row: CatalogRow) -> CatalogTable:
    return CatalogTable(f"{row.namespace}.{row.name}", row.namespace, row.location, row.table_id, row.created_at)


__all__ = ["Catalog", "CatalogTable", "TableName"]
