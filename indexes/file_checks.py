"""Which files of an index are damaged or missing: what a lookup refuses, what ``validate`` lists.

Every index file is checked against the seal recorded where it is referenced
(:mod:`.integrity`) as it is read; this module checks a partition's files all at once,
so ``t.indexes.validate()`` and ``lakeline index validate`` name each damaged or missing
file (a problem ``damaged`` or ``missing`` with its ``path``) before comparing entries,
which a damaged file would only stop at the first. And a record-index delta that is
simply gone leaves nothing to check a seal of: :func:`check_deltas_present` notices the
data instant whose delta is missing.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Collection
from typing import Any

from ..timeline.errors import CorruptFileError, LakelineError
from ..timeline.storage.filesystem import Storage
from ..timeline.timeline import Timeline
from .integrity import seal_of_name, verify
from .metadata_table import MetadataTable
from .record_index.store import (
    MAPPED_SUFFIX,
    mapped_entries,
    newest_generation,
    partition_dir,
    read_entries,
    visible_deltas,
)

_DELTA_NAME = re.compile(r"^delta_(?P<instant>\d+)_")


def check_deltas_present(
    storage: Storage, partition: str, snapshot: Timeline, after_seq: int, deltas: Collection[str]
) -> None:
    """Refuse a record index missing the delta of a data instant completed in
    ``snapshot`` after event ``after_seq`` (its generation's), ``deltas`` being the ones
    found (:func:`.record_index.store.visible_deltas`): every such instant wrote one before
    it completed (even for no entries, :func:`.on_commit.write_commit_updates`; the
    indexer's catch-up for those before the index was ready), so one missing was deleted
    outside lakeline, and the keys it named would be taken for new ones.

    Raises:
        CorruptFileError: naming the instant and the partition.
    """
    have = {int(m.group("instant")) for p in deltas if (m := _DELTA_NAME.match(posixpath.basename(p)))}
    for inst in snapshot.completed_after(after_seq):
        if inst.action.writes_data and inst.id not in have:
            raise CorruptFileError(
                f"record index delta of instant {inst.id} is missing from {partition_dir(partition)} "
                "(deleted outside lakeline?): the index cannot say which keys it wrote"
            )


def _problem(name: str, storage: Storage, path: str, error: LakelineError | FileNotFoundError) -> dict[str, Any]:
    gone = isinstance(error, FileNotFoundError) or "is missing" in str(error)
    rel = storage.relative(path) if path.startswith(storage.base) else path
    return {"index": name, "path": rel, "problem": "missing" if gone else "damaged", "error": str(error)}


def metadata_problems(storage: Storage, name: str, partition: str) -> list[dict[str, Any]]:
    """The damaged files of a metadata-table partition (bloom filters, column stats),
    each read whole: its seal and every page's checksum."""
    mt = MetadataTable(storage)
    out = []
    bases, deltas = mt.bases(partition), mt.deltas(partition)
    for path in [p for _, p in bases] + [p for ps in deltas.values() for p in ps]:
        try:
            verify(storage, path, seal_of_name(path), again=True)
            mt.read_file(path)
        except FileNotFoundError:
            continue  # compacted away meanwhile
        except LakelineError as e:
            out.append(_problem(name, storage, path, e))
    return out


def record_index_problems(storage: Storage, name: str, partition: str, snapshot: Timeline) -> list[dict[str, Any]]:
    """The damaged or missing files of a record index as ``snapshot`` reads it: its
    manifest, each bucket file it names, each delta after it, and the deltas of data
    instants that are gone."""
    try:
        gen = newest_generation(storage, partition)
    except LakelineError as e:
        return [{"index": name, "path": partition_dir(partition), "problem": "damaged", "error": str(e)}]
    out = []
    deltas = visible_deltas(storage, partition, snapshot, gen.seq if gen is not None else -1)
    files = [(storage.path(p), gen.seals.get(p)) for p, _ in gen.files.values()] if gen is not None else []
    for path, seal in files + [(p, seal_of_name(p)) for p in deltas]:
        try:
            verify(storage, path, seal, again=True)
            if path.endswith(MAPPED_SUFFIX):
                mapped_entries(storage, path, seal)
            else:
                read_entries(storage, path, seal=seal)  # every page's checksum
        except (LakelineError, FileNotFoundError) as e:
            out.append(_problem(name, storage, path, e))
    if gen is not None:
        try:
            check_deltas_present(storage, partition, snapshot, gen.seq, deltas)
        except CorruptFileError as e:
            out.append({"index": name, "path": partition_dir(partition), "problem": "missing", "error": str(e)})
    return out
