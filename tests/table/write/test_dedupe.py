"""Deduplication of a batch (lakeline.table.write.dedupe) against a brute-force reference.

``deduplicate`` groups rows by 64-bit key hashes and folds only the rows whose hashes
meet, so what could go wrong is exactly what a hash cannot see: two keys merged by a
collision, a row lost when its group is folded, the order of the rows kept. Each test
here compares it with a plain Python fold (one row per key: the largest ordering value,
nulls losing, on a tie the last row; rows kept in their order) over many random
batches: random order, repeats, ties, null ordering values, single and composite keys of
several types, one chunk and many, and with the hash forced to collide.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from lakeline.table.write import dedupe
from lakeline.table.write.records import deduplicate

Key = tuple[str, ...]


def reference(rows: list[dict[str, Any]], key: Key, ordering: str | None) -> list[int]:
    """The positions of the rows a deduplication keeps, by a plain Python fold."""
    best: dict[tuple[Any, ...], int] = {}
    for i, row in enumerate(rows):
        k = tuple(row[c] for c in key)
        if k in best and ordering is not None:
            old, new = rows[best[k]][ordering], row[ordering]
            if new is None and old is not None or (new is not None and old is not None and new < old):
                continue  # the row held wins: a larger ordering value (a null loses)
        best[k] = i
    return sorted(best.values())


def _values(rng: random.Random, kind: str, n: int, distinct: int, nulls: bool) -> list[Any]:
    """``n`` values of a column kind drawn from ``distinct`` ones (so repeats happen)."""
    pick = [rng.randrange(distinct) for _ in range(n)]
    make: dict[str, Callable[[int], Any]] = {
        "string": lambda v: f"k{v:x}" * (1 + v % 3),  # lengths vary: several hash passes
        "int": lambda v: v * 7919 - 1000,
        "binary": lambda v: bytes([v % 256, 0xFF, v // 256]),  # not UTF-8
        "date": lambda v: datetime.date(2020, 1, 1) + datetime.timedelta(days=v),
    }
    return [None if nulls and rng.random() < 0.2 else make[kind](v) for v in pick]


TYPES = {"string": pa.string(), "int": pa.int64(), "binary": pa.binary(), "date": pa.date32()}


def random_batch(rng: random.Random, keys: list[str], ordering: str | None) -> tuple[pa.Table, Key]:
    """A random batch: key columns of the given kinds (a second key part may be null, as
    a partition value may), an ordering column with ties and nulls, a payload column
    with each row's position, cut into random chunks."""
    n = rng.choice([2, 3, 10, 100, 1000])
    distinct = max(1, int(n * rng.choice([0.05, 0.5, 1.0, 3.0])))
    cols: dict[str, pa.Array] = {}
    for i, kind in enumerate(keys):
        cols[f"k{i}"] = pa.array(_values(rng, kind, n, distinct, nulls=i > 0), TYPES[kind])
    if ordering == "ts":
        cols["ts"] = pa.array([None if rng.random() < 0.15 else rng.randrange(5) for _ in range(n)], pa.int64())
    elif ordering == "name":
        cols["name"] = pa.array(_values(rng, "string", n, 4, nulls=True), pa.string())
    cols["row"] = pa.array(range(n), pa.int64())
    table = pa.table(cols)
    cuts = sorted({0, n, *(rng.randrange(n) for _ in range(rng.choice([0, 1, 5])))})
    table = pa.concat_tables([table.slice(a, b - a) for a, b in zip(cuts, cuts[1:], strict=False)] or [table])
    return table, tuple(f"k{i}" for i in range(len(keys)))


SHAPES = [(["string"], "ts"), (["int"], "ts"), (["binary"], None), (["date"], "name"), (["string", "int"], "ts")]
SHAPES += [(["int", "string"], None), (["binary", "date"], "ts"), (["string"], "name")]


def check_many(seed: int, rounds: int = 40) -> None:
    rng = random.Random(seed)
    for _ in range(rounds):
        keys, ordering = rng.choice(SHAPES)
        table, key = random_batch(rng, keys, ordering)
        if rng.random() < 0.2:
            table = table.sort_by([(key[0], "ascending")])  # the sorted-batch shortcut too
        got = deduplicate(table, key, ordering)
        want = reference(table.to_pylist(), key, ordering)
        assert got.column("row").to_pylist() == [table.column("row")[i].as_py() for i in want], (keys, ordering)
        assert got.equals(table.take(pa.array(want, pa.int64()))), (keys, ordering)


@pytest.mark.parametrize("seed", range(6))
def test_deduplicate_equals_the_reference_on_random_batches(seed: int) -> None:
    check_many(seed)


@pytest.mark.parametrize(
    "collide",
    [
        pytest.param(lambda h: np.zeros_like(h), id="one-hash-for-every-key"),
        # Only the top two bits stay (the low bits carry row numbers): four hashes, each
        # shared by many keys, some groups of one key and some of several.
        pytest.param(lambda h: h & np.uint64(0xC000000000000000), id="four-hashes"),
    ],
)
def test_a_hash_collision_never_merges_two_keys(
    monkeypatch: pytest.MonkeyPatch, collide: Callable[[np.ndarray], np.ndarray]
) -> None:
    real = dedupe.row_hashes
    monkeypatch.setattr(dedupe, "row_hashes", lambda cols: collide(real(cols)))
    check_many(100, rounds=60)


def test_batches_without_repeats_come_back_as_they_are() -> None:
    rng = np.random.default_rng(7)
    keys = pa.array([f"{v:032x}" for v in rng.permutation(5000)])
    table = pa.table({"key": keys, "ts": pa.array(rng.integers(0, 3, 5000))})
    assert deduplicate(table, ("key",), "ts") is table  # random order: nothing copied
    assert deduplicate(table.sort_by("key"), ("key",), "ts").equals(table.sort_by("key"))
    assert deduplicate(table.slice(0, 1), ("key",), "ts").num_rows == 1
    assert deduplicate(table.slice(0, 0), ("key",), "ts").num_rows == 0


def test_the_ordering_field_may_be_the_key() -> None:
    table = pa.table({"k": pa.array([3, 1, 3, 2, 1], pa.int64()), "v": ["a", "b", "c", "d", "e"]})
    assert deduplicate(table, ("k",), "k").column("v").to_pylist() == ["c", "d", "e"]


def test_types_without_equality_or_ranks_go_through_the_exact_fold(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(keys: list[pa.ChunkedArray]) -> np.ndarray:
        raise pa.ArrowNotImplementedError("no equal kernel")  # as for a string_view key

    monkeypatch.setattr(dedupe, "_same_as_previous", refuse)
    check_many(200, rounds=30)
