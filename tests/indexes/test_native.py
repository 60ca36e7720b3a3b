"""The C loops of index entries equal their numpy references, value for value.

Entries written by an install with the extension are probed by installs without it
(and the other way round), so any difference would be a false negative somewhere.
Under CI the extension must be built: the Makefile's editable install compiles it.
"""

from __future__ import annotations

import os

import numpy as np
import pyarrow as pa
import pytest
from lakeline.indexes import bloom, hashing
from lakeline.indexes.native import NATIVE

pytestmark = pytest.mark.skipif(
    NATIVE is None and os.environ.get("CI") != "true", reason="lakeline was installed without its C extension"
)


def test_the_extension_is_built_under_ci() -> None:
    assert NATIVE is not None, "indexes/_native.c was not compiled by the install"


def _texts(rng: np.random.Generator, n: int) -> pa.Array:
    # Lengths 0..40 cover whole words, partial last words and empty strings; bytes
    # cover the high bit (sign-extension bugs) and zeros (padding bugs).
    lengths = rng.integers(0, 41, n)
    raw = [bytes(rng.integers(0, 256, k, dtype=np.uint8)) for k in lengths]
    raw[::7] = [b"\x00" * (k % 9) for k in lengths[::7]]
    return pa.array(raw, pa.binary())


@pytest.mark.parametrize("seed", [0, 1, 0xFFFFFFFFFFFFFFFF])
@pytest.mark.parametrize("large", [False, True])
def test_text_hashes_equal_the_numpy_reference(seed: int, large: bool) -> None:
    rng = np.random.default_rng(seed & 0xFFFF)
    arr = _texts(rng, 3000)
    if large:
        arr = arr.cast(pa.large_binary())
    arr = arr.slice(5, 2000)  # an offset into the buffers
    _, offsets_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64 if large else np.int32)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data_buf, dtype=np.uint8)
    native = hashing.hash_text_buffers(data, offsets, seed)
    reference = hashing.hash_text_buffers_numpy(data, offsets, seed)
    assert native.dtype == np.uint64
    np.testing.assert_array_equal(native, reference)


def test_text_hash_refuses_offsets_outside_the_data() -> None:
    with pytest.raises(ValueError, match="outside"):
        hashing.hash_text_buffers(np.zeros(4, np.uint8), np.array([0, 9], np.int32))


@pytest.mark.parametrize("n", [0, 1, 1000, 300_000])
def test_datasketches_coupons_equal_the_numpy_and_python_references(n: int) -> None:
    from lakeline.indexes import coupons

    rng = np.random.default_rng(n)
    w = rng.integers(0, 2**64, n, dtype=np.uint64)
    w[::7] &= np.uint64(0xFF)  # small values: long runs of leading zeros in the hash
    native = coupons.word_coupons(w)
    np.testing.assert_array_equal(native, coupons.word_coupons_numpy(w))
    ref = [coupons.coupon(*coupons.murmur3_128(int(x).to_bytes(8, "little"))) for x in w[:200]]
    assert native[:200].tolist() == ref


@pytest.mark.parametrize("n", [1, 999, 200_000])
@pytest.mark.parametrize("fpp", [0.3, 0.01, 0.0001])
def test_bloom_bits_and_probes_equal_the_numpy_reference(n: int, fpp: float) -> None:
    rng = np.random.default_rng(n)
    h = rng.integers(0, 2**64, n, dtype=np.uint64)
    built = bloom.BloomBits.of(h, fpp)
    assert built == bloom.BloomBits.of_numpy(h, fpp)
    probes = np.concatenate([h[:50], rng.integers(0, 2**64, 5000, dtype=np.uint64)])
    got = built.contains(probes)
    np.testing.assert_array_equal(got, built.contains_numpy(probes))
    assert got[: min(n, 50)].all()  # no false negatives


@pytest.mark.parametrize("seed", [0, 7, 0xFFFFFFFFFFFFFFFF])
def test_fixed_width_hashes_equal_the_numpy_reference(seed: int) -> None:
    rng = np.random.default_rng(seed & 0xFFFF)
    ints = pa.array(rng.integers(-(2**63), 2**63 - 1, 10_000, dtype=np.int64))
    floats = pa.array(np.concatenate([rng.standard_normal(1000), [0.0, -0.0, np.nan, -np.nan]]))
    for arr in (ints, floats, ints.cast(pa.int16(), safe=False), pa.array([1, None, 3], pa.int32())):
        words = hashing._as_words(arr)
        assert words is not None
        np.testing.assert_array_equal(hashing.hash_array(arr, seed), hashing.hash_words_numpy(words, seed))


@pytest.mark.parametrize("large", [False, True])
def test_text_min_max_equals_arrow(large: bool) -> None:
    rng = np.random.default_rng(3)
    words = [bytes(rng.integers(0, 256, k, dtype=np.uint8)).decode("latin-1") for k in rng.integers(0, 12, 5000)]
    words += ["", "\u00ff\u00ff", "a", "a\x00"]  # prefixes, empty, high code points
    arr = pa.array(words, pa.large_string() if large else pa.string()).slice(3)
    chunked = pa.chunked_array([arr.slice(0, 100), arr.slice(100)])
    mm = pa.compute.min_max(arr)
    expected = (mm["min"].as_py(), mm["max"].as_py())
    assert hashing.min_max_text(arr) == expected
    assert hashing.min_max_text(chunked) == expected


@pytest.mark.parametrize(
    "arr",
    [
        pa.array([3, None, -1, 100], pa.int8()),
        pa.array([3, None, -(2**62), 2**62], pa.int64()),
        pa.array([3, None, 1, 2**63], pa.uint64()),
        pa.array([0.1, None, -2.5e-7, 1e300], pa.float64()),
        pa.array([1, None, 1_700_000_000_000], pa.timestamp("ms")),
        pa.array([1, None, 20_000], pa.int32()).cast(pa.date32()),
        pa.array([True, None, False]),
    ],
    ids=lambda a: str(a.type),
)
def test_min_max_text_is_arrows_text_of_the_bounds(arr: pa.Array) -> None:
    mm = pa.compute.min_max(arr)
    want = tuple(pa.compute.cast(mm[b], pa.string()).as_py() for b in ("min", "max"))
    assert hashing.min_max_text(arr) == want
    assert hashing.min_max_text(pa.nulls(3, arr.type)) == (None, None)


@pytest.mark.parametrize(
    "arr",
    [
        pa.chunked_array([pa.array([f"v{i}" for i in range(20_000)]), pa.array(["", "x" * 40, "v7", "é" * 17])]),
        pa.array([b"\x00\x01", b"", b"\xff" * 9, b"0123456789abcdef0"], pa.binary()),
    ],
    ids=lambda a: str(a.type),
)
def test_text_coupons_equal_the_python_reference(arr: pa.Array) -> None:
    from lakeline.indexes import coupons

    got = coupons.column_coupons(arr).tolist()
    values = arr.to_pylist()
    want = [
        0 if not v else coupons.coupon(*coupons.murmur3_128(v.encode() if isinstance(v, str) else v)) for v in values
    ]
    assert got == want


def _numpy_distinct(words: np.ndarray) -> bool:
    ordered = np.sort(words)
    return not (ordered[1:] == ordered[:-1]).any()


@pytest.mark.parametrize("n", [0, 1, 2, 2047, 2049, 300_000])
def test_words_distinct_equals_a_sort(n: int) -> None:
    # Random hashes, then one repeat placed anywhere (first, last, same block or not):
    # the partitioned set must find every repeat a sort finds.
    rng = np.random.default_rng(n)
    words = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    assert NATIVE.words_distinct(words) == _numpy_distinct(words)
    for _ in range(5 if n >= 2 else 0):
        i, j = rng.choice(n, 2, replace=False)
        repeated = words.copy()
        repeated[i] = repeated[j]
        assert NATIVE.words_distinct(repeated) is False


@pytest.mark.parametrize(
    "words",
    [
        np.zeros(2, np.uint64),  # zero marks a free slot: two zeros are still a repeat
        np.array([0, 1, 2**63], np.uint64),
        np.arange(1, 100_000, dtype=np.uint64),  # one block: the top bits never vary
        np.arange(1, 100_000, dtype=np.uint64) << np.uint64(40),  # few blocks, many words each
        np.repeat(np.arange(50_000, dtype=np.uint64), 2),
        np.array([2**64 - 1, 2**64 - 1], np.uint64),
    ],
)
def test_words_distinct_on_skewed_words(words: np.ndarray) -> None:
    assert NATIVE.words_distinct(words) == _numpy_distinct(words)


def test_long_columns_split_over_two_threads_give_the_same_hashes_and_bounds() -> None:
    # From SPLIT_ROWS on, hash_text and min_max_text run in two halves (one on the helper
    # thread); the halves' seam falls inside a chunk here, and chunks have offsets.
    from lakeline.indexes.native import SPLIT_ROWS

    rng = np.random.default_rng(7)
    n = SPLIT_ROWS + 12_345
    words = rng.integers(0, 10**12, n)
    text = pa.array(np.char.mod("k%d", words).astype(object), pa.string())
    chunked = pa.chunked_array([text.slice(0, 300_001), text.slice(300_001, 600_000), text.slice(900_001)])
    expected = hashing.hash_text_buffers_numpy(*hashing._text_buffers(text), 3)
    np.testing.assert_array_equal(hashing.hash_text(chunked, 3), expected)
    np.testing.assert_array_equal(hashing.hash_text(text, 3), expected)
    mm = pa.compute.min_max(text)
    assert hashing.min_max_text(chunked) == (mm["min"].as_py(), mm["max"].as_py())


@pytest.mark.parametrize("n", [0, 1, 1000, 100_000])
def test_probe_search_equals_the_numpy_reference(n: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from lakeline.indexes.record_index import hash_bits

    rng = np.random.default_rng(n)
    probes = np.sort(rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64))
    width = hash_bits.width_for(n)
    bits = hash_bits.empty_table(width)
    hash_bits.set_bits(bits, width, probes)
    # Present hashes, their neighbours (same top bits), and repeats of the first probes.
    asked = np.r_[probes, probes + 1, probes[: n // 10], rng.integers(-(2**63), 2**63 - 1, 5000, dtype=np.int64)]
    asked = asked[rng.permutation(len(asked))]
    native = hash_bits.find_sorted(bits, width, probes, asked)
    monkeypatch.setattr(hash_bits, "NATIVE", None)
    reference = hash_bits.find_sorted(bits, width, probes, asked)
    assert [a.tolist() for a in native] == [a.tolist() for a in reference]
    assert len(native[0]) == int(np.isin(asked, probes).sum())
