"""Field ids: every column of a table, nested fields included, carries a number that
never changes and is never reused, so a file written before a rename or a drop reads
right (issue 29).

The id is stored where Parquet keeps it: Arrow field metadata ``PARQUET:field_id``,
which pyarrow writes into the Parquet schema's ``field_id`` and reads back the same way
(DuckDB, Spark and Iceberg readers see it too). The table's schema, as the latest
``schema`` instant records it, carries the ids on its fields, with the last id handed
out beside it (``last_column_id``), so a column added after a drop gets a fresh one.

Files written before ids existed carry none: they are matched by name, under the name
each column had when the table first got ids (:data:`NAME_WITHOUT_IDS`; a column added
since has none to match, ``""``), so a table older than ids keeps reading unchanged and
can still take renames and drops.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: The Arrow field metadata key pyarrow maps to Parquet's ``field_id``.
FIELD_ID_KEY = b"PARQUET:field_id"
#: The name a column has in the files a table wrote before it had ids (present only on
#: tables that got ids after files were written; ``""``: no such file holds it).
NAME_WITHOUT_IDS = b"lakeline.name_without_ids"


def field_id(f: pa.Field) -> int | None:
    """The field's id, or None when it has none (a file or schema older than ids)."""
    md = f.metadata
    if not md:
        return None
    raw = md.get(FIELD_ID_KEY)
    return None if raw is None else int(raw)


def name_without_ids(f: pa.Field) -> str:
    """The name to look for in a file without ids: the legacy name, else its own."""
    md = f.metadata or {}
    raw = md.get(NAME_WITHOUT_IDS)
    return f.name if raw is None else raw.decode()


def has_ids(schema: pa.Schema) -> bool:
    """Whether a schema's top-level fields carry ids (a table's or a file's)."""
    return any(field_id(f) is not None for f in schema)


def ids_by_position(schema: pa.Schema) -> dict[int, int]:
    """Top-level field id -> the field's position (fields without an id left out)."""
    out = {}
    for i, f in enumerate(schema):
        fid = field_id(f)
        if fid is not None:
            out[fid] = i
    return out


def _with_id(f: pa.Field, fid: int) -> pa.Field:
    return f.with_metadata({**(f.metadata or {}), FIELD_ID_KEY: str(fid).encode()})


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [t.value_field]
    return []


def _rebuilt(t: pa.DataType, children: list[pa.Field]) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct(children)
    if pa.types.is_map(t):
        return pa.map_(children[0], children[1], keys_sorted=t.keys_sorted)
    if pa.types.is_large_list(t):
        return pa.large_list(children[0])
    if pa.types.is_fixed_size_list(t):
        return pa.list_(children[0], t.list_size)
    if pa.types.is_list(t):
        return pa.list_(children[0])
    return t


class _Counter:
    def __init__(self, last: int) -> None:
        self.last = last

    def __call__(self) -> int:
        self.last += 1
        return self.last


def _assign(f: pa.Field, fresh: _Counter, keep: bool) -> pa.Field:
    """``f`` with an id on itself and on every nested field that lacks one (all of them
    anew unless ``keep``); a field's own id comes before its children's (Iceberg's order)."""
    own = field_id(f) if keep else None
    out = _with_id(f, own if own is not None else fresh())
    kids = _children(f.type)
    if kids:
        out = out.with_type(_rebuilt(f.type, [_assign(k, fresh, keep) for k in kids]))
    return out


def assign_ids(fields: list[pa.Field], last: int, keep: bool = True) -> tuple[list[pa.Field], int]:
    """``fields`` with ids on every field at every depth: fresh ones after ``last`` where
    a field has none (or everywhere, ``keep=False``: a schema from elsewhere, such as a
    Parquet file's, may carry ids that mean nothing to this table). Returns the fields
    and the last id handed out."""
    fresh = _Counter(last)
    return [_assign(f, fresh, keep) for f in fields], fresh.last


def max_id(schema: pa.Schema) -> int:
    """The largest id anywhere in ``schema`` (0 without any)."""
    return max((fid for f in walk(list(schema)) if (fid := field_id(f)) is not None), default=0)


def walk(fields: list[pa.Field]) -> Iterator[pa.Field]:
    """Every field, nested ones after their parent."""
    for f in fields:
        yield f
        yield from walk(_children(f.type))


def strip_ids(t: pa.DataType) -> pa.DataType:
    """``t`` with no field metadata at any depth (a nested type compared as Arrow types,
    or shown to a user)."""
    kids = _children(t)
    if not kids:
        return t
    return _rebuilt(t, [k.remove_metadata().with_type(strip_ids(k.type)) for k in kids])


def without_ids_marked(f: pa.Field, name: str) -> pa.Field:
    """``f`` marked with the name files without ids hold it under (``""``: none)."""
    return f.with_metadata({**(f.metadata or {}), NAME_WITHOUT_IDS: name.encode()})


def reads_by_name(file_schema: pa.Schema, schema: pa.Schema) -> bool:
    """Whether a plain by-name read of a file (a Parquet dataset over many files) gives
    ``schema``'s columns right: every column the file has under a table column's name
    is that column (same id, same type), and a table column the file lacks by name is
    not in it under another name (then it reads null by name, as it should)."""
    file_ids = {field_id(f) for f in file_schema} - {None}
    for f in schema:
        fid = field_id(f)
        at = file_schema.get_field_index(f.name)
        if not file_ids and fid is not None and name_without_ids(f) != f.name:
            if name_without_ids(f) or at >= 0:
                return False  # renamed since this file from before ids, or another column of that name
        if at < 0:
            if fid is not None and fid in file_ids:
                return False  # renamed since the file was written
            continue
        theirs = file_schema.field(at)
        if not reads_as(theirs, f) or (field_id(theirs) is not None and field_id(theirs) != fid):
            return False
        if field_id(theirs) is None and fid is not None and name_without_ids(f) != f.name:
            return False  # a file from before ids, of a column renamed since
    return True


def source_of(kids: list[pa.Field], want: pa.Field) -> int:
    """The position among a file's struct fields ``kids`` of the one that holds the
    table's field ``want`` (-1: none). By id when the file's fields have ids and ``want``
    has one, else by name (:func:`name_without_ids`: a struct of a file from before ids,
    whose field was renamed since, is found under its old name; ``""``: in no such file)."""
    fid = field_id(want)
    if fid is not None and any(field_id(k) is not None for k in kids):
        return next((i for i, k in enumerate(kids) if field_id(k) == fid), -1)
    name = name_without_ids(want)
    return next((i for i, k in enumerate(kids) if name and k.name == name), -1)


def reads_as(src: pa.Field, dst: pa.Field) -> bool:
    """Whether a file's column ``src`` holds the table's column ``dst`` as it is: the
    same type, and inside structs, at every depth, each field the one of the same id (a
    struct field renamed since has another name, so another type; one dropped and added
    again under its name has the same type, but another id)."""
    if src.type != dst.type:
        return False
    if not pa.types.is_struct(dst.type):
        return all(reads_as(s, d) for s, d in zip(_children(src.type), _children(dst.type)))
    kids = _children(src.type)
    return all(source_of(kids, d) == i and reads_as(kids[i], d) for i, d in enumerate(_children(dst.type)))


def conform(arr: pa.Array | pa.ChunkedArray, src: pa.Field, dst: pa.Field) -> pa.Array | pa.ChunkedArray:
    """A file's column ``arr`` (of the file's field ``src``) as the table's column ``dst``.

    Struct fields are matched by id at every depth (a field renamed since reads under
    its new name, a dropped one is left out, one the file lacks is null), which Arrow's
    struct cast cannot do: it matches by name. Anything else is cast (a widening)."""
    if reads_as(src, dst):
        return arr
    if not (pa.types.is_struct(src.type) and pa.types.is_struct(dst.type)):
        return arr.cast(dst.type)
    if isinstance(arr, pa.ChunkedArray):
        return pa.chunked_array([conform(c, src, dst) for c in arr.chunks], type=dst.type)
    assert isinstance(arr, pa.StructArray)
    kids, want = _children(src.type), _children(dst.type)
    cols = []
    for d in want:
        at = source_of(kids, d)
        cols.append(typed_nulls(len(arr), d.type) if at < 0 else conform(arr.field(at), kids[at], d))
    mask = arr.is_null() if arr.null_count else None
    return pa.StructArray.from_arrays(cols, fields=want, mask=mask)


def typed_nulls(n: int, t: pa.DataType) -> pa.Array:
    """``n`` nulls of type ``t`` that every cast to ``t`` accepts. Arrow refuses a null
    in a field declared non-nullable even under a null parent (``pa.nulls`` puts one
    there: a struct's children are null too), so where ``t`` declares such a field the
    slots under the null hold the value Arrow's own conversion of ``None`` puts there
    (0, "", an empty list); Parquet stores nothing under a null parent either way."""
    if not _holds_non_nullable(t):
        return pa.nulls(n, t)
    return pa.array([None], t).take(pa.array(np.zeros(n, dtype=np.int64)))


def _holds_non_nullable(t: pa.DataType) -> bool:
    return any(not f.nullable for f in walk(_children(t)))


def with_valid_nulls(rows: pa.Table, schema: pa.Schema) -> pa.Table:
    """``rows`` (with ``schema``'s columns, as a dataset read them) where each struct
    column of ``schema`` holds a value in every non-nullable field under a null parent,
    as :func:`typed_nulls` builds them: a dataset reading a file that lacks a column
    (added since) fills it with Arrow's nulls, null at every depth, which a cast to the
    table's types refuses."""
    for f in schema:
        if pa.types.is_struct(f.type) and _holds_non_nullable(f.type) and rows.column(f.name).null_count:
            at = rows.schema.get_field_index(f.name)
            rows = rows.set_column(at, rows.schema.field(at), valid_nulls(rows.column(at), f.type))
    return rows


def valid_nulls(col: pa.ChunkedArray, t: pa.DataType) -> pa.ChunkedArray:
    """``col`` (of a struct type ``t``; anything else is returned as it is) with a value
    in every field ``t`` declares non-nullable under a null parent, through structs at
    any depth. Spark hands such nulls over: ``F.when(c, F.struct(lit(1)))`` declares its
    field non-nullable and sends a null in it under each null struct."""
    if not (pa.types.is_struct(t) and _holds_non_nullable(t)):
        return col
    return pa.chunked_array([_filled(c, t, None, True) for c in col.chunks], type=col.type)


def _filled(arr: pa.Array, t: pa.DataType, above: pa.Array | None, nullable: bool) -> pa.Array:
    """``arr`` (a struct array of type ``t``) with a value in each slot under a null
    (``above``: where a parent is null, or None) that ``t`` declares non-nullable. Only
    those slots: a null a non-nullable field holds under a valid parent is kept, for the
    check that refuses it (:func:`lakeline.table.write.records.nulls_where_required`)."""
    own = arr.is_null()
    under = own if above is None else pc.or_(own, above)
    mask = own if above is None or nullable else pc.and_(own, pc.invert(above))
    fields = _children(t)
    kids = []
    for i, f in enumerate(fields):
        kid = arr.field(i)
        if pa.types.is_struct(f.type):
            kid = _filled(kid, f.type, under, f.nullable)
        elif not f.nullable and kid.null_count:
            kid = pc.if_else(under, typed_nulls(1, pa.struct([f])).field(0)[0], kid)
        kids.append(kid)
    return pa.StructArray.from_arrays(kids, fields=fields, mask=mask if mask.true_count else None)
