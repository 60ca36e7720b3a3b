"""A key-pinned scan decodes only the base row groups the record index says hold its keys
(table/read/key_pruning.py, row_groups.py ``narrowed_to_rows`` and ``groups_holding``).

Random keys put every key in every row group's min/max range, so statistics prune no
row group; the index's positions do. Checked by brute force on both table types, through
inserts, upserts (some losing to the stored version by their ordering value), deletes,
a copy-on-write rewrite (whose entries name no rows: its base is read whole) and a
compaction: every pinned filter returns what the whole table filtered by pyarrow holds,
and the scans decode fewer row groups than the files have.
"""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.table.read import scan as scan_module
from lakeline.table.read.row_groups import groups_holding

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
GROUP = 1024

pytestmark = pytest.mark.usefixtures("no_faults")


def _keys(rng: random.Random, n: int) -> list[str]:
    return [f"{rng.getrandbits(128):032x}" for _ in range(n)]


def _rows(keys: list[str], ts: int, rng: random.Random) -> pa.Table:
    return pa.table({"id": keys, "ts": [ts] * len(keys), "v": [rng.randint(0, 9) for _ in keys]}, schema=SCHEMA)


def test_groups_holding_marks_the_groups_of_the_rows_and_trusts_no_row_outside_the_file() -> None:
    starts = np.array([0, 10, 20, 25])
    assert groups_holding(starts, np.array([0, 19, 24])).tolist() == [True, True, True]
    assert groups_holding(starts, np.array([10, 11])).tolist() == [False, True, False]
    assert groups_holding(starts, np.zeros(0, np.int64)).tolist() == [False, False, False]
    assert groups_holding(starts, np.array([3, 25])).tolist() == [True, True, True]  # 25: past the file


@pytest.mark.parametrize("kind", ["cow", "mor"])
def test_a_key_pinned_scan_decodes_only_the_row_groups_holding_its_keys(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(21)
    t = Table.create(
        tmp_path / kind,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type=kind,
        # Inserts make files of their own, as large appends do (small groups are not
        # filled: a copy-on-write fill is a rewrite, whose entries name no rows).
        properties={"index.record-index": True, "write.row-group-rows": GROUP, "write.small-file-limit-bytes": 0},
    )
    groups = {"files": 0, "read": 0}
    real = scan_module.narrowed_to_rows

    def counted(dataset, rows_of):  # type: ignore[no-untyped-def]
        out = real(dataset, rows_of)
        for before, after in zip(dataset.get_fragments(), out.get_fragments()):
            before.ensure_complete_metadata()
            groups["files"] += before.num_row_groups
            groups["read"] += len(after.row_groups) if after.row_groups is not None else before.num_row_groups
        return out

    monkeypatch.setattr(scan_module, "narrowed_to_rows", counted)
    keys: list[str] = []
    for _ in range(3):
        batch = _keys(rng, 5 * GROUP)
        keys += batch
        t.insert(_rows(batch, 1, rng))

    def check(step: str, gone: set[str]) -> float:
        """The share of the scanned bases' row groups the step's scans decoded."""
        groups.update(files=0, read=0)
        whole = t.to_arrow()
        for _ in range(25):
            pinned = rng.sample(keys, rng.randint(1, 4)) + rng.sample(sorted(gone) or keys, 1) + _keys(rng, 1)
            filt = (
                pc.field("id").isin(pinned) if len(pinned) > 1 and rng.random() < 0.7 else pc.field("id") == pinned[0]
            )
            if rng.random() < 0.3:
                filt = filt & (pc.field("v") >= 3)
            scan = t.scan(filter=filt)
            got = sorted(scan.to_arrow().to_pylist(), key=lambda r: r["id"])
            want = sorted(whole.filter(filt).to_pylist(), key=lambda r: r["id"])
            assert got == want, (step, filt)
            groups["files"] += scan.read_stats.base_row_groups
            groups["read"] += scan.read_stats.base_row_groups_read
        return groups["read"] / groups["files"]

    assert check("inserts", set()) < 0.5  # most row groups were left undecoded
    old = rng.sample(keys, 400)
    # Upserts: newer versions, and older ones the stored version outlives (ts 0 < 1).
    t.upsert(_rows(old[:300], 2, rng))
    t.upsert(_rows(old[300:350], 0, rng))
    deleted = set(old[350:])
    t.delete(pa.table({"id": sorted(deleted)}))
    # Copy-on-write: the upserts rewrote every base, and a rewrite's entries name no
    # rows, so its bases are read whole; merge-on-read's bases stay and narrow.
    upserted = check("upserts and deletes", deleted)
    t.services.compact()
    compacted = check("compacted", deleted)
    if kind == "mor":
        assert upserted < 0.5 and compacted < 0.5
    assert t.indexes.validate("record_index")["mismatches"] == []
