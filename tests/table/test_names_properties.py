"""Property tests for names (issue 25): any column name is refused with a typed error at
create or works end to end; any partition values, null and the null folder's name among
them, round-trip exactly, filter exactly and stay inside the table's folder.

The unmarked tests run a moderate number of examples (each well under 20 s); the
``soak`` ones run many more (``make soak``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakeline.table import LakelineError, SchemaMismatchError, Table
from lakeline.timeline.view.file_group import MAX_FOLDER_BYTES, NULL_PARTITION, partition_path

SPECIAL_VALUES = [
    NULL_PARTITION,
    "%5F_HIVE_DEFAULT_PARTITION__",
    "",
    ".",
    "..",
    "/",
    "%",
    "\x00",
    "../..",
    "a=b",
    "%2F",
    " ",
    "\n",
    "é",
]
FAST = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SOAK = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

column_names = st.text(min_size=1, max_size=12)
partition_values = st.lists(
    st.one_of(st.none(), st.sampled_from(SPECIAL_VALUES), st.text(max_size=30)), min_size=1, max_size=10, unique=True
)


def _sorted(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: r["id"])


def _fits(column: str, value: str | None) -> bool:
    return all(len(c.encode()) <= MAX_FOLDER_BYTES for c in partition_path((column,), (value,)).split("/"))


def check_column_name(name: str, table_type: str, partitioned: bool) -> None:
    """Refused at create with a typed error, or every operation keeps the column's values."""
    s = pa.schema([("id", pa.int64()), (name, pa.string()), ("n", pa.int64())])
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "t"
        try:
            t = Table.create(
                path, s, record_key="id", partition_by=[name] if partitioned else None, table_type=table_type
            )
        except LakelineError:
            assert not path.exists() or not any(path.iterdir()), "a refused create left files"
            return
        # The name is a value too, unless its folder would be too long (test_names covers that).
        third = name if not partitioned or _fits(name, name) else "b"
        first = "a" if third != "a" else "z"
        t.upsert(pa.table({"id": [1, 2, 3], name: [first, None, third], "n": [1, 2, 3]}, schema=s))
        t.upsert(pa.table({"id": [1], name: [first], "n": [10]}, schema=s))
        t.update(pc.field("id") == 3, {"n": 30})
        t.delete(pa.table({"id": [2]}))
        want = [{"id": 1, name: first, "n": 10}, {"id": 3, name: third, "n": 30}]
        assert _sorted(t.to_arrow().to_pylist()) == want
        assert _sorted(Table.open(path).to_arrow().to_pylist()) == want
        assert t.to_arrow(filter=pc.field(name) == third).column("id").to_pylist() == [3]
        if table_type == "mor":
            t.services.compact()
            assert _sorted(t.to_arrow().to_pylist()) == want


def check_partition_values(values: list[str | None], table_type: str) -> None:
    """A batch of distinct keys, one per value, reads back exactly; == and is_null
    filters return exactly the matching rows; every file lies under the base path."""
    s = pa.schema([("id", pa.int64()), ("p", pa.string()), ("n", pa.int64())])
    rows = pa.table({"id": list(range(len(values))), "p": values, "n": list(range(len(values)))}, schema=s)
    too_long = not all(_fits("p", v) for v in values)
    with tempfile.TemporaryDirectory() as d:
        base = os.path.realpath(Path(d) / "t")
        t = Table.create(base, s, record_key="id", partition_by=["p"], table_type=table_type)
        before = t.timeline.last_seq
        if too_long:
            with pytest.raises(SchemaMismatchError):
                t.upsert(rows)
            assert t.timeline.last_seq == before
            return
        t.upsert(rows)
        t.upsert(rows.slice(0, 1))  # a second write of one key: mor logs, cow rewrites
        assert _sorted(t.to_arrow().to_pylist()) == rows.to_pylist()
        for i, v in enumerate(values):
            expr = pc.field("p").is_null() if v is None else pc.field("p") == v
            assert t.to_arrow(filter=expr).column("id").to_pylist() == [i], (v, expr)
        assert t.to_arrow(filter=pc.field("p").is_valid()).num_rows == sum(v is not None for v in values)
        for f in t.scan().files():
            assert os.path.realpath(f).startswith(base + os.sep), f
        for root, _, names in os.walk(d):
            for n in names:
                assert os.path.realpath(os.path.join(root, n)).startswith(base + os.sep)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@FAST
@given(name=column_names, partitioned=st.booleans())
def test_any_column_name_is_refused_or_round_trips(table_type: str, name: str, partitioned: bool) -> None:
    check_column_name(name, table_type, partitioned)


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@FAST
@given(values=partition_values)
def test_any_partition_values_round_trip_and_filter_exactly(table_type: str, values: list[str | None]) -> None:
    check_partition_values(values, table_type)


@pytest.mark.soak
@pytest.mark.parametrize("table_type", ["cow", "mor"])
@SOAK
@given(name=st.text(min_size=1), partitioned=st.booleans())
def test_any_column_name_soak(table_type: str, name: str, partitioned: bool) -> None:
    check_column_name(name, table_type, partitioned)


@pytest.mark.soak
@pytest.mark.parametrize("table_type", ["cow", "mor"])
@SOAK
@given(
    values=st.lists(
        st.one_of(st.none(), st.sampled_from(SPECIAL_VALUES), st.text()), min_size=1, max_size=30, unique=True
    )
)
def test_any_partition_values_soak(table_type: str, values: list[str | None]) -> None:
    check_partition_values(values, table_type)
