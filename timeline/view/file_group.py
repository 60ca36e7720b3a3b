"""File groups, file slices and the names of data files.

A *file group* (id unique in its partition) is a line of versions of the same set of
keys. A *file slice* is one base file plus the log files written on top of it; a
copy-on-write rewrite or a compaction starts a new slice in the same group. Names can
never repeat: they carry the group id, the instant id and a random write token, so a
retried or concurrent write can never overwrite a file another instant owns.
"""

from __future__ import annotations

import ast
import enum
import re
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa

BASE_SUFFIX = ".parquet"
LOG_SUFFIX = ".log.parquet"
#: The folder value of a null partition value (Hive and Spark write the same). No string
#: value encodes to it: :func:`partition_path` writes the string "__HIVE_DEFAULT_PARTITION__"
#: as :data:`LITERAL_NULL_NAME`, so a null and that string are two folders.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
#: The folder value of the string "__HIVE_DEFAULT_PARTITION__": its first character
#: percent-encoded, which :func:`urllib.parse.unquote` (and Hive readers) decode back.
LITERAL_NULL_NAME = "%5F" + NULL_PARTITION[1:]
#: Longest folder name (one path component, in UTF-8 bytes) most file systems allow: a
#: partition folder is refused before writing when longer (``ENAMETOOLONG`` otherwise).
MAX_FOLDER_BYTES = 255

#: ``<file group>_<instant>_<token>[_<table tag>].parquet`` (``.log.parquet`` for logs). The
#: table tag (the first hex digits of the table's uuid) says which table wrote the file:
#: cleaning and purge delete an unreferenced file only when it carries their own tag
#: (docs/safety.md). Names without one are from before the tag; they are never orphans.
_NAME = re.compile(
    r"^(?P<fg>[0-9a-f]{32})_(?P<instant>\d+)_(?P<token>[0-9a-f]{8})(?:_(?P<table>[0-9a-f]{12}))?"
    r"(?P<suffix>\.log\.parquet|\.parquet)$"
)
#: Hex digits of the table uuid a data file name carries.
TABLE_TAG_LENGTH = 12


class FileKind(enum.StrEnum):
    """What a data file of a slice is: its base file, or a log file written on top of
    it (merge-on-read). The value is what commit metadata and the files index store."""

    BASE = "base"
    LOG = "log"


def new_file_group_id() -> str:
    return uuid.uuid4().hex


def table_tag(table_uuid: str) -> str:
    """The tag data file names of the table ``table_uuid`` carry ("" for a table without one)."""
    return table_uuid[:TABLE_TAG_LENGTH] if len(table_uuid) >= TABLE_TAG_LENGTH else ""


def data_file_name(file_group: str, instant: int, kind: FileKind, tag: str) -> str:
    """A fresh, never-repeating name for a base (:attr:`FileKind.BASE`) or log file of the table
    whose :func:`table_tag` is ``tag``."""
    token = uuid.uuid4().hex[:8]
    owner = f"_{tag}" if tag else ""
    return f"{file_group}_{instant}_{token}{owner}{LOG_SUFFIX if kind == FileKind.LOG else BASE_SUFFIX}"


@dataclass(frozen=True)
class ParsedName:
    file_group: str
    instant: int
    token: str
    kind: FileKind
    table_tag: str = ""  # "" for a name written before names carried the table's tag


def parse_data_file_name(name: str) -> ParsedName | None:
    """The parts of a data file name, or None for a name lakeline did not write."""
    m = _NAME.match(name.rsplit("/", 1)[-1])
    if m is None:
        return None
    kind = FileKind.LOG if m.group("suffix") == LOG_SUFFIX else FileKind.BASE
    return ParsedName(m.group("fg"), int(m.group("instant")), m.group("token"), kind, m.group("table") or "")


def partition_value_name(value: object) -> str:
    """The folder text of one partition value: percent-quoted (no ``/``, ``.``-only or
    ``=`` can escape or split the folder), :data:`NULL_PARTITION` for a null, and never
    :data:`NULL_PARTITION` for a value: quoting is one-to-one, and the one string it
    leaves as that name gets its first character quoted."""
    if value is None:
        return NULL_PARTITION
    text = quote(str(value), safe="")
    return LITERAL_NULL_NAME if text == NULL_PARTITION else text


def partition_path(columns: tuple[str, ...], values: tuple[object, ...]) -> str:
    """Hive-style relative folder (``day=2026-01-01/region=eu``); "" when unpartitioned.
    Distinct value tuples (of one type) give distinct paths: a null is
    ``__HIVE_DEFAULT_PARTITION__``, the string "__HIVE_DEFAULT_PARTITION__" is
    ``%5F_HIVE_DEFAULT_PARTITION__`` (docs/format.md)."""
    return "/".join(f"{quote(col, safe='')}={partition_value_name(val)}" for col, val in zip(columns, values))


def partition_values(path: str) -> dict[str, str | None]:
    """The raw (string) values of a Hive-style partition folder: the inverse of
    :func:`partition_path` (None for the null folder, the string for any other)."""
    out: dict[str, str | None] = {}
    if not path:
        return out
    for part in path.split("/"):
        col, _, val = part.partition("=")
        out[unquote(col)] = None if val == NULL_PARTITION else unquote(val)
    return out


def partition_scalar(raw: str, typ: pa.DataType) -> pa.Scalar | None:
    """The value a folder's decoded text stands for. Binary values were written as
    Python's ``repr`` of the bytes (``b'...'``, one-to-one), read back as a literal
    (no code runs); a folder that does not parse promises nothing (None), so it is
    never pruned rather than pruned wrongly."""
    if pa.types.is_binary(typ) or pa.types.is_large_binary(typ) or pa.types.is_fixed_size_binary(typ):
        try:
            data = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
        return pa.scalar(data, typ) if isinstance(data, bytes) else None
    return pa.array([raw]).cast(typ)[0]


@dataclass(frozen=True)
class DataFile:
    """One file of a slice, as the commit that wrote it described it."""

    path: str  # relative to the table's base path
    kind: FileKind
    instant: int  # the instant that wrote it
    rows: int
    bytes: int
    completed_seq: int  # sequence number of the writing instant's completion
    key_min: object = None
    key_max: object = None
    inserts: bool = False  # holds keys that were new to the table when written
    # Log files: how many rows are delete records (all of them: a delete-only log). A
    # hint, 0 when not known (files index checkpoints from before it), so not part of
    # what makes two views of a file equal.
    deletes: int = field(default=0, compare=False)


@dataclass(frozen=True)
class FileSlice:
    """A base file and the logs on top of it (``base`` is None while a compaction that
    starts the slice is pending)."""

    file_group: str
    partition: str
    base_instant: int
    base: DataFile | None = None
    logs: tuple[DataFile, ...] = ()

    @property
    def files(self) -> tuple[DataFile, ...]:
        return ((self.base,) if self.base else ()) + self.logs

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.files)

    def key_bounds(self) -> tuple[object, object] | None:
        """(lowest, highest) record key any file of the slice holds (base and logs: a log
        may revive a key outside the range of a base that a compaction rewrote without
        it), or None when unknown: a file without a range, float keys (NaN fits no
        range), or bounds of types that do not compare (after a schema change)."""
        lows: list[Any] = []  # keys of any orderable type; a mix that does not order is caught below
        highs: list[Any] = []
        for f in self.files:
            if f.key_min is None or f.key_max is None or isinstance(f.key_min, float) or isinstance(f.key_max, float):
                return None
            lows.append(f.key_min)
            highs.append(f.key_max)
        try:
            return (min(lows), max(highs)) if lows else None
        except TypeError:
            return None


@dataclass(frozen=True)
class FileGroup:
    """A file group and its slices, oldest first."""

    id: str
    partition: str
    slices: tuple[FileSlice, ...] = field(default_factory=tuple)

    @property
    def latest(self) -> FileSlice:
        return self.slices[-1]
