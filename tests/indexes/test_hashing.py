"""Column hashes and bounds (indexes/hashing.py): equal values hash equal however Arrow
holds them, seeds change the hash, and binary bounds survive as text."""

from __future__ import annotations

import pyarrow as pa
import pytest
from lakeline.indexes.hashing import (
    BINARY_HEX_TAG,
    ColumnHashes,
    binary_bound_text,
    binary_bound_value,
    hash_array,
    min_max_text,
)


def test_same_values_hash_the_same_in_every_layout() -> None:
    values = ["a", "bb", "", "ccc"]
    plain = hash_array(pa.array(values, pa.string()))
    assert list(hash_array(pa.array(values, pa.large_string()))) == list(plain)
    assert list(hash_array(pa.chunked_array([values[:1], values[1:]]))) == list(plain)
    assert list(hash_array(pa.array(values).dictionary_encode())) == list(plain)
    assert len(set(plain)) == 4


def test_ints_hash_by_value_and_seed_matters() -> None:
    a = hash_array(pa.array([1, 2, 3], pa.int64()))
    assert list(hash_array(pa.array([1, 2, 3], pa.int32()))) == list(a)
    assert list(hash_array(pa.array([1, 2, 3], pa.int64()), seed=7)) != list(a)
    assert len(set(a)) == 3


@pytest.mark.parametrize("value", [b"", b"abc", b"\xff\xfe", BINARY_HEX_TAG.encode() + b"00"])
def test_binary_bounds_round_trip(value: bytes) -> None:
    text = binary_bound_text(value)
    assert binary_bound_value(text) == value
    assert text.startswith(BINARY_HEX_TAG) == (value in (b"\xff\xfe", BINARY_HEX_TAG.encode() + b"00"))


def test_min_max_text() -> None:
    assert min_max_text(pa.array([3, None, -2])) == ("-2", "3")
    assert min_max_text(pa.array(["b", "a", "é"])) == ("a", "é")
    assert min_max_text(pa.array([None], pa.string())) == (None, None)
    assert min_max_text(pa.array([b"\xff", b"a"])) == ("a", BINARY_HEX_TAG + "ff")


def test_column_hashes_of_valid_rows() -> None:
    rows = pa.table({"k": pa.array(["x", None, "y"])})
    hashes = ColumnHashes(rows)
    assert len(hashes.of("k")) == 3
    assert list(hashes.of_valid("k")) == list(hash_array(pa.array(["x", "y"])))
    assert hashes.bounds("k") == ("x", "y")
