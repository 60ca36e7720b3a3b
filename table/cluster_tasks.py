"""The engine task of clustering: rewrite a set of file slices as new, sorted file groups.

A module-level function over a frozen task description, like compaction's
(:mod:`.compact_tasks`), so a ``LocalEngine`` thread, a worker process or a Spark
executor runs it unchanged. The input slices are read merged by the read path's own
:func:`~.scan.read_slice` (merge-on-read logs folded in by the one merge rule), so the
output holds exactly the rows a reader of the slices saw. The rows are sorted by the
sort columns (:mod:`.zorder`: ``linear`` or ``zorder``), cut into files of about the
target size, and each file is written by the writers' :func:`~.files.write_file`
(marker first) as the first base of a *new* file group: the clustering instant then
retires the input groups, so nothing it writes can ever be mistaken for a version of
an input group.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from ..timeline.commit_metadata import WriteStat
from ..timeline.file_group import FileSlice, data_file_name, new_file_group_id
from .files import FileWrite, write_file
from .group_tasks import WriteSettings, rel_path
from .scan import SliceRead, read_slice
from .zorder import sort_rows


@dataclass(frozen=True)
class ClusterTask:
    """Rewrite ``slices`` (all of one partition) as new file groups named for
    ``settings.instant``, sorted by ``sort_by`` under ``strategy``, cut at
    ``target_bytes`` on disk."""

    settings: WriteSettings
    partition: str
    slices: tuple[FileSlice, ...]
    sort_by: tuple[str, ...]
    strategy: str
    target_bytes: int


def _rows_per_file(task: ClusterTask, rows: int) -> int:
    """Rows in one output file, so that files come out between 0.75 and 1.5 times the
    target: never small (a small output would be clustered again and again), and
    spread evenly instead of leaving a stub at the end.

    The size of a row is the inputs' on-disk bytes per row: they were written with the
    same codec and schema (a sorted output compresses a little better, and merged logs
    make it a little smaller, so files come out a little under, never far over).
    """
    if rows == 0:
        return 1
    on_disk = sum(s.bytes for s in task.slices)
    per_file = max(1.0, task.target_bytes / max(on_disk / rows, 1e-9))
    files = max(1, round(rows / per_file))
    return -(-rows // files)


def cluster_slices(task: ClusterTask) -> list[WriteStat]:
    """Write the merged, sorted rows of the slices as new file groups; [] when no row
    is left (every row of the inputs was deleted: the groups are retired all the same)."""
    st = task.settings
    read = [read_slice(SliceRead(st.storage, s, st.schema, st.key, st.ordering)) for s in task.slices]
    rows = pa.concat_tables([t.cast(st.schema) for t in read]) if read else st.schema.empty_table()
    rows = sort_rows(rows, task.sort_by, task.strategy)
    out: list[WriteStat] = []
    step = _rows_per_file(task, rows.num_rows)
    for start in range(0, rows.num_rows, step):
        fg = new_file_group_id()
        name = data_file_name(fg, st.instant, "base")
        out.append(write_file(FileWrite(st.storage, st.instant, rel_path(task.partition, name), task.partition, fg,
                                        "base", rows.slice(start, step).combine_chunks(), st.key, st.compression,
                                        st.row_group_rows, inserts=False)))
    return out
