"""Bloom filters: no false negatives, a false-positive rate near the configured one,
composite keys, serialization through a metadata-table row, the key range, and hashes
that are the same for every way Arrow may hold the same value."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lakeline.indexes.bloom import BloomBits, FileBloom, bloom_table, file_bloom_rows, key_hashes
from lakeline.indexes.hashing import hash_array
from lakeline.timeline.errors import MetadataTableError, UnknownColumnError


@pytest.mark.parametrize("typ", [pa.int64(), pa.string()])
def test_no_false_negatives_and_fpp_near_target(typ: pa.DataType) -> None:
    rows = pa.table({"id": pa.array(range(0, 20_000, 2), pa.int64()).cast(typ)})
    fb = FileBloom.build(rows, ["id"], fpp=0.01)
    assert fb.might_contain(key_hashes(rows, ["id"])).all()
    absent = pa.table({"id": pa.array(range(1, 40_000, 2), pa.int64()).cast(typ)})
    rate = fb.might_contain(key_hashes(absent, ["id"])).mean()
    assert 0 < rate < 0.02
    assert fb.key_min == "0" and fb.entries == 10_000
    assert fb.key_max == ("19998" if typ == pa.int64() else "9998")  # text orders "9998" last


def test_round_trip_through_a_row() -> None:
    rows = pa.table({"id": ["a", "b", "c"]})
    t = file_bloom_rows("p/f.parquet", "p", rows, ["id"], fpp=0.001)
    assert t.schema.field("filter").type == pa.binary()
    row = t.to_pylist()[0]
    back = FileBloom.from_row(row)
    probe = key_hashes(pa.table({"id": ["a", "b", "c", "zzz-not-there"]}), ["id"])
    assert back.might_contain(probe)[:3].tolist() == [True, True, True]
    assert back.columns == ("id",) and back.fpp == 0.001 and back.entries == 3
    assert bloom_table([row]).num_rows == 1


def test_a_foreign_or_truncated_filter_is_a_typed_error() -> None:
    raw = BloomBits.of(np.arange(10, dtype=np.uint64), 0.01).to_bytes()
    with pytest.raises(MetadataTableError):
        BloomBits.from_bytes(b"\x00" * 40)  # e.g. a pybloom-live filter
    with pytest.raises(MetadataTableError):
        BloomBits.from_bytes(raw[:-1])


def test_composite_keys_do_not_collide_on_the_separator_free_join() -> None:
    rows = pa.table({"a": ["x", "x|y"], "b": ["y|z", "z"]})
    fb = FileBloom.build(rows, ["a", "b"])
    keys = key_hashes(rows, ["a", "b"])
    assert len(set(keys.tolist())) == 2
    assert fb.might_contain(keys).all()
    assert fb.key_min is None  # no range for a composite key


def test_probe_values_cast_to_the_column_type() -> None:
    schema = pa.schema([pa.field("id", pa.int32())])
    rows = pa.table({"id": pa.array([1, 2, 3], pa.int32())})
    fb = FileBloom.build(rows, ["id"], schema=schema)
    probe = pa.table({"id": pa.array([2, 5], pa.int64())})  # a literal of another int width
    assert fb.might_contain(key_hashes(probe, ["id"], schema))[0]


def test_empty_file_and_unknown_column() -> None:
    fb = FileBloom.build(pa.table({"id": pa.array([], pa.int64())}), ["id"])
    assert fb.entries == 0 and fb.key_min is None
    assert not fb.might_contain_any(key_hashes(pa.table({"id": [1]}), ["id"]))
    with pytest.raises(UnknownColumnError):
        key_hashes(pa.table({"id": [1]}), ["nope"])


def test_hashes_do_not_depend_on_how_arrow_holds_the_values() -> None:
    words = ["", "a", "bb", "k000123", "ünïcode", "x" * 300]
    want = hash_array(pa.array(words, pa.string()))
    assert len(set(want.tolist())) == len(words)
    assert (hash_array(pa.array(words, pa.large_string())) == want).all()
    assert (hash_array(pa.chunked_array([words[:2], words[2:]])) == want).all()
    sliced = pa.array(["pad"] + words, pa.string()).slice(1)
    assert (hash_array(sliced) == want).all()
    # Strings of mixed lengths in any order hash like each one alone.
    for i, w in enumerate(words):
        assert hash_array(pa.array([w]))[0] == want[i]
    ints = pa.array([0, -1, 7, 2**40], pa.int64())
    assert (hash_array(ints.cast(pa.int64())) == hash_array(pa.array([0, -1, 7, 2**40], pa.int64()))).all()
    assert (hash_array(pa.array([1, 2], pa.int8())) == hash_array(pa.array([1, 2], pa.int64()))).all()


def test_few_and_many_probes_agree() -> None:
    rows = pa.table({"id": pa.array(range(0, 50_000, 5), pa.int64())})
    fb = FileBloom.build(rows, ["id"], fpp=0.01)
    probe = key_hashes(pa.table({"id": pa.array(range(20_000), pa.int64())}), ["id"])
    many = fb.might_contain(probe)  # unpacks the filter
    few = np.concatenate([fb.might_contain(probe[i : i + 3]) for i in range(0, 60, 3)])  # packed lookups
    assert (few == many[:60]).all() and many[::5].all()


def test_fixed_width_values_hash_by_value() -> None:
    import datetime as dt

    floats = hash_array(pa.array([1.0, -0.0, 0.0, float("nan"), 2.5]))
    assert floats[1] == floats[2] and len(set(floats.tolist())) == 4
    assert (hash_array(pa.array([1.5], pa.float32())) == hash_array(pa.array([1.5]))).all()
    stamp = pa.array([dt.datetime(2026, 1, 1, 12)], pa.timestamp("us"))
    assert (hash_array(stamp) == hash_array(pa.array([stamp[0].value], pa.int64()))).all()
    day = pa.array([dt.date(2026, 1, 1)])
    assert (hash_array(day) == hash_array(pa.array([day[0].value], pa.int64()))).all()
    assert (hash_array(pa.chunked_array([stamp, stamp])) == hash_array(stamp)[[0, 0]]).all()
