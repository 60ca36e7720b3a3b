"""HyperLogLog sketches of distinct values, built over whole columns (C or numpy).

``column_stats`` keeps one sketch per file and column so the number of distinct values
(NDV) of a partition or a table is a merge of sketches, never a re-read of the data.
Sketches are built for every base file a writer or an index build produces, so they are
built from :mod:`.hashing`'s vectorized hashes: the datasketches bindings take one
Python call per value, which made column statistics cost 5-10x a plain read of the
file (``docs/decisions.md`` has the measurement).

A sketch is ``2^p`` registers, each the largest "leading zeros + 1" of the hashes routed
to it; merging is the register-wise maximum, so the sketch of a union is exact whatever
the order of files. The estimate is Ertl's improved raw estimator ("New cardinality
estimation algorithms for HyperLogLog sketches", 2017), accurate from 0 to far beyond
any table without empirical bias tables; its relative standard error is about
``1.04 / sqrt(2^p)`` (0.8 % at the default p = 14).

On disk a sketch is a magic, ``p``, and the registers compressed with zlib (files with
few distinct values leave most registers at zero, so their sketches are a few bytes).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ..timeline.errors import MetadataTableError
from .native import NATIVE

_MAGIC = b"LLHL1"
_HASH_BITS = 64
#: Up to this many hashes a sketch is built by a scatter-max into the registers.
_SMALL = 200_000


@dataclass(frozen=True)
class Hll:
    """A HyperLogLog sketch: ``2^p`` registers of ranks."""

    p: int
    registers: np.ndarray  # uint8, length 2^p

    @classmethod
    def empty(cls, p: int) -> Hll:
        return cls(p, np.zeros(1 << p, dtype=np.uint8))

    @classmethod
    def of(cls, hashes: np.ndarray, p: int) -> Hll:
        """The sketch of a set of 64-bit hashes (repeats change nothing)."""
        h = np.ascontiguousarray(hashes, dtype=np.uint64)
        if NATIVE is not None:
            registers = np.zeros(1 << p, dtype=np.uint8)
            NATIVE.hll_update(h, p, registers)
            return cls(p, registers)
        return cls(p, registers_numpy(h, p))

    def merge(self, other: Hll) -> Hll:
        """The sketch of the union.

        Raises:
            MetadataTableError: the sketches have different precisions.
        """
        if other.p != self.p:
            raise MetadataTableError(f"cannot merge HLL sketches of precision {self.p} and {other.p}")
        return Hll(self.p, np.maximum(self.registers, other.registers))

    def estimate(self) -> float:
        """The estimated number of distinct hashes added."""
        m = 1 << self.p
        q = _HASH_BITS - self.p
        counts = np.bincount(self.registers, minlength=q + 2).astype(np.float64)
        z = m * _tau(1.0 - counts[q + 1] / m)
        for k in range(q, 0, -1):
            z = 0.5 * (z + counts[k])
        z += m * _sigma(counts[0] / m)
        if math.isinf(z):
            return 0.0
        return m * m / (2.0 * math.log(2.0)) / z

    def bounds(self, deviations: float = 2.0) -> tuple[float, float]:
        """``estimate`` minus and plus ``deviations`` relative standard errors."""
        est = self.estimate()
        rse = 1.04 / math.sqrt(1 << self.p)
        return max(0.0, est * (1 - deviations * rse)), est * (1 + deviations * rse)

    def to_bytes(self) -> bytes:
        return _MAGIC + bytes([self.p]) + zlib.compress(self.registers.tobytes(), 1)

    @classmethod
    def from_bytes(cls, raw: bytes) -> Hll:
        """Raises:
            MetadataTableError: not a serialized lakeline sketch."""
        if raw[:len(_MAGIC)] != _MAGIC or len(raw) <= len(_MAGIC):
            raise MetadataTableError("NDV sketch in an unknown format; rebuild the column_stats index")
        p = raw[len(_MAGIC)]
        try:
            regs = np.frombuffer(zlib.decompress(raw[len(_MAGIC) + 1:]), dtype=np.uint8)
        except zlib.error as e:
            raise MetadataTableError(f"NDV sketch is corrupt: {e}") from e
        if len(regs) != 1 << p:
            raise MetadataTableError(f"NDV sketch has {len(regs)} registers, expected {1 << p}")
        return cls(p, regs)


def registers_numpy(h: np.ndarray, p: int) -> np.ndarray:
    """The registers of :meth:`Hll.of` in numpy (the reference the C loop must equal)."""
    q = _HASH_BITS - p
    # Rank = leading zeros of the q low bits + 1 (q + 1 when they are all zero). The q
    # bits (<= 53) convert to a float exactly, whose exponent field e is the position of
    # the highest set bit plus 1023, so rank = q + 1023 - e; zero has e = 0, which the
    # minimum turns into q + 1.
    low = (h & np.uint64((1 << q) - 1)).astype(np.float64)
    exponent = low.view(np.uint64) >> np.uint64(52)
    rank = np.minimum(np.uint64(q + 1023) - exponent, np.uint64(q + 1))
    registers_of = h >> np.uint64(q)
    if len(h) <= _SMALL:
        # Up to ~200k values (log files, small bases) a scatter-max costs less than
        # allocating and scanning the mark table.
        registers = np.zeros(1 << p, dtype=np.uint8)
        np.maximum.at(registers, registers_of.astype(np.intp), rank.astype(np.uint8))
        return registers
    # Many values: mark (register, rank) pairs, then take each register's last mark (the
    # scatter-max slows down once the registers no longer stay in cache).
    seen = np.zeros((1 << p, q + 2), dtype=bool)
    flat = registers_of
    flat *= np.uint64(q + 2)
    flat += rank
    seen.reshape(-1)[flat] = True
    last = q + 1 - np.argmax(seen[:, ::-1], axis=1)
    return np.where(seen.any(axis=1), last, 0).astype(np.uint8)


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
