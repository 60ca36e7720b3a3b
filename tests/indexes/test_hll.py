"""lakeline's NDV sketches are Apache DataSketches HLL sketches: the datasketches library
(the reference, a test dependency) reads them and holds the same coupons or registers,
for ints, longs, strings, empty input and nulls; a merge is the union."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from lakeline.indexes.column_stats import merge_sketches, sketch_values
from lakeline.indexes.hll import Hll, set_max
from lakeline.timeline.errors import MetadataTableError

datasketches = pytest.importorskip("datasketches")


def reference(values: list[object], lg_k: int = 12) -> object:
    sk = datasketches.hll_sketch(lg_k, datasketches.tgt_hll_type.HLL_8)
    for v in values:
        if v is not None:
            sk.update(v)
    return sk


def payload(raw: bytes) -> list[int]:
    """The coupons of a LIST/SET image, or the registers of an HLL image."""
    pre_ints = raw[0]
    if raw[7] & 3 == 2:
        return list(raw[4 * pre_ints :])
    return sorted(np.frombuffer(raw, "<u4", offset=4 * pre_ints).tolist())


@pytest.mark.parametrize("n", [0, 3, 8, 9, 300, set_max(12), set_max(12) + 1, 50_000])
@pytest.mark.parametrize("typ", [pa.int32(), pa.int64(), pa.string()])
def test_sketch_holds_what_datasketches_holds(n: int, typ: pa.DataType) -> None:
    values: list[object] = [i * 7 - 1000 for i in range(n)]
    if pa.types.is_string(typ):
        values = [f"user-{v}" for v in values] + [""]
    values = values + [None]
    mine = sketch_values(pa.array(values, typ))
    ref = reference(values).serialize_compact()
    assert mine[:8][2:5] == ref[:8][2:5] and mine[7] == ref[7], "family, lg_k, mode and target differ"
    assert payload(mine) == payload(ref)
    back = datasketches.hll_sketch.deserialize(mine)
    assert back.lg_config_k == 12
    distinct = len({v for v in values if v not in (None, "")})
    assert abs(back.get_estimate() - distinct) <= max(0.05 * distinct, 0.5)
    assert abs(Hll.from_bytes(mine).estimate() - distinct) <= max(0.05 * distinct, 0.5)


def test_merge_is_the_union_and_datasketches_agrees() -> None:
    a = list(range(0, 30_000))
    b = list(range(20_000, 60_000))
    small = [5, 70_000, 70_001]
    merged = merge_sketches(
        [sketch_values(pa.array(a)), sketch_values(pa.array(b)), sketch_values(pa.array(small)), None]
    )
    assert payload(merged) == payload(reference(a + b + small).serialize_compact())
    union = datasketches.hll_union(12)
    for part in (a, b, small):
        union.update(datasketches.hll_sketch.deserialize(sketch_values(pa.array(part))))
    assert union.get_result(datasketches.tgt_hll_type.HLL_8).get_estimate() == pytest.approx(
        datasketches.hll_sketch.deserialize(merged).get_estimate()
    )
    tiny = merge_sketches([sketch_values(pa.array([1, 2])), sketch_values(pa.array([2, 3]))])
    assert Hll.from_bytes(tiny).estimate() == 3


def test_old_and_foreign_sketches_are_refused_with_the_fix() -> None:
    with pytest.raises(MetadataTableError, match="rebuild"):
        Hll.from_bytes(b"LLHL1\x0e" + b"\x00" * 20)
    with pytest.raises(MetadataTableError):
        Hll.from_bytes(b"not a sketch")
    hll4 = reference(list(range(5000)))
    four = datasketches.hll_sketch(12, datasketches.tgt_hll_type.HLL_4)
    for v in range(5000):
        four.update(v)
    with pytest.raises(MetadataTableError, match="HLL_8"):
        Hll.from_bytes(four.serialize_compact())
    assert Hll.from_bytes(hll4.serialize_compact()).is_hll
