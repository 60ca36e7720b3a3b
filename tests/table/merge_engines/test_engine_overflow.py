"""An aggregation ``sum`` or ``count`` that its column's type cannot hold is refused
before anything is written, on both table types, and never bricks a table (issue 45:
audit rows ME5-ME10, defects D8-D10; docs/merge-engines.md, "Totals that fit").

Before: int64 2^62 + 2^62 wrapped silently to -2^63 (D8); int8, decimal(5,2) and an int8
``count`` of 130 raised a bare ``ArrowInvalid``, on copy-on-write after the instant was
requested (D9); on merge-on-read the upsert committed and every read and compaction
raised ``ArrowInvalid`` from then on (D10).
"""

from __future__ import annotations

import decimal
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Hooks, Table, ValidationContext
from lakeline.table.checked_sums import run_sums
from lakeline.table.write import operations
from lakeline.timeline.errors import AggregateOverflowError, LakelineError

D = decimal.Decimal

# (type, a first total that fits, a version that makes it overflow)
CASES: dict[str, tuple[pa.DataType, Any, Any]] = {
    "int8": (pa.int8(), 100, 100),
    "int8-negative": (pa.int8(), -100, -100),
    "int16": (pa.int16(), 30_000, 30_000),
    "int32": (pa.int32(), 2**31 - 1, 1),
    "int64": (pa.int64(), 2**62, 2**62),  # D8: wrapped to -2^63
    "int64-negative": (pa.int64(), -(2**63), -1),
    "uint8": (pa.uint8(), 200, 100),
    "uint16": (pa.uint16(), 60_000, 6_000),
    "uint32": (pa.uint32(), 2**32 - 1, 1),
    "uint64": (pa.uint64(), 2**63, 2**63),
    "decimal(5,2)": (pa.decimal128(5, 2), D("999.99"), D("0.01")),
    "decimal(38,0)": (pa.decimal128(38, 0), D(10**38 - 1), D(1)),  # Arrow's widened sum could wrap: exact path
}


def _table(path: Path, table_type: str, typ: pa.DataType, fn: str = "sum") -> Table:
    schema = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("c", typ)])
    props = {"merge.engine": "aggregation", "merge.c.aggregate": fn}
    return Table.create(path, schema, record_key="id", ordering_field="ts", table_type=table_type, properties=props)


def _rows(t: Table, ids: list[int], ts: int, values: list[Any]) -> pa.Table:
    return pa.table({"id": ids, "ts": [ts] * len(ids), "c": values}, schema=t.config.schema)


def _read(t: Table) -> dict[int, Any]:
    out = Table.open(t.path).to_arrow()
    return dict(zip(out.column("id").to_pylist(), out.column("c").to_pylist(), strict=True))


def _events(t: Table) -> list[tuple[int, str]]:
    return [(i.id, str(i.state)) for i in Table.open(t.path).timeline.instants()]


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("case", list(CASES))
def test_a_total_that_overflows_across_commits_is_refused_before_anything_is_written(
    tmp_path: Path, table_type: str, case: str
) -> None:
    typ, first, more = CASES[case]
    t = _table(tmp_path / "t", table_type, typ)
    t.upsert(_rows(t, [1, 2], 1, [first, more]))
    events, before = _events(t), {1: first, 2: more}
    with pytest.raises(AggregateOverflowError, match=r"column 'c'.*\{'id': 1\}|\{'id': 1\}.*column 'c'") as e:
        t.upsert(_rows(t, [1], 2, [more]))
    assert isinstance(e.value, LakelineError) and isinstance(e.value, ValueError)
    assert _events(t) == events, "the refused upsert began an instant"
    assert _read(t) == before
    assert Table.open(t.path).to_arrow(filter=pc.field("id") == 1).column("c").to_pylist() == [first]
    if table_type == "mor":
        t.services.compact()
        assert _read(t) == before
        with pytest.raises(AggregateOverflowError):  # after compaction too (D8)
            t.upsert(_rows(t, [1], 3, [more]))
        assert _read(t) == before
    # The table takes a version that fits: the refusal was the overflow's.
    t.upsert(_rows(t, [2], 4, [more if first != more else 0]))
    assert _read(t)[1] == first


@pytest.mark.parametrize("table_type", ["cow", "mor"])
@pytest.mark.parametrize("case", ["int8", "int64", "uint64", "decimal(5,2)"])
def test_a_total_that_overflows_within_one_batch_is_refused(tmp_path: Path, table_type: str, case: str) -> None:
    typ, first, more = CASES[case]
    t = _table(tmp_path / "t", table_type, typ)
    t.upsert(_rows(t, [5], 1, [more]))
    events = _events(t)
    with pytest.raises(AggregateOverflowError, match=r"\{'id': 1\}"):
        t.upsert(_rows(t, [1, 2, 1], 2, [first, more, more]))
    assert _events(t) == events
    assert _read(t) == {5: more}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_an_int8_count_past_127_is_refused(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type, pa.int8(), fn="count")
    created = _events(t)
    with pytest.raises(AggregateOverflowError, match="count"):  # ME7: 130 versions in one batch
        t.upsert(_rows(t, [1] * 130, 1, [1] * 130))
    assert _events(t) == created
    t.upsert(_rows(t, [1] * 127, 1, list(range(127))))
    assert _read(t) == {1: 127}
    events = _events(t)
    with pytest.raises(AggregateOverflowError, match="count"):
        t.upsert(_rows(t, [1], 2, [7]))
    assert _events(t) == events
    t.upsert(_rows(t, [1], 3, [None]))  # a null counts 0: 127 still fits
    assert _read(t) == {1: 127}


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_totals_at_the_edge_of_the_type_commit(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path / "t", table_type, pa.int8())
    t.upsert(_rows(t, [1, 2], 1, [100, -100]))
    t.upsert(_rows(t, [1, 2], 2, [27, -28]))
    assert _read(t) == {1: 127, 2: -128}
    t.upsert(_rows(t, [1, 2], 3, [-127, 128 - 1]))  # back down, and up to the other edge
    assert _read(t) == {1: 0, 2: -1}


@pytest.mark.parametrize("recovery", ["delete the key", "widen the column"])
def test_a_log_written_before_the_check_reads_as_a_typed_error(tmp_path: Path, monkeypatch: Any, recovery: str) -> None:
    """A table an older lakeline left with an unmergeable log (D10): reads and
    compaction name the column and the key; deleting the key or widening the column
    (the error says both) makes the table read and compact again."""
    t = _table(tmp_path / "t", "mor", pa.int8())
    t.upsert(_rows(t, [1, 2], 1, [100, 1]))
    with monkeypatch.context() as m:
        m.setattr(operations, "check_folds", lambda ctx, plan: None)  # as before the fix
        assert t.upsert(_rows(t, [1], 2, [100])).instant is not None
    for read in (
        lambda: Table.open(t.path).to_arrow(),
        lambda: Table.open(t.path).to_arrow(filter=pc.field("id") == 1),
        lambda: t.services.compact(),
    ):
        with pytest.raises(AggregateOverflowError, match=r"merge.c.aggregate=sum.*\{'id': 1\} is 200.*int8"):
            read()
    if recovery == "delete the key":
        t.delete(pa.table({"id": [1]}))
        expected = {2: 1}
    else:
        with t.update_schema() as u:
            u.update_column("c", pa.int16())
        t = Table.open(t.path)
        expected = {1: 200, 2: 1}
    assert _read(t) == expected
    t.services.compact()
    assert _read(t) == expected


def test_a_concurrent_version_of_the_key_replays_the_write_and_refuses_it(tmp_path: Path) -> None:
    """Each of two merge-on-read upserts fits on the snapshot it planned on; together
    they overflow. The one completing second sees the other's version of its key, replays
    and is refused on the fresh snapshot."""
    t = _table(tmp_path / "t", "mor", pa.int8())
    t.upsert(_rows(t, [1], 1, [20]))
    done = threading.Event()

    def other_writer(ctx: ValidationContext) -> None:
        if not done.is_set():
            done.set()
            other = Table.open(t.path)
            other.upsert(_rows(other, [1], 2, [100]))

    with pytest.raises(AggregateOverflowError, match=r"\{'id': 1\} is 220"):
        t.upsert(_rows(t, [1], 3, [100]), hooks=Hooks(validators=[other_writer]))
    assert done.is_set()
    assert _read(t) == {1: 120}
    t.services.compact()
    assert _read(t) == {1: 120}


INTEGERS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


@pytest.mark.parametrize("typ", INTEGERS, ids=str)
def test_run_sums_are_exact_and_flag_exactly_the_overflows(typ: pa.DataType) -> None:
    rng = np.random.default_rng(45)
    info = np.iinfo(np.dtype(typ.to_pandas_dtype()))
    edges = np.array([info.min, info.max, info.min + 1, info.max - 1, 0, 1], dtype=np.dtype(typ.to_pandas_dtype()))
    random = rng.integers(info.min, info.max, size=2000, dtype=np.dtype(typ.to_pandas_dtype()), endpoint=True)
    values = np.concatenate([edges, random, edges])
    mask = rng.random(len(values)) < 0.1
    col = pa.array(values, type=typ, mask=mask)
    starts = np.unique(np.concatenate([[0], rng.integers(1, len(values), size=700)]))
    sums, over = run_sums(col, starts)
    ends = np.append(starts[1:], len(values))
    items = col.to_pylist()
    expected_over = []
    for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
        present = [v for v in items[s:e] if v is not None]
        total = sum(present)
        if not present:
            assert sums[i].as_py() is None
        elif info.min <= total <= info.max:
            assert sums[i].as_py() == total
        else:
            expected_over.append(i)
            assert sums[i].as_py() is None
    assert over.tolist() == expected_over
    assert expected_over, "the case holds no overflow to find"


@pytest.mark.parametrize("typ", [pa.decimal128(5, 2), pa.decimal128(38, 3)], ids=str)
def test_decimal_run_sums_are_exact_and_flag_exactly_the_overflows(typ: pa.DataType) -> None:
    rng = np.random.default_rng(7)
    top = 10**typ.precision - 1
    ints = [int(v) for v in rng.integers(-(2**62), 2**62, size=600)]
    ints = [v * (top // 2**62) if typ.precision > 18 else v % (top + 1) for v in ints] + [top, top, -top, -top]
    exact = decimal.Context(prec=100)  # the default 28 digits would round a 38-digit value
    values = [D(v).scaleb(-typ.scale, exact) for v in ints]
    col = pa.array(values, typ)
    starts = np.unique(np.concatenate([[0], rng.integers(1, len(values), size=200)]))
    sums, over = run_sums(col, starts)  # in the default context: run_sums must not round
    ends = np.append(starts[1:], len(values))
    expected_over = []
    with decimal.localcontext(exact):
        limit = D(top).scaleb(-typ.scale)
        for i, (s, e) in enumerate(zip(starts, ends, strict=True)):
            total = sum(values[s:e], D(0))
            if abs(total) > limit:
                expected_over.append(i)
                assert sums[i].as_py() is None
            else:
                assert sums[i].as_py() == total
    assert over.tolist() == expected_over
    assert expected_over
    # Each extreme alone fits, to the last digit.
    extremes = [D(top).scaleb(-typ.scale, exact), D(-top).scaleb(-typ.scale, exact)]
    sums, over = run_sums(pa.array(extremes, typ), np.array([0, 1]))
    assert over.size == 0 and sums.to_pylist() == extremes


@pytest.mark.parametrize("table_type", ["cow", "mor"])
def test_versions_in_several_logs_and_partitions_with_a_composite_key(tmp_path: Path, table_type: str) -> None:
    """The touched keys' current totals come from the base and every log of their
    slice, each partition apart; a total past the type after three versions is refused
    (each file's statistics alone fit, so the rows are read)."""
    schema = pa.schema([("day", pa.string()), ("id", pa.int64()), ("sub", pa.string()), ("c", pa.int8())])
    t = Table.create(
        tmp_path / "t",
        schema,
        record_key=["id", "sub"],
        partition_by=["day"],
        table_type=table_type,
        properties={"merge.engine": "aggregation", "merge.c.aggregate": "sum"},
    )

    def up(day: str, ids: list[int], subs: list[str], values: list[int]) -> None:
        t.upsert(pa.table({"day": [day] * len(ids), "id": ids, "sub": subs, "c": values}, schema=schema))

    for day in ("d1", "d2"):
        up(day, [1, 1, 2], ["a", "b", "a"], [50, 50, 50])
        up(day, [1, 2], ["a", "a"], [50, 50])
    events = _events(t)
    with pytest.raises(AggregateOverflowError, match=r"'id': 1, 'sub': 'a'"):
        up("d2", [1, 1], ["a", "b"], [50, 1])
    assert _events(t) == events
    up("d2", [1, 1], ["b", "c"], [50, 50])  # (1, b) is at 100, (1, c) is new: both fit
    out = Table.open(t.path).to_arrow()
    got = sorted(zip(*(out.column(c).to_pylist() for c in ("day", "id", "sub", "c")), strict=True))
    assert got == [
        ("d1", 1, "a", 100),
        ("d1", 1, "b", 50),
        ("d1", 2, "a", 100),
        ("d2", 1, "a", 100),
        ("d2", 1, "b", 100),
        ("d2", 1, "c", 50),
        ("d2", 2, "a", 100),
    ]
