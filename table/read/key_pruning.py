"""Key pruning: which slices a filter can skip by the range of record keys their files
hold (from the commit metadata every writer records, no index needed), and, when the
filter pins the key (``==``, ``isin``) and a record index is ready, by the keys the
index says each file holds (:func:`prune_by_record_index`).

The filter's tree (:mod:`lakeline.indexes.expressions`) is asked whether a slice whose
keys lie in ``[lo, hi]`` may hold a match (:func:`might_match` on those bounds; a key
is never null). A slice the tree keeps is also tried with Arrow's own simplification
(the range as a guarantee), which also sees through parts of a filter the tree reads as
``Unknown``; a slice is skipped when either proves no row of it can match.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ...indexes.expressions import ColumnBounds, Expr, columns, might_match
from ...indexes.pruning import filter_tree, has_unknown, pinned_values
from ...indexes.record_index.lookup import Holding, RecordIndexReader, slices_holding
from ...timeline.errors import MetadataTableError
from ...timeline.view.file_group import DataFile, FileSlice
from ..context import TableContext


def _bounds(s: FileSlice | DataFile, typ: pa.DataType) -> tuple[pa.Scalar, pa.Scalar] | None:
    """The key range of a slice or of one file as scalars of the key's type, or None
    when unknown (a float key: NaN fits no range)."""
    if isinstance(s, FileSlice):
        bounds = s.key_bounds()
    else:
        known = not any(v is None or isinstance(v, float) for v in (s.key_min, s.key_max))
        bounds = (s.key_min, s.key_max) if known else None
    if not bounds:
        return None
    try:
        lo, hi = (pa.scalar(b).cast(typ) for b in bounds)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return None
    return (lo, hi) if lo.is_valid and hi.is_valid else None


def prune_key_ranges(
    ctx: TableContext, slices: list[FileSlice], filter: pc.Expression | None, tree: Expr | None = None
) -> list[FileSlice]:
    """The slices whose record-key range may hold a row matching ``filter`` (``tree``:
    its tree, when the caller already read it).

    Sound for merge-on-read slices too: a merged row's key is a key of the base or of a
    log, so it lies within the union of their ranges. Single-column keys only.
    """
    key, schema, fs = ctx.config.record_key, ctx.config.schema, ctx.storage.fs
    tree = filter_tree(filter, schema) if tree is None else tree
    if filter is None or tree is None or len(key) != 1:
        return list(slices)
    unknown = has_unknown(tree)
    if key[0] not in columns(tree) and not unknown:
        return list(slices)  # the filter surely does not constrain the key
    typ = schema.field(key[0]).type
    fmt = ds.ParquetFileFormat()
    frags: list[ds.Fragment] = []
    owners: list[int] = []
    kept: list[int] = []
    for i, s in enumerate(slices):
        bounds = _bounds(s, typ)
        if bounds is None:
            kept.append(i)
            continue
        lo, hi = bounds
        if not might_match(tree, {key[0]: ColumnBounds(lo.as_py(), hi.as_py(), 0, None)}):
            continue
        guarantee = (pc.field(key[0]) >= lo) & (pc.field(key[0]) <= hi)
        frags.append(fmt.make_fragment(str(len(frags)), fs, partition_expression=guarantee))
        owners.append(i)
    if frags:
        try:
            dset = ds.FileSystemDataset(frags, schema, fmt, fs)
            kept.extend(owners[int(f.path)] for f in dset.get_fragments(filter=filter))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            kept.extend(owners)  # a filter Arrow cannot simplify: the tree's answer stands
    keep = set(kept)
    return [s for i, s in enumerate(slices) if i in keep]


def file_might_match(tree: Expr, key: str, typ: pa.DataType, f: DataFile) -> bool:
    """False only when the range of record keys ``f`` holds (single-column key ``key``
    of type ``typ``) proves none of its keys satisfies ``tree``, a filter on the key."""
    bounds = _bounds(f, typ)
    if bounds is None:
        return True
    return might_match(tree, {key: ColumnBounds(bounds[0].as_py(), bounds[1].as_py(), 0, None)})


def prune_by_record_index(ctx: TableContext, slices: list[FileSlice], tree: Expr | None) -> Holding:
    """The slices a file of which holds a record of a key ``tree`` pins, from a ready
    record index of the snapshot, with the rows of their bases that hold one
    (:func:`slices_holding`); ``slices`` as they are (and no rows) when the filter pins
    no key, or no index serves the snapshot (a generation newer than it: time travel)."""
    key, schema = ctx.config.record_key, ctx.config.schema
    unknown = Holding(slices, {})
    if tree is None or len(key) != 1 or not slices:
        return unknown
    values = pinned_values(tree, key[0], schema)
    if values is None:
        return unknown
    reader = RecordIndexReader.open(ctx.storage, ctx.snapshot, schema, key)
    if reader is None:
        return unknown
    try:
        return slices_holding(reader, slices, [v.as_py() for v in values])
    except MetadataTableError:
        return unknown  # folded away under us: read without it
