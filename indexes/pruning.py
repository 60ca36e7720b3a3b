"""Data skipping with the indexes: which files may hold a row matching a filter.

The filter is read once per scan as lakeline's own expression tree
(:func:`~.expressions.from_arrow`, through Substrait; never from its printed text), and
two stages, each only ever keeping a file when in doubt, ask it questions:

* **stats**: a file's column stats become :class:`~.expressions.ColumnBounds`, and the
  file is dropped when :func:`~.expressions.might_match` proves no row can match. A
  second prover runs on the files the tree keeps: the stats as Arrow *guarantees* (what
  every row of the file satisfies) and Arrow's own expression simplification, which
  also sees through parts of a filter the tree reads as ``Unknown``. A file is dropped
  when either proves it holds no match; a file without stats, or a column without
  bounds, is never pruned on them.
* **bloom**: for a filter that pins a bloomed column to a set of values
  (:func:`~.expressions.pinned_values`: ``= v``, ``IN (...)``, through ``and``/``or``),
  a file whose bloom filter answers "no" for every value is dropped (bloom filters have
  no false negatives).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from ..timeline.errors import InvalidIndexError
from ..timeline.storage.filesystem import Storage
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import FileSlice
from .bloom import FileBloom, describing, key_hashes
from .column_stats import by_present_names, decode_bound, guarantees
from .entries import resolve
from .expressions import And, ColumnBounds, Expr, Not, Or, Unknown, columns, from_arrow, might_match
from .expressions import pinned_values as expression_pins
from .expressions.values import comparable
from .metadata_table import MetadataTable, visible_paths
from .states import IndexKind, readable_indexes

T = TypeVar("T")

_FMT = ds.ParquetFileFormat()
_FS = pafs.LocalFileSystem()


def filter_tree(filter: pc.Expression | Expr | None, schema: pa.Schema) -> Expr | None:
    """The tree of a filter (read once per scan; a tree is returned as it is)."""
    if filter is None or isinstance(filter, Expr):
        return filter
    return from_arrow(filter, schema)


def has_unknown(tree: Expr) -> bool:
    """Whether a part of ``tree`` was not understood (it may name any column)."""
    if isinstance(tree, And | Or):
        return any(has_unknown(c) for c in tree.children)
    if isinstance(tree, Not):
        return has_unknown(tree.child)
    return isinstance(tree, Unknown)


def file_bounds(rows: Iterable[Mapping[str, Any]], schema: pa.Schema) -> dict[str, ColumnBounds]:
    """A file's column-stats rows as bounds per column (a bound that does not decode to
    the column's current type is unknown)."""
    out: dict[str, ColumnBounds] = {}
    for row in rows:
        name = str(row["column"])
        if name not in schema.names:
            continue
        typ = schema.field(name).type
        try:
            lo, hi = decode_bound(row["min"], typ), decode_bound(row["max"], typ)
            bounds = (lo.as_py(), hi.as_py()) if lo is not None and hi is not None else (None, None)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, ValueError, OverflowError):
            bounds = (None, None)  # the column's type changed since (or a corrupt bound)
        out[name] = ColumnBounds(bounds[0], bounds[1], int(row["null_count"]), int(row["value_count"]))
    return out


def stats_keep(
    filter: pc.Expression | None,
    schema: pa.Schema,
    stats_by_path: Mapping[str, list[dict[str, object]]],
    paths: Sequence[str],
    tree: Expr | None = None,
) -> list[bool]:
    """For each path: False only when its stats prove no row can match ``filter``
    (``tree``: its tree, when the caller already read it).

    ``stats_by_path`` holds the column-stats rows of each file (absent: keep it).
    """
    tree = filter_tree(filter, schema) if tree is None else tree
    if filter is None or tree is None:
        return [True] * len(paths)
    keep = [True] * len(paths)
    for i, p in enumerate(paths):
        rows = stats_by_path.get(p)
        if rows and not might_match(tree, file_bounds(rows, schema)):
            keep[i] = False
    # The second prover, on the files the tree keeps: Arrow's simplification under the
    # stats as guarantees. Only columns the filter may name are split on nulls.
    named = None if has_unknown(tree) else columns(tree)
    mentioned: Callable[[str], bool] = (lambda name: True) if named is None else named.__contains__
    frags: list[ds.Fragment] = []
    owners: list[int] = []
    for i, p in enumerate(paths):
        rows = stats_by_path.get(p)
        if not rows or not keep[i]:
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
        for i in set(owners):  # a filter Arrow cannot simplify: the tree's answer stands
            keep[i] = True
    return keep


# -- bloom stage ------------------------------------------------------------------------


def pinned_values(filter: pc.Expression | Expr | None, column: str, schema: pa.Schema) -> list[pa.Scalar] | None:
    """The values of ``column`` (of its type) every row matching ``filter`` holds one
    of, or None: not pinned, or a pinned value the column's type does not hold exactly
    (it could not be probed as the rows were hashed)."""
    tree = filter_tree(filter, schema)
    if tree is None or column not in schema.names:
        return None
    values = expression_pins(tree, column)
    if values is None:
        return None
    typ = schema.field(column).type
    out: list[pa.Scalar] = []
    for v in values:
        try:
            s = pa.scalar(v, typ)
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None
        back = s.as_py()
        if not comparable(v, back) or back != v:
            return None
        out.append(s)
    return out


def bloom_keep(
    filter: pc.Expression | Expr | None,
    schema: pa.Schema,
    columns: Sequence[str],
    blooms_by_path: Mapping[str, FileBloom],
    paths: Sequence[str],
) -> list[bool]:
    """For each path: False only when the filter (or its tree) pins the bloomed
    (single) column to values the file's bloom filter surely does not hold."""
    keep = [True] * len(paths)
    if filter is None or len(columns) != 1:
        return keep
    values = pinned_values(filter, columns[0], schema)
    if values is None:
        return keep
    if not values:  # no row can match at all
        return [p not in blooms_by_path for p in paths]
    probe = key_hashes(
        pa.table({columns[0]: pa.array([v.as_py() for v in values], schema.field(columns[0]).type)}), columns, schema
    )
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


def prune(
    storage: Storage,
    snapshot: Timeline,
    schema: pa.Schema,
    record_key: Sequence[str],
    slices: list[FileSlice],
    filter: pc.Expression | None,
    tree: Expr | None = None,
    untrusted: frozenset[str] = frozenset(),
) -> Pruned:
    """Drop the slices the snapshot's ready indexes prove hold no matching row
    (``tree``: the filter's tree, when the scan already read it). Column statistics are
    asked by field id where they recorded one (:func:`.column_stats.by_present_names`),
    and so are bloom filters (:func:`.bloom.describing`); entries without one, of the
    columns ``untrusted``, are not: a rename, drop or widening moved their names, so
    what files recorded under such a name may describe another column (issue 29)."""
    if filter is None:
        n = _files(slices)
        return Pruned(slices, n, n)
    ready = readable_indexes(snapshot)
    stats_ix = [d for d in ready if d.kind == IndexKind.COLUMN_STATS]
    bloom_ix = [d for d in ready if d.kind == IndexKind.BLOOM_FILTERS]
    if not stats_ix and not bloom_ix:
        n = _files(slices)
        return Pruned(slices, n, n)
    tree = filter_tree(filter, schema) if tree is None else tree
    mt = MetadataTable(storage)
    paths = [f.path for s in slices for f in s.files]
    stats_keep_by_path: dict[str, bool] = {}
    for idx in stats_ix:
        rows = visible_paths(mt.read(idx.partition, snapshot), paths)
        if rows is None or rows.num_rows == 0:
            continue
        by_path: dict[str, list[dict[str, object]]] = {}
        for r in by_present_names(rows.to_pylist(), schema, untrusted):
            by_path.setdefault(str(r["path"]), []).append(r)
        for p, k in zip(paths, stats_keep(filter, schema, by_path, paths, tree)):
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
        if len(cols) != 1 or pinned_values(tree, cols[0], schema) is None:
            continue  # nothing to probe: skip reading and decoding the filters
        rows = visible_paths(mt.read(idx.partition, snapshot), paths2)
        if rows is None or rows.num_rows == 0:
            continue
        # Only entries over these columns as they are now (by field id) are asked.
        describes = describing(cols, schema, untrusted)
        blooms = {str(r["path"]): FileBloom.from_row(r) for r in rows.to_pylist() if describes(r)}
        for p, k in zip(paths2, bloom_keep(tree, schema, cols, blooms, paths2)):
            bloom_keep_by_path[p] = bloom_keep_by_path.get(p, True) and k
    final = _slices_kept(after_stats, bloom_keep_by_path)
    return Pruned(final, _files(after_stats), _files(final))


def key_blooms(
    storage: Storage, snapshot: Timeline, schema: pa.Schema, record_key: Sequence[str]
) -> dict[str, FileBloom]:
    """The bloom filters over exactly the record key, by base-file path, from a
    ``ready`` index of ``snapshot`` (empty when there is none). Tagging probes them
    before it reads a file's keys; files that are not live in the snapshot are never
    asked for."""
    for idx in readable_indexes(snapshot):
        if idx.kind != IndexKind.BLOOM_FILTERS:
            continue
        try:
            if resolve(idx, schema, record_key).columns != tuple(record_key):
                continue
        except InvalidIndexError:
            continue
        rows = MetadataTable(storage).read(idx.partition, snapshot)
        if rows is None or rows.num_rows == 0:
            continue
        describes = describing(record_key, schema, frozenset())
        return {str(r["path"]): FileBloom.from_row(r) for r in rows.to_pylist() if describes(r)}
    return {}
