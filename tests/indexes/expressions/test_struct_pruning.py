"""A table with a struct column prunes as any other (issue 45 follow-up).

Every nested field of a lakeline table carries its field id as metadata, and pyarrow's
Substrait serializer refuses a struct whose fields carry metadata, so every filter on
such a table read as ``Unknown``: no partition, key-range, column-stats or bloom pruning
at all. The schema is now handed to the serializer without metadata (a column is a
position there), and the reads stay what Arrow's filter gives over the whole table.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.indexes.expressions import Compare, In, Op, Ref, Unknown, from_arrow
from lakeline.indexes.expressions.from_arrow import without_metadata
from lakeline.table import Table
from lakeline.timeline.field_ids import walk

SCHEMA = pa.schema(
    [
        pa.field("k", pa.int64(), nullable=False),
        pa.field("p", pa.string()),
        pa.field("n", pa.int64()),
        pa.field("s", pa.struct([pa.field("a", pa.int64()), pa.field("t", pa.struct([pa.field("b", pa.string())]))])),
        pa.field("l", pa.list_(pa.struct([pa.field("c", pa.float64())]))),
        pa.field("m", pa.map_(pa.string(), pa.int32())),
    ]
)

k, p, n, s = pc.field("k"), pc.field("p"), pc.field("n"), pc.field("s", "a")


def _rows(keys: range) -> pa.Table:
    return pa.table(
        {
            "k": list(keys),
            "p": ["a" if x % 2 else "b" for x in keys],
            "n": [x * 10 for x in keys],
            "s": [{"a": x % 7, "t": {"b": str(x)}} for x in keys],
            "l": [[{"c": float(x)}] for x in keys],
            "m": [{"q": x} for x in keys],
        },
        schema=SCHEMA,
    )


def _table(tmp_path: Path, kind: str) -> Table:
    """Four inserts of 10 keys each (a file per partition each), the indexes on; on
    merge-on-read an upsert adds logs."""
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="k",
        partition_by=["p"],
        table_type=kind,
        properties={"write.small-file-limit-bytes": 0},
    )
    t.indexes.create("column_stats")
    t.indexes.create("bloom_filters", columns=["n"])
    for start in range(0, 40, 10):
        t.insert(_rows(range(start, start + 10)))
    if kind == "mor":
        t.upsert(_rows(range(35, 37)))
        assert any(sl.logs for sl in t.scan().slices)
    return t


def test_the_tree_of_a_filter_on_a_table_with_a_struct(tmp_path: Path) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="k", partition_by=["p"])
    schema = t.schema
    assert any(f.metadata for f in walk(list(schema)) if f.name in ("a", "b", "c"))  # ids inside the struct
    assert from_arrow(n > 5, schema) == Compare(Op.GT, Ref("n"), 5)
    assert from_arrow(k.isin([1, 2]), schema) == In(Ref("k"), frozenset({1, 2}))
    assert isinstance(from_arrow(s > 3, schema), Unknown)  # a nested field: never pruned on
    plain = without_metadata(schema)
    assert plain.names == schema.names and not any(f.metadata for f in walk(list(plain)))
    assert [f.type for f in plain] == [f.type for f in schema]  # Arrow types ignore metadata


#: The pruning stages :meth:`Scan.explain` counts files after, in order.
STAGES = ("after_partition_pruning", "after_stats_pruning", "after_bloom_pruning")

FILTERS = {
    "n_range": n >= 300,
    "n_eq": n == 120,
    "partition": p == "a",
    "key": k == 7,
    "partition_and_struct": (p == "b") & (s > 3),
    "struct": s == 2,
    "or": (n < 50) | (s == 6),
}


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_a_table_with_a_struct_prunes_and_reads_what_arrow_filters(tmp_path: Path, kind: str) -> None:
    t = _table(tmp_path, kind)
    whole = t.to_arrow()
    plan = {name: t.scan(filter=flt).explain() for name, flt in FILTERS.items()}
    groups = {name: e["file_groups"] for name, e in plan.items()}  # slices left to read
    assert t.scan().explain()["file_groups"] == 8
    assert groups == {
        "n_range": 2,  # the last insert's
        "n_eq": 1,
        "partition": 4,
        "key": 2,  # the first insert's (keys 0-8 and 1-9)
        "partition_and_struct": 4,
        "struct": 8,  # a nested field prunes nothing
        "or": 8,
    }
    stage = {name: [e[f"files_{x}"] for x in ("total", *STAGES)] for name, e in plan.items()}
    assert stage["partition"][1] < stage["partition"][0]
    assert stage["n_range"][2] < stage["n_range"][1]
    assert stage["n_eq"][3] < stage["n_eq"][2]
    for name, flt in FILTERS.items():
        want = sorted(whole.filter(flt).column("k").to_pylist())
        assert want, name
        got = t.to_arrow(filter=flt)
        assert sorted(got.column("k").to_pylist()) == want, name
        assert got.sort_by("k").equals(whole.filter(flt).sort_by("k")), name
