"""The record index on a table on S3 (SeaweedFS): built, kept by writes and services,
folded into generations, used by tagging and key-pinned scans, and validated, with every
file of it on the store (``.lakeline/metadata/record_index@N/`` objects)."""

from __future__ import annotations

import random
from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from lakeline.indexes.record_index.store import newest_generation
from lakeline.table import Table

from tests.object_storage.s3_tables import SCHEMA


def hex_rows(keys: list[str], ts: int) -> pa.Table:
    n = len(keys)
    return pa.table({"id": keys, "ts": [ts] * n, "v": [float(ts)] * n, "day": ["d1"] * n}, schema=SCHEMA)


@pytest.mark.parametrize("table_type", ["mor", "cow"])
def test_record_index_on_the_store(
    make_table: Callable[..., Table], table_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(30)
    keys = [f"{rng.getrandbits(128):032x}" for _ in range(1500)]
    t = make_table(
        table_type,
        properties={"write.target-file-size-bytes": 16_000, "metadata.compact.max-deltas": 2, "clean.orphan-age-ms": 0},
    )
    t.insert(hex_rows(keys[:1000], 1))
    d = t.indexes.create("record_index", options={"buckets": 4})
    assert t.storage.objects is not None and d.state == "ready"

    def no_data_tag(*args: object, **kwargs: object) -> None:
        raise AssertionError("tagged by reading data files")

    monkeypatch.setattr("lakeline.table.write.operations.tag", no_data_tag)
    t.upsert(hex_rows(keys[900:1200], 2))
    t.delete(pa.table({"id": keys[:50]}))
    t.insert(hex_rows(keys[1200:], 3))
    monkeypatch.undo()
    t.services.compact()
    t.services.cluster(sort_by=["id"])
    t.services.clean(policy="keep_latest_file_versions", retain=1, dry_run=False)
    t.indexes.compact("record_index")
    gen = newest_generation(t.storage, d.partition)
    assert gen is not None and gen.seq > d.instant and gen.rows == 1450
    assert t.indexes.validate("record_index")["mismatches"] == []
    s = t.scan(filter=pc.field("id").isin([keys[10], keys[60], keys[1300]]))
    assert sorted(s.to_arrow().column("id").to_pylist()) == sorted([keys[60], keys[1300]])
    e = s.explain()
    assert e["files_after_record_index_pruning"] == len(s.files()) < e["files_total"]
    got = t.to_arrow()
    assert got.num_rows == 1450 and len(set(got.column("id").to_pylist())) == 1450
