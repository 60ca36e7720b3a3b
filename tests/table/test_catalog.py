"""``lakeline.table.Catalog``: tables by name in PostgreSQL, on a real server.

Each test works in a namespace of its own (the database is shared by the session), and
checks what the database and the filesystem hold afterwards, not only what was returned.
"""

from __future__ import annotations

import multiprocessing
import uuid
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Catalog, Table
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import (
    FaultInjectedError,
    InvalidTableNameError,
    LocationInUseError,
    SchemaMismatchError,
    TableExistsError,
    TableNotFoundError,
    TimelineConfigError,
    UnknownColumnError,
)
from lakeline.timeline.storage.event_log.postgresql import PostgresStore

from tests.children.catalog_race import create_one

pytestmark = pytest.mark.postgres

SCHEMA = pa.schema(
    [pa.field("id", pa.int64(), nullable=False), pa.field("ts", pa.int64()), pa.field("day", pa.string())]
)


def _rows(ids: list[int], ts: int = 1) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "day": ["d1" if i % 2 else "d2" for i in ids]}, schema=SCHEMA)


@pytest.fixture
def ns() -> str:
    """A namespace no other test uses."""
    return f"t{uuid.uuid4().hex[:12]}"


def _create(cat: Catalog, name: str, location: Path) -> Table:
    return cat.create_table(
        name,
        location,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type="mor",
        properties={"write.parquet-compression": "zstd"},
    )


def _has_timeline(dsn: str, table_id: str) -> bool:
    store = PostgresStore(dsn, table_id, "")
    try:
        return store.has_events()
    finally:
        store.close()


def test_create_load_list_describe(cat: Catalog, ns: str, tmp_path: Path, pg_url: str) -> None:
    t = _create(cat, f"{ns}.orders", tmp_path / "orders")
    _create(cat, f"{ns}.customers", tmp_path / "customers").log.store.close()
    other = f"{ns}x"
    _create(cat, f"{other}.items", tmp_path / "items").log.store.close()

    assert cat.list_tables(ns) == [f"{ns}.customers", f"{ns}.orders"]
    assert cat.list_tables(other) == [f"{other}.items"]
    everything = cat.list_tables()
    assert {f"{ns}.customers", f"{ns}.orders", f"{other}.items"} <= set(everything)
    assert everything == sorted(everything)
    assert {ns, other} <= set(cat.list_namespaces())
    assert cat.table_exists(f"{ns}.orders") and not cat.table_exists(f"{ns}.nothing")

    info = cat.describe(f"{ns}.orders")
    assert cat.describe_tables(ns) == [cat.describe(f"{ns}.customers"), info]
    assert (info.name, info.namespace, info.location) == (f"{ns}.orders", ns, t.path)
    assert info.table_uuid == t.config.table_uuid and info.created_at.tzinfo is not None

    loaded = cat.load_table(f"{ns}.orders")
    assert loaded.path == t.path and loaded.config.table_uuid == t.config.table_uuid
    assert loaded.log.store.kind == "postgresql"  # the timeline is in the catalog's database
    cfg = loaded.config
    assert (cfg.table_type, cfg.record_key, cfg.partition_by) == ("mor", ("id",), ("day",))
    assert dict(loaded.config.properties) == {"write.parquet-compression": "zstd"}
    assert not (tmp_path / "orders" / ".lakeline" / "events").exists()  # no filesystem log
    with pytest.raises(TableNotFoundError):
        cat.load_table(f"{ns}.nothing")
    with pytest.raises(TableNotFoundError):
        cat.describe(f"{ns}.nothing")
    t.log.store.close()
    loaded.log.store.close()


def test_a_catalog_table_is_an_ordinary_table(cat: Catalog, ns: str, tmp_path: Path, pg_url: str) -> None:
    t = _create(cat, f"{ns}.orders", tmp_path / "orders")
    t.upsert(_rows([1, 2, 3]))
    t.upsert(_rows([2], ts=5))
    t.delete(pa.table({"id": pa.array([3], pa.int64())}))
    t.log.store.close()

    loaded = cat.load_table(f"{ns}.orders")
    got = loaded.to_arrow().sort_by("id")
    assert got.column("id").to_pylist() == [1, 2] and got.column("ts").to_pylist() == [1, 5]
    assert loaded.to_arrow(filter=pc.field("day") == "d1").column("id").to_pylist() == [1]
    loaded.log.store.close()
    by_path = Table.open(tmp_path / "orders", timeline=pg_url)
    assert by_path.to_arrow().num_rows == 2
    by_path.log.store.close()


def test_rename_is_atomic_and_checked(cat: Catalog, ns: str, tmp_path: Path) -> None:
    t = _create(cat, f"{ns}.orders", tmp_path / "orders")
    _create(cat, f"{ns}.taken", tmp_path / "taken").log.store.close()
    cat.rename_table(f"{ns}.orders", f"{ns}.orders_v1")
    assert cat.list_tables(ns) == [f"{ns}.orders_v1", f"{ns}.taken"]
    with pytest.raises(TableNotFoundError):
        cat.load_table(f"{ns}.orders")
    moved = cat.load_table(f"{ns}.orders_v1")
    assert moved.config.table_uuid == t.config.table_uuid and moved.path == t.path
    moved.log.store.close()

    with pytest.raises(TableExistsError):
        cat.rename_table(f"{ns}.orders_v1", f"{ns}.taken")
    with pytest.raises(TableNotFoundError):
        cat.rename_table(f"{ns}.nothing", f"{ns}.other")
    with pytest.raises(InvalidTableNameError):
        cat.rename_table(f"{ns}.orders_v1", "no-dots")
    assert cat.list_tables(ns) == [f"{ns}.orders_v1", f"{ns}.taken"]
    assert cat.describe(f"{ns}.taken").table_uuid != t.config.table_uuid

    cat.rename_table(f"{ns}.orders_v1", f"{ns}archive.orders")  # across namespaces
    assert cat.list_tables(ns) == [f"{ns}.taken"] and cat.list_tables(f"{ns}archive") == [f"{ns}archive.orders"]
    t.log.store.close()


def test_drop_keeps_the_table_openable_by_path(cat: Catalog, ns: str, tmp_path: Path, pg_url: str) -> None:
    t = _create(cat, f"{ns}.orders", tmp_path / "orders")
    t.upsert(_rows([1, 2]))
    t.log.store.close()
    dropped = cat.drop_table(f"{ns}.orders")
    assert dropped.location == t.path and dropped.table_uuid == t.config.table_uuid
    assert cat.list_tables(ns) == [] and not cat.table_exists(f"{ns}.orders")
    with pytest.raises(TableNotFoundError):
        cat.drop_table(f"{ns}.orders")

    again = Table.open(tmp_path / "orders", timeline=pg_url)
    assert sorted(again.to_arrow().column("id").to_pylist()) == [1, 2]
    again.log.store.close()
    # The location still holds that table: no new table there, but it can be named again.
    with pytest.raises(LocationInUseError):
        _create(cat, f"{ns}.fresh", tmp_path / "orders")
    adopted = cat.register_table(f"{ns}.orders_again", tmp_path / "orders")
    assert adopted.config.table_uuid == t.config.table_uuid
    adopted.log.store.close()
    assert cat.load_table(f"{ns}.orders_again").to_arrow().num_rows == 2
    with pytest.raises(LocationInUseError):  # one table, one name
        cat.register_table(f"{ns}.orders_twice", tmp_path / "orders")


def test_drop_purge_removes_files_and_timeline(cat: Catalog, ns: str, tmp_path: Path, pg_url: str) -> None:
    t = _create(cat, f"{ns}.orders", tmp_path / "orders")
    t.upsert(_rows([1, 2]))
    table_id = t.config.table_uuid
    t.log.store.close()
    keep = _create(cat, f"{ns}.keep", tmp_path / "keep")
    keep.upsert(_rows([7]))
    keep.log.store.close()
    assert _has_timeline(pg_url, table_id)

    cat.drop_table(f"{ns}.orders", purge=True)
    assert not (tmp_path / "orders").exists()
    assert not _has_timeline(pg_url, table_id)
    assert cat.list_tables(ns) == [f"{ns}.keep"]
    with pytest.raises(TableNotFoundError):
        Table.open(tmp_path / "orders", timeline=pg_url)
    # The other table is untouched, and the name and location are free again.
    assert cat.load_table(f"{ns}.keep").to_arrow().column("id").to_pylist() == [7]
    fresh = _create(cat, f"{ns}.orders", tmp_path / "orders")
    assert fresh.config.table_uuid != table_id and fresh.to_arrow().num_rows == 0
    fresh.log.store.close()


def test_names_and_locations_are_unique(cat: Catalog, ns: str, tmp_path: Path) -> None:
    _create(cat, f"{ns}.orders", tmp_path / "orders").log.store.close()
    with pytest.raises(TableExistsError, match=f"{ns}.orders"):
        _create(cat, f"{ns}.orders", tmp_path / "elsewhere")
    assert not (tmp_path / "elsewhere").exists()  # refused before anything was written
    with pytest.raises(LocationInUseError):
        _create(cat, f"{ns}.other", tmp_path / "orders")
    with pytest.raises(LocationInUseError):  # the same folder spelled differently
        _create(cat, f"{ns}.other", tmp_path / "x" / ".." / "orders")
    assert cat.list_tables(ns) == [f"{ns}.orders"]


@pytest.mark.parametrize(
    "bad",
    [
        "orders",
        "a.b.c",
        "sales.",
        ".orders",
        "sa-les.orders",
        "sales.or ders",
        "",
        "sälès.orders",
        "sales.orders;drop",
        None,
    ],
)
def test_bad_names_are_refused_before_anything_is_written(
    cat: Catalog, ns: str, tmp_path: Path, bad: str | None
) -> None:
    before = cat.list_tables()
    with pytest.raises(InvalidTableNameError):
        cat.create_table(bad, tmp_path / "t", SCHEMA, record_key="id")  # type: ignore[arg-type]
    assert not (tmp_path / "t").exists()
    assert cat.list_tables() == before
    with pytest.raises(InvalidTableNameError):
        cat.load_table(bad)  # type: ignore[arg-type]


def test_a_pickled_catalog_connects_afresh(cat: Catalog, ns: str, tmp_path: Path) -> None:
    import pickle

    _create(cat, f"{ns}.orders", tmp_path / "orders").log.store.close()
    with pickle.loads(pickle.dumps(cat)) as copy:
        assert copy.list_tables(ns) == [f"{ns}.orders"] and copy.lock_timeout_s == cat.lock_timeout_s


def test_bad_namespace_and_dsn_are_refused(cat: Catalog) -> None:
    with pytest.raises(InvalidTableNameError):
        cat.list_tables("a.b")
    with pytest.raises(TimelineConfigError):
        Catalog("/some/folder")


def test_bad_arguments_take_no_name(cat: Catalog, ns: str, tmp_path: Path) -> None:
    with pytest.raises(UnknownColumnError):
        cat.create_table(f"{ns}.orders", tmp_path / "t", SCHEMA, record_key="nope")
    with pytest.raises(SchemaMismatchError):
        cat.create_table(f"{ns}.orders", tmp_path / "t", SCHEMA, ordering_field="ts")  # ordering needs a key
    assert not (tmp_path / "t").exists() and cat.list_tables(ns) == []


def test_a_failed_creation_frees_the_name(cat: Catalog, ns: str, tmp_path: Path) -> None:
    faults.arm("create.after_requested", "raise")
    try:
        with pytest.raises(FaultInjectedError):
            _create(cat, f"{ns}.orders", tmp_path / "first")
    finally:
        faults.disarm_all()
    assert not cat.table_exists(f"{ns}.orders") and cat.list_tables(ns) == []
    t = _create(cat, f"{ns}.orders", tmp_path / "second")
    assert cat.describe(f"{ns}.orders").location == t.path
    t.log.store.close()


def test_a_replaced_table_is_not_loaded(cat: Catalog, ns: str, tmp_path: Path, pg_url: str) -> None:
    import shutil

    t = _create(cat, f"{ns}.orders", tmp_path / "orders")
    t.log.store.close()
    shutil.rmtree(tmp_path / "orders")
    with pytest.raises(TableNotFoundError, match=f"{ns}.orders"):
        cat.load_table(f"{ns}.orders")
    Table.create(tmp_path / "orders", SCHEMA, timeline=pg_url).log.store.close()
    with pytest.raises(TableNotFoundError, match=t.config.table_uuid):
        cat.load_table(f"{ns}.orders")


def test_register_refuses_what_is_not_a_table_here(cat: Catalog, ns: str, tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError):
        cat.register_table(f"{ns}.ghost", tmp_path / "ghost")
    Table.create(tmp_path / "fs", SCHEMA)  # timeline on the filesystem, not in this database
    with pytest.raises(TimelineConfigError):
        cat.register_table(f"{ns}.fs", tmp_path / "fs")
    assert cat.list_tables(ns) == []


def _race(pg_url: str, jobs: list[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """Run ``create_table`` of each (name, location) in its own process, all at once."""
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(len(jobs)), ctx.Queue()
    procs = [ctx.Process(target=create_one, args=(pg_url, name, loc, barrier, out)) for name, loc in jobs]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    return results


def test_processes_racing_for_one_name(cat: Catalog, ns: str, tmp_path: Path) -> None:
    name = f"{ns}.orders"
    results = _race(cat.dsn, [(name, str(tmp_path / f"loc{i}")) for i in range(4)])
    outcomes = sorted(r[0] for r in results)
    assert outcomes == ["TableExistsError"] * 3 + ["ok"], results
    (winner,) = [loc for outcome, _, loc in results if outcome == "ok"]
    assert cat.describe(name).location == winner
    # The losers left no table behind (not even a folder).
    assert sorted(p.name for p in tmp_path.iterdir()) == [Path(winner).name]
    cat.load_table(name).log.store.close()


def test_processes_racing_for_one_location(cat: Catalog, ns: str, tmp_path: Path) -> None:
    loc = str(tmp_path / "shared")
    results = _race(cat.dsn, [(f"{ns}.t{i}", loc) for i in range(4)])
    outcomes = sorted(r[0] for r in results)
    assert outcomes == ["LocationInUseError"] * 3 + ["ok"], results
    (winner,) = [name for outcome, name, _ in results if outcome == "ok"]
    assert cat.list_tables(ns) == [winner]
    t = cat.load_table(winner)
    t.upsert(pa.table({"id": pa.array([1], pa.int64()), "v": ["a"]}))
    assert t.to_arrow().num_rows == 1
    t.log.store.close()
