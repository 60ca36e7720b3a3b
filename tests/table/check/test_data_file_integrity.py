"""Data files carry Parquet page CRCs and the size their commit recorded (issue 45 item 2):
a byte flipped in a page of a base or a log, a data file swapped with another of the
table, or one cut short is a ``CorruptFileError`` naming the file on every read path
(to_arrow, a filtered scan, to_batches, to_polars, changes(), a compaction, an upsert
that touches the file) and nothing is committed; ``t.check(deep=True)`` and
``lakeline table check --deep`` name it, while the default check reads footers only.
Files written before page CRCs read as before.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.table import Table
from lakeline.timeline.errors import CorruptFileError
from lakeline.timeline.storage.data_integrity import forget
from lakeline.timeline.storage.object_store import ObjectStore
from lakeline.timeline.view.file_group import FileKind

from tests.seaweedfs import SeaweedServer

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.int64()), ("day", pa.string())])
#: Rows of each partition (different, so their files differ in size).
ROWS = {"a": 3000, "b": 2000}
#: Each partition's keys: random 40-bit numbers, so their delta-packed values fill pages
#: (sequential keys pack into a few bytes, mostly block headers).
KEYS = {
    day: np.sort(np.random.default_rng(i).choice(2**40, n, replace=False)) + i * 2**41
    for i, (day, n) in enumerate(ROWS.items())
}


def rows(ids: np.ndarray, day: str, ts: int = 1, seed: int = 1) -> pa.Table:
    values = np.random.default_rng(seed).integers(0, 2**62, len(ids))
    return pa.table({"id": ids, "ts": np.full(len(ids), ts), "v": values, "day": [day] * len(ids)}, schema=SCHEMA)


def make(path: Path, table_type: str) -> Table:
    """Two partitions of int64 values, stored uncompressed (as a large file stores a column
    its codec saves little on: table/encoding.py), so a flipped byte decodes silently to
    other values without page CRCs; on mor an upsert of a third of each partition's keys
    writes a log."""
    t = Table.create(
        path,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        partition_by=["day"],
        table_type=table_type,
        properties={"write.parquet-compression": "none"},
    )
    t.insert(pa.concat_tables([rows(KEYS["a"], "a"), rows(KEYS["b"], "b")]))
    if table_type == "mor":
        t.upsert(rows(KEYS["a"][::3], "a", ts=2, seed=2))
        t.upsert(rows(KEYS["b"][::3], "b", ts=2, seed=3))
    return t


def live_file(t: Table, kind: FileKind, day: str = "a") -> str:
    (s,) = [s for s in t.view(t.timeline).latest_slices() if s.partition == f"day={day}"]
    if kind == FileKind.LOG:
        return s.logs[-1].path
    assert s.base is not None
    return s.base.path


def flip_pages(t: Table, rel: str) -> None:
    """Flip one byte in the middle of the ``id`` and ``v`` column chunks of ``rel``'s first
    row group: inside their delta-packed values, where a flip decodes to other numbers
    without any error of its own (a dictionary index flipped out of range, or a block
    header, would fail to decode even without CRCs)."""
    path = t.storage.path(rel)
    group = pq.ParquetFile(path).metadata.row_group(0)
    with open(path, "r+b") as f:
        for j in range(group.num_columns):
            chunk = group.column(j)
            if chunk.path_in_schema not in ("id", "v"):
                continue
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            at = start + chunk.total_compressed_size // 2 + 1
            f.seek(at)
            byte = f.read(1)
            f.seek(at)
            f.write(bytes([byte[0] ^ 0xFF]))


def swap(t: Table, rel: str, other: str) -> None:
    Path(t.storage.path(rel)).write_bytes(Path(t.storage.path(other)).read_bytes())


def truncate(t: Table, rel: str) -> None:
    path = Path(t.storage.path(rel))
    path.write_bytes(path.read_bytes()[:-100])


def reads(t: Table) -> dict[str, Callable[[], object]]:
    """Every read path, each over the damaged file (partition a)."""
    first = t.timeline.completed()[0].id
    return {
        "to_arrow": lambda: t.to_arrow(),
        "filtered scan": lambda: t.to_arrow(filter=pc.field("id") < int(KEYS["a"][10])),
        "to_batches": lambda: list(t.scan(filter=pc.field("day") == "a").to_batches()),
        "to_polars": lambda: t.to_polars().collect(),
        "changes": lambda: t.changes(first),
    }


def assert_names(error: pytest.ExceptionInfo[CorruptFileError], rel: str) -> None:
    assert rel in str(error.value), str(error.value)


@pytest.fixture(autouse=True)
def _fresh_sizes() -> None:
    forget()  # no recorded size registered by an earlier test's table


@pytest.mark.parametrize(
    ("table_type", "kind"), [("cow", FileKind.BASE), ("mor", FileKind.BASE), ("mor", FileKind.LOG)]
)
@pytest.mark.parametrize("damage", ["flip", "swap", "truncate"])
def test_a_damaged_data_file_fails_every_read_and_write_naming_it(
    tmp_path: Path, table_type: str, kind: FileKind, damage: str
) -> None:
    t = make(tmp_path / table_type, table_type)
    rel = live_file(t, kind)
    if damage == "flip":
        flip_pages(t, rel)
    elif damage == "swap":
        swap(t, rel, live_file(t, kind, "b"))  # another data file of the table, of its kind
    else:
        truncate(t, rel)
    t = Table.open(t.path)
    for name, read in reads(t).items():
        with pytest.raises(CorruptFileError) as error:
            read()
        assert rel in str(error.value), f"{name}: {error.value}"
        if damage != "flip":
            assert "its commit recorded" in str(error.value), f"{name}: {error.value}"
    before = len(t.timeline.instants())
    writes: dict[str, Callable[[], object]] = {"upsert": lambda: t.upsert(rows(KEYS["a"][::2], "a", ts=5, seed=5))}
    if table_type == "mor":
        writes["compaction"] = lambda: t.services.compact()
    for name, write in writes.items():
        with pytest.raises(CorruptFileError) as error:
            write()
        assert rel in str(error.value), f"{name}: {error.value}"
    fresh = Table.open(t.path)
    assert len(fresh.timeline.completed()) == len(t.timeline.completed())  # nothing committed
    assert not fresh.timeline.pending() and len(fresh.timeline.instants()) >= before


@pytest.mark.parametrize(("table_type", "kind"), [("cow", FileKind.BASE), ("mor", FileKind.LOG)])
def test_the_deep_check_names_a_flipped_page_the_default_check_does_not_read(
    tmp_path: Path, table_type: str, kind: FileKind
) -> None:
    t = make(tmp_path / table_type, table_type)
    assert t.check(deep=True, indexes=False).ok
    rel = live_file(t, kind)
    flip_pages(t, rel)
    assert t.check(indexes=False).ok  # footers only: the page is not read
    report = t.check(deep=True, indexes=False)
    (problem,) = report.problems
    assert problem.kind == "damaged_data" and problem.path == rel
    assert "row group 0, column id" in problem.detail and "CRC" in problem.detail
    result = CliRunner().invoke(cli, ["table", "check", t.path, "--deep", "--skip-indexes"])
    assert result.exit_code == 1, result.output
    assert f"damaged_data: {rel}" in result.stdout
    assert CliRunner().invoke(cli, ["table", "check", t.path, "--skip-indexes"]).exit_code == 0


def test_every_data_file_is_written_with_page_crcs(tmp_path: Path) -> None:
    """Bases, logs and a compaction's rewrite: each page header holds a CRC (pyarrow does
    not expose it: a flipped page byte failing to read is the proof)."""
    t = make(tmp_path / "mor", "mor")
    t.services.compact()
    for s in t.view(Table.open(t.path).timeline).latest_slices():
        for f in s.files:
            path = t.storage.path(f.path)
            assert pq.ParquetFile(path).metadata.row_group(0).num_columns
            whole = Path(path).read_bytes()
            flip_pages(t, f.path)
            with pytest.raises(OSError, match="CRC"):
                pq.read_table(path, page_checksum_verification=True)
            Path(path).write_bytes(whole)
    assert Table.open(t.path).to_arrow().num_rows == sum(ROWS.values())


def test_a_table_written_before_page_crcs_reads_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written as lakeline wrote them before page CRCs (their commits record their
    sizes) read, merge, check deep and compact as before."""
    monkeypatch.setattr("lakeline.table.encoding.PARQUET_WRITE", {})
    t = make(tmp_path / "old", "mor")
    expected = t.to_arrow().sort_by("id")
    monkeypatch.undo()
    t = Table.open(t.path)
    assert t.to_arrow().sort_by("id").equals(expected)
    assert t.check(deep=True, indexes=False).ok
    t.services.compact()
    assert Table.open(t.path).to_arrow().sort_by("id").equals(expected)


def test_on_s3_a_swapped_base_is_refused_by_its_size_without_a_request_more(
    s3: SeaweedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On an object store the recorded size is compared with the size of the HEAD the
    reader sends anyway: a copy-on-write read (one dataset scan of its bases) makes as many
    requests with the check as without, and a base swapped with another is refused."""
    t = Table.create(
        s3.uri(), SCHEMA, record_key="id", partition_by=["day"], storage_options=s3.options(), table_type="cow"
    )
    t.insert(pa.concat_tables([rows(KEYS["a"], "a"), rows(KEYS["b"], "b")]))
    calls: list[str] = []
    real_call = ObjectStore._call

    def counted(self: ObjectStore, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(what.split(" ", 1)[0])
        return real_call(self, what, fn, *args, **kwargs)

    monkeypatch.setattr(ObjectStore, "_call", counted)
    expected = t.to_arrow().sort_by("id")
    checked = len(calls)
    assert calls.count("GET") >= 2  # each base opened (a HEAD and ranged GETs)
    calls.clear()
    forget()
    monkeypatch.setattr("lakeline.table.read.scan.check_sizes", lambda storage, files: None)
    monkeypatch.setattr("lakeline.timeline.storage.object_files.check_opened", lambda path, size: None)
    assert t.to_arrow().sort_by("id").equals(expected)
    assert len(calls) == checked  # the check adds no request
    monkeypatch.undo()
    rel, other = live_file(t, FileKind.BASE, "a"), live_file(t, FileKind.BASE, "b")
    with t.storage.fs.open_output_stream(t.storage.path(rel)) as out:
        out.write(t.storage.read_bytes(t.storage.path(other)))
    t = Table.open(t.path, storage_options=s3.options())
    for read in (t.to_arrow, lambda: t.to_arrow(filter=pc.field("day") == "a"), lambda: t.to_polars().collect()):
        with pytest.raises(CorruptFileError, match="its commit recorded") as error:
            read()
        assert rel in str(error.value)
    with pytest.raises(CorruptFileError, match=rel):
        t.upsert(rows(KEYS["a"][:5], "a", ts=5))


@pytest.mark.parametrize("index", ["record_index", "bloom_filters"])
def test_an_index_is_never_built_from_a_flipped_page(tmp_path: Path, index: str) -> None:
    """An index built over a damaged file would hash other keys than the table holds (an
    upsert would then insert existing keys again): the build stops, naming the file."""
    t = make(tmp_path / "cow", "cow")
    rel = live_file(t, FileKind.BASE)
    flip_pages(t, rel)
    with pytest.raises(CorruptFileError, match=rel):
        t.indexes.create(index)
