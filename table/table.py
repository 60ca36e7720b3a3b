"""The ``Table`` handle: the user-facing surface of a lakeline table.

Modelled on delta-rs's ``DeltaTable``: a light handle over a location that reads the
timeline afresh whenever it needs the table's state, and delegates the work to the
write path (:mod:`.writer`), the read path (:mod:`.scan`) and the services.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from ..indexes.files_index import load_view
from ..timeline.commit_metadata import Operation
from ..timeline.diagnostics.redact import redact
from ..timeline.errors import InvalidFilterError, TableNotFoundError
from ..timeline.instant import Action
from ..timeline.log import EventLog
from ..timeline.storage.filesystem import Storage
from ..timeline.table_config import TableConfig, TableType
from ..timeline.timeline import Timeline
from ..timeline.txn import Txn, committed_version
from ..timeline.view.fs_view import FileSystemView
from .check import CheckReport, check_table
from .context import TableContext
from .engine import Engine, LocalEngine
from .hooks import Hooks, after_commit_hooks, effective_hooks, property_hooks
from .lifecycle import create_log, open_log
from .merge_engine import MergeEngine
from .read.table_reads import TableReads
from .schema.change import add_columns
from .schema.update import SchemaUpdate, conformed_again
from .write.merge_plan import merge_planner
from .write.merger import MergeSpec, TableMerger, prepare_source
from .write.operations import (
    partition_targets,
    plan_delete,
    plan_delete_where,
    plan_insert,
    plan_overwrite,
    plan_upsert,
)
from .write.plan import WritePlan
from .write.records import check_filter, prepare_keys, prepare_rows, to_arrow_table
from .write.update import update_planner
from .write.writer import WriteResult, run_write

if TYPE_CHECKING:
    from ..services.indexing.table_indexes import TableIndexes
    from ..services.table_services import TableServices


#: Views kept per handle, extended instead of replayed (``changes`` compares two snapshots).
_CACHED_VIEWS = 4


class Table(TableReads):
    """A lakeline table at a location. Create with :meth:`create`, open with :meth:`open`.

    Every write takes ``hooks=``: validators that may refuse it before its commit,
    callbacks and inline services after it (:mod:`.hooks`); the result's
    ``hook_errors`` lists what failed after the commit landed. And ``txn=(app_id,
    version)`` (:mod:`lakeline.timeline.txn`): a version at or below the newest one the
    application committed lands nothing (``r.instant`` None, ``r.stats["txn_skipped"]``),
    so a pipeline that replays a batch after a crash writes it once
    (:class:`~lakeline.timeline.errors.InvalidTxnError` for a malformed pair)."""

    def __init__(self, storage: Storage, log: EventLog, timeline_url: str | None) -> None:
        self.storage = storage
        self.log = log
        self.timeline_url = timeline_url
        self._config: TableConfig | None = None
        self._config_seq = -2
        self._engine: Engine | None = None
        self._engine_chosen = False  # set by the user (Spark...), not the lazy default
        self._views: list[FileSystemView] = []

    # -- lifecycle -------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        path: str | os.PathLike[str],
        schema: pa.Schema,
        record_key: str | list[str] | None = None,
        ordering_field: str | None = None,
        partition_by: list[str] | None = None,
        table_type: str = TableType.COW,
        properties: Mapping[str, Any] | None = None,
        timeline: str | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> Table:
        """Create a new table.

        Args:
            path: local path or object-store URI (``s3://bucket/prefix``) of the table's folder.
            schema: the Arrow schema of the rows.
            record_key: key column(s); None makes an append-only table.
            ordering_field: when two versions of a key meet, the larger value wins.
            partition_by: Hive-style partition columns.
            table_type: ``"cow"`` (copy-on-write) or ``"mor"`` (merge-on-read).
            properties: table properties (see ``config/defaults.toml``).
            timeline: None keeps the event log next to the data, or a ``postgresql://`` URL.
            storage_options: an object store's options, deltalake's keys (``AWS_ENDPOINT_URL``, ...).

        Raises:
            TableExistsError: a table already exists there.
            UnsafeLocationError: a table may not live there: the empty path, a file system
                root, a home folder, a non-empty folder, a file, or inside another table.
            SchemaMismatchError, UnknownColumnError, InvalidPropertyError: bad arguments
                (nothing is written).
        """
        storage = Storage.for_uri(path, storage_options)
        config = TableConfig.build(
            schema, record_key, ordering_field, partition_by, table_type, properties, uuid.uuid4().hex
        )
        property_hooks(config.props)  # refuse bad inline.services / commit.callback-url now
        MergeEngine.of(config)  # and merge settings that do not fit the schema
        table = cls(storage, create_log(storage, config, timeline), timeline)
        if config.has_key and config.props.index_record_index:
            # Built at once on the empty table; a create killed before it leaves a table
            # without the index (reads and writes stay exact: they read the data).
            table.indexes.create("record_index", wait=True)
        return table

    @classmethod
    def open(
        cls, path: str | os.PathLike[str], timeline: str | None = None, storage_options: Mapping[str, str] | None = None
    ) -> Table:
        """Open an existing table.

        Raises:
            TableNotFoundError: no table at ``path``.
            TableIdentityError: ``path`` is a copy of a table whose timeline is in PostgreSQL
                (two folders would write one event log).
            TimelineConfigError: the timeline argument does not match the table.
            InvalidPropertyError: the stored properties are not valid for this version.
        """
        storage = Storage.for_uri(path, storage_options)
        return cls(storage, open_log(storage, timeline), timeline)

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
        """The table configuration from the latest completed schema instant, as of the
        last read of the log (every write reads the log again before it plans)."""
        tl = self.log.timeline
        if self._config is None or tl.last_seq != self._config_seq:
            cfg = TableConfig.from_timeline(tl)
            if cfg is None:
                raise TableNotFoundError(f"the table at {self.storage.uri} has no configuration")
            self._config, self._config_seq = cfg, tl.last_seq
        return self._config

    @property
    def schema(self) -> pa.Schema:
        return self.config.schema

    @property
    def engine(self) -> Engine:
        """The engine data work runs on (a ``LocalEngine`` unless one was set)."""
        if self._engine is None:
            self._engine = LocalEngine(self.config.props.engine_parallelism or None)
        return self._engine

    @engine.setter
    def engine(self, engine: Engine) -> None:
        self._engine = engine
        self._engine_chosen = True

    @property
    def service_engine(self) -> Engine:
        """The engine background table services run on: the table's engine if one was
        set (e.g. Spark), else a local engine whose threads run at ``service.nice``."""
        if self._engine_chosen and self._engine is not None:
            return self._engine
        props = self.config.props
        return LocalEngine(props.engine_parallelism or None, nice=props.service_nice)

    def context(self, snapshot: Timeline | None = None, engine: Engine | None = None) -> TableContext:
        """The table at ``snapshot`` (None: the newest, read now) as one value, for the
        steps of a write or a read; ``engine`` overrides the table's engine. An older
        snapshot (``as_of``) comes with the configuration it had: its schema's names and
        types, which its files are read by (through their field ids)."""
        snapshot = self.log.refresh() if snapshot is None else snapshot
        config = self.config
        if snapshot.last_seq < self.log.timeline.last_seq:
            config = TableConfig.from_timeline(snapshot) or config  # archived: the newest
        return TableContext(self.storage, self.log, config, engine or self.engine, snapshot, self.view(snapshot))

    def update_schema(self) -> SchemaUpdate:
        """``with t.update_schema() as u:`` add, rename, drop and widen columns; one
        schema instant at exit, no data file rewritten (:mod:`.schema.update`)."""
        return SchemaUpdate(self)

    def view(self, snapshot: Timeline) -> FileSystemView:
        """The file-system view of a snapshot: the last few are kept and extended rather
        than rebuilt (the log is append-only); a fresh handle starts from the files
        index's newest checkpoint."""
        view = load_view(self.storage, snapshot, self._views)
        if view not in self._views:
            self._views = (self._views + [view])[-_CACHED_VIEWS:]
        return view

    def __repr__(self) -> str:
        return f"Table({redact(self.storage.uri)!r})"

    # -- writes ------------------------------------------------------------------------

    def _prepared(
        self, data: Any, dedupe: bool = True
    ) -> tuple[Callable[[TableContext], pa.Table], Callable[[], TableConfig] | None]:
        """Checked, deduplicated rows for an attempt's context, and the schema change
        they need (None if none).

        The schema change is not made here: ``run_write`` makes it once the write has
        planned without error, so refused input (null or duplicate keys) leaves no trace.
        An attempt replayed on a schema a concurrent schema instant changed (a rename, a
        drop, a widening: :func:`~.write.commit.schema_conflict`) conforms the rows
        again to it, which refuses an old column name or a narrowing, typed.
        """
        cfg = self.config
        table = to_arrow_table(data)
        rows, new_fields = prepare_rows(table, cfg, dedupe)
        rows_for = conformed_again(table, rows, cfg, dedupe)
        return rows_for, (lambda: add_columns(self.log, cfg, new_fields)) if new_fields else None

    def insert(self, data: Any, hooks: Hooks | None = None, txn: tuple[str, int] | None = None) -> WriteResult:
        """Insert rows (a keyed table refuses keys it already holds).

        Args:
            data: a pa.Table, pa.RecordBatchReader, pandas.DataFrame or any object with
                ``__arrow_c_stream__`` / ``__arrow_c_array__`` (Polars, DuckDB, ...).

        Raises:
            SchemaMismatchError, NullKeyError: bad input; nothing is written.
            DuplicateKeyError: a key already exists (``write.insert-key-check``).
            CommitConflictError: concurrent commits kept conflicting.
        """
        rows, evolve = self._prepared(data)
        planner = lambda ctx: plan_insert(ctx, rows(ctx))  # noqa: E731
        return self._write(Operation.INSERT, self.config.write_action, planner, hooks, evolve, txn, rows)

    def upsert(self, data: Any, hooks: Hooks | None = None, txn: tuple[str, int] | None = None) -> WriteResult:
        """Insert new keys and update existing ones (the larger ordering value wins).

        Raises:
            UnsupportedOperationError: the table has no record key.
            SchemaMismatchError, NullKeyError: bad input; nothing is written.
            CommitConflictError: concurrent commits kept conflicting.
        """
        self.config.require_key(Operation.UPSERT)
        rows, evolve = self._prepared(data)
        planner = lambda ctx: plan_upsert(ctx, rows(ctx))  # noqa: E731
        return self._write(Operation.UPSERT, self.config.write_action, planner, hooks, evolve, txn, rows)

    def delete(self, keys: Any, hooks: Hooks | None = None, txn: tuple[str, int] | None = None) -> WriteResult:
        """Delete rows by record key; keys the table does not hold are ignored.

        Args:
            keys: a table of the record-key columns (plus, optionally, the partition
                columns to narrow the search).

        Raises:
            UnsupportedOperationError: the table has no record key.
            SchemaMismatchError, NullKeyError: the key columns are missing, of another
                type than the table's (no cast across types: ``1`` never deletes ``"1"``)
                or null.
        """
        self.config.require_key(Operation.DELETE)
        cfg = self.config
        table = prepare_keys(keys, cfg)
        planner = lambda ctx: plan_delete(ctx, table)  # noqa: E731
        return self._write(Operation.DELETE, cfg.write_action, planner, hooks, txn=txn, rows=lambda _: table)

    def delete_where(
        self, predicate: pc.Expression, hooks: Hooks | None = None, txn: tuple[str, int] | None = None
    ) -> WriteResult:
        """Delete every row matching ``predicate``.

        Raises:
            UnknownColumnError, InvalidFilterError: a bad predicate; nothing is written.
        """
        if predicate is None:
            raise InvalidFilterError("delete_where needs a predicate (use overwrite to empty the table)")
        check_filter(self.config.schema, predicate)
        planner = lambda ctx: plan_delete_where(ctx, predicate)  # noqa: E731
        return self._write(Operation.DELETE_WHERE, self.config.where_action, planner, hooks, txn=txn)

    def overwrite(
        self,
        data: Any,
        partitions: list[Any] | None = None,
        hooks: Hooks | None = None,
        txn: tuple[str, int] | None = None,
    ) -> WriteResult:
        """Replace the partitions present in ``data`` (all of an unpartitioned table).

        Args:
            data: the new rows.
            partitions: replace these partitions instead (Hive paths such as
                ``"day=2026-01-01"`` or dicts of partition values), even if ``data``
                has no rows for them.
        """
        rows, evolve = self._prepared(data)
        targets = partition_targets(self.config.partition_by, partitions) if partitions is not None else None
        return self._write(
            Operation.OVERWRITE,
            Action.REPLACE_COMMIT,
            lambda ctx: plan_overwrite(ctx, rows(ctx), targets),
            hooks,
            evolve,
            txn,
        )

    def update(
        self,
        where: pc.Expression | None = None,
        set: Mapping[str, Any] | None = None,
        hooks: Hooks | None = None,
        txn: tuple[str, int] | None = None,
    ) -> WriteResult:
        """Change the rows ``where`` matches (None: every row), SQL's ``UPDATE ... SET``.

        Args:
            where: a filter over the current values; a null result leaves the row as it is.
            set: column name -> Arrow expression over the row's current values
                (``pc.field("n") + 1``) or a literal; every one is computed from the
                values before the update.

        Returns:
            ``WriteResult`` with ``stats["updated"]``, the number of rows matched.

        Raises:
            UnknownColumnError, InvalidFilterError: a bad ``where`` or an unknown column.
            ImmutableColumnError: ``set`` names a record-key or partition column.
            InvalidUpdateError: ``set`` is empty or holds something that is neither an
                expression nor a literal.
            SchemaMismatchError: a value does not cast to its column's type.
            CommitConflictError: concurrent commits kept conflicting.
            Nothing is written when any of these but the last is raised.
        """
        planner = update_planner(self.config, where, set)
        return self._write(Operation.UPDATE, self.config.where_action, planner, hooks, txn=txn)

    def merge(self, source: Any, hooks: Hooks | None = None, txn: tuple[str, int] | None = None) -> TableMerger:
        """MERGE ``source`` into the table: Delta's clauses joined on the record key
        (:mod:`.write.merger`). Add ``when_*`` clauses, then ``execute()``: one commit.

        Raises:
            UnsupportedOperationError: the table has no record key.
            SchemaMismatchError, NullKeyError, DuplicateKeyError: a bad source (a key
                column missing, or null, or on two rows); nothing is written.
        """
        cfg = self.config
        cfg.require_key(Operation.MERGE)
        rows = prepare_source(to_arrow_table(source), cfg)
        keys = rows.select(list(cfg.record_key))

        def run(spec: MergeSpec) -> WriteResult:
            planner = merge_planner(cfg, rows, spec)
            return self._write(Operation.MERGE, cfg.write_action, planner, hooks, txn=txn, rows=lambda _: keys)

        return TableMerger(cfg, rows.schema, run)

    def _write(
        self,
        operation: Operation,
        action: Action,
        planner: Callable[[TableContext], WritePlan],
        hooks: Hooks | None,
        evolve: Callable[[], TableConfig] | None = None,
        txn: tuple[str, int] | None = None,
        rows: Callable[[TableContext], pa.Table] | None = None,
    ) -> WriteResult:
        """Run a write with its hooks (the call's and the table properties',
        :mod:`.hooks`): validators before the commit, callbacks and inline services after.
        A keyed write's ``rows`` may first make the table build its record index."""
        version = Txn.of(txn)
        joined = effective_hooks(hooks, self.config.props, self.config.schema)
        if rows is not None and self.config.has_key:
            self.indexes.before_write(operation, rows)
        result = run_write(self.context, operation, action, planner, evolve, joined.validators, version)
        return after_commit_hooks(self, result, joined)

    def txn_version(self, app_id: str) -> int | None:
        """The newest version ``app_id`` committed with ``txn=`` (read now), or None."""
        done = committed_version(self.timeline, app_id)
        return None if done is None else done[0]

    def check(
        self, indexes: bool = True, progress: Callable[[int, int], None] | None = None, deep: bool = False
    ) -> CheckReport:
        """Check that every file the current and the retained snapshots read exists with
        its recorded size, row count and a readable footer, and (``indexes``) that the
        indexes match (``t.indexes.validate()``); ``report.problems`` lists every one
        found, by path (:mod:`.check`). Reads footers only (``deep``: every page too,
        each verified against its CRC); changes nothing."""
        return check_table(self, indexes, progress, deep)

    @property
    def indexes(self) -> TableIndexes:
        """Index API: create, list, drop, validate (state lives on the timeline)."""
        from ..services.indexing.table_indexes import TableIndexes  # the declared seam (tests/test_layout.py)

        return TableIndexes(self)

    @property
    def services(self) -> TableServices:
        """Table services: compaction, clustering, cleaning, archival, rollback, indexing."""
        from ..services.table_services import TableServices  # the declared seam (tests/test_layout.py)

        return TableServices(self)


__all__ = ["Table", "WriteResult"]
