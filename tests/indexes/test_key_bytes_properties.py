"""Property test: record keys of any bytes work with bloom filters and column stats
(issue 25, audit D2g).

Binary keys need not be UTF-8; the bloom filter's key range used to be Arrow's cast of
the bytes to string, so ``b'\\xff\\xfe'`` failed every write once a bloom filter existed.
For random sets of binary keys (empty, NUL, non-UTF-8, the hex tag of stored bounds),
written partly before and partly after both indexes exist: every key is found by an
``==`` filter, deleted keys are gone, and ``validate`` finds no mismatch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakeline.indexes.hashing import BINARY_HEX_TAG
from lakeline.table import Table

FAST = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Bytes that once broke, or might break, a text representation of a bound.
AWKWARD = [
    b"",
    b"\x00",
    b"\xff\xfe",
    b"\x80",
    b"a\x00b",
    BINARY_HEX_TAG.encode(),
    BINARY_HEX_TAG.encode() + b"zz",
    "é".encode(),
    b"\xed\xa0\x80",
]
keys = st.lists(st.sampled_from(AWKWARD) | st.binary(max_size=64), min_size=1, max_size=10, unique=True)


@FAST
@given(
    keys=keys,
    table_type=st.sampled_from(["cow", "mor"]),
    split=st.integers(min_value=0, max_value=10),
    deleted=st.sets(st.integers(min_value=0, max_value=9), max_size=3),
)
def test_binary_keys_are_found_deleted_and_validated(
    keys: list[bytes], table_type: str, split: int, deleted: set[int]
) -> None:
    schema = pa.schema([("k", pa.binary()), ("n", pa.int64())])
    with tempfile.TemporaryDirectory() as d:
        t = Table.create(Path(d) / "t", schema, record_key="k", table_type=table_type)
        before, after = keys[:split], keys[split:]
        if before:  # written before the indexes exist: the builds index them
            t.upsert(pa.table({"k": before, "n": list(range(len(before)))}, schema=schema))
        t.indexes.create("bloom_filters")
        t.indexes.create("column_stats")
        if after:  # written with both indexes building entries on commit
            t.upsert(pa.table({"k": after, "n": list(range(len(before), len(keys)))}, schema=schema))
        gone = [keys[i] for i in sorted(deleted) if i < len(keys)]
        if gone:
            t.delete(pa.table({"k": gone}, schema=pa.schema([("k", pa.binary())])))
        for n, key in enumerate(keys):
            got = t.to_arrow(filter=pc.field("k") == pa.scalar(key, pa.binary())).to_pylist()
            assert got == ([] if key in gone else [{"k": key, "n": n}]), key
        assert sorted(t.to_arrow().column("k").to_pylist()) == sorted(k for k in keys if k not in gone)
        report = t.indexes.validate()
        assert report["mismatches"] == [], report
