"""Bloom filters of data files: a bit array over key hashes, plus the key range.

One row per base file. The filter holds the record key (or the named columns). Keys are
hashed by :mod:`.hashing` over whole Arrow columns: a single integer column by value,
anything else by its Arrow text, and a composite key by the text of its parts joined by
a unit separator, so ``("a", "b|c")`` and ``("a|b", "c")`` never collide. Build and probe
hash the same way, so a probe value must first be cast to the column's type
(:func:`key_hashes` does it from the table schema).

The filter is a classic bloom filter with ``k`` probes derived from one 64-bit hash by
double hashing (Kirsch and Mitzenmacher), built and probed by the C loops of
:mod:`.native` or, without them, numpy (the same bits either way). It replaced
pybloom-live, whose one Python call per key made index entries of a 5M-row rewrite
take 30 s (``docs/decisions.md`` has the measurement).

The key range (min/max of a single-column key, as text, binary keys as
:func:`~.hashing.binary_bound_text`; cast it back to the column's type before
comparing) is kept for key-range pruning ahead of the probe. A bloom filter has no
false negatives: a file it answers "no" for holds none of the probed
keys, which is what lets scans and tagging skip it.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..timeline.errors import MetadataTableError, UnknownColumnError
from ..timeline.field_ids import field_id, strip_ids
from .hashing import ColumnHashes, as_plain_binary, hash_array, hash_text, is_binary_like
from .native import NATIVE

#: Default false-positive rate of a filter.
DEFAULT_FPP = 0.01

#: Joins the parts of a composite key; a control character no sane key contains.
KEY_SEPARATOR = "\x1f"

#: Serialized filter: magic, number of bits, number of probes, then the bits.
_MAGIC = b"LLBF1"
_HEADER = struct.Struct("<QI")

#: The metadata-table schema of the ``bloom_filters`` index partition.
BLOOM_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("partition", pa.string(), nullable=False),
        pa.field("columns", pa.string(), nullable=False),  # the bloomed columns, comma-joined
        pa.field("key_min", pa.string()),
        pa.field("key_max", pa.string()),
        pa.field("entries", pa.int64(), nullable=False),
        pa.field("fpp", pa.float64(), nullable=False),
        pa.field("filter", pa.binary(), nullable=False),
        # The columns' field ids (comma-joined) and Arrow types (joined by
        # KEY_SEPARATOR) in the file; null: entries written before 2026-11-27, or a file
        # without ids. Pruning asks an entry for the columns of those ids while their
        # types are unchanged, whatever they are called now (issue 29).
        pa.field("field_ids", pa.string()),
        pa.field("field_types", pa.string()),
    ]
)


def _key_columns(rows: pa.Table, columns: Sequence[str], schema: pa.Schema | None) -> list[pa.ChunkedArray]:
    out = []
    for name in columns:
        if name not in rows.column_names:
            raise UnknownColumnError(f"bloom filter column {name!r} is not in the rows")
        col = rows.column(name)
        if schema is not None and name in schema.names and col.type != schema.field(name).type:
            col = pc.cast(col, schema.field(name).type)
        out.append(col)
    return out


def key_hashes(
    rows: pa.Table, columns: Sequence[str], schema: pa.Schema | None = None, hashes: ColumnHashes | None = None
) -> np.ndarray:
    """The 64-bit hash of each row's key over ``columns`` (cast to ``schema``'s types;
    ``hashes`` of ``rows``' columns are reused when no cast is needed).

    Nulls hash like an empty part; a record key is never null, and for a named column
    a null is never matched by ``=``/``IN`` anyway.

    Raises:
        UnknownColumnError: a column is missing from ``rows``.
    """
    cols = _key_columns(rows, columns, schema)
    if len(cols) == 1:
        if hashes is not None and hashes.rows is rows and cols[0].type == rows.column(columns[0]).type:
            return hashes.of(columns[0])
        return hash_array(cols[0])
    if not any(is_binary_like(c.type) for c in cols):
        parts = [pc.fill_null(pc.cast(c, pa.string()), "") for c in cols]
        return hash_text(pc.binary_join_element_wise(*parts, KEY_SEPARATOR))
    # A binary part need not be UTF-8: join the bytes (the text of the other parts as
    # its UTF-8 bytes), which hashes exactly as the joined text would.
    raw = [
        pc.fill_null(
            pc.cast(as_plain_binary(c) if is_binary_like(c.type) else pc.cast(c, pa.string()), pa.binary()), b""
        )
        for c in cols
    ]
    return hash_text(pc.binary_join_element_wise(*raw, KEY_SEPARATOR.encode()))


@dataclass(frozen=True)
class BloomBits:
    """A bloom filter: ``num_bits`` bits (little-endian bit order) set by ``num_hashes``
    probes of each key hash."""

    num_bits: int
    num_hashes: int
    bits: bytes

    @staticmethod
    def sizing(capacity: int, fpp: float) -> tuple[int, int]:
        """Bits and probes of the smallest filter that holds ``capacity`` keys at ``fpp``."""
        n = max(capacity, 1)
        # At most 2^32 bits: probes are 32-bit (about 450M keys at 1 %, far beyond a file).
        m = min(1 << 32, max(64, math.ceil(-n * math.log(fpp) / (math.log(2) ** 2))))
        k = max(1, round(m / n * math.log(2)))
        return m, k

    @staticmethod
    def _probes(hashes: np.ndarray, num_bits: int, count: int) -> Iterator[np.ndarray]:
        """The bit positions of each probe, one array per probe (reused between them).

        Probe i is the 32-bit ``h1 + i * h2``, mapped onto ``[0, num_bits)`` by a multiply
        and shift (Lemire's fast range) instead of a modulo, which costs 3x as much.
        """
        h1 = hashes & np.uint64(0xFFFFFFFF)
        h2 = (hashes >> np.uint64(32)) | np.uint64(1)
        pos = np.empty_like(h1)
        m, low32, shift = np.uint64(num_bits), np.uint64(0xFFFFFFFF), np.uint64(32)
        with np.errstate(over="ignore"):
            for _ in range(count):
                np.bitwise_and(h1, low32, out=pos)
                pos *= m
                pos >>= shift
                yield pos
                h1 += h2

    @classmethod
    def of(cls, hashes: np.ndarray, fpp: float) -> BloomBits:
        """A filter sized for ``len(hashes)`` keys at false-positive rate ``fpp``."""
        m, k = cls.sizing(len(hashes), fpp)
        if NATIVE is not None:
            packed = np.zeros((m + 7) // 8, dtype=np.uint8)
            NATIVE.bloom_set(np.ascontiguousarray(hashes, dtype=np.uint64), m, k, packed)
            return cls(m, k, packed.tobytes())
        return cls.of_numpy(hashes, fpp)

    @classmethod
    def of_numpy(cls, hashes: np.ndarray, fpp: float) -> BloomBits:
        """:meth:`of` in numpy (the reference the C loop must equal)."""
        m, k = cls.sizing(len(hashes), fpp)
        bits = np.zeros(m, dtype=bool)
        for pos in cls._probes(hashes, m, k):
            bits[pos] = True
        return cls(m, k, np.packbits(bits, bitorder="little").tobytes())

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """For each hash: False only when the key was surely never added."""
        if NATIVE is not None:
            out = np.empty(len(hashes), dtype=np.uint8)
            NATIVE.bloom_test(
                np.ascontiguousarray(hashes, dtype=np.uint64), self.num_bits, self.num_hashes, self.bits, out
            )
            return out.view(bool)
        return self.contains_numpy(hashes)

    def contains_numpy(self, hashes: np.ndarray) -> np.ndarray:
        """:meth:`contains` in numpy (the reference the C loop must equal)."""
        packed = np.frombuffer(self.bits, dtype=np.uint8)
        hit = np.ones(len(hashes), dtype=bool)
        if len(hashes) * self.num_hashes < len(packed) // 4:
            # Few keys (a scan's IN list): read their bits where they are packed rather
            # than unpacking the whole filter.
            for pos in self._probes(hashes, self.num_bits, self.num_hashes):
                hit &= ((packed[pos >> np.uint64(3)] >> (pos & np.uint64(7)).astype(np.uint8)) & 1).astype(bool)
            return hit
        bits = np.unpackbits(packed, bitorder="little").view(bool)
        for pos in self._probes(hashes, self.num_bits, self.num_hashes):
            hit &= bits[pos]
        return hit

    def to_bytes(self) -> bytes:
        return _MAGIC + _HEADER.pack(self.num_bits, self.num_hashes) + self.bits

    @classmethod
    def from_bytes(cls, raw: bytes) -> BloomBits:
        """Raises:
        MetadataTableError: not a serialized lakeline bloom filter."""
        head = len(_MAGIC) + _HEADER.size
        if raw[: len(_MAGIC)] != _MAGIC or len(raw) < head:
            raise MetadataTableError("bloom filter entry in an unknown format; rebuild the index")
        m, k = _HEADER.unpack_from(raw, len(_MAGIC))
        if len(raw) - head != (m + 7) // 8:
            raise MetadataTableError(f"bloom filter entry truncated: {len(raw) - head} bytes for {m} bits")
        return cls(m, k, raw[head:])


def recorded(schema: pa.Schema, columns: Sequence[str]) -> tuple[str | None, str | None]:
    """The field ids and types ``columns`` have in ``schema`` (a file's, or a table's),
    as a bloom entry records them: (None, None) unless each column has an id."""
    ids, types = [], []
    for name in columns:
        f = schema.field(name) if name in schema.names else None
        fid = field_id(f) if f is not None else None
        if f is None or fid is None:
            return None, None
        ids.append(str(fid))
        types.append(str(strip_ids(f.type)))
    return ",".join(ids), KEY_SEPARATOR.join(types)


@dataclass
class FileBloom:
    """The bloom filter of one file and its key range (as text, single-column keys)."""

    columns: tuple[str, ...]
    filter: BloomBits
    key_min: str | None
    key_max: str | None
    entries: int
    fpp: float
    field_ids: str | None = None
    field_types: str | None = None

    @classmethod
    def build(
        cls,
        rows: pa.Table,
        columns: Sequence[str],
        fpp: float = DEFAULT_FPP,
        schema: pa.Schema | None = None,
        hashed: ColumnHashes | None = None,
    ) -> FileBloom:
        """A filter over the keys of ``rows`` with false-positive rate ``fpp`` (``hashed``:
        hashes of ``rows``' columns shared with the file's other indexes)."""
        hashes = key_hashes(rows, columns, schema, hashed)
        lo = hi = None
        if len(columns) == 1 and rows.num_rows:
            lo, hi = (hashed if hashed is not None and hashed.rows is rows else ColumnHashes(rows)).bounds(columns[0])
        ids, types = recorded(rows.schema, columns)
        return cls(tuple(columns), BloomBits.of(hashes, fpp), lo, hi, len(hashes), fpp, ids, types)

    def to_row(self, path: str, partition: str) -> dict[str, object]:
        return {
            "path": path,
            "partition": partition,
            "columns": ",".join(self.columns),
            "key_min": self.key_min,
            "key_max": self.key_max,
            "entries": self.entries,
            "fpp": self.fpp,
            "filter": self.filter.to_bytes(),
            "field_ids": self.field_ids,
            "field_types": self.field_types,
        }

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> FileBloom:
        return cls(
            tuple(str(row["columns"]).split(",")),
            BloomBits.from_bytes(row["filter"]),
            row["key_min"],
            row["key_max"],
            int(row["entries"]),
            float(row["fpp"]),
            row.get("field_ids"),
            row.get("field_types"),
        )

    def might_contain(self, hashes: np.ndarray) -> np.ndarray:
        """For each key hash (:func:`key_hashes`): False only when the file surely does
        not hold that key."""
        if self.entries == 0:
            return np.zeros(len(hashes), dtype=bool)
        return self.filter.contains(hashes)

    def might_contain_any(self, hashes: np.ndarray) -> bool:
        return bool(self.might_contain(hashes).any())


def describing(
    columns: Sequence[str], schema: pa.Schema, untrusted: frozenset[str]
) -> Callable[[Mapping[str, Any]], bool]:
    """Whether a bloom entry is over the table's ``columns`` as they are now: by the
    field ids and types it recorded (a renamed column keeps its entries; a dropped,
    re-added or widened one's are not asked), else, an entry from before ids, by name,
    unless a rename, drop or widening moved a name (``untrusted``)."""
    want = recorded(schema, columns)
    named = ",".join(columns)
    by_name = not any(c in untrusted for c in columns)

    def describes(row: Mapping[str, Any]) -> bool:
        ids = row.get("field_ids")
        if ids is None:
            return by_name and row["columns"] == named
        return (ids, row.get("field_types")) == want

    return describes


def bloom_table(rows: list[dict[str, object]]) -> pa.Table:
    """Rows of :meth:`FileBloom.to_row` as a table of :data:`BLOOM_SCHEMA`."""
    return pa.Table.from_pylist(rows, schema=BLOOM_SCHEMA)


def file_bloom_rows(
    path: str,
    partition: str,
    rows: pa.Table,
    columns: Sequence[str],
    fpp: float = DEFAULT_FPP,
    schema: pa.Schema | None = None,
) -> pa.Table:
    """The ``bloom_filters`` row of one file, as a one-row table."""
    return bloom_table([FileBloom.build(rows, columns, fpp, schema).to_row(path, partition)])
