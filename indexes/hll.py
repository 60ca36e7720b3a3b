"""NDV sketches in the Apache DataSketches HLL format, built by lakeline's own loops.

``column_stats`` keeps one sketch per file and column, so the number of distinct values
(NDV) of a partition or a table is a merge of sketches, never a re-read of the data.
The sketches are DataSketches HLL sketches (``HLL_8``, ``lg_k`` 12 by default, Spark's
own default), byte-compatible with what the ``datasketches`` library writes, so Spark's
``hll_union_agg`` / ``hll_sketch_estimate`` and the datasketches library merge and
estimate them (``lakeline.spark.ndv``). They are still built from whole columns at
once: the datasketches bindings take one Python call per value, which made column
statistics cost 5-10x a plain read of the file (``docs/decisions.md``).

A value becomes a *coupon* (:mod:`.hashing`: MurmurHash3_x64_128, seed 9001, low 26
bits of the first half, 1 + leading zeros of the second above them). A sketch is, as
in DataSketches, either the set of its coupons while there are few (``LIST`` up to 7,
then ``SET`` up to 3/4 of 2^(lg_k-3): exact counts for small files), or ``2^lg_k``
registers, each the largest value of the coupons whose low bits select it (``HLL``).
Merging is the union of coupons or the register-wise maximum, so the sketch of a union
is exact whatever the order of files. lakeline's own estimate of a register sketch is
Ertl's improved raw estimator; Spark and datasketches use their composite estimator
on the same registers (serialized sketches are marked *out of order*, as the result of
a union is), so the numbers differ within the sketch's error (~1.6% at lg_k 12).

Sketches written before this format (lakeline's own ``LLHL1``: another hash) cannot be
merged with these: reading one raises :class:`MetadataTableError` asking for
``t.indexes.rebuild("column_stats")``.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..timeline.errors import MetadataTableError

_LEGACY_MAGIC = b"LLHL1"
_FAMILY, _SER_VER = 7, 1
_LIST, _SET, _HLL = 0, 1, 2
_HLL_8 = 2
_COMPACT, _OUT_OF_ORDER, _EMPTY = 8, 16, 4
_LIST_MAX = 7  # coupons of a LIST (lgArr 3): it becomes a SET when full
_KEY_MASK = (1 << 26) - 1


def set_max(lg_k: int) -> int:
    """Most coupons a SET holds before the sketch becomes registers."""
    return 3 * (1 << (lg_k - 3)) // 4


@dataclass(frozen=True)
class Hll:
    """A DataSketches HLL sketch: coupons (few values) or ``2^lg_k`` registers."""

    p: int  # lg_k
    registers: np.ndarray | None = None  # uint8, HLL mode
    coupons: np.ndarray | None = None  # sorted unique uint32, LIST/SET mode

    @classmethod
    def empty(cls, p: int) -> Hll:
        return cls(p, None, np.zeros(0, dtype=np.uint32))

    @classmethod
    def of_coupons(cls, coupons: np.ndarray, p: int) -> Hll:
        """The sketch of some coupons (repeats and zeros, i.e. skipped values, ignored)."""
        c = np.asarray(coupons, dtype=np.uint32)
        limit = set_max(p)
        if len(c) > 4 * limit and len(_distinct(c[: 4 * limit])) > limit:
            return cls(p, _registers(c, p), None)  # many values: no need for the set of them
        unique = _distinct(c)
        if len(unique) <= limit:
            return cls(p, None, unique)
        return cls(p, _registers(unique, p), None)

    @property
    def is_hll(self) -> bool:
        return self.registers is not None

    def merge(self, other: Hll) -> Hll:
        """The sketch of the union.

        Raises:
            MetadataTableError: the sketches have different lg_k.
        """
        if other.p != self.p:
            raise MetadataTableError(f"cannot merge HLL sketches of lg_k {self.p} and {other.p}")
        if self.registers is None and other.registers is None:
            assert self.coupons is not None and other.coupons is not None
            return Hll.of_coupons(np.concatenate([self.coupons, other.coupons]), self.p)
        mine = self.registers if self.registers is not None else _registers(self.coupons, self.p)
        theirs = other.registers if other.registers is not None else _registers(other.coupons, other.p)
        return Hll(self.p, np.maximum(mine, theirs), None)

    def estimate(self) -> float:
        """The estimated number of distinct values added."""
        if self.registers is None:
            assert self.coupons is not None
            return float(len(self.coupons))
        m = 1 << self.p
        q = 62  # values are 1..63: leading zeros of a 64-bit half, capped
        counts = np.bincount(self.registers, minlength=q + 2).astype(np.float64)
        z = m * _tau(1.0 - counts[q + 1] / m)
        for k in range(q, 0, -1):
            z = 0.5 * (z + counts[k])
        z += m * _sigma(counts[0] / m)
        if math.isinf(z):
            return 0.0
        return m * m / (2.0 * math.log(2.0)) / z

    def bounds(self, deviations: float = 2.0) -> tuple[float, float]:
        """``estimate`` minus and plus ``deviations`` relative standard errors (exact in
        coupon mode)."""
        est = self.estimate()
        if self.registers is None:
            return est, est
        rse = 1.04 / math.sqrt(1 << self.p)
        return max(0.0, est * (1 - deviations * rse)), est * (1 + deviations * rse)

    def to_bytes(self) -> bytes:
        """The DataSketches compact image (HLL_8 target)."""
        mode_byte = lambda mode: mode | (_HLL_8 << 2)  # noqa: E731
        if self.registers is None:
            coupons = self.coupons if self.coupons is not None else np.zeros(0, dtype=np.uint32)
            n = len(coupons)
            body = coupons.astype("<u4").tobytes()
            flags = _COMPACT | (_EMPTY if n == 0 else 0)
            if n <= _LIST_MAX:
                return bytes([2, _SER_VER, _FAMILY, self.p, 3, flags, n, mode_byte(_LIST)]) + body
            lg_arr = 5
            while n > 3 * (1 << lg_arr) // 4:
                lg_arr += 1
            head = bytes([3, _SER_VER, _FAMILY, self.p, lg_arr, flags, 0, mode_byte(_SET)])
            return head + struct.pack("<i", n) + body
        regs = self.registers
        low = regs[regs < 32].astype(np.int64)
        high = regs[regs >= 32].astype(np.int64)
        kxq0 = float(np.sum(np.ldexp(1.0, -low))) if len(low) else 0.0
        kxq1 = float(np.sum(np.ldexp(1.0, -high))) if len(high) else 0.0
        zeros = int(np.count_nonzero(regs == 0))
        head = bytes([10, _SER_VER, _FAMILY, self.p, 0, _COMPACT | _OUT_OF_ORDER, 0, mode_byte(_HLL)])
        return head + struct.pack("<dddii", 0.0, kxq0, kxq1, zeros, 0) + regs.astype(np.uint8).tobytes()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Hll:
        """A sketch from its DataSketches image (LIST, SET, or HLL_8; HLL_4/6 are not read).

        Raises:
            MetadataTableError: not such an image, or an old lakeline sketch.
        """
        if raw[: len(_LEGACY_MAGIC)] == _LEGACY_MAGIC:
            raise MetadataTableError(
                "NDV sketch in lakeline's pre-DataSketches format; rebuild the index: t.indexes.rebuild('column_stats')"
            )
        if len(raw) < 8 or raw[2] != _FAMILY or raw[1] != _SER_VER:
            raise MetadataTableError("NDV sketch in an unknown format; rebuild the column_stats index")
        pre_ints, lg_k, mode = raw[0], raw[3], raw[7] & 3
        try:
            if mode == _LIST:
                n = raw[6]
                return cls(lg_k, None, np.sort(np.frombuffer(raw, "<u4", n, 4 * pre_ints).astype(np.uint32)))
            if mode == _SET:
                (n,) = struct.unpack_from("<i", raw, 8)
                return cls(lg_k, None, np.sort(np.frombuffer(raw, "<u4", n, 4 * pre_ints).astype(np.uint32)))
            if raw[7] >> 2 != _HLL_8:
                raise MetadataTableError("NDV sketch is not an HLL_8 sketch; lakeline writes only those")
            regs = np.frombuffer(raw, np.uint8, 1 << lg_k, 4 * pre_ints).copy()
        except ValueError as e:
            raise MetadataTableError(f"NDV sketch is corrupt: {e}") from e
        return cls(lg_k, regs, None)


def _distinct(coupons: np.ndarray) -> np.ndarray:
    """Sorted distinct non-zero coupons (a sort: numpy's ``unique`` is many times slower
    on this input)."""
    s = np.sort(coupons)
    if len(s):
        s = s[np.concatenate(([True], s[1:] != s[:-1]))]
        if s[0] == 0:
            s = s[1:]
    return s


def _registers(coupons: np.ndarray | None, p: int) -> np.ndarray:
    """HLL-mode registers of coupons: each slot keeps the largest value routed to it (a
    zero coupon, a skipped value, changes nothing)."""
    registers = np.zeros(1 << p, dtype=np.uint8)
    if coupons is not None and len(coupons):
        c = coupons.astype(np.uint32)
        np.maximum.at(registers, (c & np.uint32((1 << p) - 1)).astype(np.intp), (c >> np.uint32(26)).astype(np.uint8))
    return registers


def merge_all(sketches: Iterable[Hll], p: int) -> Hll:
    """The union of many sketches (the empty sketch when there are none)."""
    out = Hll.empty(p)
    for sk in sketches:
        out = out.merge(sk)
    return out


def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y, z = 1.0, x
    while True:
        x *= x
        z_old = z
        z += x * y
        y += y
        if z == z_old:
            return z


def _tau(x: float) -> float:
    if x == 0.0 or x == 1.0:
        return 0.0
    y, z = 1.0, 1.0 - x
    while True:
        x = math.sqrt(x)
        z_old = z
        y *= 0.5
        z -= (1.0 - x) ** 2 * y
        if z == z_old:
            return z / 3.0
