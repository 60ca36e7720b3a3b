"""Damaged index files never change an answer (issue 45 item 2; audit rows RI6-RI14).

For every kind of index file a table keeps (a record index's bucket files, generation
manifest and deltas; bloom filter and column stats bases and deltas; the files index's
checkpoint), each damage (bytes flipped, truncated, swapped for a sibling of its kind,
zeroed, deleted) leaves the table's answers right: an upsert of keys the table holds
raises ``CorruptFileError`` before it commits, or inserts none of them again; a point
lookup finds every key, or raises; and ``validate`` names the damaged file.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from lakeline.indexes.bloom import _HEADER, _MAGIC
from lakeline.indexes.integrity import VERIFIED
from lakeline.table import Table
from lakeline.timeline.errors import CorruptFileError, LakelineError

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])
KEYS = 400
META = ".lakeline/metadata"


def rows(ids: list[int], ts: int = 1, offset: int = 0) -> pa.Table:
    ids = [i + offset for i in ids]
    return pa.table({"id": ids, "ts": [ts] * len(ids), "v": ["x"] * len(ids)}, schema=SCHEMA)


def flip(p: Path, _: Path | None) -> None:
    b = bytearray(p.read_bytes())
    m = len(b) // 2
    b[m : m + 64] = bytes(x ^ 0xFF for x in b[m : m + 64])
    p.write_bytes(bytes(b))


def truncate(p: Path, _: Path | None) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def swap(p: Path, sibling: Path | None) -> None:
    assert sibling is not None
    p.write_bytes(sibling.read_bytes())


def zero(p: Path, _: Path | None) -> None:
    p.write_bytes(b"\0" * p.stat().st_size)


def delete(p: Path, _: Path | None) -> None:
    p.unlink()


DAMAGES: dict[str, Callable[[Path, Path | None], None]] = {
    "flip": flip,
    "truncate": truncate,
    "swap": swap,
    "zero": zero,
    "delete": delete,
}


def _table(tmp_path: Path, kind: str, table_type: str, name: str = "t", offset: int = 0) -> Table:
    """A table of :data:`KEYS` keys (from ``offset``) in 4 commits with the index of
    ``kind`` ready, a folded part (a base / a generation) and deltas after it."""
    d = tmp_path / name
    shutil.rmtree(d, ignore_errors=True)
    props = {"write.target-file-size-bytes": 4096, "metadata.files.checkpoint-commits": 2}
    t = Table.create(d, SCHEMA, record_key="id", ordering_field="ts", table_type=table_type, properties=props)
    t.upsert(rows(list(range(0, KEYS // 2)), offset=offset))
    if kind == "record_index":
        t.indexes.create("record_index", options={"buckets": 4})
    elif kind != "files":
        t.indexes.create(kind, columns=["id"])
    t.upsert(rows(list(range(KEYS // 2, 3 * KEYS // 4)), offset=offset))
    if kind not in ("record_index", "files"):
        t.indexes.compact(kind)  # a base holding what came so far
    t.upsert(rows(list(range(3 * KEYS // 4, KEYS)), offset=offset))
    t.upsert(rows(list(range(3 * KEYS // 4, 3 * KEYS // 4 + 10)), ts=2, offset=offset))
    return Table.open(d)


def _files_of(t: Table, kind: str, part: str) -> list[Path]:
    meta = Path(t.path) / META
    folder = "files" if kind == "files" else f"{kind}@*"
    pattern = {
        "bucket": "gen_*/b*.arrow",
        "manifest": "gen_*.json",
        "delta": "delta_*.parquet",
        "base": "base_*.parquet",
    }[part]
    return sorted(meta.glob(f"{folder}/{pattern}"))


CASES = [
    ("record_index", "bucket"),
    ("record_index", "manifest"),
    ("record_index", "delta"),
    ("bloom_filters", "base"),
    ("bloom_filters", "delta"),
    ("column_stats", "base"),
    ("column_stats", "delta"),
    ("files", "base"),
]


# A deleted manifest is no damage: no manifest is no generation (the index is rebuilt,
# its deltas alone are never read), so that one pair is not a case.
@pytest.mark.parametrize(
    ("kind", "part", "damage"), [(k, p, d) for k, p in CASES for d in DAMAGES if (p, d) != ("manifest", "delete")]
)
def test_a_damaged_index_file_never_changes_an_answer(tmp_path: Path, kind: str, part: str, damage: str) -> None:
    t = _table(tmp_path, kind, "mor" if part == "delta" else "cow")
    files = _files_of(t, kind, part)
    assert files, (kind, part)
    victim = files[len(files) // 2]
    sibling = next((f for f in files if f != victim and f.read_bytes() != victim.read_bytes()), None)
    if damage == "swap" and sibling is None:
        # The only file of its kind (a manifest: one generation at a time; a single
        # base): swapped for the same file of another table of other keys (RI14).
        other = _files_of(_table(tmp_path, kind, "mor" if part == "delta" else "cow", "other", 10 * KEYS), kind, part)
        sibling = other[min(len(other) - 1, files.index(victim))]
    DAMAGES[damage](victim, sibling)
    VERIFIED.clear()  # a fresh process: nothing verified yet

    # validate names the file (or, for a deleted record-index delta, its instant's
    # absence). A deleted file of the other kinds is named by nothing but a listing;
    # its data files then have no entries, which only costs reads (checked below).
    if kind == "record_index" or damage != "delete":
        report = Table.open(t.path).indexes.validate()
        named = [m for m in report["mismatches"] if m.get("problem") in ("damaged", "missing")]
        rel = str(victim.relative_to(t.path))
        assert named, report
        if damage != "delete" or part != "delta":
            assert any(m["path"] == rel for m in named) or part == "manifest", (rel, named)

    # Point lookups never miss: every key is found, or the read refuses, typed.
    sample = list(range(0, KEYS, 37))
    try:
        found = [Table.open(t.path).to_arrow(filter=pc.field("id") == k).num_rows for k in sample]
        assert found == [1] * len(sample), found
    except LakelineError as e:
        assert isinstance(e, CorruptFileError), e

    # An upsert of every key the table holds inserts none again, or refuses, typed.
    try:
        Table.open(t.path).upsert(rows(list(range(KEYS)), ts=3))
    except LakelineError as e:
        assert isinstance(e, CorruptFileError), e
    got = Table.open(t.path).to_arrow(columns=["id"])  # a full read asks no index
    assert got.num_rows == KEYS == pc.count_distinct(got.column("id")).as_py(), got.num_rows


def test_a_bloom_entry_zeroed_in_a_well_formed_file_is_refused(tmp_path: Path) -> None:
    """RI13 (D16): the bit array of one entry zeroed, the file otherwise well-formed:
    a point lookup of an existing key returned 0 rows and an upsert inserted it again."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts")
    t.upsert(rows(list(range(2000))))
    t.indexes.create("bloom_filters", columns=["id"])
    (f,) = (Path(t.path) / META).glob("bloom_filters*/base_*.parquet")
    tb = pq.read_table(f)
    head = len(_MAGIC) + _HEADER.size
    bits = [x[:head] + b"\0" * (len(x) - head) for x in tb.column("filter").to_pylist()]
    at = tb.column_names.index("filter")
    pq.write_table(tb.set_column(at, tb.schema.field("filter"), pa.array(bits, tb.schema.field("filter").type)), f)
    VERIFIED.clear()
    with pytest.raises(CorruptFileError, match=f.name):
        Table.open(t.path).to_arrow(filter=pc.field("id") == 5)
    with pytest.raises(CorruptFileError, match=f.name):
        Table.open(t.path).upsert(rows(list(range(0, 2000, 100)), ts=2))
    a = Table.open(t.path).to_arrow()
    assert a.num_rows == 2000 == pc.count_distinct(a.column("id")).as_py()
    problems = Table.open(t.path).indexes.validate()["mismatches"]
    assert [(m["problem"], Path(m["path"]).name) for m in problems] == [("damaged", f.name)]


def test_a_swapped_bucket_file_stops_the_upsert_before_it_commits(tmp_path: Path) -> None:
    """RI6 (D13): a bucket file replaced by another bucket's (valid Arrow): the upsert of
    every existing key inserted 226 of them again."""
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", ordering_field="ts", table_type="cow")
    for lo in range(0, 2000, 500):
        t.upsert(rows(list(range(lo, lo + 500))))
    t.indexes.create("record_index", options={"buckets": 8})
    buckets = sorted((Path(t.path) / META).glob("record_index*/gen_*/b*.arrow"))
    victim = buckets[len(buckets) // 2]
    victim.write_bytes(buckets[0].read_bytes())
    VERIFIED.clear()
    before = len(Table.open(t.path).timeline.completed_after(-1))
    with pytest.raises(CorruptFileError, match=victim.name):
        Table.open(t.path).upsert(rows(list(range(2000)), ts=2))
    after = Table.open(t.path)
    assert len(after.timeline.completed_after(-1)) == before  # nothing committed
    a = after.to_arrow()
    assert a.num_rows == 2000 == pc.count_distinct(a.column("id")).as_py()
    # RI9 (D15): a deleted bucket file is reported as missing, by name.
    buckets[1].unlink()
    problems = after.indexes.validate("record_index")["mismatches"]
    assert {"missing", "damaged"} == {m["problem"] for m in problems}, problems
    assert {Path(m["path"]).name for m in problems} == {victim.name, buckets[1].name}
