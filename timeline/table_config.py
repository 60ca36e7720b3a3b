"""The table's configuration as it lives in the table state.

The configuration (Arrow schema, record key, ordering field, partition columns, type,
properties) is written as the metadata of a completed ``schema`` instant; the latest such
instant wins. It is therefore changed only through the timeline, and every writer reads
it from there at commit time rather than trusting its own local settings.
"""

from __future__ import annotations

import base64
import enum
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import pyarrow as pa

from ..config import PropertyProblem, TableProperties, explicit
from .errors import (
    CorruptEventError,
    InvalidPropertyError,
    ReservedColumnError,
    SchemaMismatchError,
    UnknownColumnError,
    UnsupportedOperationError,
)
from .field_ids import assign_ids, field_id, max_id
from .instant import Action
from .timeline import Timeline
from .view.file_group import MAX_FOLDER_BYTES, partition_path


class TableType(enum.StrEnum):
    """How a table applies changes: copy-on-write rewrites base files, merge-on-read
    appends log files a compaction folds later. The value is what the configuration stores."""

    COW = "cow"
    MOR = "mor"


#: The values of :class:`TableType`, as arguments and the stored configuration spell them.
TABLE_TYPES = tuple(t.value for t in TableType)
FORMAT_VERSION = 1

#: Columns lakeline writes into log files beside the user's (``_op``, ``_seq``,
#: ``_base_pos``: the on-disk format, docs/format.md) and ``_pos`` (reserved since the
#: first version). ``_op`` is also the change column of ``Table.changes()``.
RESERVED_COLUMNS = ("_op", "_seq", "_pos", "_base_pos")
#: Prefix of every column lakeline adds to rows only while it works on them (fold order,
#: row numbers, partition folders of keys...). Reserved, so no user column can collide
#: with one, whatever lakeline adds later under it.
INTERNAL_PREFIX = "__lakeline_"


def refuse_duplicates(names: list[str], what: str) -> None:
    """Refuse column names that appear twice (which column would be the table's?).

    Raises:
        SchemaMismatchError: naming the duplicates.
    """
    dup = sorted(n for n, count in Counter(names).items() if count > 1)
    if dup:
        raise SchemaMismatchError(f"{what} has duplicate column names {dup!r} (each appears more than once): {names!r}")


def check_column_names(names: list[str], what: str = "schema") -> None:
    """Refuse column names a table cannot hold, before anything is written.

    Raises:
        SchemaMismatchError: a name is not a string or appears twice.
        ReservedColumnError: a name is reserved (:data:`RESERVED_COLUMNS`, a name under
            :data:`INTERNAL_PREFIX`) or starts with ``.``, which Arrow's group-bys,
            joins and sorts read as a nested field path (``..`` would name no column).
    """
    bad = [n for n in names if not isinstance(n, str)]
    if bad:
        raise SchemaMismatchError(f"{what} has column names that are not strings: {bad!r}")
    refuse_duplicates(names, what)
    reserved = [n for n in names if n in RESERVED_COLUMNS or n.startswith(INTERNAL_PREFIX)]
    if reserved:
        raise ReservedColumnError(
            f"{what} has column(s) {reserved!r} reserved by lakeline: {', '.join(RESERVED_COLUMNS)} and any "
            f"name starting with {INTERNAL_PREFIX!r}"
        )
    paths = [n for n in names if n.startswith(".")]
    if paths:
        raise ReservedColumnError(
            f"{what} has column(s) {paths!r} starting with '.', which Arrow reads as a nested field path; rename them"
        )


def schema_to_text(schema: pa.Schema) -> str:
    return base64.b64encode(schema.serialize().to_pybytes()).decode()


def schema_from_text(text: str) -> pa.Schema:
    return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(text)))


def _check_properties(props: Mapping[str, Any] | None) -> dict[str, Any]:
    try:
        return explicit(props)
    except PropertyProblem as e:
        raise InvalidPropertyError(str(e)) from None


@dataclass(frozen=True)
class TableConfig:
    """Everything about a table that is fixed by its schema instants."""

    schema: pa.Schema
    record_key: tuple[str, ...] = ()
    ordering_field: str | None = None
    partition_by: tuple[str, ...] = ()
    table_type: TableType = TableType.COW
    properties: Mapping[str, Any] = field(default_factory=dict)
    table_uuid: str = ""
    #: The last field id handed out (:mod:`.field_ids`): ids are never reused, so a
    #: column added after a drop of the same name is a new column in old files too.
    last_column_id: int = 0
    #: Names a rename or a drop moved off a column (and the new names of renamed ones):
    #: statistics and indexes that files recorded under such a name may describe
    #: another column, so pruning never trusts them (issue 29).
    moved_names: tuple[str, ...] = ()

    @classmethod
    def build(
        cls,
        schema: pa.Schema,
        record_key: str | list[str] | tuple[str, ...] | None,
        ordering_field: str | None,
        partition_by: list[str] | tuple[str, ...] | None,
        table_type: str,
        properties: Mapping[str, Any] | None,
        table_uuid: str,
    ) -> TableConfig:
        """Validate user arguments into a configuration.

        Raises:
            SchemaMismatchError: the schema is unusable (duplicate names, nested key...).
            ReservedColumnError: a column name is reserved (:func:`check_column_names`).
            UnknownColumnError: key, ordering or partition columns are not in the schema.
            InvalidPropertyError: a property is unknown or malformed; or a bad table type.
        """
        if not isinstance(schema, pa.Schema):
            raise SchemaMismatchError(f"schema must be a pyarrow.Schema, not {type(schema).__name__}")
        names = schema.names
        check_column_names(names)
        keys = (record_key,) if isinstance(record_key, str) else tuple(record_key or ())
        parts = tuple(partition_by or ())
        for what, cols in (("record key", keys), ("partition", parts)):
            for c in cols:
                if c not in names:
                    raise UnknownColumnError(f"{what} column {c!r} is not in the schema {names}")
        if ordering_field is not None and ordering_field not in names:
            raise UnknownColumnError(f"ordering field {ordering_field!r} is not in the schema {names}")
        if ordering_field is not None and not keys:
            raise SchemaMismatchError("an ordering field needs a record key")
        for c in parts:
            # Its folder must fit with a null value at least (any value, were it not for this).
            if len(partition_path((c,), (None,)).encode()) > MAX_FOLDER_BYTES:
                raise SchemaMismatchError(
                    f"partition column name {c[:40]!r}... is too long: its folder name would "
                    f"exceed {MAX_FOLDER_BYTES} bytes (a file system limit)"
                )
        for c in keys + parts:
            t = schema.field(c).type
            if pa.types.is_nested(t) or pa.types.is_floating(t):
                raise SchemaMismatchError(f"column {c!r} of type {t} cannot be a key or partition column")
        if table_type not in TABLE_TYPES:
            raise InvalidPropertyError(f"table_type must be one of {TABLE_TYPES}, not {table_type!r}")
        if table_type == TableType.MOR and not keys:
            raise InvalidPropertyError("a merge-on-read table needs a record key")
        checked = _check_properties(properties)
        if not keys and checked.get("index.record-index") is True:
            raise InvalidPropertyError("index.record-index needs a record key (the index maps keys to file groups)")
        # Ids of the caller's schema (one read from a Parquet file, say) mean nothing here.
        fields, last = assign_ids(list(schema), 0, keep=False)
        return cls(
            schema=pa.schema(fields, metadata=schema.metadata),
            last_column_id=last,
            record_key=keys,
            ordering_field=ordering_field,
            partition_by=parts,
            table_type=TableType(table_type),
            properties=checked,
            table_uuid=table_uuid,
        )

    @property
    def has_key(self) -> bool:
        return bool(self.record_key)

    @property
    def write_action(self) -> Action:
        return Action.DELTA_COMMIT if self.table_type == TableType.MOR else Action.COMMIT

    def require_key(self, operation: str) -> None:
        """Raises:
        UnsupportedOperationError: the table is append-only, and ``operation`` needs keys.
        """
        if not self.has_key:
            raise UnsupportedOperationError(f"{operation} needs a record key; this table is append-only")

    @property
    def where_action(self) -> Action:
        """The action of a write that picks rows by a predicate (``delete_where``,
        ``update``): an append-only table has no keys for a log to name, so it rewrites
        the files in a ``commit`` whatever its type."""
        return self.write_action if self.has_key else Action.COMMIT

    @cached_property
    def props(self) -> TableProperties:
        """Stored properties merged over the documented defaults, typed (``props.to_dict()``
        lists them by dotted key).

        Raises:
            InvalidPropertyError: a stored property is unknown to this version or malformed.
        """
        try:
            return TableProperties.resolve(self.properties, stored=True)
        except PropertyProblem as e:
            raise InvalidPropertyError(str(e)) from None

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT_VERSION,
            "schema": schema_to_text(self.schema),
            "fields": [
                {"name": f.name, "type": str(f.type), "nullable": f.nullable, "id": field_id(f)} for f in self.schema
            ],
            "last_column_id": self.last_column_id,
            "moved_names": list(self.moved_names),
            "record_key": list(self.record_key),
            "ordering_field": self.ordering_field,
            "partition_by": list(self.partition_by),
            "table_type": self.table_type.value,
            "properties": dict(self.properties),
            "table_uuid": self.table_uuid,
        }

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TableConfig:
        """The configuration a schema instant stored (:meth:`to_dict`).

        Raises:
            CorruptEventError: not a configuration of a format this version reads (a
                format other than :data:`FORMAT_VERSION`, a schema that does not decode,
                fields of the wrong shape).
            InvalidPropertyError: a stored property is unknown to this version or malformed.
        """
        _check_config_shape(raw)
        try:
            schema = schema_from_text(raw["schema"])
        except (ValueError, TypeError, pa.ArrowException) as e:  # binascii.Error is a ValueError
            raise CorruptEventError(f"table configuration: its schema does not decode: {e}") from None
        cfg = cls(
            schema=schema,
            record_key=tuple(raw.get("record_key") or ()),
            ordering_field=raw.get("ordering_field"),
            partition_by=tuple(raw.get("partition_by") or ()),
            table_type=TableType(raw.get("table_type", TableType.COW)),
            properties=dict(raw.get("properties") or {}),
            table_uuid=raw.get("table_uuid", ""),
            # A configuration from before field ids records no last id: its schema's.
            last_column_id=int(raw.get("last_column_id") or max_id(schema)),
            moved_names=tuple(raw.get("moved_names") or ()),
        )
        _ = cfg.props  # a property this version does not know fails on open
        return cfg

    @classmethod
    def from_timeline(cls, timeline: Timeline) -> TableConfig | None:
        """The configuration of the latest completed schema instant, if any.

        Raises:
            CorruptEventError: that instant holds no configuration this version reads.
        """
        for inst in reversed(timeline.completed()):
            if inst.action is Action.SCHEMA:
                raw = inst.metadata.get("config")
                if not isinstance(raw, Mapping):
                    raise CorruptEventError(f"schema instant {inst.id} holds no table configuration")
                return cls.from_dict(raw)
        return None


def _check_config_shape(raw: object) -> None:
    """Refuse a stored configuration this version cannot read (issue 25, audit C4c: a
    format 99 was read as if it were 1).

    Raises:
        CorruptEventError: see :meth:`TableConfig.from_dict`.
    """
    if not isinstance(raw, Mapping):
        raise CorruptEventError(f"table configuration is a {type(raw).__name__}, not an object")
    fmt = raw.get("format", FORMAT_VERSION)
    if isinstance(fmt, bool) or fmt != FORMAT_VERSION:
        raise CorruptEventError(f"table configuration of format {fmt!r}; this version reads format {FORMAT_VERSION}")
    if not isinstance(raw.get("schema"), str):
        raise CorruptEventError("table configuration without a schema")
    for name in ("record_key", "partition_by"):
        value = raw.get(name) or []
        if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
            raise CorruptEventError(f"table configuration: {name} is not a list of column names: {value!r}")
    if raw.get("ordering_field") is not None and not isinstance(raw.get("ordering_field"), str):
        raise CorruptEventError(f"table configuration: ordering_field {raw.get('ordering_field')!r} is no column name")
    table_type = raw.get("table_type", TableType.COW.value)
    if table_type not in TABLE_TYPES:
        raise CorruptEventError(f"table configuration: table_type {table_type!r} is not one of {TABLE_TYPES}")
    last = raw.get("last_column_id", 0)
    if isinstance(last, bool) or not isinstance(last, int) or last < 0:
        raise CorruptEventError(f"table configuration: last_column_id {last!r} is no field id")
    moved = raw.get("moved_names") or []
    if not isinstance(moved, list) or not all(isinstance(c, str) for c in moved):
        raise CorruptEventError(f"table configuration: moved_names is not a list of column names: {moved!r}")
    if not isinstance(raw.get("properties") or {}, Mapping) or not isinstance(raw.get("table_uuid", ""), str):
        raise CorruptEventError("table configuration: properties is not an object, or table_uuid no text")
