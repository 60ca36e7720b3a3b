"""Bloom filters: no false negatives, a false-positive rate near the configured one,
composite keys, serialization through a metadata-table row, and the key range."""

from __future__ import annotations

import pyarrow as pa
import pytest
from lakeline.indexes.bloom import (
    FileBloom,
    bloom_table,
    file_bloom_rows,
    key_strings,
    might_contain,
)
from lakeline.timeline.errors import UnknownColumnError


def test_no_false_negatives_and_fpp_near_target() -> None:
    rows = pa.table({"id": pa.array(range(0, 20_000, 2), pa.int64())})
    fb = FileBloom.build(rows, ["id"], fpp=0.01)
    present = key_strings(rows, ["id"])
    assert all(fb.might_contain(present))
    absent = [str(i) for i in range(1, 40_000, 2)]
    rate = sum(fb.might_contain(absent)) / len(absent)
    assert rate < 0.02
    assert fb.key_min == "0" and fb.key_max == "19998" and fb.entries == 10_000


def test_round_trip_through_a_row() -> None:
    rows = pa.table({"id": ["a", "b", "c"]})
    t = file_bloom_rows("p/f.parquet", "p", rows, ["id"], fpp=0.001)
    assert t.schema.field("filter").type == pa.binary()
    row = t.to_pylist()[0]
    assert might_contain(row, ["a", "b", "c", "zzz-not-there"])[:3] == [True, True, True]
    back = FileBloom.from_row(row)
    assert back.columns == ("id",) and back.fpp == 0.001 and back.entries == 3
    assert bloom_table([row]).num_rows == 1


def test_composite_keys_do_not_collide_on_the_separator_free_join() -> None:
    rows = pa.table({"a": ["x", "x|y"], "b": ["y|z", "z"]})
    fb = FileBloom.build(rows, ["a", "b"])
    keys = key_strings(rows, ["a", "b"])
    assert len(set(keys)) == 2
    assert all(fb.might_contain(keys))
    assert fb.key_min is None  # no range for a composite key


def test_probe_values_cast_to_the_column_type() -> None:
    schema = pa.schema([pa.field("id", pa.int32())])
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int32())})
    fb = FileBloom.build(rows, ["id"], schema=schema)
    probe = pa.table({"id": pa.array([2, 5], pa.int64())})  # a literal of another int width
    assert fb.might_contain(key_strings(probe, ["id"], schema))[0]


def test_empty_file_and_unknown_column() -> None:
    fb = FileBloom.build(pa.table({"id": pa.array([], pa.int64())}), ["id"])
    assert fb.entries == 0 and fb.key_min is None
    assert not fb.might_contain_any(["1"])
    with pytest.raises(UnknownColumnError):
        key_strings(pa.table({"id": [1]}), ["nope"])
