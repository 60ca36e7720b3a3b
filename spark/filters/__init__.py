"""Spark filters as lakeline's expression tree, for pruning only: SQL text through a small
parser of the user's input (:mod:`.sql`), a ``Column`` walked structurally and the tree
widened back to an Arrow filter that is never stricter than Spark's (:mod:`.translate`)."""

from .translate import filter_tree, to_arrow_filter, widened_arrow

__all__ = ["filter_tree", "to_arrow_filter", "widened_arrow"]
