"""Data file names, partition folders and slices (timeline/view/file_group.py)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from lakeline.timeline.view.file_group import (
    LITERAL_NULL_NAME,
    NULL_PARTITION,
    DataFile,
    FileKind,
    FileSlice,
    data_file_name,
    parse_data_file_name,
    partition_path,
    partition_scalar,
    partition_values,
    table_tag,
)

GROUP = "ab" * 16
UUID = "0123456789abcdef0123456789abcdef"


@pytest.mark.parametrize("kind", list(FileKind))
@pytest.mark.parametrize("tag", ["", table_tag(UUID)])
def test_file_names_parse_back(kind: FileKind, tag: str) -> None:
    name = data_file_name(GROUP, 42, kind, tag)
    parsed = parse_data_file_name("day=1/" + name)
    assert parsed is not None
    assert (parsed.file_group, parsed.instant, parsed.kind, parsed.table_tag) == (GROUP, 42, kind, tag)
    assert data_file_name(GROUP, 42, kind, tag) != name


def test_table_tag_and_foreign_names() -> None:
    assert table_tag(UUID) == "0123456789ab" and table_tag("short") == ""
    for name in ("part-0000.parquet", f"{GROUP}_x_00000000.parquet", f"{GROUP}_1_00000000.csv"):
        assert parse_data_file_name(name) is None


def test_partition_paths_round_trip_nulls_and_odd_text() -> None:
    values = (None, "__HIVE_DEFAULT_PARTITION__", "a/b=c", "..")
    path = partition_path(("n", "lit", "s", "dots"), values)
    assert path.split("/")[:2] == [f"n={NULL_PARTITION}", f"lit={LITERAL_NULL_NAME}"]
    assert partition_values(path) == dict(zip(("n", "lit", "s", "dots"), values))
    assert partition_path((), ()) == "" and partition_values("") == {}


def test_partition_scalar() -> None:
    assert partition_scalar("7", pa.int64()).as_py() == 7
    assert partition_scalar("b'\\x00'", pa.binary()).as_py() == b"\x00"
    assert partition_scalar("__import__('os')", pa.binary()) is None


def _file(kind: FileKind, lo: object, hi: object, size: int = 1) -> DataFile:
    return DataFile("p", kind, 1, rows=1, bytes=size, completed_seq=1, key_min=lo, key_max=hi)


def test_slice_key_bounds_cover_base_and_logs() -> None:
    s = FileSlice(GROUP, "", 1, _file(FileKind.BASE, 5, 9, 10), (_file(FileKind.LOG, 1, 6, 3),))
    assert s.key_bounds() == (1, 9) and s.bytes == 13 and len(s.files) == 2
    assert FileSlice(GROUP, "", 1, _file(FileKind.BASE, 0.5, 2.0)).key_bounds() is None
    assert FileSlice(GROUP, "", 1, _file(FileKind.BASE, None, 3)).key_bounds() is None
    mixed = FileSlice(GROUP, "", 1, _file(FileKind.BASE, 1, 2), (_file(FileKind.LOG, "a", "b"),))
    assert mixed.key_bounds() is None
