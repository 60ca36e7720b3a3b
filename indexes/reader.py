"""Index pruning for a scan: the stats stage, then the bloom stage, over file slices.

Only ``ready`` indexes of the scan's own snapshot are used, and only their entries for
the exact base files of that snapshot. Slices with log files are never pruned (their
logs may hold any value), nor are base files without an entry (written by an instant
that did not index them). See :mod:`.pruning` for why each stage is sound.
"""

from __future__ import annotations

from collections.abc import Sequence
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
    cands = [s for s in slices if s.base is not None and not s.logs]
    paths = [s.base.path for s in cands]  # type: ignore[union-attr]
    dropped: set[int] = set()
    for idx in stats_ix:
        rows = visible_paths(mt.read(idx.name, snapshot), paths)
        if rows is None or rows.num_rows == 0:
            continue
        by_path: dict[str, list[dict[str, object]]] = {}
        for r in rows.to_pylist():
            by_path.setdefault(str(r["path"]), []).append(r)
        for i, k in enumerate(stats_keep(filter, schema, by_path, paths)):
            if not k:
                dropped.add(i)
    stats_gone = {id(s) for i, s in enumerate(cands) if i in dropped}
    n_stats = _files([s for s in slices if id(s) not in stats_gone])
    cands2 = [s for i, s in enumerate(cands) if i not in dropped]
    paths2 = [s.base.path for s in cands2]  # type: ignore[union-attr]
    bloom_dropped: set[int] = set()
    for idx in bloom_ix:
        try:
            cols = resolve(idx, schema, record_key).columns
        except InvalidIndexError:
            continue  # its columns left the schema: no pruning with it
        if len(cols) != 1 or pinned_values(filter, cols[0], schema) is None:
            continue  # nothing to probe: skip reading and decoding the filters
        rows = visible_paths(mt.read(idx.name, snapshot), paths2)
        if rows is None or rows.num_rows == 0:
            continue
        # Entries from another definition of the same name (columns) are not this index's.
        blooms = {str(r["path"]): FileBloom.from_row(r) for r in rows.to_pylist()
                  if r["columns"] == ",".join(cols)}
        for i, k in enumerate(bloom_keep(filter, schema, cols, blooms, paths2)):
            if not k:
                bloom_dropped.add(i)
    gone = stats_gone | {id(s) for i, s in enumerate(cands2) if i in bloom_dropped}
    final = [s for s in slices if id(s) not in gone]
    return Pruned(final, n_stats, _files(final))


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
        rows = MetadataTable(storage).read(idx.name, snapshot)
        if rows is None or rows.num_rows == 0:
            continue
        return {str(r["path"]): FileBloom.from_row(r) for r in rows.to_pylist() if r["columns"] == key}
    return {}


__all__ = ["Pruned", "key_blooms", "prune", "select"]
