"""Partition pruning: what the rows of a partition folder satisfy, and which slices a
filter can skip by their folder alone.

The folder's values are turned into a guarantee expression and Arrow decides whether
the filter can hold under it (a fragment that carries only the guarantee), so pruning
follows Arrow's own simplification rules. The null folder of a string column has two
alternatives: until 2026-11-25 the string "__HIVE_DEFAULT_PARTITION__" was written there
too (docs/format.md), and its rows must keep matching an ``==`` filter on that string.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..timeline.file_group import NULL_PARTITION, FileSlice, partition_scalar, partition_values
from .context import TableContext


def partition_guarantees(schema: pa.Schema, partition: str, legacy: bool = True) -> list[pc.Expression]:
    """What the rows of a partition folder satisfy (its partition values), as
    alternatives every row meets one of: one, except (with ``legacy``) for the null folder
    of a string column, which until 2026-11-25 also took the string
    "__HIVE_DEFAULT_PARTITION__"."""
    alternatives = [pc.scalar(True)]
    for col, raw in partition_values(partition).items():
        typ = schema.field(col).type
        if raw is None:
            null = [pc.field(col).is_null()]
            if legacy and (pa.types.is_string(typ) or pa.types.is_large_string(typ)):
                null.append(pc.field(col) == NULL_PARTITION)
            alternatives = [a & n for a in alternatives for n in null]
            continue
        value = partition_scalar(raw, typ)
        if value is not None:
            alternatives = [a & (pc.field(col) == value) for a in alternatives]
    return alternatives


def partition_guarantee(schema: pa.Schema, partition: str) -> pc.Expression:
    """What every row of a partition folder written by this version satisfies: the one
    expression a Parquet dataset's fragment carries for other engines (Arrow does not
    prune under a disjunction, so the legacy alternative is left to lakeline's own scans;
    docs/format.md section 6)."""
    return partition_guarantees(schema, partition, legacy=False)[0]


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
            # Fragments carrying only a guarantee each: Arrow decides if the filter can hold.
            frags = [fmt.make_fragment("unused", fs, partition_expression=g)
                     for g in partition_guarantees(schema, s.partition)]
            dset = ds.FileSystemDataset(frags, schema, fmt, fs)
            cache[s.partition] = bool(list(dset.get_fragments(filter=filter)))
        if cache[s.partition]:
            kept.append(s)
    return kept


__all__ = ["partition_guarantee", "partition_guarantees", "prune_slices"]
