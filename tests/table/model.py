"""An in-memory model of what a lakeline table must hold, and random inputs for it.

The model spells out, in plain Python, the semantics the table promises (docs/design.md,
"Public API", plus the choices below), independently of the Arrow code that implements
them, so the model-based tests can compare the two after every write:

* record identity is (partition values, record key);
* a batch is deduplicated by identity: the largest ordering value wins (null is the
  smallest), a tie goes to the last row;
* versions of a record fold in commit order: an upsert replaces the current version
  unless the current one has a strictly larger ordering value; a delete removes the
  record whatever its ordering value; an upsert after a delete brings it back;
* insert refuses identities the table holds (DuplicateKeyError);
* delete(keys) ignores absent keys and, without partition columns, deletes the key in
  every partition;
* delete_where(pred) deletes the rows where pred is true (null keeps the row);
* overwrite(data) replaces the partitions present in data (the whole table when it is
  unpartitioned); ``partitions=`` names the partitions to replace instead;
* tables without a record key are append-only: rows are a multiset.

Predicates are built as a tiny tree (:class:`Pred`) that yields both a
``pyarrow.compute.Expression`` for lakeline and a Python function with SQL's
three-valued logic for the model.
"""

from __future__ import annotations

import copy
import operator
import random
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

Row = dict[str, Any]
Ident = tuple[Any, ...]

#: The schema every model test uses: key ``id``, ordering ``ts``, partition ``day``.
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64()),
        pa.field("ts", pa.int64()),
        pa.field("day", pa.string()),
        pa.field("v", pa.int64()),
        pa.field("s", pa.string()),
    ]
)
COLUMNS = SCHEMA.names
DAYS = ["2026-01-01", "2026-01-02", "a b/c=%d"]  # the last one needs quoting in a path


def _sort_key(value: Any) -> tuple[int, Any]:
    """Total order over values that may be None (None first)."""
    return (0, 0) if value is None else (1, value)


def row_tuple(row: Row, columns: Sequence[str]) -> tuple[Any, ...]:
    return tuple(row.get(c) for c in columns)


def sorted_rows(rows: Iterable[Row], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """Rows as tuples in a canonical order (for comparing multisets)."""
    return sorted((row_tuple(r, columns) for r in rows), key=lambda t: tuple(_sort_key(v) for v in t))


def table_rows(table: pa.Table, columns: Sequence[str]) -> list[tuple[Any, ...]]:
    """An Arrow table's rows as canonical sorted tuples."""
    return sorted_rows(table.select(list(columns)).to_pylist(), columns)


# -- predicates with three-valued logic ---------------------------------------------------


_CMP: dict[str, tuple[Callable[[Any, Any], bool], Callable[[pc.Expression, Any], pc.Expression]]] = {
    "==": (operator.eq, lambda f, v: f == v),
    "!=": (operator.ne, lambda f, v: f != v),
    "<": (operator.lt, lambda f, v: f < v),
    "<=": (operator.le, lambda f, v: f <= v),
    ">": (operator.gt, lambda f, v: f > v),
    ">=": (operator.ge, lambda f, v: f >= v),
}


@dataclass(frozen=True)
class Pred:
    """A predicate tree: ``kind`` is cmp, isin, isnull, and, or, not."""

    kind: str
    col: str = ""
    op: str = ""
    value: Any = None
    values: tuple[Any, ...] = ()
    args: tuple[Pred, ...] = ()

    def expr(self) -> pc.Expression:
        """The Arrow expression lakeline evaluates."""
        if self.kind == "cmp":
            return _CMP[self.op][1](pc.field(self.col), self.value)
        if self.kind == "isin":
            return pc.field(self.col).isin(list(self.values))
        if self.kind == "isnull":
            return pc.field(self.col).is_null()
        if self.kind == "not":
            return ~self.args[0].expr()
        a, b = self.args[0].expr(), self.args[1].expr()
        return (a & b) if self.kind == "and" else (a | b)

    def eval(self, row: Row) -> bool | None:
        """SQL semantics: True, False or None (unknown)."""
        if self.kind == "cmp":
            x = row.get(self.col)
            return None if x is None else _CMP[self.op][0](x, self.value)
        if self.kind == "isin":
            # Arrow's is_in: a null input is simply not in a null-free value set.
            x = row.get(self.col)
            return False if x is None else x in self.values
        if self.kind == "isnull":
            return row.get(self.col) is None
        if self.kind == "not":
            r = self.args[0].eval(row)
            return None if r is None else not r
        a, b = self.args[0].eval(row), self.args[1].eval(row)
        if self.kind == "and":
            if a is False or b is False:
                return False
            return None if a is None or b is None else True
        if a is True or b is True:
            return True
        return None if a is None or b is None else False

    def matches(self, row: Row) -> bool:
        return self.eval(row) is True

    def __str__(self) -> str:
        return str(self.expr())


def random_leaf(rng: random.Random, days: Sequence[str | None], partition_col: str | None = "day") -> Pred:
    """One comparison, membership or null test over the model schema's columns."""
    cols = ["id", "ts", "v", "s"] + ([partition_col] if partition_col else [])
    col = rng.choice(cols)
    kind = rng.choices(["cmp", "isin", "isnull"], weights=[6, 2, 1])[0]
    if kind == "isnull":
        return Pred("isnull", col=col)

    def pick() -> object:
        if col in ("id", "ts", "v"):
            return rng.randint(-1, {"id": 40, "ts": 4, "v": 100}[col])
        if col == "s":
            return rng.choice(["a", "b", "c", "d"])
        return rng.choice([d for d in days if d is not None])

    if kind == "isin":
        return Pred("isin", col=col, values=tuple({pick() for _ in range(rng.randint(1, 3))}))
    return Pred("cmp", col=col, op=rng.choice(list(_CMP)), value=pick())


def random_pred(
    rng: random.Random, days: Sequence[str | None], depth: int = 2, partition_col: str | None = "day"
) -> Pred:
    """A random predicate tree up to ``depth`` levels of and/or/not."""
    if depth == 0 or rng.random() < 0.4:
        return random_leaf(rng, days, partition_col)
    kind = rng.choice(["and", "or", "not"])
    if kind == "not":
        return Pred("not", args=(random_pred(rng, days, depth - 1, partition_col),))
    return Pred(
        kind, args=(random_pred(rng, days, depth - 1, partition_col), random_pred(rng, days, depth - 1, partition_col))
    )


# -- the table model ---------------------------------------------------------------------


class ModelDuplicateKey(Exception):
    """The model's view of DuplicateKeyError (insert of an identity the table holds)."""


@dataclass
class TableModel:
    """What a table holds. Keyed: identity -> row. Append-only: a list (multiset)."""

    key: tuple[str, ...] = ("id",)
    ordering: str | None = "ts"
    partition_by: tuple[str, ...] = ("day",)
    columns: tuple[str, ...] = tuple(COLUMNS)
    keyed_rows: dict[Ident, Row] = field(default_factory=dict)
    plain_rows: list[Row] = field(default_factory=list)

    @property
    def keyed(self) -> bool:
        return bool(self.key)

    # -- identities --------------------------------------------------------------------

    def part_of(self, row: Row) -> tuple[Any, ...]:
        return tuple(row.get(c) for c in self.partition_by)

    def ident(self, row: Row) -> Ident:
        return self.part_of(row) + tuple(row[k] for k in self.key)

    def rows(self) -> list[Row]:
        return list(self.keyed_rows.values()) if self.keyed else list(self.plain_rows)

    def sorted(self) -> list[tuple[Any, ...]]:
        return sorted_rows(self.rows(), self.columns)

    def snapshot(self) -> TableModel:
        return copy.deepcopy(self)

    def partitions(self) -> set[tuple[Any, ...]]:
        return {self.part_of(r) for r in self.rows()}

    # -- the fold rule -------------------------------------------------------------------

    def _ord(self, row: Row) -> tuple[int, Any]:
        return _sort_key(row.get(self.ordering)) if self.ordering else (0, 0)

    def newer_wins(self, current: Row, incoming: Row) -> bool:
        """Whether ``incoming`` replaces ``current``: unless current is strictly larger."""
        if self.ordering is None:
            return True
        return not (self._ord(current) > self._ord(incoming))

    def dedupe(self, batch: Sequence[Row]) -> list[Row]:
        """One row per identity: the largest ordering value, the last row on a tie."""
        if not self.keyed:
            return list(batch)
        winners: dict[Ident, Row] = {}
        for row in batch:
            i = self.ident(row)
            if i not in winners or self.newer_wins(winners[i], row):
                winners[i] = row
        return list(winners.values())

    # -- the five writes -------------------------------------------------------------------

    def insert(self, batch: Sequence[Row]) -> None:
        """Raises ModelDuplicateKey (and changes nothing) if an identity is held."""
        if not self.keyed:
            self.plain_rows.extend(dict(r) for r in batch)
            return
        rows = self.dedupe(batch)
        if any(self.ident(r) in self.keyed_rows for r in rows):
            raise ModelDuplicateKey()
        for r in rows:
            self.keyed_rows[self.ident(r)] = dict(r)

    def upsert(self, batch: Sequence[Row]) -> None:
        for r in self.dedupe(batch):
            i = self.ident(r)
            cur = self.keyed_rows.get(i)
            if cur is None or self.newer_wins(cur, r):
                self.keyed_rows[i] = dict(r)

    def delete(self, keys: Sequence[Row], with_partition: bool) -> None:
        if with_partition or not self.partition_by:
            gone = {self.ident(k) for k in keys}
            self.keyed_rows = {i: r for i, r in self.keyed_rows.items() if i not in gone}
        else:
            gone_keys = {tuple(k[c] for c in self.key) for k in keys}
            self.keyed_rows = {
                i: r for i, r in self.keyed_rows.items() if tuple(r[c] for c in self.key) not in gone_keys
            }

    def delete_where(self, pred: Pred) -> None:
        if self.keyed:
            self.keyed_rows = {i: r for i, r in self.keyed_rows.items() if not pred.matches(r)}
        else:
            self.plain_rows = [r for r in self.plain_rows if not pred.matches(r)]

    def overwrite(self, batch: Sequence[Row], partitions: Iterable[tuple[Any, ...]] | None = None) -> None:
        if not self.partition_by:
            targets = None  # everything
        elif partitions is None:
            targets = {self.part_of(r) for r in batch}
        else:
            targets = set(partitions)
        keep = (lambda r: False) if targets is None else (lambda r: self.part_of(r) not in targets)
        if self.keyed:
            self.keyed_rows = {i: r for i, r in self.keyed_rows.items() if keep(r)}
            for r in self.dedupe(batch):
                self.keyed_rows[self.ident(r)] = dict(r)
        else:
            self.plain_rows = [r for r in self.plain_rows if keep(r)] + [dict(r) for r in batch]

    # -- incremental reads -------------------------------------------------------------------

    @staticmethod
    def diff(old: TableModel, new: TableModel) -> list[tuple[Any, ...]]:
        """What ``changes(old, new)`` must return: rows plus ``_op``, canonical order."""
        out: list[Row] = []
        for i, r in new.keyed_rows.items():
            prev = old.keyed_rows.get(i)
            if prev is None:
                out.append({**r, "_op": "insert"})
            elif row_tuple(prev, new.columns) != row_tuple(r, new.columns):
                out.append({**r, "_op": "update"})
        for i, r in old.keyed_rows.items():
            if i not in new.keyed_rows:
                out.append({**r, "_op": "delete"})
        return sorted_rows(out, list(new.columns) + ["_op"])


def to_arrow(rows: Sequence[Row], schema: pa.Schema = SCHEMA) -> pa.Table:
    """Rows (dicts) as an Arrow table of ``schema``, keeping their order."""
    return pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in rows], schema=schema)
