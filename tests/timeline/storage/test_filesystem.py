"""The table's storage (timeline/storage/filesystem.py): paths resolve under the base,
and deletion refuses anything outside the table or reached through a symbolic link."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from lakeline.timeline.errors import UnsafeLocationError
from lakeline.timeline.storage.filesystem import Storage, _scan_local


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    (tmp_path / "t").mkdir()
    return Storage.for_uri(tmp_path / "t")


def test_empty_location_is_refused() -> None:
    with pytest.raises(UnsafeLocationError):
        Storage.for_uri("  ")


def test_paths_round_trip_and_missing(storage: Storage) -> None:
    p = storage.path("day=1", "f.parquet")
    assert storage.relative(p) == "day=1/f.parquet" and storage.is_local and storage.uri == storage.base
    assert storage.missing([p]) == [p]
    storage.write_bytes(p, b"abc")
    assert storage.read_bytes(p) == b"abc" and storage.missing([p]) == []
    assert [i.path for i in storage.list_files(storage.path("day=1"))] == [p]


def test_delete_refuses_a_path_outside_the_table(storage: Storage, tmp_path: Path) -> None:
    outside = tmp_path / "sibling.txt"
    outside.write_bytes(b"keep")
    for path in (str(outside), storage.path("..", "sibling.txt"), storage.base):
        assert not storage.contains(path)
        assert storage.delete(path) is False
    storage.delete_dir(str(tmp_path))
    assert outside.read_bytes() == b"keep"


def test_delete_refuses_a_path_through_a_symbolic_link(storage: Storage, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.mkdir()
    (target / "f").write_bytes(b"keep")
    os.symlink(target, storage.path("link"))
    assert storage.delete(storage.path("link", "f")) is False
    storage.delete_dir(storage.path("link"))  # the link goes, never what it points at
    assert not os.path.lexists(storage.path("link")) and (target / "f").read_bytes() == b"keep"


def test_delete_inside_is_idempotent(storage: Storage) -> None:
    p = storage.path("a", "f")
    storage.write_bytes(p, b"x")
    assert storage.delete(p) is True and storage.delete(p) is False
    storage.delete_dir(storage.path("a"))
    assert not storage.exists(storage.path("a"))


@pytest.mark.parametrize("recursive", [False, True])
def test_the_fallback_listing_equals_pyarrow_s(storage: Storage, recursive: bool) -> None:
    """The listing taken after pyarrow's race (os.scandir) reports the same entries, types
    and sizes as pyarrow's own, and an absent folder as empty."""
    for rel, body in (("a/f1", b"x"), ("a/b/f2", b"yy"), ("a/b/c/f3", b""), ("a/g", b"zzz")):
        storage.write_bytes(storage.path(*rel.split("/")), body)
    root = storage.path("a")

    def shape(infos: list[pafs.FileInfo]) -> list[tuple[str, pafs.FileType, int | None]]:
        return sorted((i.path, i.type, i.size if i.type == pafs.FileType.File else None) for i in infos)

    expected = storage.fs.get_file_info(pafs.FileSelector(root, recursive=recursive))
    assert shape(_scan_local(root, recursive)) == shape(expected) and len(expected) >= 3
    assert _scan_local(storage.path("absent"), recursive) == []


def test_listing_holds_while_another_process_makes_and_removes_the_folder(storage: Storage) -> None:
    """pyarrow opens the folder and only then asks whether it exists; a folder made in
    between failed a writer's listing in CI (ENOENT although it was there). The listing is
    either empty or what the folder holds, never an error."""
    folder = storage.path("meta", "files")
    churn = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time\n"
            "d = sys.argv[1]; end = time.monotonic() + 3\n"
            "while time.monotonic() < end:\n"
            "    os.makedirs(d, exist_ok=True); open(os.path.join(d, 'f'), 'w').close()\n"
            "    os.remove(os.path.join(d, 'f')); os.rmdir(d)\n",
            folder,
        ]
    )
    try:
        seen = set()
        while churn.poll() is None:
            for entries in (storage.list_entries(folder), storage.list_files(folder)):
                seen.add(tuple(sorted(os.path.basename(e.path) for e in entries)))
        assert churn.returncode == 0
        assert seen <= {(), ("f",)} and () in seen
    finally:
        churn.kill()
        churn.wait()
