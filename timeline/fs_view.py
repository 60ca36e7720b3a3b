"""The file-system view: which files make up the table at a snapshot.

Derived from the timeline alone, never from listing storage: the completed
data-writing instants are replayed in completion order. A base file starts a new slice
of its file group; a log joins the newest slice whose base instant was requested
before the log's instant completed (so a log that lands while a compaction runs joins
the compaction's slice); a replaced group leaves the view. Files of pending or
rolled-back instants are never visible.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .commit_metadata import CommitMetadata
from .file_group import DataFile, FileGroup, FileSlice
from .timeline import Timeline


@dataclass
class _Group:
    partition: str
    slices: list[FileSlice] = field(default_factory=list)


class FileSystemView:
    """Partitions, file groups and slices of one snapshot."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.seq = timeline.last_seq
        groups: dict[tuple[str, str], _Group] = {}
        for inst in timeline.completed():
            if not inst.action_kind.writes_data:
                continue
            md = CommitMetadata.from_dict(inst.metadata)
            done = inst.completed_seq or 0
            for st in md.files:
                df = DataFile(
                    path=st.path,
                    kind=st.kind,
                    instant=inst.id,
                    rows=st.rows,
                    bytes=st.bytes,
                    completed_seq=done,
                    key_min=st.key_min,
                    key_max=st.key_max,
                    inserts=st.inserts,
                )
                g = groups.setdefault((st.partition, st.file_group), _Group(st.partition))
                if st.kind == "base":
                    _add_base(g, st.file_group, df)
                else:
                    _add_log(g, st.file_group, df)
            for part, fgs in md.replaced.items():
                for fg in fgs:
                    groups.pop((part, fg), None)
        self._groups = {
            key: FileGroup(key[1], g.partition, tuple(g.slices)) for key, g in groups.items() if g.slices
        }

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        """Live file groups (of one partition, or all)."""
        return [g for (p, _), g in self._groups.items() if partition is None or p == partition]

    def group(self, partition: str, file_group: str) -> FileGroup | None:
        return self._groups.get((partition, file_group))

    def partitions(self) -> list[str]:
        return sorted({p for p, _ in self._groups})

    def latest_slices(self, partition: str | None = None) -> list[FileSlice]:
        """The slice readers read for each live group: the newest with a base file,
        with the logs of any later base-less slice merged on top."""
        out = []
        for g in self.file_groups(partition):
            slices = list(g.slices)
            # A slice without a base belongs to a pending compaction: its logs are read
            # on top of the slice before it.
            while len(slices) > 1 and slices[-1].base is None:
                tail = slices.pop()
                slices[-1] = replace(slices[-1], logs=slices[-1].logs + tail.logs)
            out.append(slices[-1])
        return out

    def files(self) -> list[DataFile]:
        """Every file of every latest slice."""
        return [f for s in self.latest_slices() for f in s.files]


def _add_base(g: _Group, fg: str, df: DataFile) -> None:
    # Logs already placed on older slices that completed after this base's instant was
    # requested belong to the new slice.
    moved: list[DataFile] = []
    kept_slices: list[FileSlice] = []
    for s in g.slices:
        # Only slices with such logs change; copying every slice made each rewrite of
        # a copy-on-write group cost O(versions), and a view build O(versions^2).
        if any(f.completed_seq > df.instant for f in s.logs):
            moved.extend(f for f in s.logs if f.completed_seq > df.instant)
            s = replace(s, logs=tuple(f for f in s.logs if f.completed_seq <= df.instant))
        kept_slices.append(s)
    new = FileSlice(fg, g.partition, df.instant, df, tuple(sorted(moved, key=lambda f: f.completed_seq)))
    g.slices = sorted(kept_slices + [new], key=lambda s: s.base_instant)


def _add_log(g: _Group, fg: str, df: DataFile) -> None:
    for i in range(len(g.slices) - 1, -1, -1):
        if g.slices[i].base_instant < df.completed_seq:
            g.slices[i] = replace(g.slices[i], logs=g.slices[i].logs + (df,))
            return
    # No slice yet (its base is written by a compaction still pending): start one.
    g.slices.append(FileSlice(fg, g.partition, -1, None, (df,)))
