"""``with t.update_schema() as u:``: add, rename, drop and widen columns in one schema
instant, without rewriting a data file (docs/design.md, issue 29).

Columns are matched by field id (:mod:`lakeline.timeline.field_ids`), so no change needs
the data: a rename changes the name the id carries, a drop removes the id from the
schema (files keep the column; no reader asks for it), an add hands out a fresh id (old
files lack it and read null), a widening changes the type readers cast to. Each step is
checked when it is called, so bad input fails at the line that asks for it, and all of
them again at exit on the configuration the instant lands on: a schema instant that
landed meanwhile is not overwritten, the steps are applied on top of it (or refused,
typed, if they no longer fit). Nothing is written until exit, and nothing at all when
the block raises.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import TracebackType
from typing import TYPE_CHECKING

import pyarrow as pa

from ...config.properties import AGGREGATE_PREFIX, AGGREGATE_SUFFIX
from ...indexes.entries import resolve
from ...indexes.states import IndexKind, index_states
from ...timeline.errors import CommitConflictError, InvalidIndexError, SchemaMismatchError, UnknownColumnError
from ...timeline.field_ids import assign_ids, field_id, has_ids, typed_nulls, without_ids_marked
from ...timeline.instant import Action
from ...timeline.plans import SchemaChangePlan
from ...timeline.table_config import TableConfig, check_column_names
from ...timeline.timeline import Timeline
from ..context import TableContext
from ..write.records import prepare_rows, same_columns
from .change import commit_schema, fresh_fields
from .nested import nested_field, nested_step, struct_path

if TYPE_CHECKING:
    from ..table import Table

#: Integer widths in bits; each widens to a larger one of the same signedness, and an
#: unsigned one also to a larger signed one.
_DECIMAL_DIGITS = {8: 3, 16: 5, 32: 10, 64: 20}  # digits an integer needs as a decimal


def widens(src: pa.DataType, dst: pa.DataType) -> bool:
    """Whether every ``src`` value is a ``dst`` value: Delta Lake 4.0's type widening.

    byte → short → int → long (and unsigned to wider unsigned or signed); float →
    double; byte, short, int → double; any integer → a decimal with room for its digits;
    decimal(p, s) → decimal(p + k1, s + k2) with k1 ≥ k2 ≥ 0; date → timestamp without
    a time zone. The same type is no change."""
    if src == dst:
        return True
    if pa.types.is_integer(src) and pa.types.is_integer(dst):
        wider = dst.bit_width > src.bit_width
        return wider and (pa.types.is_signed_integer(dst) or not pa.types.is_signed_integer(src))
    if pa.types.is_floating(src) and pa.types.is_floating(dst):
        return dst.bit_width > src.bit_width
    if pa.types.is_integer(src) and pa.types.is_float64(dst):
        return src.bit_width <= 32
    if pa.types.is_integer(src) and pa.types.is_decimal(dst):
        return dst.precision - dst.scale >= _DECIMAL_DIGITS[src.bit_width]
    if pa.types.is_decimal(src) and pa.types.is_decimal(dst):
        k1, k2 = dst.precision - src.precision, dst.scale - src.scale
        return k1 >= k2 >= 0
    if pa.types.is_date(src) and pa.types.is_timestamp(dst):
        return dst.tz is None
    return False


def _check_widening(step: Step, old: pa.DataType) -> None:
    """Raises:
    SchemaMismatchError: ``step`` (an update) asks for no type, or for one that is
        no widening of ``old``."""
    if not isinstance(step.type, pa.DataType):
        raise SchemaMismatchError(f"update_column({step.name!r}): the type must be a pyarrow DataType")
    if not widens(old, step.type):
        raise SchemaMismatchError(
            f"{step.describe()}: {old} -> {step.type} is not a widening (allowed: int8 -> int16 -> int32 -> "
            "int64, float32 -> float64, int8/16/32 -> float64, integers to decimals with room, decimal precision "
            "up by at least the scale, date -> timestamp without zone)"
        )


@dataclass(frozen=True)
class Step:
    """One change of an update: ``op`` is add, rename, delete or update."""

    op: str
    name: str
    new_name: str | None = None
    type: pa.DataType | None = None
    after: str | None = None

    def describe(self) -> str:
        if self.op == "rename":
            return f"rename {self.name} to {self.new_name}"
        if self.op == "delete":
            return f"delete {self.name}"
        where = f" after {self.after}" if self.after else ""
        return f"{self.op} {self.name} {self.type}{where}"


def _fixed_columns(cfg: TableConfig, tl: Timeline) -> tuple[dict[str, str], dict[str, str]]:
    """Columns a rename or drop must leave alone, with why: the record key, partition
    and ordering columns (files, folders and the record index are keyed by them, and the
    configuration names them: renaming them is not built), columns an index names by
    name only (a definition from before ids). Second, the columns only a drop must leave
    alone: those of a bloom filter that recorded their ids (its entries follow a rename;
    a column-stats index forgets a dropped column, :func:`~lakeline.indexes.entries.resolve`).
    A column with a ``merge.<column>.aggregate`` is neither: its setting follows a
    rename and leaves with a drop (:func:`_carried_setting`)."""
    out: dict[str, str] = {}
    undroppable: dict[str, str] = {}
    for c in cfg.record_key:
        out[c] = "a record-key column (files and the record index are keyed by it)"
    for c in cfg.partition_by:
        out[c] = "a partition column (its values name the partition folders)"
    if cfg.ordering_field:
        out[cfg.ordering_field] = "the ordering field (the configuration and merge engine order versions by it)"
    for idx in index_states(tl).values():
        if not idx.field_ids:
            for c in idx.columns:
                out.setdefault(c, f"a column of index {idx.name!r}")
            continue
        try:
            cols = resolve(idx, cfg.schema, cfg.record_key).columns
        except InvalidIndexError:
            continue  # none of its columns is left to keep
        for c in cols:
            if idx.kind == IndexKind.BLOOM_FILTERS:
                undroppable.setdefault(
                    c,
                    f"a column of bloom filter index {idx.name!r}, whose entries hash its columns together; "
                    f"drop the index first (t.indexes.drop({idx.name!r}))",
                )
    return out, undroppable


def with_ids(cfg: TableConfig) -> TableConfig:
    """``cfg`` with field ids, for a table created before them: every column gets one,
    and keeps its present name as the one its files without ids hold it under."""
    if has_ids(cfg.schema):
        return cfg
    fields, last = assign_ids(list(cfg.schema), 0, keep=False)
    fields = [without_ids_marked(f, f.name) for f in fields]
    return replace(cfg, schema=pa.schema(fields, metadata=cfg.schema.metadata), last_column_id=last)


def _carried_setting(cfg: TableConfig, old: str, new: str | None) -> TableConfig:
    """``cfg`` with the column ``old``'s ``merge.<old>.aggregate`` moved to ``new`` (a
    rename: the same column, so it folds the same way, and the schema instant records
    the moved key) or removed (``new`` None: a drop; the column's values are no longer
    read, and a column added later under its name is a new one, folding by default)."""
    key = f"{AGGREGATE_PREFIX}{old}{AGGREGATE_SUFFIX}"
    if key not in cfg.properties:
        return cfg
    props = {k: v for k, v in cfg.properties.items() if k != key}
    if new is not None:
        props[f"{AGGREGATE_PREFIX}{new}{AGGREGATE_SUFFIX}"] = cfg.properties[key]
    return replace(cfg, properties=props)


def apply_step(
    cfg: TableConfig, step: Step, fixed: dict[str, str], undroppable: Mapping[str, str] | None = None
) -> TableConfig:
    """``cfg`` after ``step`` (``fixed``, ``undroppable``: :func:`_fixed_columns`).

    Raises:
        SchemaMismatchError: a name taken, a rename or drop of a column in ``fixed``, a
            type change that is not a widening, a type that is no Arrow type.
        UnknownColumnError: the column (or ``after``) is not in the schema.
        ReservedColumnError: a new name lakeline reserves.
    """
    cfg = with_ids(cfg)
    parts = struct_path(cfg.schema, step.name)
    if parts is not None:
        if step.op == "update":
            _check_widening(step, nested_field(cfg.schema, parts, step).type)
        return nested_step(cfg, step, parts, fixed)  # a field inside a struct column
    fields = list(cfg.schema)
    names = [f.name for f in fields]
    if step.op != "add" and step.name not in names:
        raise UnknownColumnError(f"{step.describe()}: no column {step.name!r}; the table has {names}")
    moved = list(cfg.moved_names)
    if step.op == "add":
        if not isinstance(step.type, pa.DataType):
            raise SchemaMismatchError(f"add_column({step.name!r}): the type must be a pyarrow DataType")
        check_column_names([*names, step.name], f"the schema with column {step.name!r} added")
        at = len(fields)
        if step.after is not None:
            if step.after not in names:
                raise UnknownColumnError(f"{step.describe()}: no column {step.after!r}; the table has {names}")
            at = names.index(step.after) + 1
        new, last = fresh_fields(cfg, [pa.field(step.name, step.type, nullable=True)])
        fields.insert(at, new[0])
        return replace(cfg, schema=pa.schema(fields, metadata=cfg.schema.metadata), last_column_id=last)
    i = names.index(step.name)
    if step.op in ("rename", "delete") and step.name in fixed:
        raise SchemaMismatchError(
            f"{step.describe()}: {step.name!r} is {fixed[step.name]}; it cannot be renamed or dropped"
        )
    if step.op == "delete" and undroppable and step.name in undroppable:
        raise SchemaMismatchError(f"{step.describe()}: {step.name!r} is {undroppable[step.name]}")
    if step.op == "rename":
        new_name = step.new_name
        if not isinstance(new_name, str) or new_name in names:
            raise SchemaMismatchError(f"{step.describe()}: the table already has a column {new_name!r}")
        check_column_names([*names[:i], new_name, *names[i + 1 :]], f"the schema with {step.describe()}")
        fields[i] = fields[i].with_name(new_name)
        moved += [step.name, new_name]
        cfg = _carried_setting(cfg, step.name, new_name)
    elif step.op == "delete":
        if len(fields) == 1:
            raise SchemaMismatchError(f"{step.describe()}: a table keeps at least one column")
        del fields[i]
        moved.append(step.name)
        cfg = _carried_setting(cfg, step.name, None)
    else:
        old = fields[i]
        if old.type != step.type and (step.name in cfg.record_key or step.name in cfg.partition_by):
            raise SchemaMismatchError(f"{step.describe()}: {step.name!r} is a key or partition column; its type stays")
        _check_widening(step, old.type)
        fields[i] = old.with_type(step.type)
        moved.append(step.name)  # files' statistics hold the narrower type's values
    return replace(cfg, schema=pa.schema(fields, metadata=cfg.schema.metadata), moved_names=tuple(dict.fromkeys(moved)))


def _last_schema_instant(tl: Timeline) -> int | None:
    for inst in reversed(tl.completed()):
        if inst.action is Action.SCHEMA:
            return inst.id
    return None


class SchemaUpdate:
    """The steps of one ``update_schema()`` block; see the module docstring."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._steps: list[Step] = []
        tl = table.log.refresh()
        self._cfg = table.config
        self._fixed, self._undroppable = _fixed_columns(self._cfg, tl)

    def _add(self, step: Step) -> SchemaUpdate:
        self._cfg = apply_step(self._cfg, step, self._fixed, self._undroppable)
        self._steps.append(step)
        return self

    def add_column(self, name: str, type: pa.DataType, after: str | None = None) -> SchemaUpdate:  # noqa: A002
        """A new nullable column (``after``: right after that column; else at the end),
        with a fresh field id: files written before read it as nulls. ``"s.x"``, where
        ``s`` is a struct column, adds the field ``x`` inside it (``after``: a field of
        ``s``; ``"s.t.x"`` inside the struct field ``t`` of ``s``)."""
        return self._add(Step("add", name, type=type, after=after))

    def rename_column(self, old: str, new: str) -> SchemaUpdate:
        """``old`` is called ``new`` from now on, in files written before too.
        ``"s.x"`` renames the field ``x`` of the struct column ``s`` (``new`` is the
        field's new name, ``"y"``: then ``s.y``)."""
        return self._add(Step("rename", old, new_name=new))

    def delete_column(self, name: str) -> SchemaUpdate:
        """Drop ``name``; its values stay in old files, unread (``as_of`` reads them).
        ``"s.x"`` drops the field ``x`` of the struct column ``s`` (not its last one)."""
        return self._add(Step("delete", name))

    def update_column(self, name: str, type: pa.DataType) -> SchemaUpdate:  # noqa: A002
        """Widen ``name`` to ``type`` (:func:`widens`); files read cast to it.
        ``"s.x"`` widens the field ``x`` of the struct column ``s`` (by the same rules;
        old files' structs are read by id and the field cast)."""
        return self._add(Step("update", name, type=type))

    @property
    def schema(self) -> pa.Schema:
        """The schema the steps so far make."""
        return self._cfg.schema

    def __enter__(self) -> SchemaUpdate:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None and self._steps:
            self.commit()

    def commit(self) -> int:
        """Land the steps as one schema instant, applied to the configuration it lands
        on (retried when another schema instant lands first). Returns its id.

        Raises:
            SchemaMismatchError, UnknownColumnError: the steps no longer fit the table's
                schema (a concurrent change took a name, say); nothing was written.
            CommitConflictError: schema instants kept landing through every retry.
        """
        log = self._table.log
        retries = self._table.config.props.commit_max_retries
        for _ in range(retries + 1):
            tl = log.refresh()
            base = TableConfig.from_timeline(tl)
            assert base is not None
            fixed, undroppable = _fixed_columns(base, tl)
            cfg = base
            for step in self._steps:
                cfg = apply_step(cfg, step, fixed, undroppable)
            based_on = _last_schema_instant(tl)

            def unchanged(now: Timeline, based_on: int | None = based_on) -> None:
                if _last_schema_instant(now) != based_on:
                    raise CommitConflictError("another schema instant landed first")

            plan = SchemaChangePlan(
                "update", tuple(s.name for s in self._steps), tuple(s.describe() for s in self._steps)
            )
            try:
                instant = commit_schema(
                    log, plan, cfg, check=unchanged, fault="schema.update.after_requested", recheck=True
                )
            except CommitConflictError:
                continue
            self._cfg = cfg
            return instant
        raise CommitConflictError(f"update_schema gave up after {retries} retries: schema instants kept landing")


def conformed_again(
    data: pa.Table, rows: pa.Table, cfg: TableConfig, dedupe: bool
) -> Callable[[TableContext], pa.Table]:
    """The rows of a write for an attempt's context: ``rows`` (``data`` prepared for
    ``cfg``) while the schema is ``cfg``'s; on a replay after a schema instant replaced
    it (:func:`~.write.commit.schema_conflict`), ``data`` conformed again to the new
    schema, which refuses an old column name or a narrowing, typed. Columns added
    meanwhile read as nulls: the writer could not know them."""

    def rows_for(ctx: TableContext) -> pa.Table:
        if same_columns(ctx.config.schema, cfg.schema):
            return rows
        return prepare_rows(added_since(data, cfg.schema, ctx.config.schema), ctx.config, dedupe, evolve=False)[0]

    return rows_for


def added_since(rows: pa.Table, planned_on: pa.Schema, now: pa.Schema) -> pa.Table:
    """``rows``, checked against ``planned_on``, with the columns a concurrent schema
    instant added since (in ``now``: a new field id and a name the rows do not carry) as
    nulls: the writer could not know them. Renamed, dropped or retyped columns are left
    to the conforming that follows, which refuses an old name or a narrowing, typed.
    The local write's replay and Spark's tasks and data-source commit all use it."""
    ids = {i for f in planned_on if (i := field_id(f)) is not None}
    names = set(planned_on.names)
    for f in now:
        i = field_id(f)
        if (i is None or i not in ids) and f.name not in names and f.name not in rows.column_names:
            rows = rows.append_column(f, typed_nulls(rows.num_rows, f.type))
    return rows
