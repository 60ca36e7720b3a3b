"""Seeded random filters against random small files, checked by brute force.

For each of 300 random Arrow filters (``and``, ``or``, ``not``, the six comparisons
with the literal on either side, ``isin`` with and without a null, ``is_null``,
``is_valid``, a few unknown functions) over int, string and date columns with nulls:

* files (small tables): wherever Arrow finds a matching row in a file, ``might_match``
  on the file's bounds says True; and it prunes a good share of the files without a
  match, so a do-nothing evaluator fails;
* partitions (single-valued files): the same with ``partition_might_match``;
* pins: every matching row's value is in ``pinned_values``;
* the tree back in Arrow selects a superset of the rows, the same rows unless an
  ``isin`` holds a null (whose null handling Substrait does not carry).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import date, timedelta

import pyarrow as pa
import pyarrow.compute as pc
from lakeline.indexes.expressions import (
    ColumnBounds,
    Expr,
    Unknown,
    Value,
    columns,
    from_arrow,
    might_match,
    partition_might_match,
    pinned_values,
    to_arrow,
    visit,
)
from lakeline.indexes.expressions.tree import Compare, In, IsNull, Visitor

SEED = 20260
FILTERS = 300
FILES = 40
PARTITIONS = 60
STRINGS = ["", "a", "ab", "b", "ba", "bb", "c", "q", "z", "é", "éa"]
DAY0 = date(2020, 1, 1)
SCHEMA = pa.schema([("i", pa.int64()), ("s", pa.string()), ("d", pa.date32())])


def _value(rng: random.Random, column: str, center: int | None = None) -> Value:
    k = rng.randrange(12) if center is None else min(11, max(0, center + rng.randrange(3)))
    return k if column == "i" else STRINGS[k % len(STRINGS)] if column == "s" else DAY0 + timedelta(days=k)


def _file(rng: random.Random, rows: int) -> dict[str, list[Value | None]]:
    out: dict[str, list[Value | None]] = {}
    for col in SCHEMA.names:
        center, p_null = rng.randrange(10), rng.choice([0.0, 0.0, 0.3, 1.0])
        out[col] = [None if rng.random() < p_null else _value(rng, col, center) for _ in range(rows)]
    return out


class _Gen:
    """Random Arrow filters; ``null_in_isin`` tells whether the last one has such a leaf."""

    def __init__(self, rng: random.Random) -> None:
        self.rng, self.null_in_isin = rng, False

    def filter(self) -> pc.Expression:
        self.null_in_isin = False
        return self.expr(3)

    def expr(self, depth: int) -> pc.Expression:
        r = self.rng.random()
        if depth == 0 or r < 0.35:
            return self.leaf()
        if r < 0.6:
            return self.expr(depth - 1) & self.expr(depth - 1)
        if r < 0.85:
            return self.expr(depth - 1) | self.expr(depth - 1)
        return ~self.expr(depth - 1)

    def leaf(self) -> pc.Expression:
        rng = self.rng
        col = rng.choice(SCHEMA.names)
        field, v = pc.field(col), _value(rng, col)
        kind = rng.random()
        if kind < 0.5:
            name = rng.choice(["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"])
            fn: Callable[..., pc.Expression] = getattr(pc, name)
            return fn(field, v) if rng.random() < 0.7 else fn(pc.scalar(v), field)
        if kind < 0.75:
            values: list[Value | None] = [_value(rng, col) for _ in range(rng.randint(1, 4))]
            if rng.random() < 0.2:
                values.append(None)
                self.null_in_isin = True
            return field.isin(pa.array(values, SCHEMA.field(col).type))
        if kind < 0.85:
            return field.is_null()
        if kind < 0.95:
            return field.is_valid()
        return pc.starts_with(pc.field("s"), "b") if rng.random() < 0.5 else (pc.field("i") * 2 > 9)


def _bounds(table: pa.Table) -> dict[str, ColumnBounds]:
    out = {}
    for col in table.column_names:
        mm = pc.min_max(table.column(col))
        out[col] = ColumnBounds(mm["min"].as_py(), mm["max"].as_py(), table.column(col).null_count, table.num_rows)
    return out


def _ids(table: pa.Table, expr: pc.Expression, id_column: str) -> set[int]:
    return set(table.filter(expr).column(id_column).to_pylist())


class _HasUnknown(Visitor[bool]):
    def always_true(self) -> bool:
        return False

    always_false = always_true

    def and_(self, children: list[bool]) -> bool:
        return any(children)

    or_ = and_

    def not_(self, child: bool) -> bool:
        return child

    def compare(self, node: Compare) -> bool:
        return False

    def is_in(self, node: In) -> bool:
        return False

    def is_null(self, node: IsNull) -> bool:
        return False

    def unknown(self, node: Unknown) -> bool:
        return True


def test_random_filters_against_files_partitions_and_pins() -> None:
    rng = random.Random(SEED)
    files = [pa.Table.from_pydict(_file(rng, rng.randint(1, 4)), schema=SCHEMA) for _ in range(FILES)]
    bounds = [_bounds(t) for t in files]
    rows = pa.concat_tables(files)
    rows = rows.append_column("_file", pa.array([i for i, t in enumerate(files) for _ in range(t.num_rows)]))
    rows = rows.append_column("_row", pa.array(range(rows.num_rows)))
    parts = [{c: (None if rng.random() < 0.15 else _value(rng, c)) for c in SCHEMA.names} for _ in range(PARTITIONS)]
    part_rows = pa.Table.from_pylist(parts, schema=SCHEMA).append_column("_part", pa.array(range(PARTITIONS)))

    gen = _Gen(rng)
    no_match = pruned = part_no_match = part_pruned = pinned = pins_pruning = exact = 0
    for _ in range(FILTERS):
        flt = gen.filter()
        tree = from_arrow(flt, SCHEMA)
        assert columns(tree) <= set(SCHEMA.names)
        unknown = visit(tree, _HasUnknown())
        assert not (isinstance(tree, Unknown) and "serializ" in tree.reason), tree  # Substrait took it

        matched = _ids(rows, flt, "_file")
        for i, b in enumerate(bounds):
            keep = might_match(tree, b)
            assert keep or i not in matched, (str(flt), tree, files[i].to_pylist())
            if i not in matched:
                no_match += 1
                pruned += not keep

        part_matched = _ids(part_rows, flt, "_part")
        for i, values in enumerate(parts):
            keep = partition_might_match(tree, values)
            assert keep or i not in part_matched, (str(flt), tree, values)
            if i not in part_matched:
                part_no_match += 1
                part_pruned += not keep

        matching_rows = rows.filter(flt)
        for col in SCHEMA.names:
            pins = pinned_values(tree, col)
            if pins is None:
                continue
            pinned += 1
            got = set(matching_rows.column(col).to_pylist())
            assert got <= pins, (str(flt), tree, col, got, pins)
            pins_pruning += any(v not in pins for v in rows.column(col).to_pylist())

        if not unknown:
            original, back = _ids(rows, flt, "_row"), _ids(rows, to_arrow(tree, SCHEMA), "_row")
            assert back >= original, (str(flt), tree)
            if not gen.null_in_isin:
                assert back == original, (str(flt), tree)
                exact += 1

    print(
        f"files: pruned {pruned} of {no_match} without a match; partitions: {part_pruned} of {part_no_match}; "
        f"pins: {pinned} (column, filter) pairs, {pins_pruning} excluding a stored value; exact round trips {exact}"
    )
    assert pruned > 0.2 * no_match
    assert part_pruned > 0.5 * part_no_match
    assert pinned >= 20 and pins_pruning >= 10
    assert exact >= FILTERS // 2


def test_a_do_nothing_evaluator_would_fail() -> None:
    """The share asserted above is out of reach of an evaluator that always keeps: the
    brute force finds files without a match for most filters."""
    rng = random.Random(SEED)
    files = [pa.Table.from_pydict(_file(rng, rng.randint(1, 4)), schema=SCHEMA) for _ in range(FILES)]
    flt = (pc.field("i") == 11) & (pc.field("s") == "q")
    assert sum(t.filter(flt).num_rows == 0 for t in files) > FILES // 2
    tree: Expr = from_arrow(flt, SCHEMA)
    assert sum(not might_match(tree, _bounds(t)) for t in files) > FILES // 2
