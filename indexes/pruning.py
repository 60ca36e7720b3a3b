"""Data skipping with the indexes: which files may hold a row matching a filter.

Two stages, each only ever keeping a file when in doubt:

* **stats**: a file's column stats become Arrow *guarantees* (what every row of the
  file satisfies); Arrow's own expression simplification then says whether the filter
  can hold. A file without stats, or a column without bounds, is never pruned on them.
* **bloom**: for a filter that pins a bloomed column to ``= v`` or ``IN (...)`` in a
  top-level conjunction, a file whose bloom filter answers "no" for every value is
  dropped (bloom filters have no false negatives).

Arrow offers no public way to take an expression apart, so the bloom stage reads the
pinned values from the expression's text, and accepts a leaf only if an expression
rebuilt from the parsed values prints exactly the same: a filter it cannot read with
certainty is simply not bloom-pruned.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from ..timeline.errors import InvalidIndexError
from ..timeline.storage.filesystem import Storage
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import FileSlice
from .bloom import FileBloom, key_hashes
from .column_stats import guarantees
from .entries import resolve
from .metadata_table import MetadataTable, visible_paths
from .states import readable_indexes

T = TypeVar("T")

_FMT = ds.ParquetFileFormat()
_FS = pafs.LocalFileSystem()


def _mentioned(filter: pc.Expression) -> Callable[[str], bool]:
    text = str(filter)
    return lambda name: name in text


def stats_keep(filter: pc.Expression | None, schema: pa.Schema,
               stats_by_path: Mapping[str, list[dict[str, object]]], paths: Sequence[str]) -> list[bool]:
    """For each path: False only when its stats prove no row can match ``filter``.

    ``stats_by_path`` holds the column-stats rows of each file (absent: keep it).
    """
    if filter is None:
        return [True] * len(paths)
    mentioned = _mentioned(filter)
    frags: list[ds.Fragment] = []
    owners: list[int] = []
    keep = [True] * len(paths)
    for i, p in enumerate(paths):
        rows = stats_by_path.get(p)
        if not rows:
            continue
        keep[i] = False
        for g in guarantees(rows, schema, mentioned):
            frags.append(_FMT.make_fragment(f"{len(frags)}", _FS, partition_expression=g))
            owners.append(i)
    if not frags:
        return keep
    try:
        dset = ds.FileSystemDataset(frags, schema, _FMT, _FS)
        for frag in dset.get_fragments(filter=filter):
            keep[owners[int(frag.path)]] = True
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return [True] * len(paths)  # a filter Arrow cannot simplify: prune nothing
    return keep


# -- bloom stage ------------------------------------------------------------------------

_EQ = re.compile(r'^(?P<col>[A-Za-z_][A-Za-z0-9_]*) == (?P<lit>.+)$', re.DOTALL)
_EQ_REV = re.compile(r'^(?P<lit>.+) == (?P<col>[A-Za-z_][A-Za-z0-9_]*)$', re.DOTALL)
_IN = re.compile(r'^is_in\((?P<col>[A-Za-z_][A-Za-z0-9_]*), \{value_set=(?P<typ>[a-z0-9_\[\], ]+):\[(?P<body>.*)\], '
                 r'null_matching_behavior=(?P<nm>[A-Z]+)\}\)$', re.DOTALL)


def _strip_parens(text: str) -> str:
    while text.startswith("(") and text.endswith(")") and _balanced(text[1:-1]):
        text = text[1:-1]
    return text


def _balanced(text: str) -> bool:
    depth, quoted, esc = 0, False, False
    for ch in text:
        if quoted:
            esc, quoted = (False, quoted) if esc else (ch == "\\", ch != '"')
            continue
        if ch == '"':
            quoted = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                return False
    return depth == 0 and not quoted


def _conjuncts(text: str) -> list[str]:
    """Top-level ``and`` operands of an expression's text."""
    text = _strip_parens(text)
    out, depth, quoted, esc, start, i = [], 0, False, False, 0, 0
    while i < len(text):
        ch = text[i]
        if quoted:
            esc, quoted = (False, True) if esc else (ch == "\\", ch != '"')
        elif ch == '"':
            quoted = True
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0 and text.startswith(" and ", i):
            out.append(text[start:i])
            i += 5
            start = i
            continue
        i += 1
    out.append(text[start:])
    if len(out) == 1:
        return out
    return [c for part in out for c in _conjuncts(part)]


def _literal(text: str, typ: pa.DataType) -> pa.Scalar | None:
    raw = text[1:-1] if len(text) >= 2 and text[0] == text[-1] == '"' else text
    try:
        return pc.cast(pa.scalar(raw, pa.string()), typ)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None


def pinned_values(filter: pc.Expression | None, column: str, schema: pa.Schema) -> list[pa.Scalar] | None:
    """The values a top-level ``=``/``IN`` conjunct pins ``column`` to, or None.

    Several pinning conjuncts intersect; a leaf is only trusted if rebuilding it from
    the parsed values prints exactly the same text.
    """
    if filter is None or column not in schema.names:
        return None
    typ = schema.field(column).type
    result: set[object] | None = None
    scalars: dict[object, pa.Scalar] = {}
    for leaf in _conjuncts(str(filter)):
        leaf = _strip_parens(leaf)
        vals = _leaf_values(leaf, column, typ)
        if vals is None:
            continue
        for v in vals:
            scalars[v.as_py()] = v
        found = {v.as_py() for v in vals}
        result = found if result is None else result & found
    if result is None:
        return None
    out = [scalars[v] for v in result]
    if '"' in str(filter) and not _verified(filter, column, schema, out):
        return None
    return out


def _verified(filter: pc.Expression, column: str, schema: pa.Schema, values: list[pa.Scalar]) -> bool:
    """Whether Arrow agrees the filter is false for values of ``column`` outside ``values``.

    A string literal can hold quotes and ``and`` (Arrow prints it unescaped), which can
    fool the text split; substituting values outside the pinned set and letting Arrow
    fold the filter to false catches such a misreading. Only string and integer columns
    get probes; other types are not bloom-pruned under quoted filters.
    """
    typ = schema.field(column).type
    pinned = {v.as_py() for v in values}
    if pa.types.is_string(typ) or pa.types.is_large_string(typ):
        probes: list[object] = ["", max(pinned, default="") + "\uffff\x01lakeline"]
    elif pa.types.is_integer(typ):
        probes = [min(pinned, default=0) - 1, max(pinned, default=0) + 1]
    else:
        return False
    probes = [p for p in probes if p not in pinned]
    if not probes:
        return False
    try:
        frags = [_FMT.make_fragment(str(i), _FS, partition_expression=pc.field(column) == pa.scalar(p, typ))
                 for i, p in enumerate(probes)]
        return not list(ds.FileSystemDataset(frags, schema, _FMT, _FS).get_fragments(filter=filter))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, OverflowError):
        return False


def _leaf_values(leaf: str, column: str, typ: pa.DataType) -> list[pa.Scalar] | None:
    for rx in (_EQ, _EQ_REV):
        m = rx.match(leaf)
        if m and m.group("col") == column:
            v = _literal(m.group("lit"), typ)
            if v is None or not v.is_valid:
                return None
            # The literal's own type is unknown; accept if a rebuild of either orientation
            # with the column's type prints the same text.
            f = pc.field(column)
            rebuilt = {str(f == v), str(pc.scalar(v) == f)}
            if f"({leaf})" not in rebuilt:
                return None
            return [v]
    m = _IN.match(leaf)
    if m and m.group("col") == column and m.group("nm") in ("MATCH", "SKIP"):
        items = [x.strip().rstrip(",") for x in m.group("body").strip().split("\n") if x.strip()]
        if any(x == "null" for x in items):
            return None  # null matches null rows, which no bloom filter holds
        literals = [_literal(x, typ) for x in items]
        vals = [v for v in literals if v is not None and v.is_valid]
        if len(vals) != len(literals):
            return None
        try:
            set_type = pa.type_for_alias(m.group("typ"))
            arr = pa.array([v.as_py() for v in vals], typ).cast(set_type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError):
            return None
        nm = m.group("nm").lower()
        rebuilt = pc.field(column).isin(arr) if nm == "match" else pc.is_in(
            pc.field(column), value_set=arr, skip_nulls=True)
        if str(rebuilt) != leaf:
            return None
        return vals
    return None


def bloom_keep(filter: pc.Expression | None, schema: pa.Schema, columns: Sequence[str],
               blooms_by_path: Mapping[str, FileBloom], paths: Sequence[str]) -> list[bool]:
    """For each path: False only when the filter pins the bloomed (single) column to
    values the file's bloom filter surely does not hold."""
    keep = [True] * len(paths)
    if filter is None or len(columns) != 1:
        return keep
    values = pinned_values(filter, columns[0], schema)
    if values is None:
        return keep
    probe = key_hashes(pa.table({columns[0]: pa.array([v.as_py() for v in values], schema.field(columns[0]).type)}),
                       columns, schema)
    for i, p in enumerate(paths):
        fb = blooms_by_path.get(p)
        if fb is not None and not fb.might_contain_any(probe):
            keep[i] = False
    return keep


def select(items: Iterable[T], keep: Iterable[bool]) -> list[T]:
    return [x for x, k in zip(items, keep) if k]


# -- pruning a snapshot's file slices with its ready indexes --------------------------

@dataclass(frozen=True)
class Pruned:
    """The slices left after each stage (file counts are for ``explain``)."""

    slices: list[FileSlice]
    files_after_stats: int
    files_after_bloom: int


def _files(slices: Sequence[FileSlice]) -> int:
    return sum(len(s.files) for s in slices)


def _slices_kept(slices: Sequence[FileSlice], file_keep: Mapping[str, bool]) -> list[FileSlice]:
    """Slices with at least one file that may match (or that the stage did not judge)."""
    return [s for s in slices if any(file_keep.get(f.path, True) for f in s.files)]


def prune(storage: Storage, snapshot: Timeline, schema: pa.Schema, record_key: Sequence[str],
          slices: list[FileSlice], filter: pc.Expression | None) -> Pruned:
    """Drop the slices the snapshot's ready indexes prove hold no matching row."""
    if filter is None:
        n = _files(slices)
        return Pruned(slices, n, n)
    ready = readable_indexes(snapshot)
    stats_ix = [d for d in ready if d.kind == "column_stats"]
    bloom_ix = [d for d in ready if d.kind == "bloom_filters"]
    if not stats_ix and not bloom_ix:
        n = _files(slices)
        return Pruned(slices, n, n)
    mt = MetadataTable(storage)
    paths = [f.path for s in slices for f in s.files]
    stats_keep_by_path: dict[str, bool] = {}
    for idx in stats_ix:
        rows = visible_paths(mt.read(idx.partition, snapshot), paths)
        if rows is None or rows.num_rows == 0:
            continue
        by_path: dict[str, list[dict[str, object]]] = {}
        for r in rows.to_pylist():
            by_path.setdefault(str(r["path"]), []).append(r)
        for p, k in zip(paths, stats_keep(filter, schema, by_path, paths)):
            # Several stats indexes: a file is out when any one of them rules it out.
            stats_keep_by_path[p] = stats_keep_by_path.get(p, True) and k
    after_stats = _slices_kept(slices, stats_keep_by_path)
    paths2 = [f.path for s in after_stats for f in s.files]
    bloom_keep_by_path: dict[str, bool] = {}
    for idx in bloom_ix:
        try:
            cols = resolve(idx, schema, record_key).columns
        except InvalidIndexError:
            continue  # its columns left the schema: no pruning with it
        if len(cols) != 1 or pinned_values(filter, cols[0], schema) is None:
            continue  # nothing to probe: skip reading and decoding the filters
        rows = visible_paths(mt.read(idx.partition, snapshot), paths2)
        if rows is None or rows.num_rows == 0:
            continue
        # Entries from another definition of the same name (columns) are not this index's.
        blooms = {str(r["path"]): FileBloom.from_row(r) for r in rows.to_pylist()
                  if r["columns"] == ",".join(cols)}
        for p, k in zip(paths2, bloom_keep(filter, schema, cols, blooms, paths2)):
            bloom_keep_by_path[p] = bloom_keep_by_path.get(p, True) and k
    final = _slices_kept(after_stats, bloom_keep_by_path)
    return Pruned(final, _files(after_stats), _files(final))


def key_blooms(storage: Storage, snapshot: Timeline, schema: pa.Schema,
               record_key: Sequence[str]) -> dict[str, FileBloom]:
    """The bloom filters over exactly the record key, by base-file path, from a
    ``ready`` index of ``snapshot`` (empty when there is none). Tagging probes them
    before it reads a file's keys; files that are not live in the snapshot are never
    asked for."""
    key = ",".join(record_key)
    for idx in readable_indexes(snapshot):
        if idx.kind != "bloom_filters":
            continue
        try:
            if resolve(idx, schema, record_key).columns != tuple(record_key):
                continue
        except InvalidIndexError:
            continue
        rows = MetadataTable(storage).read(idx.partition, snapshot)
        if rows is None or rows.num_rows == 0:
            continue
        return {str(r["path"]): FileBloom.from_row(r) for r in rows.to_pylist() if r["columns"] == key}
    return {}


