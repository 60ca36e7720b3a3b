"""The bloom stage: pinned values read from filters only when certain, and files the
bloom filters rule out dropped, never a file holding a pinned key."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from lakeline.indexes.bloom import FileBloom
from lakeline.indexes.pruning import bloom_keep, pinned_values

SCHEMA = pa.schema([("id", pa.int64()), ("s", pa.string()), ("v", pa.float64())])
ID, S, V = pc.field("id"), pc.field("s"), pc.field("v")


def _pins(flt: pc.Expression, col: str) -> set[object] | None:
    vals = pinned_values(flt, col, SCHEMA)
    return None if vals is None else {v.as_py() for v in vals}


def test_pinned_values_of_equalities_and_in_lists() -> None:
    assert _pins(ID == 5, "id") == {5}
    assert _pins(pc.scalar(5) == ID, "id") == {5}
    assert _pins(ID == pa.scalar(5, pa.int32()), "id") == {5}
    assert _pins(ID.isin([1, 2, 3]), "id") == {1, 2, 3}
    assert _pins(S.isin(["a", "b"]), "s") == {"a", "b"}
    assert _pins((ID == 5) & (V > 1.5), "id") == {5}
    assert _pins((ID.isin([1, 2])) & (V > 0) & (ID == 2), "id") == {2}
    assert _pins((S == "q") & (ID == 1), "s") == {"q"}
    assert _pins((ID == 5) | (ID == 6), "id") == {5, 6}  # a disjunction unites its pins
    assert _pins((ID == 5) | ID.isin([7, 8]), "id") == {5, 7, 8}


def test_no_pins_when_the_filter_does_not_imply_them() -> None:
    for flt in [
        (ID == 5) | (V == 6),
        ~(ID == 5),
        ID > 5,
        ID.isin([1, None]),
        V == 1.0,
        S == "a) and (id == 3",
        S == 'x" and id == 3 and "y',
        (S == 'a" and (id == 4) and "b') & (V > 0),
    ]:
        assert _pins(flt, "id") is None, flt
    assert _pins(ID == 5, "nope") is None
    assert _pins(None, "id") is None  # type: ignore[arg-type]


def test_bloom_keep_never_drops_a_file_holding_a_pinned_key() -> None:
    rng = random.Random(7)
    files = {
        f"f{i}": pa.table(
            {
                "id": pa.array(sorted(rng.sample(range(10_000), 300)), pa.int64()),
                "s": [str(rng.random()) for _ in range(300)],
                "v": [rng.random() for _ in range(300)],
            }
        )
        for i in range(20)
    }
    blooms = {p: FileBloom.build(t, ["id"], fpp=0.01) for p, t in files.items()}
    paths = list(files)
    dropped = 0
    for _ in range(300):
        keys = rng.sample(range(10_000), rng.randint(1, 4))
        flt = ID.isin(keys) if len(keys) > 1 else (ID == keys[0])
        if rng.random() < 0.5:
            flt = flt & (V >= 0)
        keep = bloom_keep(flt, SCHEMA, ["id"], blooms, paths)
        for p, k in zip(paths, keep):
            holds = ds.dataset(files[p]).to_table(filter=flt).num_rows > 0
            assert k or not holds, (p, flt)
            dropped += not k
    assert dropped > 300 * 20 * 0.8  # most files hold none of a few keys
    # Filters the stage cannot read, or no bloom for a file: keep everything.
    assert bloom_keep(ID > 5, SCHEMA, ["id"], blooms, paths) == [True] * len(paths)
    assert bloom_keep(ID == 1, SCHEMA, ["id"], {}, paths) == [True] * len(paths)
