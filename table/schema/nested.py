"""Schema steps on fields inside struct columns: ``"s.x"`` (or ``"s.t.x"``, through
structs only) added, renamed, dropped or widened by :class:`~.update.SchemaUpdate`
(issue 29).

Kept apart from :mod:`.update`, whose steps are about top-level columns, because a
nested step rebuilds every struct on its path: the change is to one field, but the
table's column is the top-level struct, whose type changes with it. That column's name
goes into ``moved_names`` (files' statistics of it describe another type). Readers match
struct fields by id at every depth (:func:`lakeline.timeline.field_ids.conform`), so a
renamed field reads under its new name from files written before, a dropped one is
no longer read, and a widened one is cast (the same widenings as a top-level column,
:func:`~.update.widens`); no data file is rewritten.

Paths go through structs only. A field inside a list or a map (``l.element.x``) is not
addressed: Iceberg allows it, but lakeline's steps name fields by dotted path, and the
list's or map's own child names (``element``, ``key``, ``value``) are Arrow's, not the
user's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import pyarrow as pa

from ...timeline.errors import SchemaMismatchError, UnknownColumnError
from ...timeline.field_ids import NAME_WITHOUT_IDS, without_ids_marked
from ...timeline.table_config import TableConfig
from .change import fresh_fields

if TYPE_CHECKING:
    from .update import Step


def struct_path(schema: pa.Schema, name: str) -> list[str] | None:
    """The parts of ``name`` when it names a field inside a struct column (its first
    part a struct column of ``schema``, and ``name`` itself no top-level column), else None."""
    if "." not in name or name in schema.names:
        return None
    parts = name.split(".")
    top = schema.get_field_index(parts[0])
    if top < 0 or not pa.types.is_struct(schema.field(top).type):
        return None
    return parts


def _kids(t: pa.DataType) -> list[pa.Field]:
    return [t.field(k) for k in range(t.num_fields)]


def _edited(field: pa.Field, path: list[str], step: Step, edit: Callable[[list[pa.Field]], list[pa.Field]]) -> pa.Field:
    """``field`` (a struct) with ``edit`` applied to the fields of the struct at
    ``path[:-1]`` below it (``path[-1]`` is the field the step is about)."""
    kids = _kids(field.type)
    if len(path) > 1:
        names = [k.name for k in kids]
        if path[0] not in names:
            raise UnknownColumnError(f"{step.describe()}: {field.name!r} has no field {path[0]!r}: {names}")
        i = names.index(path[0])
        if not pa.types.is_struct(kids[i].type):
            raise SchemaMismatchError(f"{step.describe()}: {path[0]!r} is no struct (paths go through structs only)")
        kids[i] = _edited(kids[i], path[1:], step, edit)
        return field.with_type(pa.struct(kids))
    return field.with_type(pa.struct(edit(kids)))


def nested_field(schema: pa.Schema, parts: list[str], step: Step) -> pa.Field:
    """The field ``parts`` names inside a struct column of ``schema``.

    Raises:
        UnknownColumnError: a field of the path does not exist.
        SchemaMismatchError: a part of the path before the last is no struct.
    """
    field = schema.field(parts[0])
    for i, part in enumerate(parts[1:], start=1):
        if not pa.types.is_struct(field.type):
            raise SchemaMismatchError(
                f"{step.describe()}: {parts[i - 1]!r} is no struct (paths go through structs only)"
            )
        kids = _kids(field.type)
        names = [k.name for k in kids]
        if part not in names:
            raise UnknownColumnError(f"{step.describe()}: {field.name!r} has no field {part!r}: {names}")
        field = kids[names.index(part)]
    return field


def nested_step(cfg: TableConfig, step: Step, parts: list[str], fixed: dict[str, str]) -> TableConfig:
    """``cfg`` after ``step`` on the field ``parts`` names inside a struct column.

    Raises:
        SchemaMismatchError: the struct column is a key, partition, ordering or
            by-name indexed column (``fixed``), a new name is taken by a sibling or is no plain name, the
            step would leave a struct without fields, a path part is no struct.
        UnknownColumnError: a field of the path (or ``after``) does not exist.
    """
    fields = list(cfg.schema)
    top = cfg.schema.get_field_index(parts[0])
    for name in (parts[0], step.name):
        if step.op in ("rename", "delete") and name in fixed:
            raise SchemaMismatchError(
                f"{step.describe()}: {name!r} is {fixed[name]}; its fields cannot be renamed or dropped"
            )
    legacy = any(NAME_WITHOUT_IDS in (f.metadata or {}) for f in cfg.schema)
    leaf = parts[-1]
    last = cfg.last_column_id
    moved = [parts[0], step.name]

    def find(kids: list[pa.Field]) -> int:
        names = [k.name for k in kids]
        if leaf not in names:
            raise UnknownColumnError(f"{step.describe()}: no field {leaf!r} there; the struct has {names}")
        return names.index(leaf)

    def plain(new: object, kids: list[pa.Field]) -> str:
        if not isinstance(new, str) or not new or "." in new:
            raise SchemaMismatchError(f"{step.describe()}: a field's new name is a non-empty name without '.'")
        if new in [k.name for k in kids]:
            raise SchemaMismatchError(f"{step.describe()}: the struct already has a field {new!r}")
        return new

    def edit(kids: list[pa.Field]) -> list[pa.Field]:
        nonlocal last
        if step.op == "add":
            plain(leaf, kids)
            at = len(kids)
            if step.after is not None:
                names = [k.name for k in kids]
                if step.after not in names:
                    raise UnknownColumnError(f"{step.describe()}: no field {step.after!r} there: {names}")
                at = names.index(step.after) + 1
            new, last = fresh_fields(replace(cfg, last_column_id=last), [pa.field(leaf, step.type, nullable=True)])
            return [*kids[:at], new[0], *kids[at:]]
        i = find(kids)
        if step.op == "update":  # a widening, checked by the caller; the id stays
            if kids[i].type == step.type:
                return kids  # no change (a struct's own fields keep their ids)
            return [*kids[:i], kids[i].with_type(step.type), *kids[i + 1 :]]
        if step.op == "delete":
            if len(kids) == 1:
                raise SchemaMismatchError(
                    f"{step.describe()}: a struct keeps at least one field (Parquet has no empty group); "
                    f"drop the column {parts[0]!r} instead"
                )
            return kids[:i] + kids[i + 1 :]
        new_name = plain(step.new_name, kids)
        moved.append(".".join([*parts[:-1], new_name]))
        kid = kids[i]
        if legacy and NAME_WITHOUT_IDS not in (kid.metadata or {}):
            kid = without_ids_marked(kid, kid.name)  # files from before ids hold it under this name
        return [*kids[:i], kid.with_name(new_name), *kids[i + 1 :]]

    fields[top] = _edited(fields[top], parts[1:], step, edit)
    schema = pa.schema(fields, metadata=cfg.schema.metadata)
    # Files' statistics of the struct column (and of the paths) describe another type now.
    moved_names = tuple(dict.fromkeys([*cfg.moved_names, *moved]))
    return replace(cfg, schema=schema, last_column_id=last, moved_names=moved_names)
