"""Deterministic data for the write benchmark: the same rows for every system.

Rows have four columns: ``key`` (``k000000042``: zero-padded, so key order is number
order and a range of keys is a range of row numbers), ``ts`` (int64, the ordering
field), ``value`` (double) and ``category`` (string, 100 values). Everything is a pure
function of the arguments and a fixed seed, built with Arrow compute (no Python loop
over rows), so a 5M-row table is generated in about a second.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

SEED = 20261122
KEY_WIDTH = 9
N_CATEGORIES = 100
#: Base of ``ts`` for appended rows; updates get ``UPDATE_TS`` + n, always larger.
APPEND_TS = 1_700_000_000_000
UPDATE_TS = 1_800_000_000_000

SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("value", pa.float64()),
        pa.field("category", pa.string()),
    ]
)

_CATEGORIES = pa.array([f"cat_{i:02d}" for i in range(N_CATEGORIES)], pa.string())


def key(i: int) -> str:
    """The key of row number ``i``."""
    return f"k{i:0{KEY_WIDTH}d}"


def keys(numbers: np.ndarray) -> pa.Array:
    """Keys of many row numbers, vectorised."""
    digits = pc.utf8_lpad(pa.array(numbers, pa.int64()).cast(pa.string()), KEY_WIDTH, "0")
    return pc.binary_join_element_wise("k", digits, "")


def _rows(numbers: np.ndarray, ts: np.ndarray, rng: np.random.Generator) -> pa.Table:
    n = len(numbers)
    cats = _CATEGORIES.take(pa.array(rng.integers(0, N_CATEGORIES, n), pa.int32()))
    return pa.Table.from_arrays(
        [keys(numbers), pa.array(ts, pa.int64()), pa.array(rng.random(n), pa.float64()), cats], schema=SCHEMA
    )


def append_batch(index: int, rows_per_batch: int) -> pa.Table:
    """Append number ``index``: rows ``index * rows_per_batch`` up to the next batch."""
    rng = np.random.default_rng([SEED, 1, index])
    numbers = np.arange(index * rows_per_batch, (index + 1) * rows_per_batch, dtype=np.int64)
    return _rows(numbers, APPEND_TS + numbers, rng)


def upsert_batch(existing_rows: int, n: int) -> pa.Table:
    """``n`` rows: ``n // 2`` updates of existing keys drawn uniformly (without
    replacement) from ``[0, existing_rows)`` with a larger ``ts``, and the rest new keys
    ``existing_rows, existing_rows + 1, ...``. Sorted by key."""
    rng = np.random.default_rng([SEED, 2])
    n_updates = n // 2
    updated = np.sort(rng.choice(existing_rows, size=n_updates, replace=False)).astype(np.int64)
    fresh = np.arange(existing_rows, existing_rows + (n - n_updates), dtype=np.int64)
    numbers = np.concatenate([updated, fresh])
    ts = np.concatenate([UPDATE_TS + np.arange(n_updates, dtype=np.int64), APPEND_TS + fresh])
    return _rows(numbers, ts, rng)


def read_range(existing_rows: int, n_keys: int) -> tuple[str, str]:
    """``(a, b)`` such that ``a <= key < b`` holds exactly ``n_keys`` consecutive
    existing keys, in the middle of the key space."""
    n_keys = min(n_keys, existing_rows)
    start = max(0, existing_rows // 2 - n_keys // 2)
    return key(start), key(start + n_keys)


def update_batch(existing_rows: int, n: int, round_: int) -> pa.Table:
    """``n`` updates of existing keys drawn uniformly (without replacement) from
    ``[0, existing_rows)``, round ``round_`` of several: each round draws other keys and
    gives them a ``ts`` larger than every earlier round's, so the latest round wins
    wherever two rounds updated one key. Sorted by key; no new keys, so a merge-on-read
    table keeps its file groups and every round writes one log to each of them."""
    rng = np.random.default_rng([SEED, 3, round_])
    numbers = np.sort(rng.choice(existing_rows, size=min(n, existing_rows), replace=False)).astype(np.int64)
    ts = UPDATE_TS + round_ * existing_rows + np.arange(len(numbers), dtype=np.int64)
    return _rows(numbers, ts, rng)


def shuffled(table: pa.Table) -> pa.Table:
    """``table``'s rows in a fixed random order: written in that order, every file of a
    table holds keys from all over the key space (what clustering is there to fix)."""
    rng = np.random.default_rng([SEED, 4, table.num_rows])
    return table.take(pa.array(rng.permutation(table.num_rows)))
