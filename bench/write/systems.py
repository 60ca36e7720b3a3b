"""The table formats the write benchmark compares, one adapter class each.

:mod:`bench.write.bench` runs every system/step in a child process; the child builds its
system with :func:`make_system` and calls ``load``, ``create``, ``append``, ``upsert``,
``read`` and ``scan_all``. Imports are lazy so a child only loads its own library. On an
object store (``--store s3``) a system's ``path`` is its ``s3://`` URI and ``options``
the storage options, which lakeline and deltalake take alike.

deltalake is read through its own fastest path, ``DeltaTable.scan(predicate=...)`` (the
DataFusion engine; issue 30): in a trial on 1,000 keys of a merged 2M-row table in random
order it took 0.12-0.33 s, against 1.1-1.3 s for ``to_pyarrow_dataset`` with fragment
pruning and a cast (the benchmark's read before) and 0.5-1.2 s with its
``file_pruning_predicate``; ``QueryBuilder`` SQL, the same engine, took 0.18-0.23 s, the
scan's range within noise. The dataset path stays, as the ``dataset`` read (the
object-store run's report describes that one), and the read step times the other path too.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .object_store import StoreConfig

if TYPE_CHECKING:
    from .report import Run

#: What a run measures unless ``--systems`` says otherwise.
DEFAULT_SYSTEMS = ("lakeline-cow", "lakeline-mor", "deltalake", "pyiceberg")
#: ``-ri``: the table created with ``index.record-index`` (a record index from creation);
#: without it, the table's defaults (an index built by itself once its keys show random).
SYSTEMS = (*DEFAULT_SYSTEMS, "lakeline-cow-ri", "lakeline-mor-ri")
LAKELINE = ("lakeline-cow", "lakeline-mor")
BASELINE = "deltalake"
#: Environment variable a child reads: appended to its table's name (a repeat of a step
#: writes a table of its own, so the last run's table is the one later steps use).
TABLE_SUFFIX = "LAKELINE_BENCH_TABLE_SUFFIX"
#: Not a table format: the floor ``bench scale`` measures beside the systems.
FLOOR = "pyarrow"


#: How deltalake is read: its own scan (the default), or ``to_pyarrow_dataset``.
DELTA_READS = ("scan", "dataset")


class System:
    """One table format under test, at ``path`` (a folder the benchmark owns, or an
    object-store URI with its ``options``)."""

    name = ""
    #: lakeline: seconds per phase (``WriteResult.timings``) summed over the writes so far.
    timings: dict[str, float] | None = None

    def __init__(self, path: Path | str, options: dict[str, str] | None = None) -> None:
        self.path = path
        self.options = options

    def load(self) -> None:
        """Import the library (outside the timed part)."""

    def create(self, schema: Any) -> None:
        """Create the empty table (timed with the first append; a no-op where the
        first append creates it)."""

    def append(self, batch: Any) -> None:
        raise NotImplementedError

    def upsert(self, batch: Any) -> dict[str, Any]:
        raise NotImplementedError

    def read(self, a: str, b: str) -> tuple[Any, Callable[[], int]]:
        """The rows with ``a <= key < b``, and a function counting the data files the
        read touched (called after the timer stops)."""
        raise NotImplementedError

    def scan_all(self, columns: list[str]) -> Any:
        """The whole table (for the consistency check, never timed)."""
        raise NotImplementedError


class Lakeline(System):
    def __init__(
        self, path: Path | str, table_type: str, options: dict[str, str] | None = None, record_index: bool = False
    ) -> None:
        super().__init__(path, options)
        self.table_type = table_type
        self.record_index = record_index
        self.name = f"lakeline-{table_type}" + ("-ri" if record_index else "")
        self.table: Any = None

    def load(self) -> None:
        import pyarrow.compute as pc
        from lakeline.table import Table

        self.pc, self.Table = pc, Table

    def create(self, schema: Any) -> None:
        self.table = self.Table.create(
            str(self.path),
            schema,
            record_key="key",
            ordering_field="ts",
            table_type=self.table_type,
            # Not set at all without -ri: a table left to its defaults builds its record
            # index by itself once its keys show random; set to false it never would.
            properties={"index.record-index": True} if self.record_index else {},
            storage_options=self.options,
        )

    def _add_timings(self, result: Any) -> Any:
        self.timings = self.timings or {}
        for phase, s in result.timings.items():
            self.timings[phase] = self.timings.get(phase, 0.0) + s
        return result

    def append(self, batch: Any) -> None:
        self._add_timings(self.table.insert(batch))

    def upsert(self, batch: Any) -> dict[str, Any]:
        table = self.Table.open(str(self.path), storage_options=self.options)
        return dict(self._add_timings(table.upsert(batch)).stats)

    def read(self, a: str, b: str) -> tuple[Any, Callable[[], int]]:
        pc = self.pc
        scan = self.Table.open(str(self.path), storage_options=self.options).scan(
            filter=(pc.field("key") >= a) & (pc.field("key") < b)
        )
        return scan.to_arrow(), lambda: len(scan.files())

    def scan_all(self, columns: list[str]) -> Any:
        return self.Table.open(str(self.path), storage_options=self.options).to_arrow(columns=columns)


class Delta(System):
    name = "deltalake"

    def __init__(self, path: Path | str, options: dict[str, str] | None = None, read_via: str = "scan") -> None:
        super().__init__(path, options)
        if read_via not in DELTA_READS:
            raise ValueError(f"deltalake read {read_via!r}: choose from {DELTA_READS}")
        self.read_via = read_via

    def load(self) -> None:
        import deltalake
        import pyarrow.compute as pc

        self.dl, self.pc = deltalake, pc

    def append(self, batch: Any) -> None:
        self.dl.write_deltalake(str(self.path), batch, mode="append", storage_options=self.options)

    def upsert(self, batch: Any) -> dict[str, Any]:
        dt = self.dl.DeltaTable(str(self.path), storage_options=self.options)
        metrics = (
            dt.merge(source=batch, predicate="t.key = s.key", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        return {
            k: metrics[k]
            for k in (
                "num_target_rows_updated",
                "num_target_rows_inserted",
                "num_target_files_added",
                "num_target_files_removed",
            )
            if k in metrics
        }

    def read(self, a: str, b: str) -> tuple[Any, Callable[[], int]]:
        rows = self.read_with(self.read_via, a, b)
        return rows, lambda: self.files_read(a, b)

    @property
    def other_read(self) -> str:
        """The read path not timed as the step (timed after it, for comparison)."""
        return next(r for r in DELTA_READS if r != self.read_via)

    def read_with(self, how: str, a: str, b: str) -> Any:
        """The rows with ``a <= key < b`` through ``how``: ``scan`` is deltalake's own
        ``DeltaTable.scan(predicate=...)`` (DataFusion: file skipping by the log's
        statistics, row filtering in Rust); ``dataset`` is ``to_pyarrow_dataset`` with the
        fragments pruned by their min/max and the rows filtered by pyarrow."""
        dt = self.dl.DeltaTable(str(self.path), storage_options=self.options)
        import pyarrow as pa

        if how == "scan":  # an arro3 stream; pyarrow takes it over the C stream interface
            return pa.RecordBatchReader.from_stream(dt.scan(predicate=f"key >= '{a}' AND key < '{b}'")).read_all()
        import pyarrow.dataset as pds

        pc = self.pc
        dset = dt.to_pyarrow_dataset()
        frags = list(dset.get_fragments(filter=(pc.field("key") >= a) & (pc.field("key") < b)))
        # deltalake >= 1.4 rewrites files (merge, delete) with string_view columns, and
        # pyarrow has no string_view comparison kernel, so `dset.to_table(filter=expr)`
        # raises ArrowNotImplementedError (delta-io/delta-rs#4579). Filter rows on the
        # key cast to string, over the fragments pruned above (a cast in the dataset
        # filter would disable the pruning).
        key = pc.field("key").cast(pa.string())
        pruned = pds.FileSystemDataset(frags, dset.schema, dset.format, dset.filesystem)
        return pruned.to_table(filter=(key >= a) & (key < b))

    def files_read(self, a: str, b: str) -> int:
        """Data files whose min/max in the log admit a key in the range: the files either
        path opens (fragments carry each file's statistics as their partition expression)."""
        pc = self.pc
        dset = self.dl.DeltaTable(str(self.path), storage_options=self.options).to_pyarrow_dataset()
        return len(list(dset.get_fragments(filter=(pc.field("key") >= a) & (pc.field("key") < b))))

    def scan_all(self, columns: list[str]) -> Any:
        return (
            self.dl.DeltaTable(str(self.path), storage_options=self.options)
            .to_pyarrow_dataset()
            .to_table(columns=columns)
        )


class Iceberg(System):
    name = "pyiceberg"
    IDENT = "bench.t"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.folder = folder

    def load(self) -> None:
        import pyiceberg.expressions as ice
        from pyiceberg.catalog.sql import SqlCatalog

        self.ice, self.SqlCatalog = ice, SqlCatalog

    def _catalog(self) -> Any:
        self.folder.mkdir(parents=True, exist_ok=True)
        return self.SqlCatalog(
            "bench", uri=f"sqlite:///{self.folder / 'catalog.db'}", warehouse=(self.folder / "warehouse").as_uri()
        )

    def create(self, schema: Any) -> None:
        cat = self._catalog()
        cat.create_namespace("bench")
        self.table = cat.create_table(self.IDENT, schema=schema)

    def append(self, batch: Any) -> None:
        self.table.append(batch)

    def upsert(self, batch: Any) -> dict[str, Any]:
        res = self._catalog().load_table(self.IDENT).upsert(batch, join_cols=["key"])
        return {"rows_updated": res.rows_updated, "rows_inserted": res.rows_inserted}

    def read(self, a: str, b: str) -> tuple[Any, Callable[[], int]]:
        ice = self.ice
        scan = (
            self._catalog()
            .load_table(self.IDENT)
            .scan(row_filter=ice.And(ice.GreaterThanOrEqual("key", a), ice.LessThan("key", b)))
        )
        return scan.to_arrow(), lambda: len(list(scan.plan_files()))

    def scan_all(self, columns: list[str]) -> Any:
        return self._catalog().load_table(self.IDENT).scan(selected_fields=tuple(columns)).to_arrow()


class PyArrowFloor(System):
    """The floor (``bench scale``): pyarrow alone writes each append as Parquet files, two
    at a time, with the settings that were fastest here (dictionary encoding only on the
    low-cardinality ``category`` column, snappy); a read is a dataset scan whose row
    groups are pruned by their statistics. No table format, so no upsert."""

    name = "pyarrow"
    FILES_PER_APPEND = 2

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.folder = folder

    def load(self) -> None:
        import pyarrow.compute as pc
        import pyarrow.dataset as pds
        import pyarrow.parquet as pq

        self.pc, self.pds, self.pq = pc, pds, pq

    def create(self, schema: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)

    def append(self, batch: Any) -> None:
        from concurrent.futures import ThreadPoolExecutor

        n = len(list(self.folder.glob("*.parquet")))
        per = -(-batch.num_rows // self.FILES_PER_APPEND)
        parts = [batch.slice(i * per, per) for i in range(self.FILES_PER_APPEND)]

        def put(i: int) -> None:
            self.pq.write_table(parts[i], self.folder / f"part-{n + i:05d}.parquet", use_dictionary=["category"])

        with ThreadPoolExecutor(self.FILES_PER_APPEND) as pool:
            list(pool.map(put, range(self.FILES_PER_APPEND)))

    def upsert(self, batch: Any) -> dict[str, Any]:
        raise NotImplementedError("plain Parquet files have no upsert")

    def read(self, a: str, b: str) -> tuple[Any, Callable[[], int]]:
        expr = (self.pc.field("key") >= a) & (self.pc.field("key") < b)
        dset = self.pds.dataset(str(self.folder), format="parquet")

        def files_read() -> int:  # files with a row group the statistics do not rule out
            return sum(1 for f in dset.get_fragments() if f.subset(expr).num_row_groups)

        return dset.to_table(filter=expr), files_read

    def scan_all(self, columns: list[str]) -> Any:
        return self.pds.dataset(str(self.folder), format="parquet").to_table(columns=columns)


def method_notes(run: Run) -> list[str]:
    """What a reader needs to know about how each peer was driven (a note each, for the
    write benchmark's section)."""
    from .environment import _version

    notes = []
    if BASELINE in run.results:
        own = "`DeltaTable(p).scan(predicate=...).read_all()`, its own DataFusion scan"
        dataset = (
            "`to_pyarrow_dataset()` with its fragments pruned by their min/max and rows filtered on `key` "
            "cast to string (deltalake >= 1.4 rewrites files with `string_view` columns, which pyarrow "
            "cannot compare: delta-io/delta-rs#4579)"
        )
        first, second = (own, dataset) if run.delta_read == "scan" else (dataset, own)
        notes.append(
            f"deltalake read: the step times {first}; the other path, {second}, is timed right after in "
            "the same process (warm) and shown for comparison. The scan is deltalake's fastest documented "
            "read (`QueryBuilder` SQL runs the same engine and was within noise of it in a trial); the "
            "deltalake ratios use the step's time."
        )
    ice = run.get("pyiceberg", "upsert")
    if ice is not None:
        how = f"took {ice.seconds:.0f} s" if ice.ok else f"did not finish: {ice.error}"
        notes.append(
            "pyiceberg upsert is `Table.upsert(df, join_cols=['key'])` of pyiceberg "
            f"{_version('pyiceberg')}: it scans the table with an `In` filter of every incoming key, "
            "compares the matches row by row in Python, then overwrites the matched rows "
            f"(copy-on-write) and appends the new keys; it {how}, so it is reported but is not "
            "a target."
        )
    return notes


def make_system(name: str, workdir: Path) -> System:
    """The system ``name`` with its table in ``workdir/tables``, or on the object store
    that ``workdir/store.json`` names; deltalake read the way ``workdir/spec.json``'s
    ``delta_read`` says (its own scan when it says nothing)."""
    store = StoreConfig.load(workdir)
    table = name + os.environ.get(TABLE_SUFFIX, "")  # a repeat's own table
    path: Path | str = workdir / "tables" / table if store is None else store.uri(table)
    options = None if store is None else store.options
    if name == "lakeline-cow":
        return Lakeline(path, "cow", options)
    if name == "lakeline-mor":
        return Lakeline(path, "mor", options)
    if name in ("lakeline-cow-ri", "lakeline-mor-ri"):
        return Lakeline(path, name.split("-")[1], options, record_index=True)
    if name == "deltalake":
        return Delta(path, options, _delta_read(workdir))
    if store is not None:
        raise ValueError(f"{name} is not measured on an object store (it needs more than the bucket)")
    if name == "pyiceberg":
        return Iceberg(workdir / "tables" / name)
    if name == "pyarrow":
        return PyArrowFloor(workdir / "tables" / name)
    raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)} or pyarrow")


def _delta_read(workdir: Path) -> str:
    import json

    spec = workdir / "spec.json"
    return str(json.loads(spec.read_text()).get("delta_read", "scan")) if spec.exists() else "scan"
