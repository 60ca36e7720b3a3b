"""Per-key sums that never wrap: the ``sum`` and ``count`` of an aggregation table.

A key's ``sum`` is stored in its column's type, so it must fit that type. Arrow's hash
``sum`` widens integers to 64 bits and wraps there (2^62 + 2^62 came back as -2^63), and
widens decimals to the largest precision, which a cast back then refuses with a bare
``ArrowInvalid`` (issue 45, D8-D10). Here each run of a key is summed exactly and the
runs whose sum the type cannot hold are reported, so the caller refuses them with a
typed error naming the column and key (:mod:`lakeline.table.merge_engine`).

* integers up to 32 bits: summed in 64 bits (exact below 2^31 rows a key), then
  compared with the type's range;
* 64-bit integers: each value split into its high and low 32 bits, the halves summed
  apart (exact, no wrap) and joined with their carry, which shows an overflow exactly;
* decimals: Arrow's widened sum, compared with the column's precision; when even the
  widened type could wrap (a precision within a few digits of 38 or 76), exactly with
  Python's ``decimal``.

Floats are left to Arrow: they overflow to infinity by IEEE rules, which is a value.
"""

from __future__ import annotations

import decimal
import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_LOW = np.uint64(0xFFFFFFFF)


def checks(t: pa.DataType) -> bool:
    """Whether a sum in type ``t`` can overflow it (integers and decimals; floats go to
    infinity instead)."""
    return pa.types.is_integer(t) or pa.types.is_decimal(t)


def run_sums(col: pa.ChunkedArray | pa.Array, starts: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Per run of ``col`` (runs start at ``starts``, ascending, the first at 0), the sum
    of its non-null values in ``col``'s type (null when the run holds no value), and the
    numbers of the runs whose sum the type cannot hold (null in the sums)."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    valid = arr.is_valid().to_numpy(zero_copy_only=False)
    empty = np.add.reduceat(valid.astype(np.int64), starts) == 0
    if pa.types.is_decimal(arr.type):
        sums, over = _decimal_sums(arr, starts, len(arr))
    else:
        sums, over = _integer_sums(arr, starts)
    mask = empty | over
    if pa.types.is_decimal(arr.type):
        out = pc.if_else(pa.array(mask), pa.scalar(None, sums.type), sums).cast(arr.type)
    else:
        out = pa.array(sums, type=arr.type, mask=mask)
    return out, np.flatnonzero(over)


def exact_sum(col: pa.ChunkedArray | pa.Array, start: int, end: int) -> int | decimal.Decimal:
    """The exact sum of the non-null values of ``col[start:end]`` (for a message)."""
    with decimal.localcontext() as ctx:
        ctx.prec = 200
        return sum((v for v in col.slice(start, end - start).to_pylist() if v is not None), 0)


def _integer_sums(arr: pa.Array, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    dtype = np.dtype(arr.type.to_pandas_dtype())
    info = np.iinfo(dtype)
    values = arr.fill_null(0).to_numpy(zero_copy_only=False)
    if dtype.itemsize < 8:
        wide = np.add.reduceat(values.astype(np.int64 if info.min < 0 else np.uint64), starts)
        over = (wide < info.min) | (wide > info.max)
        return np.where(over, 0, wide).astype(dtype), over
    # 64 bits: v = high * 2^32 + low with 0 <= low < 2^32; the halves' sums are exact in
    # 64 bits (below 2^31 rows a run), and the total fits iff its high half, carry
    # included, fits 32 bits.
    raw = values.view(np.uint64)
    low = np.add.reduceat((raw & _LOW).astype(np.int64), starts)
    high_part = (values >> 32).astype(np.int64)  # arithmetic shift: signed highs stay signed
    high = np.add.reduceat(high_part, starts) + (low >> 32)
    lo, hi = (-(2**31), 2**31) if info.min < 0 else (0, 2**32)
    over = (high < lo) | (high >= hi)
    joined = (high.astype(np.uint64) << np.uint64(32)) | (low.astype(np.uint64) & _LOW)
    return np.where(over, 0, joined.view(dtype)).astype(dtype), over


def _decimal_sums(arr: pa.Array, starts: np.ndarray, n: int) -> tuple[pa.Array, np.ndarray]:
    typ = arr.type
    limit = decimal.Decimal(10**typ.precision - 1).scaleb(-typ.scale, decimal.Context(prec=200))  # not rounded
    longest = int(np.max(np.diff(np.append(starts, n))))
    wide_digits = 76 if pa.types.is_decimal256(typ) or typ.precision > 38 else 38
    if typ.precision + math.ceil(math.log10(longest + 1)) < wide_digits:
        # Arrow's widened sum cannot wrap: compare it with the column's precision.
        group = np.repeat(np.arange(len(starts), dtype=np.int64), np.diff(np.append(starts, n)))
        t = pa.table({"g": group, "v": arr})
        opts = pc.ScalarAggregateOptions(skip_nulls=True, min_count=1)
        sums = t.group_by("g", use_threads=False).aggregate([("v", "sum", opts)]).sort_by("g").column("v_sum")
        sums = sums.combine_chunks()
        bound = pa.scalar(limit, sums.type)
        over = pc.or_kleene(pc.greater(sums, bound), pc.less(sums, pc.negate(bound)))
        return sums, pc.fill_null(over, False).to_numpy(zero_copy_only=False)
    ends = np.append(starts[1:], n)
    exact = [decimal.Decimal(exact_sum(arr, int(s), int(e))) for s, e in zip(starts, ends, strict=True)]
    with decimal.localcontext() as ctx:
        ctx.prec = 200  # abs() rounds to the context's precision (28 digits by default)
        over = np.array([abs(v) > limit for v in exact], dtype=bool)
    fitting = [None if o else v for v, o in zip(exact, over, strict=True)]
    return pa.array(fitting, typ), over
