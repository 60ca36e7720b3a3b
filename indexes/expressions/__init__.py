"""Filters as data: lakeline's own expression tree and the questions pruning asks of it.

* :mod:`.tree`: the nodes, simplifying constructors, visitors, :func:`columns`;
* :mod:`.from_arrow`: a pyarrow expression as a tree, through Substrait
  (:mod:`.substrait` reads the protobuf);
* :mod:`.to_arrow`: a tree as a pyarrow expression;
* :mod:`.inclusive`: may a file (its column bounds) or a partition hold a match;
* :mod:`.pins`: the values a filter pins a column to (bloom filters, key ranges).

Nothing here is imported by ``lakeline.indexes`` or ``lakeline.table`` eagerly; the
modules import only pyarrow (``pyarrow.substrait`` inside :func:`from_arrow`).
"""

from __future__ import annotations

from .from_arrow import from_arrow
from .inclusive import ColumnBounds, might_match, partition_might_match
from .pins import pinned_values
from .to_arrow import to_arrow
from .tree import (
    FALSE,
    TRUE,
    AlwaysFalse,
    AlwaysTrue,
    And,
    Compare,
    Expr,
    In,
    IsNull,
    Not,
    Op,
    Or,
    Ref,
    Unknown,
    Value,
    Visitor,
    and_,
    columns,
    eq,
    is_in,
    is_null,
    not_,
    not_null,
    or_,
    push_not,
    visit,
    visit_nnf,
)

__all__ = [
    "FALSE",
    "TRUE",
    "AlwaysFalse",
    "AlwaysTrue",
    "And",
    "ColumnBounds",
    "Compare",
    "Expr",
    "In",
    "IsNull",
    "Not",
    "Op",
    "Or",
    "Ref",
    "Unknown",
    "Value",
    "Visitor",
    "and_",
    "columns",
    "eq",
    "from_arrow",
    "is_in",
    "is_null",
    "might_match",
    "not_",
    "not_null",
    "or_",
    "partition_might_match",
    "pinned_values",
    "push_not",
    "to_arrow",
    "visit",
    "visit_nnf",
]
