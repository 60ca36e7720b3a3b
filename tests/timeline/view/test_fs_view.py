"""The file-system view replayed from a timeline (timeline/view/fs_view.py): slices per
group, logs on top of their base, replaced groups gone, and an extended view equal to a
fresh one."""

from __future__ import annotations

from typing import Any

from lakeline.timeline.commit_metadata import CommitMetadata, WriteStat
from lakeline.timeline.instant import Action, Event, State
from lakeline.timeline.timeline import Timeline
from lakeline.timeline.view.file_group import FileKind
from lakeline.timeline.view.fs_view import FileSystemView

A, B = "a" * 32, "b" * 32


def _commit(events: list[Event], files: list[WriteStat], replaced: dict[str, Any] | None = None) -> None:
    i = len(events)
    md = CommitMetadata("upsert", i - 1, tuple(files), replaced=replaced or {})
    events.append(Event(i, i, i, Action.DELTA_COMMIT, State.REQUESTED, {}))
    events.append(Event(i + 1, i + 1, i, Action.DELTA_COMMIT, State.COMPLETED, md.to_dict()))


def _stat(path: str, group: str, kind: FileKind, part: str = "p=1") -> WriteStat:
    return WriteStat(f"{part}/{path}", part, group, kind, rows=1, bytes=10)


def test_slices_logs_and_replaced_groups() -> None:
    events: list[Event] = []
    _commit(events, [_stat("a0", A, FileKind.BASE), _stat("b0", B, FileKind.BASE, "p=2")])
    _commit(events, [_stat("a1", A, FileKind.LOG)])
    view = FileSystemView(Timeline(events))
    assert view.partitions() == ["p=1", "p=2"]
    (slice_a,) = view.latest_slices("p=1")
    assert slice_a.base is not None and slice_a.base.path == "p=1/a0"
    assert [f.path for f in slice_a.logs] == ["p=1/a1"]
    _commit(events, [_stat("a2", A, FileKind.BASE)], replaced={"p=2": [B]})
    view = FileSystemView(Timeline(events))
    assert view.partitions() == ["p=1"] and view.group("p=2", B) is None
    group = view.group("p=1", A)
    assert group is not None and len(group.slices) == 2
    assert [f.path for f in view.files()] == ["p=1/a2"]


def test_extended_view_equals_a_fresh_one() -> None:
    events: list[Event] = []
    _commit(events, [_stat("a0", A, FileKind.BASE)])
    first = FileSystemView(Timeline(events))
    _commit(events, [_stat("a1", A, FileKind.LOG), _stat("b0", B, FileKind.BASE)])
    timeline = Timeline(events)
    assert first.extended(timeline).state() == FileSystemView(timeline).state()
    assert [f.path for f in first.files()] == ["p=1/a0"]  # the old view is unchanged
