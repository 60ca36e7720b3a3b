"""Column statistics of data files: min, max, null count, value count and an NDV sketch.

One row per (file, column). Min and max are stored as text (Arrow's cast to string) so
one Parquet schema holds columns of every type; :func:`decode_bound` casts them back to
the column's type from the table schema. The number of distinct values is a
HyperLogLog sketch (:mod:`.hll`) serialized to bytes: sketches of many files merge
(union) into the NDV of a partition or of the whole table without reading the data
again, which a stored exact count could never do.

Pruning relies on these rows, so they err on the side of "unknown": a column whose
min/max cannot be represented (binary, nested types, floats holding NaN) gets null
bounds, and a reader never prunes on a null bound. Binary columns keep null bounds
although :func:`~.hashing.binary_bound_text` could store them: entries that tables
already hold would otherwise differ from their recomputation (``validate``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..timeline.field_ids import field_id, strip_ids
from .coupons import column_coupons
from .hashing import ColumnHashes, binary_bound_value, is_binary_like
from .hll import Hll, merge_all

#: lg(k) of the HLL sketches: 2^14 registers give a relative standard error of ~0.8 %,
#: so estimates stay within the 3 % the issue asks for with a wide margin, at ~7.5 KiB
#: per file and column at most (compressed; a few bytes for few distinct values).
DEFAULT_LG_K = 12

#: The metadata-table schema of the ``column_stats`` index partition (without the
#: columns the metadata table adds itself).
STATS_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        pa.field("partition", pa.string(), nullable=False),
        pa.field("column", pa.string(), nullable=False),
        pa.field("min", pa.string()),
        pa.field("max", pa.string()),
        pa.field("null_count", pa.int64(), nullable=False),
        pa.field("value_count", pa.int64(), nullable=False),
        pa.field("ndv_sketch", pa.binary()),
        # The column's field id and Arrow type in the file (null: entries written before
        # 2026-11-27, or a file without ids): pruning asks an entry for the column of
        # that id while its type is unchanged, whatever it is called now (issue 29).
        pa.field("field_id", pa.int64()),
        pa.field("field_type", pa.string()),
    ]
)


def has_bounds(typ: pa.DataType) -> bool:
    """Whether min/max of this type survive a round trip through text."""
    return (
        pa.types.is_integer(typ)
        or pa.types.is_floating(typ)
        or pa.types.is_string(typ)
        or pa.types.is_large_string(typ)
        or pa.types.is_boolean(typ)
        or pa.types.is_date(typ)
        or pa.types.is_timestamp(typ)
        or pa.types.is_decimal(typ)
    )


def _sketchable(typ: pa.DataType) -> bool:
    return not (pa.types.is_nested(typ) or pa.types.is_dictionary(typ))


def sketch_values(column: pa.ChunkedArray | pa.Array, lg_k: int = DEFAULT_LG_K) -> bytes:
    """A serialized DataSketches HLL sketch of the distinct non-null values of ``column``
    (:mod:`.hll`; values hashed as DataSketches and Spark hash them, :mod:`.coupons`)."""
    return Hll.of_coupons(column_coupons(column), lg_k).to_bytes()


def file_stats(
    path: str,
    partition: str,
    rows: pa.Table,
    columns: Sequence[str] | None = None,
    lg_k: int = DEFAULT_LG_K,
    hashes: ColumnHashes | None = None,
) -> pa.Table:
    """The ``column_stats`` rows of one data file (``rows`` is its content; ``hashes``
    of its columns may be shared with its other indexes)."""
    hashes = hashes if hashes is not None else ColumnHashes(rows)
    names = list(columns) if columns is not None else rows.column_names
    out: dict[str, list[object]] = {f.name: [] for f in STATS_SCHEMA}
    for name in names:
        if name not in rows.column_names:
            continue  # a column added after the file was written: no entry, never pruned
        col = rows.column(name)
        typ = col.type
        nulls = col.null_count
        lo = hi = None
        if has_bounds(typ) and len(col) > nulls:
            if pa.types.is_floating(typ) and pc.any(pc.is_nan(col)).as_py():
                pass  # NaN has no place in an ordering: leave the bounds unknown
            else:
                lo, hi = hashes.bounds(name)
        out["path"].append(path)
        out["partition"].append(partition)
        out["column"].append(name)
        out["min"].append(lo)
        out["max"].append(hi)
        out["null_count"].append(nulls)
        out["value_count"].append(len(col))
        out["ndv_sketch"].append(sketch_values(col, lg_k) if _sketchable(typ) else None)
        fid = field_id(rows.schema.field(name))
        out["field_id"].append(fid)
        out["field_type"].append(None if fid is None else str(strip_ids(typ)))
    return pa.Table.from_pydict(out, schema=STATS_SCHEMA)


def decode_bound(text: str | None, typ: pa.DataType) -> pa.Scalar | None:
    """A min/max text cast back to the column's type (None when unknown); a binary
    bound is decoded from :func:`~.hashing.binary_bound_text` (no stats entry holds one
    today, a bloom filter's key range may).

    Raises:
        ValueError: a binary bound's text is corrupt.
        pyarrow.ArrowInvalid: the text does not cast to ``typ``.
    """
    if text is None:
        return None
    if is_binary_like(typ):
        return pa.scalar(binary_bound_value(text), typ)
    return pc.cast(pa.scalar(text, pa.string()), typ)


def merge_sketches(sketches: Iterable[bytes | None], lg_k: int = DEFAULT_LG_K) -> bytes:
    """The union of serialized sketches, serialized (nulls are skipped).

    Raises:
        MetadataTableError: a sketch is corrupt or of another precision.
    """
    return merge_all((Hll.from_bytes(raw) for raw in sketches if raw), lg_k).to_bytes()


def estimate(sketch: bytes) -> float:
    """The distinct-count estimate of one serialized sketch."""
    return Hll.from_bytes(sketch).estimate()


@dataclass(frozen=True)
class NdvEstimate:
    """An NDV estimate with its bounds at two standard deviations."""

    estimate: float
    lower: float
    upper: float


def ndv(stats: pa.Table, column: str, partition: str | None = None, lg_k: int = DEFAULT_LG_K) -> NdvEstimate:
    """Distinct values of ``column`` over the files in ``stats`` (one partition or all).

    ``stats`` holds ``column_stats`` rows, typically ``MetadataTable.read`` limited to the
    live files of a snapshot.
    """
    mask = pc.equal(stats.column("column"), column)
    if partition is not None:
        mask = pc.and_(mask, pc.equal(stats.column("partition"), partition))
    sk = merge_all((Hll.from_bytes(raw) for raw in stats.filter(mask).column("ndv_sketch").to_pylist() if raw), lg_k)
    lower, upper = sk.bounds(2.0)
    return NdvEstimate(sk.estimate(), lower, upper)


def by_present_names(
    rows: Iterable[Mapping[str, Any]], schema: pa.Schema, untrusted: frozenset[str]
) -> Iterator[dict[str, Any]]:
    """The stats entries that describe a column of ``schema`` as it is now, each under
    the column's present name: an entry with a field id is that id's column while the
    type it recorded is the column's type (a rename keeps pruning on it; a column
    dropped, or widened since, is not asked: a float32 bound read as a float64 is no
    bound); an entry without one (written before ids were recorded, or of a file from
    before ids) is its name's, unless a rename, drop or widening moved that name
    (``untrusted``, the table's ``moved_names``)."""
    present = {fid: f for f in schema if (fid := field_id(f)) is not None}
    for r in rows:
        fid = r.get("field_id")
        if fid is None:
            if str(r["column"]) not in untrusted:
                yield dict(r)
            continue
        f = present.get(int(fid))
        if f is not None and r.get("field_type") == str(strip_ids(f.type)):
            yield {**r, "column": f.name}


#: At most this many nullable columns named by a filter get a "null or in bounds" split
#: (2^n guarantees per file); further ones are left unconstrained, which is sound.
MAX_NULL_SPLITS = 4


def guarantees(
    stats_rows: Iterable[Mapping[str, Any]], schema: pa.Schema, mentioned: Callable[[str], bool] = lambda name: True
) -> list[pc.Expression]:
    """Guarantees of one file, from its stats rows (one per column): every row of the
    file satisfies at least one of them.

    Arrow reads ``c >= lo`` in a guarantee as "c is not null" too, and it cannot use an
    ``or`` in a guarantee. So a column with nulls splits the file in two cases, "c is
    null" and "lo <= c <= hi", and the file may match if the filter can hold in any
    case. Only columns the filter names (``mentioned``) are split; an all-null column
    is ``is_null(c)``; a column with unknown bounds adds nothing.
    """
    base = pc.scalar(True)
    splits: list[tuple[pc.Expression, pc.Expression]] = []
    for row in stats_rows:
        name = str(row["column"])
        if name not in schema.names or not mentioned(name):
            continue
        typ = schema.field(name).type
        nulls, count = int(row["null_count"]), int(row["value_count"])
        field = pc.field(name)
        if count == 0:
            continue
        if nulls == count:
            base = base & field.is_null()
            continue
        try:
            lo = decode_bound(row["min"], typ)
            hi = decode_bound(row["max"], typ)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError):
            continue  # the column's type changed since (or a corrupt bound): no pruning on it
        if lo is None or hi is None:
            continue
        bounds = (field >= lo) & (field <= hi)
        if nulls == 0:
            base = base & bounds
        elif len(splits) < MAX_NULL_SPLITS:
            splits.append((field.is_null(), bounds))
    out = [base]
    for is_null, bounds in splits:
        out = [g & is_null for g in out] + [g & bounds for g in out]
    return out
