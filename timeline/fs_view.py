"""The file-system view: which files make up the table at a snapshot.

Derived from the timeline alone, never from listing storage: the completed
data-writing instants are replayed in completion order. A base file starts a new slice
of its file group; a log joins the newest slice whose base instant was requested before
the log's instant completed (so a log that lands while a compaction runs joins the
compaction's slice); a replaced group leaves the view. Files of pending or rolled-back
instants are never visible.

A view is immutable. Replaying a long history on every write would cost O(history)
per commit, so a view can be :meth:`extended` by the instants that completed after it
(the log is append-only: a later snapshot of the same log always extends an earlier
one), and it can start from a saved state (:meth:`from_state`) instead of the first
event: the ``files`` index of the metadata table keeps such checkpoints
(:mod:`lakeline.indexes.files_index`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from .commit_metadata import CommitMetadata
from .file_group import DataFile, FileGroup, FileSlice
from .instant import Instant
from .timeline import Timeline

#: (partition, file group id) -> the group's slices, oldest first.
GroupSlices = Mapping[tuple[str, str], tuple[FileSlice, ...]]


class FileSystemView:
    """Partitions, file groups and slices of one snapshot.

    ``FileSystemView(timeline)`` replays every completed data instant of ``timeline``;
    :meth:`extended` and :meth:`from_state` avoid the full replay.
    """

    def __init__(self, timeline: Timeline) -> None:
        self._init({}, timeline.last_seq, timeline)
        self._replay(timeline.completed())

    # -- construction ------------------------------------------------------------------

    def _init(self, groups: dict[tuple[str, str], tuple[FileSlice, ...]], seq: int, timeline: Timeline) -> None:
        self._slices = groups
        self.timeline = timeline
        self.seq = seq
        self._by_partition: dict[str, list[FileGroup]] | None = None

    @classmethod
    def from_state(cls, groups: GroupSlices, seq: int, timeline: Timeline) -> "FileSystemView":
        """A view from a saved state: ``groups`` are the slices of every live group right
        after event ``seq``; the instants of ``timeline`` completed after ``seq`` are
        replayed on top.

        Raises:
            ValueError: ``timeline`` ends before ``seq`` (it cannot be that snapshot's).
        """
        if timeline.last_seq < seq:
            raise ValueError(f"a view saved at event {seq} cannot serve a timeline ending at {timeline.last_seq}")
        view = cls.__new__(cls)
        view._init({k: tuple(v) for k, v in groups.items() if v}, seq, timeline)
        view._replay(timeline.completed_after(seq))
        view.seq = timeline.last_seq
        return view

    def extended(self, timeline: Timeline) -> "FileSystemView":
        """The view of ``timeline``, a later snapshot of the same log, replaying only the
        instants completed after this view's last event.

        Raises:
            ValueError: ``timeline`` ends before this view (it is not a later snapshot).
        """
        if timeline.last_seq == self.seq:
            return self
        return FileSystemView.from_state(self._slices, self.seq, timeline)

    def _replay(self, instants: Iterable[Instant]) -> None:
        groups = self._slices
        for inst in instants:
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
                key = (st.partition, st.file_group)
                slices = groups.get(key, ())
                if st.kind == "base":
                    groups[key] = _add_base(slices, st.file_group, st.partition, df)
                else:
                    groups[key] = _add_log(slices, st.file_group, st.partition, df)
            for part, fgs in md.replaced.items():
                for fg in fgs:
                    groups.pop((part, fg), None)
        self._by_partition = None

    # -- state -------------------------------------------------------------------------

    def state(self) -> dict[tuple[str, str], tuple[FileSlice, ...]]:
        """The slices of every live group (what :meth:`from_state` takes back)."""
        return dict(self._slices)

    # -- queries -----------------------------------------------------------------------

    def _partitions(self) -> dict[str, list[FileGroup]]:
        if self._by_partition is None:
            by_part: dict[str, list[FileGroup]] = {}
            for (p, fg), slices in self._slices.items():
                by_part.setdefault(p, []).append(FileGroup(fg, p, slices))
            self._by_partition = by_part
        return self._by_partition

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        """Live file groups (of one partition, or all)."""
        parts = self._partitions()
        if partition is not None:
            return list(parts.get(partition, ()))
        return [g for gs in parts.values() for g in gs]

    def group(self, partition: str, file_group: str) -> FileGroup | None:
        slices = self._slices.get((partition, file_group))
        return FileGroup(file_group, partition, slices) if slices else None

    def partitions(self) -> list[str]:
        return sorted(self._partitions())

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


def _add_base(slices: tuple[FileSlice, ...], fg: str, partition: str, df: DataFile) -> tuple[FileSlice, ...]:
    # Logs already placed on older slices that completed after this base's instant was
    # requested belong to the new slice.
    moved: list[DataFile] = []
    kept: list[FileSlice] = []
    for s in slices:
        # Only slices with such logs change; copying every slice made each rewrite of
        # a copy-on-write group cost O(versions), and a view build O(versions^2).
        if any(f.completed_seq > df.instant for f in s.logs):
            moved.extend(f for f in s.logs if f.completed_seq > df.instant)
            s = replace(s, logs=tuple(f for f in s.logs if f.completed_seq <= df.instant))
            if s.base is None and not s.logs:
                continue  # a pending compaction's slice whose logs all moved: nothing left
        kept.append(s)
    new = FileSlice(fg, partition, df.instant, df, tuple(sorted(moved, key=lambda f: f.completed_seq)))
    if not kept or kept[-1].base_instant < df.instant:
        return tuple(kept) + (new,)
    return tuple(sorted(kept + [new], key=lambda s: s.base_instant))


def _add_log(slices: tuple[FileSlice, ...], fg: str, partition: str, df: DataFile) -> tuple[FileSlice, ...]:
    for i in range(len(slices) - 1, -1, -1):
        if slices[i].base_instant < df.completed_seq:
            s = slices[i]
            return slices[:i] + (replace(s, logs=s.logs + (df,)),) + slices[i + 1:]
    # No slice yet (its base is written by a compaction still pending): start one.
    return slices + (FileSlice(fg, partition, -1, None, (df,)),)
