"""Bad input is refused with a typed error and leaves no trace; good input of every
accepted kind (pa.Table, RecordBatchReader, pandas.DataFrame) is taken.

"No trace" is checked strictly: the event log has no new event and the table folder
holds exactly the same files (names and sizes) as before the refused call, and the
table still reads the same rows (:func:`records_helpers.nothing_written`). Record keys are
refused in ``test_record_keys.py``, bad arguments to create and open in
``test_create_and_open.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import (
    CommitConflictError,
    DuplicateKeyError,
    InvalidFilterError,
    InvalidPropertyError,
    LakelineError,
    NullKeyError,
    SchemaMismatchError,
    SnapshotExpiredError,
    Table,
    TableExistsError,
    TableNotFoundError,
    UnknownColumnError,
    UnsupportedOperationError,
)
from lakeline.table.write.records import castable
from lakeline.timeline import errors as errors_module

from tests.table.model import COLUMNS, SCHEMA, table_rows, to_arrow
from tests.table.write.records_helpers import ROWS, nothing_written, table, write_ops  # noqa: F401 (table: a fixture)

# -- the error hierarchy -------------------------------------------------------------------


@pytest.mark.parametrize(
    "error,builtin",
    [
        (SchemaMismatchError, ValueError),
        (TableNotFoundError, LookupError),
        (TableExistsError, FileExistsError),
        (InvalidPropertyError, ValueError),
        (NullKeyError, ValueError),
        (DuplicateKeyError, ValueError),
        (UnknownColumnError, ValueError),
        (InvalidFilterError, ValueError),
        (UnsupportedOperationError, ValueError),
        (SnapshotExpiredError, LookupError),
        (CommitConflictError, LakelineError),
    ],
)
def test_errors_are_lakeline_errors_and_the_matching_builtin(error: type, builtin: type) -> None:
    assert issubclass(error, LakelineError)
    assert issubclass(error, builtin)
    assert error.__name__.endswith("Error")
    # The root is the one defined in lakeline.timeline.errors, re-exported by lakeline.table.
    assert LakelineError is errors_module.LakelineError


# -- schema ----------------------------------------------------------------------------------


def _bad_data(kind: str) -> Any:
    base = to_arrow([{"id": 9, "ts": 1, "day": "2026-01-03", "v": 1, "s": "x"}])
    if kind == "missing_column":
        return base.drop_columns(["v"])
    if kind == "missing_key_column":
        return base.drop_columns(["id"])
    if kind == "wrong_type":
        return base.set_column(base.schema.get_field_index("v"), "v", pa.array(["1"]))
    if kind == "float_into_int":
        return base.set_column(base.schema.get_field_index("v"), "v", pa.array([1.5]))
    if kind == "uint_overflow":
        return base.set_column(base.schema.get_field_index("v"), "v", pa.array([2**63], pa.uint64()))
    if kind == "extra_column":
        return base.append_column("w", pa.array([1]))
    if kind == "not_a_table":
        return [{"id": 9}]
    raise AssertionError(kind)


BAD_KINDS = [
    "missing_column",
    "missing_key_column",
    "wrong_type",
    "float_into_int",
    "uint_overflow",
    "extra_column",
    "not_a_table",
]


@pytest.mark.parametrize("op", ["insert", "upsert", "overwrite"])
@pytest.mark.parametrize("kind", BAD_KINDS)
def test_schema_mismatch_is_refused_before_anything_is_written(table: tuple[Table, Path], op: str, kind: str) -> None:
    t, path = table
    with nothing_written(t, path), pytest.raises(SchemaMismatchError) as exc:
        write_ops(t)[op](_bad_data(kind))
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, LakelineError)


def test_null_in_non_nullable_column_is_a_schema_mismatch(tmp_path: Path) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string(), nullable=False)])
    t = Table.create(tmp_path / "t", schema, record_key="id")
    t.insert(pa.table({"id": [1], "name": ["a"]}, schema=schema))
    with nothing_written(t, tmp_path / "t"), pytest.raises(SchemaMismatchError):
        t.insert(pa.table({"id": [2], "name": pa.array([None], pa.string())}))


def test_columns_may_come_in_any_order_and_widen_losslessly(table: tuple[Table, Path]) -> None:
    t, _ = table
    data = pa.table(
        {
            "s": ["z"],
            "v": pa.array([5], pa.int8()),
            "day": ["2026-01-03"],
            "ts": pa.array([1], pa.uint32()),
            "id": pa.array([7], pa.int16()),
        }
    )
    t.insert(data)
    got = t.to_arrow(filter=pc.field("id") == 7)
    assert got.schema == SCHEMA
    assert got.to_pylist() == [{"id": 7, "ts": 1, "day": "2026-01-03", "v": 5, "s": "z"}]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_extra_nullable_column_at_the_end_needs_add_columns(tmp_path: Path, table_type: str) -> None:
    path = tmp_path / "t"
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=table_type,
        properties={"write.schema-evolution": "add-columns"},
    )
    first = t.insert(to_arrow(ROWS)).instant
    wider = to_arrow([{"id": 4, "ts": 1, "day": "2026-01-01", "v": 40, "s": "d"}]).append_column("w", pa.array(["new"]))
    t.insert(wider)
    assert t.schema.names == COLUMNS + ["w"]
    assert t.schema.field("w").nullable
    # Old rows read the new column as null; the new row has its value.
    got = {r["id"]: r["w"] for r in t.to_arrow().to_pylist()}
    assert got == {1: None, 2: None, 3: None, 4: "new"}
    # Versions of old keys written after the change carry the new column.
    t.upsert(to_arrow([{**ROWS[0], "ts": 5}]).append_column("w", pa.array(["upd"])))
    t.delete(pa.table({"id": [2]}))
    got = {r["id"]: (r["w"], r["ts"]) for r in t.to_arrow().to_pylist()}
    assert got == {1: ("upd", 5), 3: (None, 1), 4: ("new", 1)}
    assert t.to_arrow(columns=["id", "w"], filter=pc.field("w") == "upd").to_pylist() == [{"id": 1, "w": "upd"}]
    # The column is now part of the schema: data without it lacks a column.
    with nothing_written(t, path), pytest.raises(SchemaMismatchError):
        t.insert(to_arrow([{"id": 5, "ts": 1, "day": "2026-01-02", "v": 50, "s": "e"}]))
    # The snapshot from before the change still reads its rows, and a new handle agrees.
    assert table_rows(t.to_arrow(as_of=first.id), COLUMNS) == table_rows(to_arrow(ROWS), COLUMNS)
    assert Table.open(path).schema.names == COLUMNS + ["w"]
    assert Table.open(path).to_arrow().num_rows == 3
    # changes() across the schema change reads old and new files alike.
    got = {(r["id"], r["_op"]): r["w"] for r in t.changes(first.id).to_pylist()}
    assert got == {(4, "insert"): "new", (1, "update"): "upd", (2, "delete"): None}
    t.delete_where(pc.field("w").is_null())  # files from before the change hold no w
    assert sorted(r["id"] for r in t.to_arrow().to_pylist()) == [1, 4]


def test_extra_column_refused_without_add_columns_even_if_nullable(table: tuple[Table, Path]) -> None:
    t, path = table
    data = to_arrow([{"id": 9, "ts": 1, "day": "2026-01-03", "v": 1, "s": "x"}]).append_column(
        pa.field("w", pa.string(), nullable=True), pa.array([None], pa.string())
    )
    with nothing_written(t, path), pytest.raises(SchemaMismatchError):
        t.upsert(data)
    assert t.schema.names == COLUMNS


# -- filters ---------------------------------------------------------------------------------

UNKNOWN_FILTERS = [
    pc.field("nope") == 1,
    (pc.field("id") == 1) | (pc.field("nope") == 2),
    ~pc.field("missing").is_null(),
]
MISTYPED_FILTERS = [pc.field("id") == "one", (pc.field("day") > 3) & (pc.field("id") == 1), pc.field("s") + 1 == 2]


@pytest.mark.parametrize("expr", UNKNOWN_FILTERS, ids=str)
def test_unknown_column_in_filter(table: tuple[Table, Path], expr: pc.Expression) -> None:
    t, path = table
    with pytest.raises(UnknownColumnError):
        t.to_arrow(filter=expr)
    with pytest.raises(UnknownColumnError):
        t.scan(filter=expr)
    with nothing_written(t, path), pytest.raises(UnknownColumnError) as exc:
        t.delete_where(expr)
    assert isinstance(exc.value, LakelineError)


@pytest.mark.parametrize("expr", MISTYPED_FILTERS, ids=str)
def test_type_mismatched_filter(table: tuple[Table, Path], expr: pc.Expression) -> None:
    t, path = table
    with pytest.raises(InvalidFilterError):
        t.to_arrow(filter=expr)
    with pytest.raises(InvalidFilterError):
        t.scan(filter=expr)
    with nothing_written(t, path), pytest.raises(InvalidFilterError) as exc:
        t.delete_where(expr)
    assert isinstance(exc.value, LakelineError)


def test_filter_must_be_an_expression_and_delete_where_needs_one(table: tuple[Table, Path]) -> None:
    t, path = table
    with pytest.raises(InvalidFilterError):
        t.to_arrow(filter="id = 1")  # type: ignore[arg-type]
    with nothing_written(t, path):
        with pytest.raises(InvalidFilterError):
            t.delete_where(None)  # type: ignore[arg-type]
        with pytest.raises(InvalidFilterError):
            t.delete_where("id = 1")  # type: ignore[arg-type]


def test_unknown_column_in_projection(table: tuple[Table, Path]) -> None:
    t, _ = table
    with pytest.raises(UnknownColumnError):
        t.to_arrow(columns=["id", "nope"])
    with pytest.raises(UnknownColumnError):
        t.scan(columns=["nope"])


# -- accepted input kinds -----------------------------------------------------------------------


def _pandas(rows: list[dict]) -> pd.DataFrame:
    return to_arrow(rows).to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def _reader(rows: list[dict]) -> pa.RecordBatchReader:
    return pa.RecordBatchReader.from_batches(SCHEMA, to_arrow(rows).to_batches(max_chunksize=1))


@pytest.mark.parametrize("kind", ["pandas", "reader", "batch"])
def test_pandas_and_record_batch_reader_inputs(table: tuple[Table, Path], kind: str) -> None:
    t, _ = table
    conv: Callable[[list[dict]], Any] = {
        "pandas": _pandas,
        "reader": _reader,
        "batch": lambda rows: to_arrow(rows).to_batches()[0],
    }[kind]
    t.insert(
        conv(
            [
                {"id": 10, "ts": 1, "day": "2026-01-03", "v": 1, "s": "x"},
                {"id": 11, "ts": 1, "day": "2026-01-03", "v": None, "s": None},
            ]
        )
    )
    t.upsert(
        conv(
            [
                {"id": 10, "ts": 2, "day": "2026-01-03", "v": 2, "s": "y"},
                {"id": 12, "ts": 1, "day": "2026-01-02", "v": 3, "s": "z"},
            ]
        )
    )
    keys = pa.table({"id": pa.array([11], pa.int64())})
    t.delete(keys.to_pandas() if kind == "pandas" else keys)
    got = {r["id"]: (r["v"], r["s"]) for r in t.to_arrow(filter=pc.field("id") >= 10).to_pylist()}
    assert got == {10: (2, "y"), 12: (3, "z")}
    t.overwrite(conv([{"id": 13, "ts": 1, "day": "2026-01-03", "v": 4, "s": "w"}]))
    assert t.to_arrow(filter=pc.field("day") == "2026-01-03").column("id").to_pylist() == [13]
    assert t.to_arrow(filter=pc.field("id") == 12).num_rows == 1  # another partition: kept


def test_plain_pandas_int_with_nulls_becomes_float_and_is_refused(table: tuple[Table, Path]) -> None:
    """A pandas int column holding NaN is float64: not losslessly castable to int64."""
    t, path = table
    df = pd.DataFrame({"id": [20, 21], "ts": [1, None], "day": ["2026-01-01"] * 2, "v": [1, 2], "s": ["a", "b"]})
    assert df["ts"].dtype == "float64"
    with nothing_written(t, path), pytest.raises(SchemaMismatchError):
        t.insert(df)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("problem", ["null_key", "duplicate_key"])
def test_refused_write_with_a_new_column_does_not_evolve_the_schema(
    tmp_path: Path, table_type: str, problem: str
) -> None:
    path = tmp_path / "t"
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=table_type,
        properties={"write.schema-evolution": "add-columns"},
    )
    t.insert(to_arrow(ROWS))
    bad_id = None if problem == "null_key" else 1
    data = to_arrow(
        [
            {"id": 7, "ts": 1, "day": "2026-01-01", "v": 1, "s": "x"},
            {"id": bad_id, "ts": 1, "day": "2026-01-01", "v": 2, "s": "y"},
        ]
    ).append_column("w", pa.array(["a", "b"]))
    with nothing_written(t, path), pytest.raises(NullKeyError if problem == "null_key" else DuplicateKeyError):
        t.insert(data)
    assert t.schema.names == COLUMNS
    assert Table.open(path).schema.names == COLUMNS


def _nn(t: pa.DataType, name: str = "item") -> pa.Field:
    return pa.field(name, t, nullable=False)


#: Spark's shapes: collect_list / F.array items, F.struct(lit(..)) fields and F.create_map
#: values declared non-nullable, against the table's nullable declaration, at every depth.
NESTED = {
    "list": (pa.list_(_nn(pa.int64())), pa.list_(pa.int64()), [[1, 2], []]),
    "map": (pa.map_(pa.string(), _nn(pa.float64(), "value")), pa.map_(pa.string(), pa.float64()), [[("a", 1.0)], []]),
    "struct": (
        pa.struct([_nn(pa.int64(), "a"), _nn(pa.string(), "b")]),
        pa.struct([("a", pa.int64()), ("b", pa.string())]),
        [{"a": 1, "b": "x"}, None],
    ),
    "list_of_struct": (
        pa.list_(_nn(pa.struct([_nn(pa.int32(), "a")]))),
        pa.list_(pa.struct([("a", pa.int64())])),
        [[{"a": 1}], None],
    ),
    "map_of_list": (
        pa.map_(pa.string(), _nn(pa.list_(_nn(pa.int64())), "value")),
        pa.map_(pa.string(), pa.list_(pa.int64())),
        [[("k", [1, 2])], None],
    ),
    "struct_of_map": (
        pa.struct([_nn(pa.map_(pa.string(), _nn(pa.int64(), "value")), "m")]),
        pa.struct([("m", pa.map_(pa.string(), pa.int64()))]),
        [{"m": [("k", 1)]}, {"m": []}],
    ),
}


@pytest.mark.parametrize("kind", sorted(NESTED))
@pytest.mark.parametrize("table_side", ["nullable", "as_incoming"])
def test_nested_columns_declared_non_nullable_are_accepted(tmp_path: Path, kind: str, table_side: str) -> None:
    """Inner fields declared non-nullable write into nullable ones (that widening loses
    nothing, issue 29 item 4) and into a table created from that very schema."""
    src, nullable, values = NESTED[kind]
    schema = pa.schema(
        [pa.field("id", pa.int64(), nullable=False), ("c", src if table_side == "as_incoming" else nullable)]
    )
    t = Table.create(tmp_path / "t", schema, record_key="id")
    data = pa.table({"id": [1, 2], "c": pa.array(values, src)})
    t.insert(data)
    t.upsert(pa.table({"id": [2], "c": pa.array(values[:1], src)}))
    got = {r["id"]: r["c"] for r in t.to_arrow().to_pylist()}
    assert got == {1: data.column("c")[0].as_py(), 2: data.column("c")[0].as_py()}


@pytest.mark.parametrize(
    "table_type,values",
    [
        (pa.list_(_nn(pa.int64())), pa.array([[1, None]], pa.list_(pa.int64()))),
        (pa.map_(pa.string(), _nn(pa.int64(), "value")), pa.array([[("a", None)]], pa.map_(pa.string(), pa.int64()))),
        (pa.struct([_nn(pa.int64(), "a")]), pa.array([{"a": None}], pa.struct([("a", pa.int64())]))),
        (
            pa.list_(pa.struct([_nn(pa.int64(), "a")])),
            pa.array([[{"a": 1}, {"a": None}]], pa.list_(pa.struct([("a", pa.int64())]))),
        ),
    ],
)
def test_a_null_where_the_table_says_non_nullable_is_refused_at_any_depth(
    tmp_path: Path, table_type: pa.DataType, values: pa.Array
) -> None:
    path = tmp_path / "t"
    t = Table.create(path, pa.schema([pa.field("id", pa.int64(), nullable=False), ("c", table_type)]), record_key="id")
    with nothing_written(t, path), pytest.raises(SchemaMismatchError, match="nullable|null"):
        t.insert(pa.table({"id": [1], "c": values}))
    # A null under a null parent is no value: a null struct, list or map is fine.
    t.insert(pa.table({"id": [2], "c": pa.array([None], values.type)}))
    assert t.to_arrow().column("c").to_pylist() == [None]


def test_nested_types_still_refuse_loss() -> None:
    assert not castable(pa.list_(pa.int64()), pa.list_(pa.int32()))
    assert not castable(pa.map_(pa.string(), pa.string()), pa.map_(pa.string(), pa.int64()))
    assert not castable(pa.struct([("a", pa.int64()), ("b", pa.int64())]), pa.struct([("a", pa.int64())]))
    assert not castable(pa.struct([("a", pa.int64())]), pa.struct([pa.field("a", pa.int64()), _nn(pa.int64(), "b")]))
    assert not castable(pa.list_(pa.int64()), pa.struct([("a", pa.int64())]))
    assert castable(pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int64()), ("b", pa.string())]))
