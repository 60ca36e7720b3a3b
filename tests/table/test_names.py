"""Names that could collide: partition folders and column names (issue 25, items 3 and 8).

A null partition value and the string "__HIVE_DEFAULT_PARTITION__" are two folders and
two records everywhere (writes, filters, upsert identity, overwrite, datasets, DuckDB);
the columns lakeline adds to rows never collide with a user's (the on-disk ones are
reserved, the in-memory ones live under a reserved prefix); names Arrow would read as a
field path, duplicate names and partition folders too long for a file system are refused
with a typed error before anything is written. The audit's repros (D12, D12b, D14b,
D14c, D16, D17b, D5j of the bad-input audit of 2026-11-25) are here as tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import ReservedColumnError, SchemaMismatchError, Table, merge
from lakeline.table.read import changes as changes_module
from lakeline.table.write import key_check, plan, records, tagging
from lakeline.timeline.table_config import INTERNAL_PREFIX, RESERVED_COLUMNS
from lakeline.timeline.view.file_group import LITERAL_NULL_NAME, NULL_PARTITION, partition_path, partition_values

from tests.table.write.records_helpers import disk_files, nothing_written

LIT = NULL_PARTITION  # the string value that spells the null folder's name
S = pa.schema([("id", pa.int64()), ("day", pa.string()), ("v", pa.int64())])


def rows_of(t: Table, **kw: Any) -> list[dict[str, Any]]:
    return sorted(t.to_arrow(**kw).to_pylist(), key=lambda r: (r["id"], str(r["day"])))


@pytest.fixture(params=["cow", "mor"])
def table_type(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def _day_table(tmp_path: Path, table_type: str) -> Table:
    return Table.create(tmp_path / "t", S, record_key="id", partition_by=["day"], table_type=table_type)


# --- partition folders -------------------------------------------------------------


def test_null_and_the_literal_have_two_folders_that_decode_back() -> None:
    assert partition_path(("day",), (None,)) == f"day={NULL_PARTITION}"
    assert partition_path(("day",), (LIT,)) == f"day={LITERAL_NULL_NAME}" == "day=%5F_HIVE_DEFAULT_PARTITION__"
    assert partition_values(f"day={NULL_PARTITION}") == {"day": None}
    assert partition_values(f"day={LITERAL_NULL_NAME}") == {"day": LIT}
    for v in ["", ".", "..", "/", "%", "a\x00b", "_" + LIT, LIT + "_", "%5F_HIVE_DEFAULT_PARTITION__", "é"]:
        path = partition_path(("d", "e"), (v, None))
        assert partition_values(path) == {"d": v, "e": None}
        assert len(path.split("/")) == 2, path


def test_repro_null_partition_both_rows_survive_one_batch(tmp_path: Path, table_type: str) -> None:
    """D12: a null and the literal in one batch were one folder; the null row was lost."""
    t = _day_table(tmp_path, table_type)
    r = t.upsert(pa.table({"id": [1, 2], "day": [None, LIT], "v": [1, 2]}, schema=S))
    assert r.stats["inserted"] == 2
    assert rows_of(t) == [{"id": 1, "day": None, "v": 1}, {"id": 2, "day": LIT, "v": 2}]
    folders = {f.split("/")[0] for f in disk_files(tmp_path / "t") if f.startswith("day=")}
    assert folders == {f"day={NULL_PARTITION}", f"day={LITERAL_NULL_NAME}"}


def test_null_and_literal_stay_apart_across_commits(tmp_path: Path, table_type: str) -> None:
    """D12b: filters, upsert identity and overwrite tell the null partition from the literal."""
    t = _day_table(tmp_path, table_type)
    t.upsert(pa.table({"id": [1], "day": [None], "v": [1]}, schema=S))
    t.upsert(pa.table({"id": [2], "day": [LIT], "v": [2]}, schema=S))
    assert rows_of(t, filter=pc.field("day") == LIT) == [{"id": 2, "day": LIT, "v": 2}]
    assert rows_of(t, filter=pc.field("day").is_null()) == [{"id": 1, "day": None, "v": 1}]
    # Identity is (partition values, key): key 1 under the literal is another record.
    t.upsert(pa.table({"id": [1], "day": [LIT], "v": [9]}, schema=S))
    assert rows_of(t) == [{"id": 1, "day": None, "v": 1}, {"id": 1, "day": LIT, "v": 9}, {"id": 2, "day": LIT, "v": 2}]
    t.update(pc.field("day").is_null(), {"v": 5})
    assert rows_of(t, filter=pc.field("day") == LIT) == [{"id": 1, "day": LIT, "v": 9}, {"id": 2, "day": LIT, "v": 2}]
    # Overwriting the null partition (by dict, then by Hive path) leaves the literal's rows.
    empty = S.empty_table()
    t.overwrite(pa.table({"id": [7], "day": [None], "v": [7]}, schema=S), partitions=[{"day": None}])
    assert rows_of(t) == [{"id": 1, "day": LIT, "v": 9}, {"id": 2, "day": LIT, "v": 2}, {"id": 7, "day": None, "v": 7}]
    t.overwrite(empty, partitions=[f"day={NULL_PARTITION}"])
    assert rows_of(t) == [{"id": 1, "day": LIT, "v": 9}, {"id": 2, "day": LIT, "v": 2}]
    # ... and the literal's (by dict) leaves a null partition's rows.
    t.upsert(pa.table({"id": [3], "day": [None], "v": [3]}, schema=S))
    t.overwrite(empty, partitions=[{"day": LIT}])
    assert rows_of(t) == [{"id": 3, "day": None, "v": 3}]
    t.upsert(pa.table({"id": [4], "day": [LIT], "v": [4]}, schema=S))
    t.overwrite(empty, partitions=[f"day={LITERAL_NULL_NAME}"])  # the literal's Hive path
    assert rows_of(t) == [{"id": 3, "day": None, "v": 3}]
    t.delete(pa.table({"id": [3], "day": pa.array([None], pa.string())}))
    assert rows_of(t) == []


def test_dataset_and_duckdb_tell_null_from_the_literal(tmp_path: Path, table_type: str) -> None:
    t = _day_table(tmp_path, table_type)
    t.upsert(pa.table({"id": [1, 2, 3], "day": [None, LIT, "x"], "v": [1, 2, 3]}, schema=S))
    if table_type == "mor":
        t.services.compact()
    dset = t.to_pyarrow_dataset()
    assert dset.to_table(filter=pc.field("day") == LIT).column("id").to_pylist() == [2]
    assert dset.to_table(filter=pc.field("day").is_null()).column("id").to_pylist() == [1]
    assert len(list(dset.get_fragments(filter=pc.field("day") == LIT))) == 1
    duckdb = pytest.importorskip("duckdb")
    con = duckdb.connect()
    con.register("t", dset)
    assert con.execute(f"select id from t where day = '{LIT}'").fetchall() == [(2,)]
    assert con.execute("select id from t where day is null").fetchall() == [(1,)]


# --- partition folder length (D16) ---------------------------------------------------


def test_a_partition_folder_longer_than_255_bytes_is_refused_before_writing(tmp_path: Path, table_type: str) -> None:
    t = _day_table(tmp_path, table_type)
    t.upsert(pa.table({"id": [1], "day": ["a"], "v": [1]}, schema=S))
    ok = "y" * (255 - len("day="))
    t.upsert(pa.table({"id": [2], "day": [ok], "v": [2]}, schema=S))
    for value in ["y" * (256 - len("day=")), "y" * 300, "é" * 50, "z" * 1_000_000]:
        with nothing_written(t, tmp_path / "t"), pytest.raises(SchemaMismatchError, match="255"):
            t.upsert(pa.table({"id": [3, 4], "day": ["b", value], "v": [3, 4]}, schema=S))
    assert [r["id"] for r in rows_of(t)] == [1, 2]


def test_a_partition_column_whose_folder_cannot_fit_is_refused_at_create(tmp_path: Path) -> None:
    """A name whose folder is too long even for a null value would fail every write."""
    fits = "c" * (255 - len("=" + NULL_PARTITION))
    for name, ok in [(fits, True), (fits + "c", False), ("\U00010000" * 20, False)]:
        s = pa.schema([("id", pa.int64()), (name, pa.string())])
        if ok:
            t = Table.create(tmp_path / "ok", s, record_key="id", partition_by=[name])
            t.upsert(pa.table({"id": [1], name: [None]}, schema=s))
            assert t.to_arrow().num_rows == 1
            continue
        with pytest.raises(SchemaMismatchError, match="too long"):
            Table.create(tmp_path / "t", s, record_key="id", partition_by=[name])
        assert not (tmp_path / "t").exists()
        Table.create(tmp_path / f"flat{len(name)}", s, record_key="id")  # as a plain column it is fine


# --- input names (D5j) -----------------------------------------------------------


def test_duplicate_column_names_are_refused(tmp_path: Path, table_type: str) -> None:
    t = _day_table(tmp_path, table_type)
    t.upsert(pa.table({"id": [1], "day": ["a"], "v": [1]}, schema=S))
    dup = pa.Table.from_arrays(
        [pa.array([7]), pa.array(["d"]), pa.array([1]), pa.array([8])], names=["id", "day", "v", "id"]
    )
    for op in (t.upsert, t.insert, t.overwrite, t.delete):
        with nothing_written(t, tmp_path / "t"), pytest.raises(SchemaMismatchError, match="duplicate"):
            op(dup)
    schema = pa.schema([("id", pa.int64()), ("v", pa.int64()), ("id", pa.string())])
    with pytest.raises(SchemaMismatchError, match="duplicate"):
        Table.create(tmp_path / "u", schema, record_key="id")
    assert not (tmp_path / "u").exists()


# --- internal and reserved column names --------------------------------------------


def test_every_internal_column_name_is_reserved_or_under_the_prefix() -> None:
    from lakeline.spark import staging

    names = [
        records.POS,
        records.OP,
        records.SEQ,
        records.BASE_POS,
        merge.ORD,
        tagging.FG,
        tagging.ROW,
        key_check.GROUP,
        plan.PARTITION,
        changes_module.PART,
        changes_module._SIDE,
        changes_module._ID,
        changes_module._OLD,
        changes_module._NEW,
        staging.BUCKET,
    ]
    for n in names:
        assert n in RESERVED_COLUMNS or n.startswith(INTERNAL_PREFIX), n
    assert changes_module.CHANGE_OP == "_op"  # the changes() contract


@pytest.mark.parametrize(
    "name",
    [
        "_ord",
        "_fg",
        "_row",
        "_partition",
        "_instant",
        "__row",
        "_side",
        "_id",
        "_old",
        "_new",
        "_bucket",
        "_ord_max",
        "_pos_last",
        "_lakeline_x",
        "__lakeline",
    ],
)
@pytest.mark.parametrize("as_key", [False, True], ids=["column", "key"])
def test_names_lakeline_used_internally_are_ordinary_user_columns(
    tmp_path: Path, table_type: str, name: str, as_key: bool
) -> None:
    """D14a/b/c: a user column (or key) with a name lakeline once used in memory works
    through every write, read and changes()."""
    key, other = (name, "v") if as_key else ("id", name)
    s = pa.schema([(key, pa.int64()), (other, pa.int64()), ("day", pa.string())])
    t = Table.create(
        tmp_path / "t", s, record_key=key, ordering_field=other, partition_by=["day"], table_type=table_type
    )
    first = t.upsert(pa.table({key: [1, 2, 3], other: [1, 2, 3], "day": ["a", "b", "a"]}, schema=s)).instant
    assert first is not None
    t.upsert(pa.table({key: [1, 4], other: [9, 4], "day": ["a", "b"]}, schema=s))
    t.update(pc.field(key) == 2, {other: 7})
    t.delete(pa.table({key: [3]}))
    got = sorted(t.to_arrow().to_pylist(), key=lambda r: r[key])
    assert got == [{key: 1, other: 9, "day": "a"}, {key: 2, other: 7, "day": "b"}, {key: 4, other: 4, "day": "b"}]
    ch = t.changes(first.id)
    assert ch.column_names == [key, other, "day", "_op"]
    assert sorted(zip(ch.column(key).to_pylist(), ch.column("_op").to_pylist())) == [
        (1, "update"),
        (2, "update"),
        (3, "delete"),
        (4, "insert"),
    ]


def test_repro_ord_column(tmp_path: Path) -> None:
    """D14b, the audit's repro: a second upsert of a mor table with a user column _ord
    committed, then every read failed."""
    s = pa.schema([("id", pa.int64()), ("_ord", pa.int64())])
    t = Table.create(tmp_path / "t", s, record_key="id", table_type="mor")
    t.upsert(pa.table({"id": [1, 2], "_ord": [1, 2]}, schema=s))
    t.upsert(pa.table({"id": [1], "_ord": [9]}, schema=s))
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [{"id": 1, "_ord": 9}, {"id": 2, "_ord": 2}]


@pytest.mark.parametrize("name", [*RESERVED_COLUMNS, INTERNAL_PREFIX + "ord", INTERNAL_PREFIX, "..", ".", ".a"])
def test_reserved_and_path_like_names_are_refused_at_create(tmp_path: Path, name: str) -> None:
    s = pa.schema([("id", pa.int64()), (name, pa.string())])
    for part in (None, [name]):
        with pytest.raises(ReservedColumnError) as e:
            Table.create(tmp_path / "t", s, record_key="id", partition_by=part)
        assert not (tmp_path / "t").exists()
    if not name.startswith("."):
        for reserved in RESERVED_COLUMNS:
            assert reserved in str(e.value)
        assert INTERNAL_PREFIX in str(e.value)


@pytest.mark.parametrize("name", ["_base_pos", "_op", INTERNAL_PREFIX + "ord", ".."])
def test_reserved_and_path_like_names_are_refused_as_new_columns(tmp_path: Path, table_type: str, name: str) -> None:
    t = Table.create(
        tmp_path / "t",
        S,
        record_key="id",
        partition_by=["day"],
        table_type=table_type,
        properties={"write.schema-evolution": "add-columns"},
    )
    t.upsert(pa.table({"id": [1], "day": ["a"], "v": [1]}, schema=S))
    data = pa.table({"id": [2], "day": ["a"], "v": [2], name: ["x"]})
    with nothing_written(t, tmp_path / "t"), pytest.raises(ReservedColumnError):
        t.upsert(data)
    t.upsert(pa.table({"id": [2], "day": ["a"], "v": [2], "_new": ["x"]}))  # an ordinary new column is fine
    assert t.schema.names == ["id", "day", "v", "_new"]


def test_repro_dot_dot_column_is_refused_not_broken(tmp_path: Path) -> None:
    """D17b: '..' was accepted, then every write raised ArrowInvalid."""
    s = pa.schema([("id", pa.int64()), ("..", pa.string())])
    with pytest.raises(ReservedColumnError, match="field path"):
        Table.create(tmp_path / "t", s, record_key="id", partition_by=[".."])


@pytest.mark.parametrize("name", ["", "[0]", "a.b", "a[0]", "a=b", "a/b", "é", "x\x00y", "\n"])
def test_names_arrow_takes_literally_work_as_columns_and_partitions(tmp_path: Path, table_type: str, name: str) -> None:
    """D17a: '' and other odd names that worked keep working (also as partition columns)."""
    s = pa.schema([("id", pa.int64()), (name, pa.string()), ("v", pa.int64())])
    t = Table.create(tmp_path / "t", s, record_key="id", partition_by=[name], table_type=table_type)
    t.upsert(pa.table({"id": [1, 2], name: ["p", None], "v": [1, 2]}, schema=s))
    t.upsert(pa.table({"id": [1], name: ["p"], "v": [3]}, schema=s))
    t.update(pc.field(name) == "p", {"v": 4})
    assert sorted(t.to_arrow().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, name: "p", "v": 4},
        {"id": 2, name: None, "v": 2},
    ]
    assert t.to_arrow(filter=pc.field(name).is_null()).column("id").to_pylist() == [2]


def test_binary_partition_values_filter_and_prune_exactly(tmp_path: Path, table_type: str) -> None:
    """Binary values name their folder by their bytes' repr; pruning reads it back (it
    used to cast the repr text itself, so ``p == b"abc"`` pruned every folder)."""
    s = pa.schema([("id", pa.int64()), ("p", pa.binary())])
    t = Table.create(tmp_path / "t", s, record_key="id", partition_by=["p"], table_type=table_type)
    t.upsert(pa.table({"id": [1, 2, 3, 4], "p": [b"abc", None, LIT.encode(), b"\xff/.."]}, schema=s))
    for i, v in enumerate([b"abc", None, LIT.encode(), b"\xff/.."], start=1):
        expr = pc.field("p").is_null() if v is None else pc.field("p") == v
        assert t.to_arrow(filter=expr).column("id").to_pylist() == [i]
        assert t.scan(filter=expr).explain()["files_after_partition_pruning"] == 1
