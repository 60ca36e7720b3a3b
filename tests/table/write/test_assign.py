"""An update's ``set`` (lakeline.table.write.assign): checked against the table before
anything is read, with a typed refusal per mistake; applied with a safe cast to the
column's type, and only to the rows ``where`` matches, in their order."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table.write.assign import apply_assignments, apply_where, check_assignments
from lakeline.timeline.errors import ImmutableColumnError, InvalidUpdateError, SchemaMismatchError, UnknownColumnError
from lakeline.timeline.table_config import TableConfig

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("n", pa.int8()), ("name", pa.string())])
CONFIG = TableConfig(SCHEMA, record_key=("id",), partition_by=("day",))
ROWS = pa.table({"id": [1, 2, 3], "day": ["a", "a", "b"], "n": [1, 2, 3], "name": ["x", "y", "z"]}, schema=SCHEMA)


def test_checked_assignments_are_in_schema_order_and_literals_become_expressions() -> None:
    checked = check_assignments(CONFIG, {"name": "new", "n": pc.field("n") + 1})
    assert [c for c, _ in checked] == ["n", "name"]
    assert all(isinstance(e, pc.Expression) for _, e in checked)


@pytest.mark.parametrize(
    ("assignments", "error"),
    [
        ({}, InvalidUpdateError),
        ([("n", 1)], InvalidUpdateError),
        ({"nope": 1}, UnknownColumnError),
        ({"id": 5}, ImmutableColumnError),
        ({"day": "c"}, ImmutableColumnError),
        ({"n": "text"}, SchemaMismatchError),
        ({"n": [1, 2]}, InvalidUpdateError),
        ({"n": pc.field("missing") + 1}, UnknownColumnError),
    ],
)
def test_mistakes_are_refused_with_a_typed_error(assignments: object, error: type[Exception]) -> None:
    with pytest.raises(error):
        check_assignments(CONFIG, assignments)


def test_apply_computes_from_current_values_and_refuses_an_overflow() -> None:
    out = apply_assignments(ROWS, check_assignments(CONFIG, {"n": pc.field("n") * 10}), SCHEMA)
    assert out.column("n").to_pylist() == [10, 20, 30]
    assert out.schema.field("n").type == pa.int8()
    assert out.column("name").to_pylist() == ["x", "y", "z"]
    with pytest.raises(SchemaMismatchError):
        apply_assignments(ROWS, check_assignments(CONFIG, {"n": pc.field("n") + 126}), SCHEMA)


def test_apply_where_changes_only_matching_rows_in_place() -> None:
    checked = check_assignments(CONFIG, {"name": "hit"})
    out, matched = apply_where(ROWS, pc.field("n") >= 2, checked, SCHEMA)
    assert matched == 2
    assert out.column("id").to_pylist() == [1, 2, 3]
    assert out.column("name").to_pylist() == ["x", "hit", "hit"]
    same, none = apply_where(ROWS, pc.field("n") > 99, checked, SCHEMA)
    assert none == 0 and same.equals(ROWS)
