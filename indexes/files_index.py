"""The ``files`` index: the file-system view, checkpointed into the metadata table.

The view of a snapshot is a replay of the commit metadata of every completed data
instant. Replaying the whole timeline on every open costs O(history) and stops working
once archival moves old events out of the active timeline, so the metadata table keeps
the view itself: ``.lakeline/metadata/files/base_<seq>_<token>.parquet`` holds every file
of every slice of every live file group right after event ``seq``. The view of any
snapshot at or after ``seq`` is that checkpoint plus a replay of the instants completed
after it, which is what :func:`load_view` builds.

The index's per-instant updates are the commit metadata itself, carried by the data
instant's ``completed`` event: they are visible exactly when the instant is completed,
are never seen for a pending or rolled-back one, and cannot disagree with the commit
(an update in a separate file could be lost between the two). A checkpoint is only a
cache of their replay, written by the committing writer every
``metadata.files.checkpoint-commits`` data commits; losing one costs time, never
correctness, and :func:`validate_checkpoint` compares one with a full replay.

The files index is always on: it is created with the table and cannot be dropped.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from ..timeline.errors import CorruptFileError, MetadataTableError
from ..timeline.storage.filesystem import Storage
from ..timeline.timeline import Timeline
from ..timeline.view.file_group import DataFile, FileKind, FileSlice
from ..timeline.view.fs_view import FileSystemView
from .metadata_table import MetadataTable
from .states import FILES

#: Checkpoints kept besides the newest, so time travel to a recent snapshot still starts
#: from one (older snapshots replay from the first event).
KEEP_CHECKPOINTS = 3
#: A cached view this many data commits behind a snapshot or more looks for a newer
#: checkpoint; a closer one is extended from memory (:func:`load_view`).
REPLAY_WITHOUT_LISTING = 64

#: One row per file of a slice; a slice whose base is pending (a compaction) has rows for
#: its logs only. ``slot`` orders the slices of a group; key bounds are JSON text because
#: commit metadata records them as JSON values of the key's type. ``deletes`` (a log's
#: delete records) came later: a checkpoint without it reads as 0, "not known", which
#: only makes a read of a delete-only log read it whole.
FILES_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.string(), nullable=False),
        pa.field("file_group", pa.string(), nullable=False),
        pa.field("slot", pa.int32(), nullable=False),
        pa.field("base_instant", pa.int64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("instant", pa.int64(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("completed_seq", pa.int64(), nullable=False),
        pa.field("key_min", pa.string()),
        pa.field("key_max", pa.string()),
        pa.field("inserts", pa.bool_(), nullable=False),
        pa.field("deletes", pa.int64(), nullable=False),
    ]
)
_OPTIONAL = {"deletes"}


def view_rows(view: FileSystemView) -> pa.Table:
    """Every file of every slice of ``view``, as rows of :data:`FILES_SCHEMA`."""
    cols: dict[str, list[Any]] = {f.name: [] for f in FILES_SCHEMA}
    for (partition, fg), slices in view.state().items():
        for slot, s in enumerate(slices):
            for f in s.files:
                cols["partition"].append(partition)
                cols["file_group"].append(fg)
                cols["slot"].append(slot)
                cols["base_instant"].append(s.base_instant)
                cols["kind"].append(str(f.kind))
                cols["path"].append(f.path)
                cols["instant"].append(f.instant)
                cols["rows"].append(f.rows)
                cols["bytes"].append(f.bytes)
                cols["completed_seq"].append(f.completed_seq)
                cols["key_min"].append(None if f.key_min is None else json.dumps(f.key_min))
                cols["key_max"].append(None if f.key_max is None else json.dumps(f.key_max))
                cols["inserts"].append(f.inserts)
                cols["deletes"].append(f.deletes)
    return pa.table(cols, schema=FILES_SCHEMA)


def state_from_rows(rows: pa.Table) -> dict[tuple[str, str], tuple[FileSlice, ...]]:
    """The slices of every group, rebuilt from :func:`view_rows` output.

    Raises:
        MetadataTableError: the rows are not a files checkpoint.
    """
    missing = [f.name for f in FILES_SCHEMA if f.name not in rows.column_names]
    if set(missing) - _OPTIONAL:
        raise MetadataTableError(f"files checkpoint lacks columns {missing}")
    for name in missing:
        rows = rows.append_column(name, pa.array([0] * rows.num_rows, FILES_SCHEMA.field(name).type))
    rows = rows.sort_by(
        [("partition", "ascending"), ("file_group", "ascending"), ("slot", "ascending"), ("completed_seq", "ascending")]
    )
    c = {name: rows.column(name).to_pylist() for name in FILES_SCHEMA.names}
    slices: dict[tuple[str, str], dict[int, list[Any]]] = {}
    for i in range(rows.num_rows):
        df = DataFile(
            c["path"][i],
            _kind(c["kind"][i]),
            c["instant"][i],
            c["rows"][i],
            c["bytes"][i],
            c["completed_seq"][i],
            _bound(c["key_min"][i]),
            _bound(c["key_max"][i]),
            c["inserts"][i],
            c["deletes"][i],
        )
        group = slices.setdefault((c["partition"][i], c["file_group"][i]), {})
        slot = group.setdefault(c["slot"][i], [c["base_instant"][i], None, []])
        if df.kind == FileKind.BASE:
            slot[1] = df
        else:
            slot[2].append(df)
    return {
        (part, fg): tuple(
            FileSlice(fg, part, base_instant, base, tuple(logs))
            for _, (base_instant, base, logs) in sorted(group.items())
        )
        for (part, fg), group in slices.items()
    }


def _kind(text: str) -> FileKind:
    try:
        return FileKind(text)
    except ValueError:
        raise MetadataTableError(
            f"files checkpoint: file kind {text!r:.60} is not one of {', '.join(FileKind)}"
        ) from None


def _bound(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def _checkpoints(storage: Storage) -> list[tuple[int, str]]:
    return MetadataTable(storage).bases(FILES)


def load_view(storage: Storage, snapshot: Timeline, cached: Sequence[FileSystemView] = ()) -> FileSystemView:
    """The file-system view of ``snapshot``, as cheaply as it can be had.

    From the newest of ``cached`` (views of earlier snapshots of the same log) or the
    newest checkpoint at or before the snapshot, whichever is later, plus a replay of
    what completed after it; a full replay only when neither exists. A checkpoint that
    vanished (a newer one replaced it) or cannot be read is passed over. A cached view
    fewer than :data:`REPLAY_WITHOUT_LISTING` data commits behind is extended without
    looking for checkpoints: replaying those commits from memory is cheaper than the
    listing (a round trip on an object store) and the read a newer checkpoint would cost.
    """
    target = snapshot.last_seq
    best = max((v for v in cached if v.seq <= target), key=lambda v: v.seq, default=None)
    if best is not None and best.seq == target:
        return best
    if best is not None and _data_commits_after(snapshot, best.seq) < REPLAY_WITHOUT_LISTING:
        return best.extended(snapshot)
    start = best.seq if best is not None else -1
    checkpoints = _checkpoints(storage)
    newest = checkpoints[-1][0] if checkpoints else -1
    for seq, path in reversed(checkpoints):
        if seq > target:
            continue
        if seq <= start:
            break
        try:
            state = state_from_rows(MetadataTable(storage).read_file(path))
        except (FileNotFoundError, OSError, pa.ArrowException, MetadataTableError, CorruptFileError):
            continue  # damaged (its seal, :mod:`.integrity`) or gone: an older one, or a replay
        view = FileSystemView.from_state(state, seq, snapshot)
        view.known_checkpoint = newest
        return view
    view = best.extended(snapshot) if best is not None else FileSystemView(snapshot)
    view.known_checkpoint = max(view.known_checkpoint, newest)
    return view


def _data_commits_after(timeline: Timeline, seq: int) -> int:
    return sum(1 for i in timeline.completed_after(seq) if i.action.writes_data)


def commits_since_checkpoint(storage: Storage, timeline: Timeline) -> int:
    """Data instants completed after the newest checkpoint (all of them without one)."""
    bases = _checkpoints(storage)
    return _data_commits_after(timeline, bases[-1][0] if bases else -1)


def checkpoint_due(storage: Storage, timeline: Timeline, every: int, known: int = -1) -> bool:
    """Whether ``every`` data commits completed since the newest checkpoint. Counted first
    from ``known`` (a checkpoint known to exist, :attr:`FileSystemView.known_checkpoint`):
    checkpoints only get newer, so that count is never too small, and the folder is
    listed (a round trip on an object store) only when it says due."""
    if _data_commits_after(timeline, known) < every:
        return False
    return commits_since_checkpoint(storage, timeline) >= every


def write_checkpoint(storage: Storage, view: FileSystemView) -> str:
    """Save ``view`` as a checkpoint and drop all but the newest few; returns its path."""
    mt = MetadataTable(storage)
    rel = mt.write_base(FILES, view.seq, view_rows(view))
    for _, path in mt.bases(FILES)[:-KEEP_CHECKPOINTS]:
        storage.delete(path)
    return rel


def validate_checkpoint(storage: Storage, timeline: Timeline) -> dict[str, Any]:
    """Compare the newest checkpoint at or before ``timeline`` with a full replay of the
    timeline up to the checkpoint's event.

    Returns ``{"checkpoint_seq": seq or None, "mismatches": [...]}``; a mismatch names a
    file group whose slices differ, or a checkpoint that is damaged (its ``path``; readers
    pass over it, so it costs time, not rows).
    """
    target = timeline.last_seq
    damaged = []
    for seq, path in reversed(_checkpoints(storage)):
        if seq > target:
            continue
        try:
            saved = state_from_rows(MetadataTable(storage).read_file(path))
        except FileNotFoundError:
            continue  # replaced by a newer one meanwhile
        except (CorruptFileError, MetadataTableError) as e:
            # Readers pass over it (a replay costs time, not rows): reported, not raised.
            damaged.append({"index": FILES, "path": storage.relative(path), "problem": "damaged", "error": str(e)})
            continue
        for older_seq, older in _checkpoints(storage):
            if older_seq < seq:  # the older ones a reader falls back to
                try:
                    MetadataTable(storage).read_file(older)
                except (CorruptFileError, MetadataTableError) as e:
                    rel = storage.relative(older)
                    damaged.append({"index": FILES, "path": rel, "problem": "damaged", "error": str(e)})
                except FileNotFoundError:
                    continue
        replayed = FileSystemView(timeline.as_of_seq(seq)).state()
        bad = [
            {"index": FILES, "partition": p, "file_group": fg, "problem": "differs"}
            for (p, fg) in sorted(set(saved) | set(replayed))
            if saved.get((p, fg)) != replayed.get((p, fg))
        ]
        return {"checkpoint_seq": seq, "mismatches": damaged + bad}
    return {"checkpoint_seq": None, "mismatches": damaged}
