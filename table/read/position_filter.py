"""Dropping rows by position from decoded columns: how a merge-on-read read removes the
base rows its position logs touch.

The rows to drop are a few per thousand, so Arrow's filter kernel, which tests every
row's selection and validity bits and writes every kept row to new buffers, costs what
the whole column costs (store_sales, three columns with nulls: 21 ms of a 92 ms read
whose compacted twin takes 58 ms). The C loops in ``_position_filter.c`` work on the
buffers a read decoded for itself:

- ``fill_holes`` (a read, which need not keep the base's row order): each dropped row's
  place in a chunk takes one of the chunk's last rows, so only as many rows move as are
  dropped. Rows stay in their chunk (a row group), and every column of the read moves
  alike; a column the loop cannot move (strings, nested) takes the same rows by index.
- ``drop_rows`` (services, which keep the order): the kept rows are long runs, each
  moved down with one ``memmove`` and a shifted copy of its validity bits.

Chunks no position falls in are passed on untouched. Without the extension (no C
compiler at install time) Arrow's ``filter`` and ``take`` give the same rows, for every
type: the loops take any fixed width (a 64-byte ``fixed_size_binary`` digest as well as
an int8), and rows or positions its buffers do not hold are a ``CorruptFileError``,
never a read outside them (``tests/table/read/test_position_filter.py`` holds the two
paths equal).
``LAKELINE_NATIVE=0`` in the environment turns it off, as for the index loops
(:mod:`lakeline.indexes.native`).
"""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pyarrow as pa

from ...indexes.native import load_extension

#: The extension module, or None when Arrow's filter and take do the work.
NATIVE: ModuleType | None = load_extension("lakeline.table._position_filter")


def drop_positions(
    column: pa.ChunkedArray, positions: np.ndarray, in_place: bool = False, keep_order: bool = True
) -> pa.ChunkedArray:
    """``column`` without the rows at ``positions`` (int64, ascending, unique, each
    below ``len(column)``).

    ``in_place``: the column's buffers belong to the caller alone (it decoded them and
    nobody else holds them), so rows may move within them instead of into new buffers;
    ``column`` must not be used afterwards. Then ``keep_order=False`` moves only as
    many rows as are dropped: each dropped row's place in a chunk takes a kept row from
    the chunk's end, so the cost is that of the dropped rows, not of the column (rows
    stay in their chunk, so a row group's statistics still hold for them)."""
    if len(positions) == 0:
        return column
    bounds = np.cumsum([0] + [len(c) for c in column.chunks])
    cuts = np.searchsorted(positions, bounds)
    chunks = [
        _drop(chunk, positions[cuts[i] : cuts[i + 1]] - bounds[i], in_place, keep_order)
        for i, chunk in enumerate(column.chunks)
    ]
    return pa.chunked_array(chunks, type=column.type)


def _drop(chunk: pa.Array, positions: np.ndarray, in_place: bool, keep_order: bool) -> pa.Array:
    if len(positions) == 0:
        return chunk
    positions = np.ascontiguousarray(positions, dtype=np.int64)
    width = _width(chunk.type)
    kept = len(chunk) - len(positions)
    validity, values = (None, None) if width is None else chunk.buffers()[:2]
    if not chunk.null_count:
        validity = None
    mutable = values is not None and values.is_mutable and (validity is None or validity.is_mutable)
    if not keep_order:
        if NATIVE is None or not (in_place and mutable):
            # Every column of a read must move its rows alike: the same holes, filled
            # from the same rows, as the C loop.
            return chunk.take(pa.array(_holes_filled(len(chunk), positions)))
        dropped_nulls = NATIVE.fill_holes(values, validity, chunk.offset, len(chunk), width, positions)
        return pa.Array.from_buffers(
            chunk.type, kept, [validity, values], null_count=chunk.null_count - dropped_nulls, offset=chunk.offset
        )
    if values is None or NATIVE is None:
        keep = np.ones(len(chunk), dtype=bool)
        keep[positions] = False
        return chunk.filter(pa.array(keep))
    if in_place and mutable:
        out_values, out_validity, out_offset = values, validity, chunk.offset
    else:
        out_values = pa.allocate_buffer(max(1, kept * width if width else (kept + 7) // 8))
        out_validity = None if validity is None else pa.allocate_buffer(max(1, (kept + 7) // 8))
        out_offset = 0
    nulls = NATIVE.drop_rows(
        values, validity, chunk.offset, len(chunk), width, positions, out_values, out_validity, out_offset
    )
    return pa.Array.from_buffers(chunk.type, kept, [out_validity, out_values], null_count=nulls, offset=out_offset)


def _holes_filled(length: int, positions: np.ndarray) -> np.ndarray:
    """The rows ``fill_holes`` leaves, as indices: rows below ``length - len(positions)``
    in place, each dropped one among them replaced by the next kept row beyond them."""
    kept = length - len(positions)
    indices = np.arange(kept, dtype=np.int64)
    below = positions[positions < kept]
    beyond = np.ones(length - kept, dtype=bool)
    beyond[positions[positions >= kept] - kept] = False
    indices[below] = np.flatnonzero(beyond) + kept
    return indices


def _width(typ: pa.DataType) -> int | None:
    """Bytes per value of a fixed-width type (0: one bit, booleans); None otherwise."""
    if pa.types.is_boolean(typ):
        return 0
    if isinstance(typ, pa.ExtensionType) or pa.types.is_dictionary(typ) or pa.types.is_null(typ):
        return None
    try:
        bits = typ.bit_width
    except ValueError:
        return None  # variable width: strings, binaries, nested
    # One values buffer and no children: what drop_rows copies.
    return bits // 8 if bits and bits % 8 == 0 and typ.num_fields == 0 else None
