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

from ..commit_metadata import CommitMetadata
from ..instant import Instant
from ..timeline import Timeline
from .file_group import DataFile, FileGroup, FileKind, FileSlice

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

    def _init(self, parts: dict[str, dict[str, tuple[FileSlice, ...]]], seq: int, timeline: Timeline) -> None:
        # partition -> file group -> slices. Extending a view copies the outer dict and
        # only the partitions a replayed commit touches, so a commit costs O(its files),
        # not O(table).
        self._parts = parts
        self.timeline = timeline
        self.seq = seq
        self._latest: dict[str, list[FileSlice]] = {}
        #: The newest saved state (files-index checkpoint) known to exist when the view
        #: was loaded, by its event (-1: none was); one found later only moves it up.
        self.known_checkpoint = -1

    @classmethod
    def from_state(cls, groups: GroupSlices, seq: int, timeline: Timeline) -> FileSystemView:
        """A view from a saved state: ``groups`` are the slices of every live group right
        after event ``seq``; the instants of ``timeline`` completed after ``seq`` are
        replayed on top.

        Raises:
            ValueError: ``timeline`` ends before ``seq`` (it cannot be that snapshot's).
        """
        parts: dict[str, dict[str, tuple[FileSlice, ...]]] = {}
        for (p, fg), slices in groups.items():
            if slices:
                parts.setdefault(p, {})[fg] = tuple(slices)
        return cls._continued(parts, seq, timeline)

    @classmethod
    def _continued(
        cls, parts: dict[str, dict[str, tuple[FileSlice, ...]]], seq: int, timeline: Timeline
    ) -> FileSystemView:
        if timeline.last_seq < seq:
            raise ValueError(f"a view saved at event {seq} cannot serve a timeline ending at {timeline.last_seq}")
        view = cls.__new__(cls)
        view._init(parts, timeline.last_seq, timeline)
        view._replay(timeline.completed_after(seq))
        return view

    def extended(self, timeline: Timeline) -> FileSystemView:
        """The view of ``timeline``, a later snapshot of the same log, replaying only the
        instants completed after this view's last event.

        Raises:
            ValueError: ``timeline`` ends before this view (it is not a later snapshot).
        """
        if timeline.last_seq == self.seq:
            return self
        view = FileSystemView._continued(dict(self._parts), self.seq, timeline)
        view.known_checkpoint = self.known_checkpoint
        return view

    def _replay(self, instants: Iterable[Instant]) -> None:
        parts = self._parts
        copied: set[str] = set()

        def groups_of(partition: str) -> dict[str, tuple[FileSlice, ...]]:
            # Copy-on-write: the inner dicts may be shared with the view this one extends.
            if partition not in copied:
                parts[partition] = dict(parts.get(partition, {}))
                copied.add(partition)
            return parts[partition]

        for inst in instants:
            if not inst.action.writes_data:
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
                    deletes=st.deletes,
                )
                groups = groups_of(st.partition)
                slices = groups.get(st.file_group, ())
                if st.kind == FileKind.BASE:
                    groups[st.file_group] = _add_base(slices, st.file_group, st.partition, df)
                else:
                    groups[st.file_group] = _add_log(slices, st.file_group, st.partition, df)
            for part, fgs in md.replaced.items():
                groups = groups_of(part)
                for fg in fgs:
                    groups.pop(fg, None)
        for p in copied:
            if not parts[p]:
                del parts[p]

    # -- state -------------------------------------------------------------------------

    def state(self) -> dict[tuple[str, str], tuple[FileSlice, ...]]:
        """The slices of every live group (what :meth:`from_state` takes back)."""
        return {(p, fg): slices for p, groups in self._parts.items() for fg, slices in groups.items()}

    # -- queries -----------------------------------------------------------------------

    def file_groups(self, partition: str | None = None) -> list[FileGroup]:
        """Live file groups (of one partition, or all)."""
        names = self._parts if partition is None else [partition]
        return [FileGroup(fg, p, slices) for p in names for fg, slices in self._parts.get(p, {}).items()]

    def group(self, partition: str, file_group: str) -> FileGroup | None:
        slices = self._parts.get(partition, {}).get(file_group)
        return FileGroup(file_group, partition, slices) if slices else None

    def partitions(self) -> list[str]:
        return sorted(self._parts)

    def latest_slices(self, partition: str | None = None) -> list[FileSlice]:
        """The slice readers read for each live group: the newest with a base file,
        with the logs of any later base-less slice merged on top."""
        if partition is None:
            return [s for p in self._parts for s in self.latest_slices(p)]
        cached = self._latest.get(partition)
        if cached is None:
            cached = [_latest(slices) for slices in self._parts.get(partition, {}).values()]
            self._latest[partition] = cached
        return list(cached)

    def files(self) -> list[DataFile]:
        """Every file of every latest slice."""
        return [f for s in self.latest_slices() for f in s.files]


def _latest(slices: tuple[FileSlice, ...]) -> FileSlice:
    # A slice without a base belongs to a pending compaction: its logs are read on top
    # of the slice before it.
    last = slices[-1]
    i = len(slices) - 1
    while i > 0 and slices[i].base is None:
        i -= 1
        last = replace(slices[i], logs=slices[i].logs + last.logs)
    return last


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
            return slices[:i] + (replace(s, logs=s.logs + (df,)),) + slices[i + 1 :]
    # No slice yet (its base is written by a compaction still pending): start one.
    return slices + (FileSlice(fg, partition, -1, None, (df,)),)
