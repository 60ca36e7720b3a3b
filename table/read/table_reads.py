"""The read side of the ``Table`` handle: scans, Arrow/pandas/Polars/dataset reach, and
the change feed, each of a snapshot read now or ``as_of`` an instant or a datetime.

A mixin of :class:`~lakeline.table.table.Table`, kept apart so that the handle's module
stays about its state and its writes; every method here goes through the handle's
:meth:`context` (the table at one snapshot as one value) and the read modules beside it.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from .changes import changes
from .scan import Scan, snapshot_of

if TYPE_CHECKING:
    import duckdb
    import polars
    import pyarrow.dataset

    from ...timeline.timeline import Timeline
    from ...timeline.view.fs_view import FileSystemView
    from ..context import TableContext


class TableReads:
    """Reads of a table handle (it provides ``timeline``, ``context`` and ``view``)."""

    if TYPE_CHECKING:

        @property
        def timeline(self) -> Timeline: ...

        def context(self, snapshot: Timeline | None = None) -> TableContext: ...

        def view(self, snapshot: Timeline) -> FileSystemView: ...

    def scan(
        self, filter: pc.Expression | None = None, columns: list[str] | None = None, as_of: int | datetime | None = None
    ) -> Scan:
        """Plan a read of the table now, or as of an instant id or a datetime.

        Raises:
            UnknownColumnError, InvalidFilterError: bad filter or columns.
            InstantNotFoundError: ``as_of`` names no completed instant.
            SnapshotExpiredError: the snapshot's files were cleaned.
        """
        return Scan(self.context(snapshot_of(self.timeline, as_of)), filter=filter, columns=columns, as_of=as_of)

    def to_arrow(
        self, filter: pc.Expression | None = None, columns: list[str] | None = None, as_of: int | datetime | None = None
    ) -> pa.Table:
        """Read the table into one Arrow table (see :meth:`scan`)."""
        return self.scan(filter=filter, columns=columns, as_of=as_of).to_arrow()

    def to_pandas(
        self, filter: pc.Expression | None = None, columns: list[str] | None = None, as_of: int | datetime | None = None
    ) -> Any:
        """Read the table into a ``pandas.DataFrame`` (see :meth:`scan`)."""
        return self.to_arrow(filter=filter, columns=columns, as_of=as_of).to_pandas()

    def to_pyarrow_dataset(self, as_of: int | datetime | None = None) -> pyarrow.dataset.Dataset:
        """The snapshot (now, or as of ``as_of``) as a Parquet ``pyarrow.dataset.Dataset``
        for DuckDB, Polars and other Arrow consumers, with partition values and key ranges
        per file, so their filters prune (:mod:`.dataset`).

        Raises:
            UnmergedLogsError: a live slice has unmerged logs (compact first, or use scan).
            InstantNotFoundError, SnapshotExpiredError: as for :meth:`scan`.
        """
        from .dataset import snapshot_dataset

        return snapshot_dataset(self.context(snapshot_of(self.timeline, as_of)), as_of=as_of)

    def to_duckdb(
        self, as_of: int | datetime | None = None, connection: duckdb.DuckDBPyConnection | None = None
    ) -> duckdb.DuckDBPyRelation:
        """The snapshot (now, or as of ``as_of``) as a DuckDB relation of ``connection``
        (default: DuckDB's default connection, so ``duckdb.sql("... FROM rel")`` reads
        it) that reads every base file by field id: after a rename, drop or widening too,
        with filters and projections pushed into the file scans (:mod:`.duckdb_relation`).
        Needs ``duckdb``.

        Raises:
            UnmergedLogsError: a live slice has unmerged logs (compact first, or use scan).
            InstantNotFoundError, SnapshotExpiredError: as for :meth:`scan`.
        """
        from .duckdb_relation import duckdb_relation

        return duckdb_relation(self.context(snapshot_of(self.timeline, as_of)), as_of=as_of, connection=connection)

    def to_polars(self, as_of: int | datetime | None = None) -> polars.LazyFrame:
        """The snapshot (pinned now, or as of ``as_of``) as a Polars ``LazyFrame``
        through an IO plugin: projection, predicate and row limit reach lakeline's
        pruning, merge-on-read included (:mod:`.polars_source`). Needs ``polars``."""
        from .polars_source import PolarsSource

        return PolarsSource(self.context(snapshot_of(self.timeline, as_of)), as_of=as_of).lazy_frame()

    def changes(self, start: int, end: int | None = None, images: bool = False) -> pa.Table:
        """Rows changed by instants completed after ``start`` up to ``end``: the net change
        per key (``_op`` insert, update or delete), or with ``images`` every change of every
        instant in completion order (``_op`` insert, update_before, update_after or delete,
        one row each, and ``_instant``, the instant that made it)."""
        return changes(self.context(), self.view, start, end, images)


__all__ = ["TableReads"]
