"""The explorer's model of a table whose schema changes under its writers (issue 29).

Why slots: a column keeps its identity across renames and widenings, and loses it when
dropped (a name added again is a new, null column). The model therefore keeps rows as
dicts keyed by *slot* (the column's name at creation, or :data:`ADDED` for the column
the schema actor adds), and a :class:`SchemaModel` says which name and type each slot
has now. Rendering a snapshot puts the slots under the names and types of then, so an
``as_of`` read is compared with the schema of its time. Lakeline's field ids are read
only to tell which slot a column of the *current* schema is when an actor builds its
rows (as an application that reads the schema before it writes would); the model
itself never looks at ids.

The rules it holds lakeline to (docs/design.md, "schema evolution"):

* a schema instant applies its steps to the schema it lands on (a concurrent one
  landed first: applied on top of it, or refused typed); one that completed with a step
  that does not fit the schema in completion order is a violation;
* a write lands by name on the schema at its completion: every column it carried must
  be there (a write still using a name a concurrent rename or drop replaced must fail
  typed, never land), columns it did not carry read null, and values go to the column
  of that name (a name dropped and added again meanwhile is the new column);
* a write refused with ``SchemaMismatchError`` or ``UnknownColumnError`` is refused for a
  schema change: one landed after the actor read the schema.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from lakeline.timeline.field_ids import field_id
from lakeline.timeline.instant import Action

from tests.table.model import SCHEMA, Pred, TableModel, sorted_rows

if TYPE_CHECKING:
    from lakeline.table import Table
    from lakeline.timeline.timeline import Timeline

Row = dict[str, Any]
#: The column the schema actor adds (int32, so that it can be widened), drops and
#: widens; every column of a later id is this slot (only one can exist at a time: the
#: name is fixed, so a second add is refused while it exists).
ADDED = "x"
ADDED_TYPE = pa.int32()
WIDE_TYPE = pa.int64()
#: The non-key column the schema actor renames, and the other name it toggles to.
RENAMED = "s"
OTHER_NAME = "label"
#: Field ids of the columns at creation: 1, 2, ... in schema order (checked at setup).
BASE_SLOTS = {n + 1: name for n, name in enumerate(SCHEMA.names)}
#: Schema steps the actor asks for; ``name`` of a ``schema`` op.
SCHEMA_STEPS = ("add", "rename", "drop", "widen")


def slot_of(f: pa.Field) -> str:
    return BASE_SLOTS.get(field_id(f) or 0, ADDED)


def check_base_ids(schema: pa.Schema) -> None:
    """The explorer maps columns to slots by the ids ``Table.create`` hands out."""
    got = {field_id(f): f.name for f in schema}
    if got != BASE_SLOTS:
        raise AssertionError(f"field ids at creation are {got}, the explorer expects {BASE_SLOTS}")


def last_schema_instant(tl: Timeline) -> int | None:
    for inst in reversed(tl.completed()):
        if inst.action is Action.SCHEMA:
            return inst.id
    return None


def write_rows(t: Table, rows: list[Row], seen: dict[str, Any]) -> pa.Table:
    """``rows`` (slot-keyed) as an Arrow table under the table's schema now (read
    fresh); ``seen`` records the names carried (name -> slot) and the schema instant."""
    tl = t.log.refresh()
    schema = t.config.schema
    carried = {f.name: slot_of(f) for f in schema}
    seen["carried"] = carried
    seen["schema_at"] = last_schema_instant(tl)
    plain = pa.schema([pa.field(f.name, f.type, nullable=f.nullable) for f in schema])
    return pa.Table.from_pylist([{n: r.get(s) for n, s in carried.items()} for r in rows], schema=plain)


def renamed(p: Pred, names: dict[str, str]) -> Pred:
    """``p`` (over slots) with each column under its name in ``names`` (slot -> name)."""
    return replace(p, col=names.get(p.col, p.col), args=tuple(renamed(a, names) for a in p.args))


def run_schema_step(t: Table, step: str, seen: dict[str, Any]) -> None:
    """One ``update_schema()`` block of the schema actor. The step is decided on the
    schema read when the block opens and recorded in ``seen`` before it commits (the
    checker may see its instant complete before this returns)."""
    tl = t.log.refresh()
    seen["schema_at"] = last_schema_instant(tl)
    with t.update_schema() as u:
        names = {slot_of(f): f.name for f in u.schema}
        if step == "add":
            seen["steps"] = (("add", ADDED),)
            u.add_column(ADDED, ADDED_TYPE)
        elif step == "rename":
            old = names.get(RENAMED, RENAMED)
            new = OTHER_NAME if old == RENAMED else RENAMED
            seen["steps"] = (("rename", old, new),)
            u.rename_column(old, new)
        elif step == "drop":
            seen["steps"] = (("drop", ADDED),)
            u.delete_column(ADDED)
        elif step == "widen":
            seen["steps"] = (("widen", ADDED),)
            u.update_column(ADDED, WIDE_TYPE)
        else:
            raise ValueError(f"unknown schema step {step!r}")


def diff_rows(actual: list[tuple[Any, ...]], expected: list[tuple[Any, ...]]) -> str:
    """What a read holds that the model has not, and the other way round (8 each)."""
    a, e = Counter(actual), Counter(expected)
    extra = sorted((a - e).elements(), key=repr)[:8]
    missing = sorted((e - a).elements(), key=repr)[:8]
    return f"table has {extra} the model has not; model has {missing} the table has not"


@dataclass
class Column:
    slot: str
    name: str
    type: pa.DataType


@dataclass
class ExplorerModel:
    """Rows (a :class:`TableModel` over slots) and the schema they read under."""

    rows: TableModel = field(default_factory=TableModel)
    columns: list[Column] = field(default_factory=lambda: [Column(f.name, f.name, f.type) for f in SCHEMA])

    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def types(self) -> list[str]:
        return [str(c.type) for c in self.columns]

    def render(self, keys: set[int] | None = None) -> list[tuple[Any, ...]]:
        """The rows as canonical tuples in schema order (only ``keys``' if given)."""
        rows = self.rows.rows() if keys is None else [r for r in self.rows.rows() if r["id"] in keys]
        return sorted_rows(rows, [c.slot for c in self.columns])

    def expected(self) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
        return self.names(), self.types(), self.render()

    def copy(self) -> ExplorerModel:
        return copy.deepcopy(self)

    # -- landing instants in completion order ------------------------------------------

    def apply_schema(self, steps: tuple[tuple[str, ...], ...]) -> str | None:
        """Apply a completed schema instant's steps; the reason it could not have landed
        (a step that does not fit the schema it landed on), else None."""
        for step in steps:
            kind, name = step[0], step[1]
            col = next((c for c in self.columns if c.name == name), None)
            if kind == "add":
                if col is not None:
                    return f"added {name!r}, which the schema had"
                self.columns.append(Column(ADDED, name, ADDED_TYPE))
            elif col is None:
                return f"{' '.join(step)}: the schema it landed on has no {name!r} ({self.names()})"
            elif kind == "rename":
                if step[2] in self.names():
                    return f"renamed {name!r} onto {step[2]!r}, which the schema had"
                col.name = step[2]
            elif kind == "drop":
                self.columns.remove(col)
                for r in self.rows.rows():
                    r.pop(col.slot, None)  # a column added again under this name is new
            elif kind == "widen":
                col.type = WIDE_TYPE
        return None

    def landed(self, rows: list[Row], carried: dict[str, str]) -> tuple[list[Row], str | None]:
        """The rows (slot-keyed) a completed write of ``rows`` that carried the columns
        ``carried`` (name -> slot) lands, and the reason it could not have landed (a
        column the schema at its completion lacks), else None."""
        missing = sorted(set(carried) - set(self.names()))
        if missing:
            return [], f"it carried {missing}, which the schema at its completion ({self.names()}) lacks"
        return [{s: r.get(s) for s in carried.values()} for r in rows], None


__all__ = [
    "ADDED",
    "OTHER_NAME",
    "RENAMED",
    "SCHEMA_STEPS",
    "ExplorerModel",
    "check_base_ids",
    "diff_rows",
    "last_schema_instant",
    "renamed",
    "run_schema_step",
    "write_rows",
]
