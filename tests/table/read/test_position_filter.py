"""Dropping rows by position (lakeline.table.read.position_filter): the C loop, the Arrow
fallback and the in-place variant all give what Arrow's filter gives, for every type
the loop moves (fixed widths of any size, booleans, decimals, nulls, sliced arrays) and
those it leaves to Arrow (strings, dictionaries); crafted buffers and positions are a
CorruptFileError, never a crash; and a merge-on-read table with a fixed_size_binary
wider than 32 bytes reads the same with and without the extension (issue 45, D12).

Under CI the extension must be built: the Makefile's editable install compiles it, and
a CI run without it fails here instead of skipping (:mod:`tests.natives`).
"""

from __future__ import annotations

import hashlib
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeline.table import Table
from lakeline.table.read.position_filter import drop_positions
from lakeline.timeline.errors import CorruptFileError

from tests import natives
from tests.ci import under_ci

RNG = np.random.default_rng(16)


def test_the_extension_is_built_under_ci() -> None:
    if not under_ci():
        pytest.skip("only CI requires the C extensions")
    assert natives.built(natives.POSITION_FILTER) is not None, "table/_position_filter.c was not compiled"


def _expected(column: pa.ChunkedArray, positions: np.ndarray) -> pa.ChunkedArray:
    keep = np.ones(len(column), dtype=bool)
    keep[positions] = False
    return column.filter(pa.array(keep))


def _arrays(n: int) -> list[pa.Array]:
    ints = RNG.integers(-1000, 1000, n)
    nulls = RNG.random(n) < 0.1
    return [
        pa.array(ints, mask=nulls),
        pa.array(ints.astype(np.int32), mask=nulls),
        pa.array(ints.astype(np.int8)),
        pa.array(ints.astype(np.float64), mask=nulls),
        pa.array(ints.astype(np.int32), mask=nulls).cast(pa.date32()),
        pa.array(ints, mask=nulls).cast(pa.timestamp("us")),
        pa.array(RNG.random(n) < 0.5, mask=RNG.random(n) < 0.2),
        pa.array([Decimal(int(x)) / 100 for x in ints], pa.decimal128(7, 2)),
        pa.array([None if m else str(x) for x, m in zip(ints, nulls)]),
        pa.array([b"abcd"] * n, pa.binary(4)),
        *[_fixed_binary(ints, nulls, w) for w in (1, 33, 64)],
        pa.array([None if m else Decimal(int(x)) / 1000 for x, m in zip(ints, nulls)], pa.decimal256(60, 3)),
        pa.array([None if m else str(x) for x, m in zip(ints, nulls)], pa.large_string()),
        pa.array([None if m else str(x).encode() for x, m in zip(ints, nulls)], pa.large_binary()),
        pa.array([None if m else str(x % 7) for x, m in zip(ints, nulls)]).dictionary_encode(),
    ]


def _fixed_binary(ints: np.ndarray, nulls: np.ndarray, width: int) -> pa.Array:
    """Digests of the ints, ``width`` bytes each (wider than decimal256's 32: issue 45 D12)."""
    values = [
        None if m else (hashlib.sha512(int(x).to_bytes(8, "little", signed=True)).digest() * 4)[:width]
        for x, m in zip(ints, nulls)
    ]
    return pa.array(values, pa.binary(width))


def _chunks(column: pa.ChunkedArray, positions: np.ndarray | None = None) -> list[list[object]]:
    """Each chunk's values (without the rows at ``positions``) as a sorted list, nulls
    first: the rows of each chunk without their order."""
    out, start = [], 0
    for c in column.chunks:
        values = c.to_pylist()
        if positions is not None:
            gone = {int(p) - start for p in positions if start <= p < start + len(c)}
            values = [v for i, v in enumerate(values) if i not in gone]
        start += len(c)
        out.append(sorted(values, key=lambda v: (v is not None, v)))
    return out


@pytest.mark.parametrize("n", [1, 9, 64, 65, 1000, 20_011])
@pytest.mark.parametrize("mode", ["copy", "shift", "swap"])
def test_drop_positions_equals_arrows_filter(n: int, mode: str) -> None:
    """Copying and shifting in place give Arrow's filter exactly; filling the holes
    from each chunk's end gives the same rows of each chunk, in another order."""
    for array in _arrays(n):
        for share in (0.0, 0.01, 0.3, 1.0):
            positions = np.unique(RNG.integers(0, n, max(1, int(n * share)))).astype(np.int64)
            # Chunks that start at odd offsets of their buffers, and one without rows.
            cut = n // 3
            column = pa.chunked_array([array.slice(0, cut), array.slice(cut, 0), array.slice(cut)], type=array.type)
            expected = _expected(column, positions)
            copy = pa.chunked_array([pa.concat_arrays([c]) for c in column.chunks], type=array.type)
            if mode == "copy":
                got = drop_positions(column, positions)
            else:
                got = drop_positions(copy, positions, in_place=True, keep_order=mode == "shift")
            got.validate(full=True)
            assert got.null_count == expected.null_count
            if mode == "swap":
                assert _chunks(got) == _chunks(column, positions), (array.type, share)
                # Columns the C loop cannot move (strings) take the same rows by index:
                # every column of a table must move alike.
                assert got.equals(drop_positions(column, positions, keep_order=False)), (array.type, share)
            else:
                assert got.equals(expected), (array.type, share)
            if mode == "copy":
                assert column.equals(
                    pa.chunked_array([array.slice(0, cut), array.slice(cut, 0), array.slice(cut)], type=array.type)
                ), "the input changed"


def test_swap_moves_only_rows_from_beyond_the_kept_ones() -> None:
    """Filling holes keeps every row below ``len - dropped`` where it was and fills each
    hole with the earliest kept row beyond them, in order."""
    column = pa.chunked_array([pa.array(np.arange(10, dtype=np.int64))])
    got = drop_positions(column, np.array([1, 4, 8], dtype=np.int64), in_place=True, keep_order=False)
    assert got.to_pylist() == [0, 7, 2, 3, 9, 5, 6]


def test_a_table_read_without_order_keeps_its_rows_whole(tmp_path) -> None:
    """A merge-on-read read drops rows from every column of a decoded base without
    keeping their order: fixed-width columns in place, a string column by index; each
    row must stay whole."""
    n = 50_000
    ints = RNG.integers(0, 10**6, n)
    table = pa.table(
        {
            "a": pa.array(ints, mask=RNG.random(n) < 0.1),
            "s": pa.array([f"v{x}" for x in ints]),
            "b": pa.array(ints % 2 == 0),
            "d": pa.array(ints.astype(np.float64)),
        }
    )
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=8_192)
    positions = np.unique(RNG.integers(0, n, 700)).astype(np.int64)
    decoded = pq.read_table(tmp_path / "f.parquet")
    got = pa.table(
        {c: drop_positions(decoded.column(c), positions, in_place=True, keep_order=False) for c in table.column_names}
    )
    keep = np.ones(n, dtype=bool)
    keep[positions] = False
    expected = table.filter(pa.array(keep))
    assert sorted(got.to_pylist(), key=str) == sorted(expected.to_pylist(), key=str)


def test_columns_chunked_apart_keep_their_rows_whole() -> None:
    """A merge by position that may reorder rows does not, when the base's columns are
    chunked differently (fill_holes moves rows within a chunk)."""
    from lakeline.table.merge import merge_at_positions
    from lakeline.table.write.records import BASE_POS, OP

    n = 1_000
    a = pa.array(np.arange(n, dtype=np.int64))
    base = pa.table(
        {
            "a": pa.chunked_array([a.slice(0, 300), a.slice(300)]),
            "b": pa.chunked_array([pa.array(np.arange(n, dtype=np.int64) * 10)]),
        }
    )
    positions = np.arange(5, n, 9, dtype=np.int64)
    changes = pa.table({OP: ["D"] * len(positions), BASE_POS: positions})
    got = merge_at_positions(base, changes, ("a",), None, ["a", "b"], owned=True, keep_order=False)
    assert all(r["b"] == 10 * r["a"] for r in got.to_pylist())
    assert got.num_rows == n - len(positions)


def test_a_log_pointing_past_its_base_is_refused() -> None:
    from lakeline.table.merge import merge_at_positions
    from lakeline.table.write.records import BASE_POS, OP
    from lakeline.timeline.errors import CorruptLogError

    base = pa.table({"a": pa.array(np.arange(10, dtype=np.int64))})
    changes = pa.table({OP: ["D", "D"], BASE_POS: pa.array([3, 10], pa.int64())})
    with pytest.raises(CorruptLogError):
        merge_at_positions(base, changes, ("a",), None, ["a"], owned=True, keep_order=False)
    assert base.column("a").to_pylist() == list(range(10)), "the base changed before the refusal"


def test_in_place_on_a_decoded_parquet_column(tmp_path) -> None:
    """What a merge-on-read read does: drop rows from a column it decoded, chunk by row
    group, in place; the neighbouring columns stay intact."""
    n = 300_000
    table = pa.table(
        {
            "a": pa.array(RNG.integers(0, 10**9, n), mask=RNG.random(n) < 0.05),
            "b": pa.array([Decimal(int(x)) / 100 for x in RNG.integers(0, 10**6, n)], pa.decimal128(7, 2)),
        }
    )
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=65_536)
    positions = np.unique(RNG.integers(0, n, 2_000)).astype(np.int64)
    decoded = pq.read_table(tmp_path / "f.parquet")
    a = drop_positions(decoded.column("a"), positions, in_place=True)
    assert a.equals(_expected(table.column("a"), positions))
    assert decoded.column("b").equals(table.column("b"))


# -- the C loops against the Arrow reference ---------------------------------------------------


def _writable_copy(chunk: pa.Array) -> pa.Array:
    """``chunk`` on fresh writable buffers at the same offset (the in-place loops need
    them; ``concat_arrays`` would start the copy at offset 0)."""
    buffers = [None if b is None else pa.py_buffer(bytearray(b.to_pybytes())) for b in chunk.buffers()]
    if pa.types.is_dictionary(chunk.type) or len(buffers) != 2:
        return pa.concat_arrays([chunk])
    return pa.Array.from_buffers(chunk.type, len(chunk), buffers, chunk.null_count, chunk.offset)


def _dropped(column: pa.ChunkedArray, positions: np.ndarray, mode: str) -> pa.ChunkedArray:
    if mode == "copy":
        return drop_positions(column, positions)
    own = pa.chunked_array([_writable_copy(c) for c in column.chunks], type=column.type)
    return drop_positions(own, positions, in_place=True, keep_order=mode == "shift")


@pytest.mark.parametrize("n", [9, 200, 3_001])
@pytest.mark.parametrize("mode", ["copy", "shift", "swap"])
def test_the_c_loops_equal_the_arrow_reference_for_every_type(
    monkeypatch: pytest.MonkeyPatch, n: int, mode: str
) -> None:
    """Every type, sliced at odd offsets of its buffers and chunked: the C loops give
    exactly (rows, order and nulls) what Arrow's filter and take give without them."""
    natives.require(natives.POSITION_FILTER)
    for array in _arrays(n + 11):
        sliced = array.slice(5, n)  # a non-zero offset into every buffer
        cut = n // 3
        column = pa.chunked_array([sliced.slice(0, cut), sliced.slice(cut, 0), sliced.slice(cut)], type=array.type)
        for share in (0.01, 0.4, 1.0):
            positions = np.unique(RNG.integers(0, n, max(1, int(n * share)))).astype(np.int64)
            got = {}
            for on in (True, False):
                natives.use_native(monkeypatch, on)
                got[on] = _dropped(column, positions, mode)
                got[on].validate(full=True)
            assert got[True].equals(got[False]), (array.type, share)
            assert got[True].null_count == got[False].null_count
            if mode != "swap":
                assert got[True].equals(_expected(column, positions)), (array.type, share)


def test_widths_beyond_decimal256_are_moved_by_the_c_loops() -> None:
    """A 64-byte value went to the C loop, which refused it (D12): the loop itself now
    moves any width, in place and into new buffers."""
    ext = natives.require(natives.POSITION_FILTER)
    for width in (33, 64, 4096):
        values = np.arange(10 * width, dtype=np.int64).astype(np.uint8)
        positions = np.array([1, 4, 9], np.int64)
        out = np.zeros(7 * width, np.uint8)
        assert ext.drop_rows(values, None, 0, 10, width, positions, out, None, 0) == 0
        rows = values.reshape(10, width)
        np.testing.assert_array_equal(out.reshape(7, width), rows[[0, 2, 3, 5, 6, 7, 8]])
        holes = values.copy()
        assert ext.fill_holes(holes, None, 0, 10, width, positions) == 0
        np.testing.assert_array_equal(holes.reshape(10, width)[:7], rows[[0, 7, 2, 3, 8, 5, 6]])


# -- crafted input ------------------------------------------------------------------------------

# (offset, length, width, positions, out bytes, out_offset): each asks for rows or positions
# the buffers do not hold. The values buffer holds 80 bytes (ten int64 rows).
CRAFTED = {
    "repeated position": (0, 10, 8, [3, 3], 80, 0),
    "descending positions": (0, 10, 8, [5, 2], 80, 0),
    "position past the rows": (0, 10, 8, [10], 80, 0),
    "negative position": (0, 10, 8, [-1], 80, 0),
    "huge position": (0, 10, 8, [2**62], 80, 0),
    "more rows than the buffer": (0, 11, 8, [1], 80, 0),
    "offset past the buffer": (3, 8, 8, [1], 80, 0),
    "negative offset": (-1, 5, 8, [1], 80, 0),
    "negative length": (0, -3, 8, [], 80, 0),
    "negative width": (0, 10, -8, [1], 80, 0),
    "width past the buffer": (0, 10, 2**40, [1], 80, 0),
    "offset whose end overflows": (2**62, 2**62, 8, [1], 80, 0),
    "width times rows overflows": (0, 10, 2**61, [1], 80, 0),
    "more positions than rows": (0, 2, 8, [0, 1, 2], 80, 0),
    "output too small": (0, 10, 8, [1], 71, 0),
    "output offset past the output": (0, 10, 8, [1], 80, 2),
    "output offset negative": (0, 10, 8, [1], 80, -1),
    "bits past the buffer": (0, 641, 0, [1], 80, 0),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_crafted_rows_and_positions_are_a_corrupt_file_error(case: str) -> None:
    ext = natives.require(natives.POSITION_FILTER)
    offset, length, width, positions, out_bytes, out_offset = CRAFTED[case]
    values = bytearray(np.arange(10, dtype=np.int64).tobytes())
    before = bytes(values)
    pos = np.array(positions, np.int64)
    with pytest.raises(CorruptFileError):
        ext.drop_rows(bytes(values), None, offset, length, width, pos, bytearray(out_bytes), None, out_offset)
    if case.startswith("output"):
        return  # fill_holes has no output buffer
    with pytest.raises(CorruptFileError):
        ext.fill_holes(values, None, offset, length, width, pos)
    assert bytes(values) == before, "a refused fill_holes moved rows"


def test_crafted_buffers_are_a_corrupt_file_error() -> None:
    """Positions that are no whole number of int64, and validity bitmaps shorter than
    the rows (on either side)."""
    ext = natives.require(natives.POSITION_FILTER)
    values, out = bytes(80), bytearray(80)
    with pytest.raises(CorruptFileError, match="whole number"):
        ext.drop_rows(values, None, 0, 10, 8, b"\x01" * 7, out, None, 0)
    with pytest.raises(CorruptFileError, match="whole number"):
        ext.fill_holes(bytearray(80), None, 0, 10, 8, b"\x01" * 12)
    one = np.array([1], np.int64)
    with pytest.raises(CorruptFileError, match="too small"):
        ext.drop_rows(values, b"\xff", 0, 10, 8, one, out, bytearray(2), 0)
    with pytest.raises(CorruptFileError, match="too small"):
        ext.drop_rows(values, b"\xff\xff", 0, 10, 8, one, out, bytearray(1), 1)
    with pytest.raises(CorruptFileError, match="too small"):
        ext.fill_holes(bytearray(80), bytearray(1), 0, 10, 8, one)


# -- end to end: a wide fixed_size_binary on merge-on-read (issue 45, D12) ---------------------


def _schema(width: int) -> pa.Schema:
    return pa.schema(
        [
            ("id", pa.int64()),
            ("ts", pa.int64()),
            ("dig", pa.binary(width)),
            ("maybe", pa.binary(width)),
            ("flag", pa.bool_()),
            ("amount", pa.decimal256(50, 2)),
        ]
    )


def _rows(ids: list[int], ts: int, width: int) -> pa.Table:
    def digest(i: int, salt: int) -> bytes:
        return (hashlib.sha512(f"{i}/{salt}".encode()).digest() * 2)[:width]

    return pa.table(
        {
            "id": ids,
            "ts": [ts] * len(ids),
            "dig": [digest(i, ts) for i in ids],
            "maybe": [None if i % 3 == 0 else digest(i, -ts) for i in ids],
            "flag": [None if i % 5 == 0 else i % 2 == 0 for i in ids],
            "amount": [Decimal(i * ts) / 100 for i in ids],
        },
        schema=_schema(width),
    )


def _history(path: Path, width: int) -> list[Any]:
    """Upserts, an update and a delete on a merge-on-read table, each read whole, through
    a filter and as a change feed, then compacted and read again: every answer."""
    t = Table.create(path, _schema(width), record_key="id", ordering_field="ts", table_type="mor")
    first = t.upsert(_rows(list(range(300)), 1, width)).instant
    assert first is not None
    t.upsert(_rows([3, 50, 299, *range(400, 410)], 2, width))
    t.update(pc.field("id") < 20, {"flag": True})
    t.delete(pa.table({"id": pa.array([7, 8, 50, 405], pa.int64())}))

    def by_id(table: pa.Table) -> list[dict[str, Any]]:
        return sorted(table.to_pylist(), key=lambda r: r["id"])

    answers: list[Any] = [by_id(t.to_arrow()), by_id(t.to_arrow(filter=pc.field("id") < 100))]
    changes = t.changes(first.id, images=True)
    answers.append(sorted(changes.to_pylist(), key=lambda r: (r["_instant"], r["id"], r["_op"])))
    t.services.compact()
    answers.append(by_id(Table.open(path).to_arrow()))
    return answers


@pytest.mark.parametrize("width", [33, 64])
def test_a_wide_fixed_binary_merge_on_read_table_reads_alike_with_and_without_the_extension(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, width: int
) -> None:
    natives.require(natives.POSITION_FILTER)
    natives.use_native(monkeypatch, True)
    native = _history(tmp_path / "native", width)
    natives.use_native(monkeypatch, False)
    reference = _history(tmp_path / "reference", width)
    for got, want in zip(native, reference, strict=True):
        assert got == want
    ids = [r["id"] for r in native[0]]
    assert ids == sorted(set(range(300)) - {7, 8, 50} | set(range(400, 410)) - {405})
    assert native[0] == native[3], "compaction changed the rows"
    assert next(r for r in native[0] if r["id"] == 3)["dig"] == _rows([3], 2, width).column("dig")[0].as_py()


def test_a_wide_fixed_binary_record_key_with_indexes_reads_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The audit's RI5: a 64-byte record key, record index and bloom filters, updates."""
    natives.require(natives.POSITION_FILTER)
    answers = {}
    for on in (True, False):
        natives.use_native(monkeypatch, on)
        t = Table.create(tmp_path / str(on), _schema(64), record_key="dig", ordering_field="ts", table_type="mor")
        t.indexes.create("record_index", wait=True)
        t.indexes.create("bloom_filters", wait=True)
        keys = _rows(list(range(300)), 1, 64)
        t.upsert(keys)
        changed = keys.slice(10, 40).set_column(1, "ts", pa.array([2] * 40, pa.int64()))
        t.upsert(changed)
        t.upsert(changed.set_column(1, "ts", pa.array([3] * 40, pa.int64())))
        rows = sorted(t.to_arrow().to_pylist(), key=lambda r: r["dig"])
        assert len(rows) == 300 and len({r["dig"] for r in rows}) == 300
        assert t.indexes.validate("record_index")["mismatches"] == []
        answers[on] = rows
    assert answers[True] == answers[False]
