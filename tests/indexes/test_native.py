"""The C loops of index entries equal their numpy references, value for value, for
every column type the index code takes (sliced, chunked, with nulls); malformed
buffers, counts and offsets are a CorruptFileError, never a crash.

Entries written by an install with the extension are probed by installs without it
(and the other way round), so any difference would be a false negative somewhere.
Every test here runs with the C loops on, whatever ``LAKELINE_NATIVE`` says; without
the extension they skip, except under CI (``CI`` set to any truthy value), where they
fail: the Makefile's editable install compiles it (:mod:`tests.natives`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

import numpy as np
import pyarrow as pa
import pytest
from lakeline.indexes import bloom, hashing
from lakeline.timeline.errors import CorruptFileError

from tests import natives
from tests.ci import under_ci
from tests.test_layout import ROOT


@pytest.fixture(autouse=True)
def native(monkeypatch: pytest.MonkeyPatch) -> Iterator[ModuleType]:
    """The index loops' extension, switched on in every module that uses it."""
    natives.use_native(monkeypatch, True)
    yield natives.require(natives.INDEX_LOOPS)


def test_the_extension_is_built_under_ci() -> None:
    if not under_ci():
        pytest.skip("only CI requires the C extensions")
    assert natives.built(natives.INDEX_LOOPS) is not None, "indexes/_native.c was not compiled by the install"


def test_the_switch_knows_every_module_with_c_loops() -> None:
    """:func:`tests.natives.use_native` turns off every ``NATIVE`` of the package, so a
    test with the loops off runs none of them."""
    holders = set()
    for folder in ("config", "timeline", "indexes", "table", "services", "spark", "cli"):
        for path in (ROOT / folder).rglob("*.py"):
            if re.search(r"^(NATIVE\b.*=|from \S+ import .*\bNATIVE\b)", path.read_text(), re.MULTILINE):
                holders.add("lakeline." + ".".join(path.relative_to(ROOT).with_suffix("").parts))
    assert holders == set(natives.USERS)


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
def test_words_distinct_equals_a_sort(native: ModuleType, n: int) -> None:
    # Random hashes, then one repeat placed anywhere (first, last, same block or not):
    # the partitioned set must find every repeat a sort finds.
    rng = np.random.default_rng(n)
    words = rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    assert native.words_distinct(words) == _numpy_distinct(words)
    for _ in range(5 if n >= 2 else 0):
        i, j = rng.choice(n, 2, replace=False)
        repeated = words.copy()
        repeated[i] = repeated[j]
        assert native.words_distinct(repeated) is False


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
def test_words_distinct_on_skewed_words(native: ModuleType, words: np.ndarray) -> None:
    assert native.words_distinct(words) == _numpy_distinct(words)


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


def test_lakeline_native_0_turns_every_c_loop_off() -> None:
    """What ``make test``'s second run of the model tests relies on: with
    ``LAKELINE_NATIVE=0`` at import, no module of the package holds an extension."""
    script = "; ".join(
        [
            "import importlib, json",
            f"print(json.dumps({{m: importlib.import_module(m).NATIVE is None for m in {sorted(natives.USERS)!r}}}))",
        ]
    )
    for value, off in (("0", True), ("1", False)):
        env = {**os.environ, "LAKELINE_NATIVE": value}
        out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
        assert json.loads(out.stdout) == dict.fromkeys(natives.USERS, off)


# -- every column type, with and without the C loops --------------------------------------------


def _columns(n: int) -> dict[str, pa.Array]:
    """A column of each type the index code hashes, bounds and sketches, with nulls."""
    rng = np.random.default_rng(n)
    ints = rng.integers(-(2**40), 2**40, n)
    nulls = rng.random(n) < 0.1
    texts = [None if m else f"t{x % 997}" + "é" * int(x % 3) for x, m in zip(ints, nulls)]
    raw = [None if m else bytes(rng.integers(0, 256, int(x % 41), dtype=np.uint8)) for x, m in zip(ints, nulls)]
    floats = ints.astype(np.float64) / 7
    floats[::11], floats[1::13], floats[2::17] = np.nan, -0.0, 0.0

    def fixed(width: int) -> pa.Array:
        return pa.array(
            [None if m else bytes(rng.integers(0, 256, width, dtype=np.uint8)) for m in nulls], pa.binary(width)
        )

    return {
        "int8": pa.array(ints % 100, pa.int8(), mask=nulls),
        "int64": pa.array(ints, mask=nulls),
        "uint64": pa.array(np.abs(ints).astype(np.uint64), mask=nulls),
        "float32": pa.array(floats.astype(np.float32), mask=nulls),
        "float64": pa.array(floats, mask=nulls),
        "bool": pa.array(ints % 2 == 0, mask=nulls),
        "date32": pa.array((ints % 30_000).astype(np.int32), mask=nulls).cast(pa.date32()),
        "timestamp_tz": pa.array(ints, mask=nulls).cast(pa.timestamp("us", "UTC")),
        "decimal128": pa.array(ints, mask=nulls).cast(pa.decimal128(20, 0)),
        "decimal256": pa.array(ints, mask=nulls).cast(pa.decimal256(60, 0)),
        "fixed1": fixed(1),
        "fixed33": fixed(33),
        "fixed64": fixed(64),
        "string": pa.array(texts, pa.string()),
        "large_string": pa.array(texts, pa.large_string()),
        "string_view": pa.array(texts, pa.string_view()),
        "binary": pa.array(raw, pa.binary()),
        "large_binary": pa.array(raw, pa.large_binary()),
        "binary_view": pa.array(raw, pa.binary_view()),
        "dictionary": pa.array(texts).dictionary_encode(),
        "no_nulls_string": pa.array([f"k{x}" for x in ints]),
    }


def _variants(array: pa.Array) -> dict[str, pa.Array | pa.ChunkedArray]:
    n = len(array)
    return {
        "whole": array,
        "sliced": array.slice(7, n - 9),  # offsets into every buffer
        "chunked": pa.chunked_array([array.slice(0, n // 3), array.slice(n // 3, 0), array.slice(n // 3)]),
        "nulls": pa.nulls(5, array.type),
    }


def _outcome(call: object) -> object:
    """What ``call()`` returns, in a comparable form, or the name of what it raised."""
    try:
        got = call()  # type: ignore[operator]
    except Exception as e:  # the same refusal either way is the same behaviour
        return ("raised", type(e).__name__)
    return got.tolist() if isinstance(got, np.ndarray) else got


def _answers(column: pa.Array | pa.ChunkedArray) -> dict[str, object]:
    from lakeline.indexes import coupons
    from lakeline.table.write import dedupe

    hashes = hashing.hash_array(column)
    bits = bloom.BloomBits.of(hashes, 0.01)
    probes = np.concatenate([hashes[:20], np.arange(500, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)])
    return {
        "hash_array": _outcome(lambda: hashing.hash_array(column, seed=5)),
        "row_hashes": _outcome(lambda: hashing.row_hashes([column, column])),
        "key_hashes": _outcome(lambda: bloom.key_hashes(pa.table({"k": column}), ["k"])),
        "coupons": _outcome(lambda: coupons.column_coupons(column)),
        "min_max_text": _outcome(lambda: hashing.min_max_text(column)),
        "min_max_values": _outcome(lambda: hashing.min_max_values(column)),
        "bloom": bits,
        "bloom_contains": _outcome(lambda: bits.contains(probes)),
        "distinct": _outcome(lambda: dedupe._distinct(hashes)),
    }


@pytest.mark.parametrize("kind", list(_columns(8)))
def test_every_answer_equals_the_reference_for_every_column_type(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """Hashes, key hashes, coupons, bounds, bloom bits and the repeat check of a column
    of each type, whole, sliced, chunked and all null: the same with the C loops as
    with numpy and Arrow alone."""
    array = _columns(1_500)[kind]
    for variant, column in _variants(array).items():
        natives.use_native(monkeypatch, True)
        native = _answers(column)
        natives.use_native(monkeypatch, False)
        reference = _answers(column)
        for what in native:
            assert native[what] == reference[what], (kind, variant, what)


# -- crafted input ------------------------------------------------------------------------------

_U64 = np.zeros(4, np.uint64)
_OUT = np.zeros(4, np.uint64)


def _calls(ext: ModuleType) -> dict[str, object]:
    """Calls of every loop with a size, count, offset or header its buffers do not back."""
    data, offs = np.zeros(8, np.uint8), np.array([0, 3, 5], np.int32)
    wide = offs.astype(np.int64)
    hashes = np.arange(4, dtype=np.int64)
    return {
        "text offsets past the data": lambda: ext.hash_text(data, np.array([0, 9], np.int32), False, 1, 0, _OUT),
        "text offsets negative": lambda: ext.hash_text(data, np.array([-4, 2], np.int32), False, 1, 0, _OUT),
        "text offsets descending": lambda: ext.hash_text(data, np.array([5, 2], np.int64), True, 1, 0, _OUT),
        "text count past the offsets": lambda: ext.hash_text(data, offs, False, 3, 0, _OUT),
        "text count overflowing": lambda: ext.hash_text(data, wide, True, 2**61, 0, _OUT),
        "text count negative": lambda: ext.hash_text(data, offs, False, -5, 0, _OUT),
        "text output too small": lambda: ext.hash_text(data, offs, False, 2, 0, np.zeros(1, np.uint64)),
        "wide offsets in a narrow buffer": lambda: ext.hash_text(data, offs, True, 2, 0, _OUT),
        "bounds of no strings": lambda: ext.text_min_max(data, offs, False, 0),
        "bounds count overflowing": lambda: ext.text_min_max(data, wide, True, 2**61),
        "bounds offsets past the data": lambda: ext.text_min_max(data, np.array([0, 2, 99], np.int32), False, 2),
        "coupon offsets past the data": lambda: ext.ds_coupons_text(
            data, np.array([0, 99], np.int32), False, 1, np.zeros(1, np.uint32)
        ),
        "coupon count overflowing": lambda: ext.ds_coupons_text(data, wide, True, 2**62, np.zeros(1, np.uint32)),
        "coupon output too small": lambda: ext.ds_coupons_words(_U64, np.zeros(3, np.uint32)),
        "words not whole": lambda: ext.hash_words(b"\x01" * 12, 0, _OUT),
        "words output too small": lambda: ext.hash_words(_U64, 0, np.zeros(3, np.uint64)),
        "distinct words not whole": lambda: ext.words_distinct(b"\x01" * 9),
        "coupon words not whole": lambda: ext.ds_coupons_words(b"\x01" * 9, np.zeros(4, np.uint32)),
        "bloom of no bits": lambda: ext.bloom_set(_U64, 0, 3, bytearray(8)),
        "bloom over 2^32 bits": lambda: ext.bloom_set(_U64, 2**32 + 1, 3, bytearray(8)),
        "bloom of no probes": lambda: ext.bloom_test(_U64, 64, 0, bytes(8), bytearray(4)),
        "bloom bits past the buffer": lambda: ext.bloom_test(_U64, 1 << 20, 3, bytes(8), bytearray(4)),
        "bloom hashes not whole": lambda: ext.bloom_set(b"\x01" * 7, 64, 3, bytearray(8)),
        "bloom output too small": lambda: ext.bloom_test(_U64, 64, 3, bytes(8), bytearray(3)),
        "probe width too small": lambda: ext.probe_sorted(bytes(64), 2, hashes, hashes, _OUT, _OUT),
        "probe width too large": lambda: ext.probe_sorted(bytes(64), 41, hashes, hashes, _OUT, _OUT),
        "probe bits past the table": lambda: ext.probe_sorted(bytes(1), 10, hashes, hashes, _OUT, _OUT),
        "probe hashes not whole": lambda: ext.probe_sorted(bytes(1), 3, hashes, b"\x01" * 9, _OUT, _OUT),
        "probe sorted not whole": lambda: ext.probe_sorted(bytes(1), 3, b"\x01" * 9, hashes, _OUT, _OUT),
        "probe output too small": lambda: ext.probe_sorted(bytes(1), 3, hashes, hashes, _OUT[:3], _OUT),
    }


@pytest.mark.parametrize("case", list(_calls(np)))  # the names only: no call runs here
def test_malformed_input_is_a_corrupt_file_error(native: ModuleType, case: str) -> None:
    with pytest.raises(CorruptFileError):
        _calls(native)[case]()  # type: ignore[operator]
