"""The read path: scan planning (files, explain, partition pruning, partition columns of
every type), projection and batches. Time travel is in ``test_time_travel.py``, merge-on-read
scans in ``test_mor_reads.py``, the file sizing the writers promise in ``test_file_sizing.py``.

Pruning is checked for soundness over many random predicates: a pruned scan must return
exactly what filtering the whole table returns (and what the model says), and no file
it drops may sit in a partition that holds a matching row.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from lakeline.table import Table
from lakeline.timeline.view.file_group import partition_path

from tests.table.model import SCHEMA, Pred, TableModel, sorted_rows, table_rows, to_arrow

# A table partitioned by a string and an int column, both with nulls and a value that
# needs quoting in a folder name.
PSCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("region", pa.string()),
        pa.field("bucket", pa.int32()),
        pa.field("v", pa.int64()),
        pa.field("s", pa.string()),
    ]
)
PCOLS = PSCHEMA.names
REGIONS = ["eu", "us", "a/b=c", None]
BUCKETS = [0, 1, 2, None]


def _prow(rng: random.Random, id_: int) -> dict[str, Any]:
    return {
        "id": id_,
        "region": rng.choice(REGIONS),
        "bucket": rng.choice(BUCKETS),
        "v": rng.choice([None, rng.randint(0, 50)]),
        "s": rng.choice(["x", "y", None]),
    }


def _leaf(rng: random.Random) -> Pred:
    col = rng.choice(["region", "region", "bucket", "bucket", "id", "v", "s"])
    if rng.random() < 0.1:
        return Pred("isnull", col=col)
    pick: Callable[[], Any] = {
        "region": lambda: rng.choice(REGIONS[:3] + ["zz"]),
        "bucket": lambda: rng.randint(-1, 3),
        "id": lambda: rng.randint(0, 200),
        "v": lambda: rng.randint(0, 50),
        "s": lambda: rng.choice(["x", "y"]),
    }[col]
    if rng.random() < 0.2:
        return Pred("isin", col=col, values=tuple({pick() for _ in range(rng.randint(1, 3))}))
    return Pred("cmp", col=col, op=rng.choice(["==", "!=", "<", "<=", ">", ">="]), value=pick())


def _pred(rng: random.Random, depth: int = 2) -> Pred:
    if depth == 0 or rng.random() < 0.35:
        return _leaf(rng)
    kind = rng.choice(["and", "and", "or", "not"])
    if kind == "not":
        return Pred("not", args=(_pred(rng, depth - 1),))
    return Pred(kind, args=(_pred(rng, depth - 1), _pred(rng, depth - 1)))


def _folder(row: dict[str, Any]) -> str:
    return partition_path(("region", "bucket"), (row["region"], row["bucket"]))


def _rel_folder(t: Table, path: str) -> str:
    return os.path.relpath(os.path.dirname(path), t.path).replace(os.sep, "/")


@pytest.fixture(scope="module", params=["cow", "mor"])
def two_level(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Table, TableModel]:
    """A table partitioned by (region, bucket) after inserts, upserts and deletes
    (shared by the tests of this module, which only read it)."""
    rng = random.Random(7)
    t = Table.create(
        tmp_path_factory.mktemp("two_level") / "t",
        PSCHEMA,
        record_key="id",
        partition_by=["region", "bucket"],
        table_type=request.param,
        properties={"write.target-file-size-bytes": 2048},
    )
    m = TableModel(("id",), None, ("region", "bucket"), tuple(PCOLS))
    rows = [_prow(rng, i) for i in range(200)]
    t.insert(to_arrow(rows, PSCHEMA))
    m.insert(rows)
    for _ in range(2):
        held = m.rows()
        ups = [{**r, "v": rng.randint(0, 50), "s": rng.choice(["x", "y", None])} for r in rng.sample(held, 30)]
        t.upsert(to_arrow(ups, PSCHEMA))
        m.upsert(ups)
        gone = [{"id": r["id"], "region": r["region"], "bucket": r["bucket"]} for r in rng.sample(m.rows(), 10)]
        t.delete(
            pa.table(
                {
                    "id": pa.array([g["id"] for g in gone], pa.int64()),
                    "region": pa.array([g["region"] for g in gone], pa.string()),
                    "bucket": pa.array([g["bucket"] for g in gone], pa.int32()),
                }
            )
        )
        m.delete(gone, with_partition=True)
    assert table_rows(t.to_arrow(), PCOLS) == m.sorted()
    return t, m


# -- pruning ---------------------------------------------------------------------------------


def test_pruning_never_drops_a_matching_row(two_level: tuple[Table, TableModel]) -> None:
    t, m = two_level
    rng = random.Random(13)
    whole = t.to_arrow()
    all_files = t.scan().files()
    pruned_some = 0
    for _ in range(60):
        pred = _pred(rng)
        expr = pred.expr()
        scan = t.scan(filter=expr)
        got = table_rows(scan.to_arrow(), PCOLS)
        unpruned = table_rows(ds.dataset(whole).to_table(filter=expr), PCOLS)
        want = sorted_rows([r for r in m.rows() if pred.matches(r)], PCOLS)
        assert got == unpruned == want, f"filter {expr}"
        ex = scan.explain()
        kept = scan.files()
        # key-range and index pruning come after the partition stage, so the files read are
        # what the last stage kept
        assert ex["files_after_bloom_pruning"] == len(kept)
        assert ex["files_total"] == len(all_files)
        assert (
            ex["files_total"]
            >= ex["files_after_partition_pruning"]
            >= ex["files_after_stats_pruning"]
            >= ex["files_after_bloom_pruning"]
        )
        assert set(kept) <= set(all_files)
        # a folder none of whose files is read must hold no matching row (files dropped by
        # key range inside a read folder are covered by got == want above)
        dropped_folders = {_rel_folder(t, f) for f in all_files} - {_rel_folder(t, f) for f in kept}
        matching_folders = {_folder(r) for r in m.rows() if pred.matches(r)}
        assert not dropped_folders & matching_folders, f"filter {expr} dropped files with matching rows"
        pruned_some += len(kept) < len(all_files)
    assert pruned_some > 10  # the predicates on partition columns do prune


@pytest.mark.parametrize(
    "expr,folders",
    [
        (pc.field("region") == "eu", lambda f: f.startswith("region=eu/")),
        (pc.field("region") == "a/b=c", lambda f: f.startswith("region=a%2Fb%3Dc/")),
        (pc.field("region").is_null(), lambda f: f.startswith("region=__HIVE_DEFAULT_PARTITION__/")),
        (
            (pc.field("bucket") >= 1) & (pc.field("region") != "us"),
            lambda f: f.split("/")[0] in ("region=eu", "region=a%2Fb%3Dc") and f.split("bucket=")[1] in ("1", "2"),
        ),
        (pc.field("bucket").isin([0]) | (pc.field("region") == "zz"), lambda f: f.endswith("bucket=0")),
    ],
    ids=["eq", "quoted", "null", "and", "or"],
)
def test_partition_filter_reads_only_matching_partitions(
    two_level: tuple[Table, TableModel], expr: pc.Expression, folders: Callable[[str], bool]
) -> None:
    t, _ = two_level
    scan = t.scan(filter=expr)
    ex = scan.explain()
    assert ex["files_total"] == len(t.scan().files())
    assert 0 < ex["files_after_partition_pruning"] < ex["files_total"]
    for f in scan.files():
        assert folders(_rel_folder(t, f)), f
    # And every file of those partitions is kept.
    assert {f for f in t.scan().files() if folders(_rel_folder(t, f))} == set(scan.files())
    pred_rows = ds.dataset(t.to_arrow()).to_table(filter=expr)
    assert table_rows(scan.to_arrow(), PCOLS) == table_rows(pred_rows, PCOLS)


def test_filter_on_non_partition_column_prunes_nothing(two_level: tuple[Table, TableModel]) -> None:
    t, _ = two_level
    ex = t.scan(filter=pc.field("v") > 10).explain()
    assert ex["files_after_partition_pruning"] == ex["files_total"]


# -- files and explain -------------------------------------------------------------------------


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_files_are_the_live_files_of_the_snapshot(tmp_path: Path, table_type: str) -> None:
    path = tmp_path / "t"
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=table_type,
        properties={"write.target-file-size-bytes": 2048},
    )
    rows = [{"id": i, "ts": 1, "day": ["d1", "d2"][i % 2], "v": i, "s": "x"} for i in range(300)]
    first = t.insert(to_arrow(rows)).instant
    before = t.scan().files()
    assert len(before) > 2
    t.upsert(to_arrow([{**r, "ts": 2, "v": -1} for r in rows[:20]]))
    now = t.scan().files()
    for f in now:
        assert os.path.isabs(f) and os.path.isfile(f) and f.startswith(str(path))
    assert len(set(now)) == len(now) == t.scan().explain()["files_total"]
    if table_type == "cow":
        assert set(before) - set(now), "rewritten base files must leave the snapshot"
        assert len(now) == len(before)
    else:
        assert set(before) < set(now) and any(f.endswith(".log.parquet") for f in now)
    assert t.scan(as_of=first.id).files() == before
    # An overwrite retires every file of the partitions it replaces.
    t.overwrite(to_arrow([{"id": 1000, "ts": 1, "day": "d1", "v": 0, "s": "new"}]))
    d1 = [f for f in t.scan().files() if "/day=d1/" in f]
    assert len(d1) == 1 and d1[0] not in now
    assert {f for f in t.scan().files() if "/day=d2/" in f} == {f for f in now if "/day=d2/" in f}
    assert t.scan(filter=pc.field("day") == "d1").explain()["files_after_partition_pruning"] == 1


# -- projection and batches ----------------------------------------------------------------------


def test_columns_projection_and_batches(two_level: tuple[Table, TableModel]) -> None:
    t, m = two_level
    got = t.to_arrow(columns=["v", "id"])
    assert got.column_names == ["v", "id"]
    assert got.schema.field("v").type == pa.int64()
    assert table_rows(got, ["v", "id"]) == sorted_rows(m.rows(), ["v", "id"])
    # Filter on columns that are not projected (partition and payload).
    expr = (pc.field("s") == "x") & (pc.field("region") == "eu")
    got = t.to_arrow(columns=["id"], filter=expr)
    assert got.column_names == ["id"]
    want = [r for r in m.rows() if r["s"] == "x" and r["region"] == "eu"]
    assert sorted(got.column("id").to_pylist()) == sorted(r["id"] for r in want)
    # A projection of the partition columns only.
    got = t.to_arrow(columns=["bucket", "region"])
    assert table_rows(got, ["bucket", "region"]) == sorted_rows(m.rows(), ["bucket", "region"])
    # Batches: record batches of the projected schema, the same rows as to_arrow.
    scan = t.scan(columns=["id", "s"], filter=pc.field("bucket") != 1)
    batches = list(scan.to_batches())
    assert batches and all(isinstance(b, pa.RecordBatch) for b in batches)
    assert all(b.schema.names == ["id", "s"] for b in batches)
    assert table_rows(pa.Table.from_batches(batches), ["id", "s"]) == table_rows(scan.to_arrow(), ["id", "s"])
    assert table_rows(scan.to_arrow(), ["id", "s"]) == sorted_rows(
        [r for r in m.rows() if r["bucket"] is not None and r["bucket"] != 1], ["id", "s"]
    )


def test_empty_results_keep_the_schema(two_level: tuple[Table, TableModel]) -> None:
    t, _ = two_level
    got = t.to_arrow(filter=pc.field("region") == "nowhere", columns=["s", "id"])
    assert got.num_rows == 0 and got.column_names == ["s", "id"]
    assert t.to_arrow(as_of=0).schema == PSCHEMA and t.to_arrow(as_of=0).num_rows == 0


# -- partition columns of every type ------------------------------------------------------


@pytest.mark.parametrize(
    "typ,a,b",
    [
        (pa.bool_(), True, False),
        (pa.int8(), -1, 5),
        (pa.date32(), date(2026, 1, 1), date(2026, 1, 2)),
        (pa.timestamp("us"), datetime(2026, 1, 1, 12, 30), datetime(2026, 1, 2)),
        (pa.timestamp("us", tz="UTC"), datetime(2026, 1, 1, 12, 30, tzinfo=UTC), datetime(2026, 1, 2, tzinfo=UTC)),
        (pa.large_string(), "x y", "z/w"),
        (pa.decimal128(5, 2), Decimal("1.50"), Decimal("-2.00")),
    ],
    ids=str,
)
def test_partition_column_types_prune_and_read_back(tmp_path: Path, typ: pa.DataType, a: Any, b: Any) -> None:
    schema = pa.schema([("id", pa.int64()), ("p", typ)])
    t = Table.create(tmp_path / "t", schema, record_key="id", partition_by=["p"], table_type="mor")
    t.insert(pa.table({"id": [1, 2, 3], "p": pa.array([a, b, None], typ)}))
    t.upsert(pa.table({"id": [1, 2], "p": pa.array([a, b], typ)}))  # logs on top
    for expr, ids in [
        (pc.field("p") == pa.scalar(a, typ), [1]),
        (pc.field("p") != pa.scalar(a, typ), [2]),
        (pc.field("p").is_null(), [3]),
        (pc.field("p").is_valid(), [1, 2]),
    ]:
        scan = t.scan(filter=expr)
        assert sorted(scan.to_arrow().column("id").to_pylist()) == ids, expr
        assert scan.explain()["files_after_partition_pruning"] < scan.explain()["files_total"], expr
    assert t.to_arrow().schema == schema
    assert sorted(t.to_arrow().column("p").to_pylist(), key=lambda v: (v is None, str(v))) == sorted(
        [a, b, None], key=lambda v: (v is None, str(v))
    )
