"""Partition pruning: what the rows of a partition folder satisfy, and which slices a
filter can skip by their folder alone.

The filter's tree (:mod:`lakeline.indexes.expressions`) is asked whether a partition
with the folder's values may hold a match (:func:`partition_might_match`); a folder
value that does not parse to the column's type is unknown, only the null folder is a
null. A partition the tree keeps is also tried with Arrow's own simplification: the
folder's values as a guarantee expression (a fragment that carries only the guarantee),
which also sees through parts of a filter the tree reads as ``Unknown``. A partition is
skipped when either proves no row of it can match. The same guarantee is what the
Parquet dataset handed to other engines carries (:mod:`.dataset`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ...indexes.expressions import Expr, Value, partition_might_match
from ...indexes.pruning import filter_tree
from ...timeline.view.file_group import FileSlice, partition_scalar, partition_values
from ..context import TableContext

_UNPARSED = (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError, OverflowError)


def _scalar(raw: str, typ: pa.DataType) -> pa.Scalar | None:
    """The folder value as the column's type; None: it does not parse (unknown)."""
    try:
        value = partition_scalar(raw, typ)
    except _UNPARSED:
        return None
    return value if value is not None and value.is_valid else None


def partition_guarantee(schema: pa.Schema, partition: str) -> pc.Expression:
    """What every row of a partition folder satisfies (its partition values)."""
    expr = pc.scalar(True)
    for col, raw in partition_values(partition).items():
        if raw is None:
            expr = expr & pc.field(col).is_null()
            continue
        value = _scalar(raw, schema.field(col).type) if col in schema.names else None
        if value is not None:
            expr = expr & (pc.field(col) == value)
    return expr


def partition_tree_values(schema: pa.Schema, partition: str) -> dict[str, Value | None]:
    """A folder's values for :func:`partition_might_match`: None for the null folder; a
    value that does not parse (or a column the schema lacks) is left out (unknown)."""
    out: dict[str, Value | None] = {}
    for col, raw in partition_values(partition).items():
        if col not in schema.names:
            continue
        if raw is None:
            out[col] = None
            continue
        value = _scalar(raw, schema.field(col).type)
        if value is not None:
            out[col] = value.as_py()
    return out


def _arrow_might_match(ctx: TableContext, partition: str, filter: pc.Expression) -> bool:
    """Arrow's answer: a fragment carrying only the folder's guarantee."""
    schema, fs, fmt = ctx.config.schema, ctx.storage.fs, ds.ParquetFileFormat()
    frag = fmt.make_fragment("unused", fs, partition_expression=partition_guarantee(schema, partition))
    try:
        return bool(list(ds.FileSystemDataset([frag], schema, fmt, fs).get_fragments(filter=filter)))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return True  # a filter Arrow cannot simplify: the tree's answer stands


def prune_slices(
    ctx: TableContext, slices: list[FileSlice], filter: pc.Expression | None, tree: Expr | None = None
) -> list[FileSlice]:
    """The slices whose partition may hold a row matching ``filter`` (``tree``: its
    tree, when the caller already read it)."""
    if filter is None or not ctx.config.partition_by:
        return list(slices)
    schema = ctx.config.schema
    tree = filter_tree(filter, schema) if tree is None else tree
    cache: dict[str, bool] = {}
    kept = []
    for s in slices:
        if s.partition not in cache:
            values = partition_tree_values(schema, s.partition)
            cache[s.partition] = (tree is None or partition_might_match(tree, values)) and _arrow_might_match(
                ctx, s.partition, filter
            )
        if cache[s.partition]:
            kept.append(s)
    return kept


__all__ = ["partition_guarantee", "partition_tree_values", "prune_slices"]
