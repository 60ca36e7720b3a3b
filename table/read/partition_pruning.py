"""Partition pruning: what the rows of a partition folder satisfy, and which slices a
filter can skip by their folder alone.

The folder's values are turned into a guarantee expression and Arrow decides whether
the filter can hold under it (a fragment that carries only the guarantee), so pruning
follows Arrow's own simplification rules. The same guarantee is what the Parquet dataset
handed to other engines carries (:mod:`.dataset`).
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ...timeline.view.file_group import FileSlice, partition_scalar, partition_values
from ..context import TableContext


def partition_guarantee(schema: pa.Schema, partition: str) -> pc.Expression:
    """What every row of a partition folder satisfies (its partition values)."""
    expr = pc.scalar(True)
    for col, raw in partition_values(partition).items():
        if raw is None:
            expr = expr & pc.field(col).is_null()
            continue
        value = partition_scalar(raw, schema.field(col).type)
        if value is not None:
            expr = expr & (pc.field(col) == value)
    return expr


def prune_slices(ctx: TableContext, slices: list[FileSlice], filter: pc.Expression | None) -> list[FileSlice]:
    """The slices whose partition may hold a row matching ``filter``."""
    if filter is None or not ctx.config.partition_by:
        return list(slices)
    schema, fs = ctx.config.schema, ctx.storage.fs
    cache: dict[str, bool] = {}
    fmt = ds.ParquetFileFormat()
    kept = []
    for s in slices:
        if s.partition not in cache:
            # A fragment carrying only the guarantee: Arrow decides if the filter can hold.
            frag = fmt.make_fragment("unused", fs, partition_expression=partition_guarantee(schema, s.partition))
            dset = ds.FileSystemDataset([frag], schema, fmt, fs)
            cache[s.partition] = bool(list(dset.get_fragments(filter=filter)))
        if cache[s.partition]:
            kept.append(s)
    return kept


__all__ = ["partition_guarantee", "prune_slices"]
