"""Files a clean finds on storage rather than in the timeline: data files in the table's
own tree, metadata-table files of indexes the timeline dropped, and the age and liveness
checks that keep a clean away from what a running writer may still name.

Why apart from :mod:`.cleaning`: the retention policy decides from the timeline alone
which file versions are old; these functions look at storage, whose listing may hold
files no instant named (a writer killed before its commit, a late index write), and
each is careful in its own way to leave a file alone when in doubt.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from ..indexes.metadata_table import MetadataTable
from ..indexes.states import FILES, index_states, partition_of
from ..timeline.instant import Action
from ..timeline.plans import index_plan
from ..timeline.storage.ownership import walk_files
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import parse_data_file_name

if TYPE_CHECKING:
    from ..table.table import Table


def data_files_on_storage(table: Table) -> dict[str, pafs.FileInfo]:
    """Data files lakeline named in the table's own tree, by relative path: ``.lakeline/``,
    symbolic links and nested tables' folders are left out (:func:`walk_files`)."""
    storage = table.storage
    out = {}
    for info in walk_files(storage):
        rel = storage.relative(info.path)
        if parse_data_file_name(rel) is not None:
            out[rel] = info
    return out


def is_young(info: pafs.FileInfo, now_ns: int, age_ms: int) -> bool:
    mtime = info.mtime_ns
    return mtime is None or now_ns - mtime < age_ms * 1_000_000


def dropped_index_files(table: Table, timeline: Timeline, now_ns: int, age_ms: int) -> list[str]:
    """Metadata-table files of indexes no longer on the timeline (a dropped index whose
    partition a late writer wrote to, or a drop that died before removing it)."""
    mt = MetadataTable(table.storage)
    live = {d.partition for d in index_states(timeline).values()} | {FILES}
    named = {
        partition_of(p.index, i.id)
        for i in timeline.by_action(Action.INDEXING)
        if (p := index_plan(i.plan)) is not None
    }
    out = []
    for name in mt.indexes_on_storage():
        # Only partitions the timeline once knew: a folder of an index whose create is
        # newer than this timeline is not a leftover.
        if name in live or name not in named:
            continue
        for info in table.storage.list_files(table.storage.path(mt.rel_dir(name)), recursive=True):
            if not is_young(info, now_ns, age_ms):
                out.append(table.storage.relative(info.path))
    return sorted(out)


def index_of(rel: str) -> str:
    """The index whose metadata-table partition holds ``rel`` (``.lakeline/metadata/<index>/...``)."""
    parts = rel.split("/")
    return parts[2] if len(parts) > 3 else ""


def instant_alive(timeline: Timeline, path: str) -> bool:
    """Whether the instant that named ``path`` is pending or unknown to ``timeline`` (a
    writer that started after it was read): its files are never touched."""
    parsed = parse_data_file_name(path)
    if parsed is None:
        return True
    inst = timeline.find(parsed.instant)
    return inst is None or inst.is_pending
