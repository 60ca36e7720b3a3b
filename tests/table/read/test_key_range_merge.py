"""A merge-on-read scan whose filter names the record key alone keeps, of a slice's
base, only the rows the filter keeps as it decodes them, and merges only the changes
pointing at those (table/read/slice_read.py ``_by_position_matching``,
row_groups.py ``read_matching``).

Random keys in every row group leave statistics nothing to prune, so this is the path a
key range over a merge-on-read table with position logs takes. Checked by brute force:
ranges, ``==``, ``isin`` and a negation, through upserts (some losing to the stored
version by their ordering value), deletes and inserts, under the deduplicate and the
partial-update engines: every result equals the whole table filtered by pyarrow, and
the merge is handed only the rows that match.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.table import Table
from lakeline.table.read import slice_read

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.int64())])
GROUP = 1024

pytestmark = pytest.mark.usefixtures("no_faults")


def _rows(keys: list[str], ts: list[int], rng: random.Random) -> pa.Table:
    return pa.table({"id": keys, "ts": ts, "v": [rng.randint(0, 99) for _ in keys]}, schema=SCHEMA)


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update"])
def test_a_key_filter_over_position_logs_equals_the_whole_table_filtered(
    tmp_path: Path, engine: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(5)
    t = Table.create(
        tmp_path / engine,
        SCHEMA,
        record_key="id",
        ordering_field="ts",
        table_type="mor",
        properties={"write.row-group-rows": GROUP, "merge.engine": engine},
    )
    keys = [f"{rng.getrandbits(64):016x}" for _ in range(6 * GROUP)]
    t.insert(_rows(keys, [10] * len(keys), rng))  # random order: every group spans every key
    handed = {"merged": 0}
    real = slice_read.merge_at_positions

    def counted(base, changes, *args, **kwargs):  # type: ignore[no-untyped-def]
        handed["merged"] += base.num_rows
        return real(base, changes, *args, **kwargs)

    monkeypatch.setattr(slice_read, "merge_at_positions", counted)
    ordered = sorted(keys)
    base = pa.table({"id": keys})
    live = set(keys)
    for step in range(4):
        updated = rng.sample(sorted(live), 300)
        # Some updates carry an older ordering value than the stored row and lose.
        t.upsert(_rows(updated, [rng.choice([5, 20 + step]) for _ in updated], rng))
        gone = rng.sample(sorted(live - set(updated)), 100)
        t.delete(pa.table({"id": gone}))
        live -= set(gone)
        fresh = [f"{rng.getrandbits(64):016x}" for _ in range(50)]
        t.insert(_rows(fresh, [30] * len(fresh), rng))
        live |= set(fresh)
        whole = t.to_arrow()
        assert t.scan().files() and any(s.logs for s in t.scan().slices)
        for _ in range(6):
            a, b = sorted(rng.sample(ordered, 2))
            pinned = rng.sample(sorted(live), 3) + [gone[0]]
            in_range = (pc.field("id") >= a) & (pc.field("id") < b)
            for flt in (in_range, pc.field("id") == pinned[0], pc.field("id").isin(pinned), ~(pc.field("id") < b)):
                handed["merged"] = 0
                got = t.scan(filter=flt).to_arrow().sort_by("id")
                assert got.equals(whole.filter(flt).sort_by("id")), (step, str(flt))
                # Only the base rows that match reach the merge, not the base's thousands.
                assert handed["merged"] <= base.filter(flt).num_rows, (step, str(flt), handed)
