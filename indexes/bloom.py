"""Bloom filters of data files: a pybloom-live filter over keys, plus the key range.

One row per base file. The filter holds the record key (or the named columns); a
composite key is the text of its parts joined by a unit separator, so ``("a", "b|c")``
and ``("a|b", "c")`` never collide. Values are hashed as their Arrow text (cast to
string), the same for the build and the probe, so a probe value must first be cast to
the column's type (:func:`key_strings` does it from the table schema).

The key range (min/max of a single-column key, as text; cast it back to the column's
type before comparing) is kept for key-range pruning ahead of the probe. A bloom filter has no false negatives: a file it answers "no"
for holds none of the probed keys, which is what lets scans and tagging skip it.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pybloom_live import BloomFilter

from ..timeline.errors import UnknownColumnError

#: Default false-positive rate of a filter.
DEFAULT_FPP = 0.01

#: Joins the parts of a composite key; a control character no sane key contains.
KEY_SEPARATOR = "\x1f"

#: The metadata-table schema of the ``bloom_filters`` index partition.
BLOOM_SCHEMA = pa.schema([
    pa.field("path", pa.string(), nullable=False),
    pa.field("partition", pa.string(), nullable=False),
    pa.field("columns", pa.string(), nullable=False),  # the bloomed columns, comma-joined
    pa.field("key_min", pa.string()),
    pa.field("key_max", pa.string()),
    pa.field("entries", pa.int64(), nullable=False),
    pa.field("fpp", pa.float64(), nullable=False),
    pa.field("filter", pa.binary(), nullable=False),
])


def key_strings(rows: pa.Table, columns: Sequence[str], schema: pa.Schema | None = None) -> list[str]:
    """The text of each row's key over ``columns`` (cast to ``schema``'s types first).

    Nulls become the empty text of their part; a record key is never null, and for a
    named column a null is never matched by ``=``/``IN`` anyway.

    Raises:
        UnknownColumnError: a column is missing from ``rows``.
    """
    parts = []
    for name in columns:
        if name not in rows.column_names:
            raise UnknownColumnError(f"bloom filter column {name!r} is not in the rows")
        col = rows.column(name)
        if schema is not None and name in schema.names and col.type != schema.field(name).type:
            col = pc.cast(col, schema.field(name).type)
        parts.append(pc.fill_null(pc.cast(col, pa.string()), ""))
    if len(parts) == 1:
        return parts[0].to_pylist()
    joined = pc.binary_join_element_wise(*parts, KEY_SEPARATOR)
    return joined.to_pylist()


@dataclass
class FileBloom:
    """The bloom filter of one file and its key range (as text, single-column keys)."""

    columns: tuple[str, ...]
    filter: BloomFilter
    key_min: str | None
    key_max: str | None
    entries: int
    fpp: float

    @classmethod
    def build(cls, rows: pa.Table, columns: Sequence[str], fpp: float = DEFAULT_FPP,
              schema: pa.Schema | None = None) -> FileBloom:
        """A filter over the keys of ``rows`` with false-positive rate ``fpp``."""
        keys = key_strings(rows, columns, schema)
        # pybloom-live refuses capacity 0; an empty file still gets a (tiny) filter.
        bf = BloomFilter(capacity=max(len(keys), 1), error_rate=fpp)
        add = bf.add
        for k in keys:
            add(k)
        lo = hi = None
        if len(columns) == 1 and rows.num_rows:
            col = rows.column(columns[0])
            if col.null_count < len(col):
                mm = pc.min_max(col)
                lo = pc.cast(mm["min"], pa.string()).as_py()
                hi = pc.cast(mm["max"], pa.string()).as_py()
        return cls(tuple(columns), bf, lo, hi, len(keys), fpp)

    def to_bytes(self) -> bytes:
        buf = io.BytesIO()
        self.filter.tofile(buf)
        return buf.getvalue()

    @staticmethod
    def filter_from_bytes(raw: bytes) -> BloomFilter:
        return BloomFilter.fromfile(io.BytesIO(raw))

    def to_row(self, path: str, partition: str) -> dict[str, object]:
        return {
            "path": path,
            "partition": partition,
            "columns": ",".join(self.columns),
            "key_min": self.key_min,
            "key_max": self.key_max,
            "entries": self.entries,
            "fpp": self.fpp,
            "filter": self.to_bytes(),
        }

    @classmethod
    def from_row(cls, row: dict[str, object]) -> FileBloom:
        return cls(
            tuple(str(row["columns"]).split(",")),
            cls.filter_from_bytes(row["filter"]),  # type: ignore[arg-type]
            row["key_min"],  # type: ignore[arg-type]
            row["key_max"],  # type: ignore[arg-type]
            int(row["entries"]),  # type: ignore[arg-type]
            float(row["fpp"]),  # type: ignore[arg-type]
        )

    def might_contain(self, keys: Sequence[str]) -> list[bool]:
        """For each key text: False only when the file surely does not hold it."""
        bf = self.filter
        return [k in bf for k in keys]

    def might_contain_any(self, keys: Sequence[str]) -> bool:
        bf = self.filter
        return any(k in bf for k in keys)


def might_contain(row: dict[str, object], keys: Sequence[str]) -> list[bool]:
    """``might_contain`` straight from a metadata-table row."""
    return FileBloom.from_row(row).might_contain(keys)


def bloom_table(rows: list[dict[str, object]]) -> pa.Table:
    """Rows of :meth:`FileBloom.to_row` as a table of :data:`BLOOM_SCHEMA`."""
    return pa.Table.from_pylist(rows, schema=BLOOM_SCHEMA)


def file_bloom_rows(path: str, partition: str, rows: pa.Table, columns: Sequence[str],
                    fpp: float = DEFAULT_FPP, schema: pa.Schema | None = None) -> pa.Table:
    """The ``bloom_filters`` row of one file, as a one-row table."""
    return bloom_table([FileBloom.build(rows, columns, fpp, schema).to_row(path, partition)])
