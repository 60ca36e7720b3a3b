"""Metadata-table upkeep a writer does right after its commit landed.

Two chores keep reads of the metadata table cheap as a table ages, and both ride on
commits so no service has to be running for them: saving a checkpoint of the
file-system view into the ``files`` index every ``metadata.files.checkpoint-commits``
data commits, and folding the deltas of a ready index into a new base once it holds
more than ``metadata.compact.max-deltas`` of them.

The commit is already durable when this runs, so upkeep never raises: a failure is
logged and the next commit tries again (a missing checkpoint or an unfolded delta costs
time, never correctness). Building indexes are not folded: their builder may still
write catch-up deltas for instants completed before a fold (see
:meth:`MetadataTable.compact`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from ..timeline import faults
from ..timeline.errors import LakelineError
from ..timeline.fs_view import FileSystemView
from ..timeline.storage import Storage
from ..timeline.timeline import Timeline
from .files_index import commits_since_checkpoint, write_checkpoint
from .lifecycle import readable_indexes
from .metadata_table import MetadataTable

log = logging.getLogger(__name__)


def after_commit(storage: Storage, timeline: Timeline, view_of: Callable[[Timeline], FileSystemView],
                 props: Mapping[str, Any]) -> list[str]:
    """Checkpoint the view and fold index deltas where due; returns what was written.

    Args:
        storage: the table's storage.
        timeline: the timeline right after the commit (its view is what is saved).
        view_of: builds (or returns a cached) view of a snapshot.
        props: the table's resolved properties.
    """
    written: list[str] = []
    try:
        faults.point("metadata.upkeep")
        if commits_since_checkpoint(storage, timeline) >= int(props["metadata.files.checkpoint-commits"]):
            written.append(write_checkpoint(storage, view_of(timeline)))
        mt = MetadataTable(storage)
        limit = int(props["metadata.compact.max-deltas"])
        for idx in readable_indexes(timeline):
            if mt.delta_count(idx.partition) > limit and (rel := mt.compact(idx.partition, timeline)) is not None:
                written.append(rel)
    except (OSError, pa.ArrowException, LakelineError) as e:
        log.warning("metadata-table upkeep after event %s failed (the commit stands): %r", timeline.last_seq, e)
    return written
