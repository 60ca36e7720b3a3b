"""A pure-Python model of the merge engines (docs/merge-engines.md), one key at a time.

The rows of one batch for a key fold first, in (ordering, arrival) order, into one
version; the versions of the batches then fold in commit order. A version is *newer*
when its ordering value is at least the current row's (None is the smallest; every
version is newer without an ordering field). ``deduplicate``: a newer version replaces
the row. ``first-row``: only a strictly older version replaces it. ``partial-update``:
per column, a non-null value of a newer version wins, and one of an older version fills
a column still null. ``aggregation``: per column its function; a ``count`` counts the
versions with a value. A delete removes the key, for every engine.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Row = dict[str, Any]


def _rank(value: Any) -> tuple[int, Any]:
    return (0, 0) if value is None else (1, value)


def _skip_none(fn: Any) -> Any:
    return lambda a, b: b if a is None else a if b is None else fn(a, b)


_COMMUTATIVE = {
    "sum": _skip_none(lambda a, b: a + b),
    "min": _skip_none(min),
    "max": _skip_none(max),
    "count": lambda a, b: a + b,
    "bool_and": _skip_none(lambda a, b: a and b),
    "bool_or": _skip_none(lambda a, b: a or b),
}


class EngineModel:
    """The rows a table with ``engine`` must hold, by identity."""

    def __init__(
        self, engine: str, ident: tuple[str, ...], ordering: str | None, aggregates: dict[str, str] | None = None
    ) -> None:
        self.engine, self.ident, self.ordering = engine, ident, ordering
        self.aggregates = aggregates or {}
        self.rows: dict[tuple[Any, ...], Row] = {}

    def _version(self, row: Row) -> Row:
        out = dict(row)
        for c, fn in self.aggregates.items():
            if fn == "count":
                out[c] = 0 if row[c] is None else 1
        return out

    def upsert(self, rows: Iterable[Row]) -> None:
        batch: dict[tuple[Any, ...], list[Row]] = {}
        for row in rows:
            batch.setdefault(tuple(row[c] for c in self.ident), []).append(self._version(row))
        for key, versions in batch.items():
            if self.ordering is not None:
                versions.sort(key=lambda r: _rank(r[self.ordering]))  # stable: arrival breaks ties
            v = versions[0]
            for later in versions[1:]:
                v = self._step(v, later)
            cur = self.rows.get(key)
            self.rows[key] = v if cur is None else self._step(cur, v)

    def delete(self, keys: Iterable[tuple[Any, ...]]) -> None:
        for key in keys:
            self.rows.pop(key, None)

    def _step(self, cur: Row, v: Row) -> Row:
        o = self.ordering
        newer = o is None or _rank(v[o]) >= _rank(cur[o])
        if self.engine == "deduplicate":
            return v if newer else cur
        if self.engine == "first-row":
            return v if o is not None and _rank(v[o]) < _rank(cur[o]) else cur
        out = dict(cur)
        for c, value in v.items():
            if c in self.ident:
                continue
            fn = (
                "last_non_null"
                if self.engine == "partial-update" or c == o
                else self.aggregates.get(c, "last_non_null")
            )
            if fn == "last_non_null":
                if value is not None and (newer or cur[c] is None):
                    out[c] = value
            elif fn == "first_non_null":
                if cur[c] is None:
                    out[c] = value
            else:
                out[c] = _COMMUTATIVE[fn](cur[c], value)
        return out
