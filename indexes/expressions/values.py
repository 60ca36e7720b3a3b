"""How literal values of the tree compare: which can be ordered against which.

Bounds and literals are plain Python values. Python orders values of one kind as Arrow
does (numbers by value, strings by code point, which is UTF-8 byte order, bytes
bytewise, dates and datetimes by time), but not across kinds: a bool is an int to
Python, a datetime is a date, and a naive datetime cannot be ordered against an aware
one. So pruning compares only values of one :func:`kind`, and never a NaN.
"""

from __future__ import annotations

import math
from datetime import date, datetime
from decimal import Decimal


def kind(v: object) -> object:
    """The kind of a value: values of one kind order alike in Python and in Arrow; None:
    never to be compared (a NaN, an unsupported type)."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int | float | Decimal):
        return None if is_nan(v) else "number"
    if isinstance(v, datetime):
        return ("datetime", v.tzinfo is not None)
    if isinstance(v, date):
        return "date"
    if isinstance(v, str):
        return "str"
    if isinstance(v, bytes):
        return "bytes"
    return None


def is_nan(v: object) -> bool:
    """Whether ``v`` is a float or Decimal NaN."""
    return (isinstance(v, float) and math.isnan(v)) or (isinstance(v, Decimal) and v.is_nan())


def comparable(*values: object) -> bool:
    """Whether all ``values`` are of one kind (so Python orders them as Arrow does)."""
    kinds = {kind(v) for v in values}
    return len(kinds) == 1 and None not in kinds
