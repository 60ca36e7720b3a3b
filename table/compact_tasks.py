"""The engine task of compaction: fold one file slice into a new base file.

A module-level function over a frozen task description, like the write path's group
tasks, so a ``LocalEngine`` thread, a worker process or a Spark executor runs it
unchanged. The slice is read merged by the read path's own :func:`~.scan.read_slice`
(the one merge rule, :mod:`.merge`), so a compacted base holds exactly the rows a
reader of the slice saw; it is written by the writers' :func:`~.files.write_file`
(marker first, stats of the file), under a name that can never repeat.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..timeline.commit_metadata import WriteStat
from ..timeline.file_group import FileSlice, data_file_name
from .files import FileWrite, write_file
from .group_tasks import WriteSettings, rel_path
from .scan import SliceRead, read_slice


@dataclass(frozen=True)
class CompactTask:
    """Compact one slice into a base file of the same group, named for ``settings.instant``."""

    settings: WriteSettings
    slice: FileSlice


def compact_slice(task: CompactTask) -> WriteStat:
    """Write the merged rows of the slice as the group's new base file.

    A slice whose every row was deleted still gets a base, an empty one: retiring the
    group instead would also drop the logs that writers append to it while the
    compaction runs (they join the new slice).
    """
    st, s = task.settings, task.slice
    rows = read_slice(SliceRead(st.storage, s, st.schema, st.key, st.ordering))
    name = data_file_name(s.file_group, st.instant, "base")
    return write_file(
        FileWrite(st.storage, st.instant, rel_path(s.partition, name), s.partition, s.file_group, "base",
                  rows.cast(st.schema), st.key, st.compression, st.row_group_rows, inserts=False)
    )
