"""Markers (timeline/markers.py): the marker's path is its record, and rollback deletes
only a file whose name carries its instant, whatever a marker says."""

from __future__ import annotations

from pathlib import Path

import pytest
from lakeline.timeline.markers import (
    delete_markers,
    instants_with_markers,
    is_instant_file,
    list_markers,
    marker_path,
    reconcile_markers,
    write_marker,
)
from lakeline.timeline.storage.filesystem import Storage
from lakeline.timeline.view.file_group import FileKind, data_file_name

GROUP = "0" * 31 + "1"


def test_markers_list_what_they_name_per_instant(tmp_path: Path) -> None:
    storage = Storage.for_uri(tmp_path)
    a = "day=1/" + data_file_name(GROUP, 4, FileKind.BASE, "")
    b = data_file_name(GROUP, 4, FileKind.LOG, "")
    write_marker(storage, 4, a)
    write_marker(storage, 4, b)
    write_marker(storage, 9, a)
    assert list_markers(storage, 4) == sorted([a, b])
    assert instants_with_markers(storage) == [4, 9]
    delete_markers(storage, 4)
    assert list_markers(storage, 4) == [] and instants_with_markers(storage) == [9]


def test_an_empty_marker_still_names_its_file(tmp_path: Path) -> None:
    storage = Storage.for_uri(tmp_path)
    rel = "day=1/" + data_file_name(GROUP, 4, FileKind.BASE, "")
    storage.write_bytes(marker_path(storage, 4, rel), b"")  # torn before its content
    assert list_markers(storage, 4) == [rel]


@pytest.mark.parametrize(
    ("rel", "ok"),
    [
        (data_file_name(GROUP, 4, FileKind.BASE, "abcdef012345"), True),
        ("day=1/" + data_file_name(GROUP, 4, FileKind.LOG, ""), True),
        (data_file_name(GROUP, 5, FileKind.BASE, ""), False),
        ("../" + data_file_name(GROUP, 4, FileKind.BASE, ""), False),
        ("/abs/" + data_file_name(GROUP, 4, FileKind.BASE, ""), False),
        ("day=1/./" + data_file_name(GROUP, 4, FileKind.BASE, ""), False),
        ("notes.txt", False),
        (".lakeline/metadata/bloom/delta_4_0abc.parquet", True),
        (".lakeline/metadata/bloom/delta_5_0abc.parquet", False),
        (".lakeline/timeline/delta_4_0abc.parquet", False),
    ],
)
def test_is_instant_file(rel: str, ok: bool) -> None:
    assert is_instant_file(rel, 4) is ok


def test_reconcile_deletes_unkept_files_of_the_instant_only(tmp_path: Path) -> None:
    storage = Storage.for_uri(tmp_path)
    kept, orphan = (data_file_name(GROUP, 4, FileKind.BASE, "") for _ in range(2))
    stray = "user.txt"
    for rel in (kept, orphan, stray):
        storage.write_bytes(storage.path(rel), b"x")
        write_marker(storage, 4, rel)
    assert reconcile_markers(storage, 4, {kept}) == [orphan]
    assert storage.exists(storage.path(kept)) and storage.exists(storage.path(stray))
    assert not storage.exists(storage.path(orphan))
    assert list_markers(storage, 4) == sorted([kept, stray])
