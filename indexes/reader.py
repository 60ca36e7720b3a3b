"""Index pruning for a scan: the stats stage, then the bloom stage, over file slices.

Only ``ready`` indexes of the scan's own snapshot are used, and only their entries for
the exact files of that snapshot. A slice is dropped when the entries of every one of
its files (base and logs: its live rows are a subset of the base rows and the logs'
upsert records) prove no row can match; a file without an entry (written by an
instant that did not index it) keeps its slice. See :mod:`.pruning` for why each stage
is sound.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from ..timeline.errors import InvalidIndexError
from ..timeline.file_group import FileSlice
from ..timeline.storage import Storage
from ..timeline.timeline import Timeline
from .bloom import FileBloom
from .lifecycle import readable_indexes
from .maintain import resolve
from .metadata_table import MetadataTable, visible_paths
from .pruning import bloom_keep, pinned_values, select, stats_keep


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


__all__ = ["Pruned", "key_blooms", "prune", "select"]
