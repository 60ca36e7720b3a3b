"""The benchmarks' data shapes (:mod:`bench.data`, issue 30): what a shape promises holds.

Why: a benchmark's number means something only for the data it ran on. The shape flags
(``--keys sequential|uuid``, ``--order random|sorted``) must produce what the report says
they do: uuid keys distinct and spread over the key space, random order really unsorted
and the same rows as sorted, the range read holding exactly its keys after the upsert,
and the old shape (sequential, sorted) still the default of the data functions, so
benchmarks that choose no shape measure what they did.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from bench import data

SHAPES = [data.Shape(k, o) for k in data.KEY_KINDS for o in data.ORDERS]


def keys_of(table: pa.Table) -> list[str]:
    return table.column("key").to_pylist()


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: s.label)
def test_a_shape_is_the_same_rows_in_its_order(shape: data.Shape) -> None:
    batch = data.append_batch(2, 3_000, shape)
    plain = data.append_batch(2, 3_000, data.Shape(shape.keys, "sorted"))
    assert batch.sort_by("key").equals(plain.sort_by("key"))  # the same rows
    assert (keys_of(batch) == sorted(keys_of(batch))) is (shape.order == "sorted")
    ups = data.upsert_batch(30_000, 3_000, shape)
    assert (keys_of(ups) == sorted(keys_of(ups))) is (shape.order == "sorted")
    assert pc.count_distinct(ups.column("key")).as_py() == 3_000


def test_uuid_keys_are_distinct_hex_spread_over_the_key_space() -> None:
    keys = data.keys(np.arange(200_000), "uuid")
    assert pc.count_distinct(keys).as_py() == 200_000
    assert set("".join(keys.slice(0, 1000).to_pylist())) <= set("0123456789abcdef")
    assert all(len(k) == 32 for k in keys.slice(0, 1000).to_pylist())
    assert data.key(12345, "uuid") == keys[12345].as_py()
    first = data.append_batch(0, 10_000, data.Shape("uuid", "sorted")).column("key")
    # One batch's keys reach across the whole space, not a narrow range as sequential keys do.
    assert pc.min(first).as_py() < "01" and pc.max(first).as_py() > "fe"


@pytest.mark.parametrize("kind", data.KEY_KINDS)
def test_the_range_read_holds_its_keys_after_the_upsert(kind: str) -> None:
    existing, new = 20_000, 1_000
    shape = data.Shape(kind, "random")
    a, b = data.read_range(existing, 500, shape, new_rows=new)
    assert data.rows_in_range(np.arange(existing + new), a, b, kind) == 500
    before = data.rows_in_range(np.arange(existing), a, b, kind)
    assert before == 500 if kind == "sequential" else 400 < before <= 500


def test_the_data_functions_default_to_the_old_shape() -> None:
    """Benchmarks that choose no shape (services, stream, spark, ...) keep their data."""
    assert keys_of(data.append_batch(1, 100)) == [data.key(i) for i in range(100, 200)]
    ups = keys_of(data.upsert_batch(1_000, 100))
    assert ups == sorted(ups) and ups[-1] == data.key(1_049)
    assert data.read_range(1_000, 10) == (data.key(495), data.key(505))
    assert data.shapes_of(None, None) == [data.DEFAULT] == [data.Shape("sequential", "random")]
    assert data.shapes_of(["uuid"], None, data.SORTED_SEQUENTIAL) == [data.Shape("uuid", "sorted")]
    with pytest.raises(ValueError):
        data.Shape("random", "sorted")
