"""Deterministic data for the benchmarks: the same rows for every system, in a chosen shape.

Rows have four columns: ``key``, ``ts`` (int64, the ordering field), ``value`` (double)
and ``category`` (string, 100 values). Every row has a number; its key is a pure function
of that number, and everything is a pure function of the arguments and a fixed seed,
built with Arrow compute and numpy (no Python loop over rows), so a 5M-row table is
generated in about a second.

Why a shape (issue 30, item 7): numbers measured only on sequential keys appended in key
order flatter a format whose files each hold a narrow key range; users' data is rarely
like that. A :class:`Shape` says which keys and which row order a batch has:

* ``keys="sequential"``: ``k000000042`` (zero-padded, so key order is number order and a
  range of keys is a range of row numbers); ``keys="uuid"``: 32 hex digits that look
  random (a bijective 64-bit mix of the number, twice), as CDC from an OLTP database with
  UUID keys delivers; key order has nothing to do with number order.
* ``order="random"``: every batch (appends, upserts, updates) in a fixed random row order;
  ``order="sorted"``: every batch sorted by key (the shape the benchmarks used before).

The functions' ``shape`` defaults to :data:`SORTED_SEQUENTIAL`, so benchmarks that do not
choose a shape measure what they always did; ``bench write``, ``bench lookup`` and ``bench
scale`` choose one from their ``--keys``/``--order`` flags (default :data:`DEFAULT`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

T = TypeVar("T")

SEED = 20261122
KEY_WIDTH = 9
N_CATEGORIES = 100
#: Base of ``ts`` for appended rows; updates get ``UPDATE_TS`` + n, always larger.
APPEND_TS = 1_700_000_000_000
UPDATE_TS = 1_800_000_000_000

KEY_KINDS = ("sequential", "uuid")
ORDERS = ("random", "sorted")

SCHEMA = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("ts", pa.int64(), nullable=False),
        pa.field("value", pa.float64()),
        pa.field("category", pa.string()),
    ]
)

_CATEGORIES = pa.array([f"cat_{i:02d}" for i in range(N_CATEGORIES)], pa.string())


@dataclass(frozen=True)
class Shape:
    """Which keys (``sequential`` or ``uuid``) and which row order in every batch
    (``random`` or ``sorted`` by key) the data has."""

    keys: str = "sequential"
    order: str = "random"

    def __post_init__(self) -> None:
        if self.keys not in KEY_KINDS or self.order not in ORDERS:
            raise ValueError(f"unknown shape {self.keys}/{self.order}: keys {KEY_KINDS}, order {ORDERS}")

    @property
    def label(self) -> str:
        """Short, for titles and file names: ``uuid keys, random order``."""
        return f"{self.keys} keys, {self.order} order"

    def describe(self) -> str:
        """One sentence for a report: what the keys look like and how batches are ordered."""
        keys = (
            "sequential keys (`k000000000` on: key order is the order rows were first written)"
            if self.keys == "sequential"
            else "random keys (32 hex digits like UUIDs without dashes, as CDC from an OLTP database "
            "with UUID keys delivers: every batch's keys spread over the whole key space)"
        )
        order = (
            "every batch (appends and upsert) in random row order"
            if self.order == "random"
            else "every batch (appends and upsert) sorted by key: numbers that hold for sorted input only"
        )
        return f"Data shape: {keys}; {order}."

    def as_dict(self) -> dict[str, str]:
        return {"keys": self.keys, "order": self.order}


#: What the benchmarks measure unless told otherwise: sequential keys, batches unsorted.
DEFAULT = Shape("sequential", "random")
#: The shape every benchmark had before issue 30 (kept to reproduce old numbers).
SORTED_SEQUENTIAL = Shape("sequential", "sorted")


def add_shape_options(parser: object, default: Shape = DEFAULT) -> None:
    """``--keys`` and ``--order`` on a benchmark's ``argparse`` parser; each takes one
    value or several, comma-separated (``--keys sequential,uuid``: one run per shape)."""
    import argparse

    assert isinstance(parser, argparse.ArgumentParser)

    def choices(allowed: tuple[str, ...]) -> Any:
        def parse(text: str) -> list[str]:
            values = [v.strip() for v in text.split(",") if v.strip()]
            bad = [v for v in values if v not in allowed]
            if bad or not values:
                raise argparse.ArgumentTypeError(f"{text!r}: choose from {', '.join(allowed)} (comma-separated)")
            return list(dict.fromkeys(values))

        return parse

    parser.add_argument(
        "--keys",
        type=choices(KEY_KINDS),
        default=None,
        help="record keys: sequential (k000000042) or uuid (32 random-looking hex digits), or both "
        f"comma-separated for a run of each; default {default.keys}",
    )
    parser.add_argument(
        "--order",
        type=choices(ORDERS),
        default=None,
        help="row order of every batch (appends, upserts): random, or sorted by key, or both "
        f"comma-separated; default {default.order}",
    )


def shapes_of(keys: list[str] | None, order: list[str] | None, default: Shape = DEFAULT) -> list[Shape]:
    """Every shape the flags ask for (keys x order), ``default``'s where a flag was not given."""
    return [Shape(k, o) for k in (keys or [default.keys]) for o in (order or [default.order])]


def _mix(x: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64's finaliser of ``x + salt``: a bijection of uint64, so distinct
    numbers get distinct values."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(salt)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


_HEX = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def uuid_order(numbers: np.ndarray) -> np.ndarray:
    """The first 64 bits of each number's uuid key: sorting by it sorts by key (the key
    is these bits in big-endian hex, then 64 more)."""
    return _mix(np.asarray(numbers, dtype=np.int64).astype(np.uint64), SEED)


def _uuid_keys(numbers: np.ndarray) -> pa.Array:
    hi = uuid_order(numbers)
    lo = _mix(np.asarray(numbers, dtype=np.int64).astype(np.uint64), SEED * 7 + 1)
    words = np.stack([hi, lo], axis=1).astype(">u8")  # big-endian: hex order is number order
    raw = words.view(np.uint8).reshape(len(numbers), 16)
    hexed = np.empty((len(numbers), 32), dtype=np.uint8)
    hexed[:, 0::2] = _HEX[raw >> 4]
    hexed[:, 1::2] = _HEX[raw & 0x0F]
    offsets = np.arange(0, 32 * (len(numbers) + 1), 32, dtype=np.int32)
    return pa.StringArray.from_buffers(len(numbers), pa.py_buffer(offsets), pa.py_buffer(hexed.tobytes()))


def key(i: int, kind: str = "sequential") -> str:
    """The key of row number ``i``."""
    if kind == "uuid":
        return str(_uuid_keys(np.array([i], dtype=np.int64))[0])
    return f"k{i:0{KEY_WIDTH}d}"


def keys(numbers: np.ndarray, kind: str = "sequential") -> pa.Array:
    """Keys of many row numbers, vectorised."""
    if kind == "uuid":
        return _uuid_keys(numbers)
    digits = pc.utf8_lpad(pa.array(numbers, pa.int64()).cast(pa.string()), KEY_WIDTH, "0")
    return pc.binary_join_element_wise("k", digits, "")


def _rows(numbers: np.ndarray, ts: np.ndarray, rng: np.random.Generator, shape: Shape, salt: int) -> pa.Table:
    """The rows of ``numbers`` (given in key order for sequential keys) in ``shape``'s order."""
    n = len(numbers)
    cats = _CATEGORIES.take(pa.array(rng.integers(0, N_CATEGORIES, n), pa.int32()))
    table = pa.Table.from_arrays(
        [keys(numbers, shape.keys), pa.array(ts, pa.int64()), pa.array(rng.random(n), pa.float64()), cats],
        schema=SCHEMA,
    )
    if shape.order == "random":
        perm = np.random.default_rng([SEED, 5, salt, n]).permutation(n)
        return table.take(pa.array(perm))
    if shape.keys == "uuid":
        return table.take(pa.array(np.argsort(uuid_order(numbers), kind="stable")))
    return table


def append_batch(index: int, rows_per_batch: int, shape: Shape = SORTED_SEQUENTIAL) -> pa.Table:
    """Append number ``index``: rows ``index * rows_per_batch`` up to the next batch."""
    rng = np.random.default_rng([SEED, 1, index])
    numbers = np.arange(index * rows_per_batch, (index + 1) * rows_per_batch, dtype=np.int64)
    return _rows(numbers, APPEND_TS + numbers, rng, shape, salt=index)


def upsert_numbers(existing_rows: int, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The row numbers :func:`upsert_batch` updates (sorted) and the new ones it adds."""
    rng = np.random.default_rng([SEED, 2])
    n_updates = n // 2
    updated = np.sort(rng.choice(existing_rows, size=n_updates, replace=False)).astype(np.int64)
    fresh = np.arange(existing_rows, existing_rows + (n - n_updates), dtype=np.int64)
    return updated, fresh


def upsert_batch(existing_rows: int, n: int, shape: Shape = SORTED_SEQUENTIAL) -> pa.Table:
    """``n`` rows: ``n // 2`` updates of existing keys drawn uniformly (without
    replacement) from ``[0, existing_rows)`` with a larger ``ts``, and the rest new keys
    ``existing_rows, existing_rows + 1, ...``, in ``shape``'s order."""
    rng = np.random.default_rng([SEED, 2])
    updated, fresh = upsert_numbers(existing_rows, n)
    rng.choice(existing_rows, size=len(updated), replace=False)  # the draw upsert_numbers made
    numbers = np.concatenate([updated, fresh])
    ts = np.concatenate([UPDATE_TS + np.arange(len(updated), dtype=np.int64), APPEND_TS + fresh])
    return _rows(numbers, ts, rng, shape, salt=999)


def read_range(existing_rows: int, n_keys: int, shape: Shape = SORTED_SEQUENTIAL, new_rows: int = 0) -> tuple[str, str]:
    """``(a, b)`` such that ``a <= key < b`` holds exactly ``n_keys`` keys of the table
    once it has rows ``[0, existing_rows + new_rows)``, in the middle of the key space.
    Sequential keys: ``n_keys`` consecutive existing keys (new rows come after them all).
    uuid keys: the ``n_keys`` smallest keys from the middle of the hex space on; some of
    them may be new rows (:func:`rows_in_range` counts the ones among the first rows)."""
    if shape.keys == "sequential":
        n_keys = min(n_keys, existing_rows)
        start = max(0, existing_rows // 2 - n_keys // 2)
        return key(start), key(start + n_keys)
    order = uuid_order(np.arange(existing_rows + new_rows, dtype=np.int64))
    upper = np.flatnonzero(order >= np.uint64(1 << 63))  # row numbers in the upper half
    take = min(n_keys + 1, len(upper))
    nearest = upper[np.argpartition(order[upper], take - 1)[:take]] if take < len(upper) else upper
    nearest = nearest[np.argsort(order[nearest])]
    a = key(int(nearest[0]), "uuid")
    b = key(int(nearest[n_keys]), "uuid") if len(nearest) > n_keys else "g"  # "g" sorts after any hex key
    return a, b


def rows_in_range(numbers: np.ndarray, a: str, b: str, kind: str) -> int:
    """How many of the rows ``numbers`` have ``a <= key < b``."""
    k = keys(numbers, kind)
    return int(pc.sum(pc.and_(pc.greater_equal(k, a), pc.less(k, b))).as_py() or 0)


def update_batch(existing_rows: int, n: int, round_: int, shape: Shape = SORTED_SEQUENTIAL) -> pa.Table:
    """``n`` updates of existing keys drawn uniformly (without replacement) from
    ``[0, existing_rows)``, round ``round_`` of several: each round draws other keys and
    gives them a ``ts`` larger than every earlier round's, so the latest round wins
    wherever two rounds updated one key. No new keys, so a merge-on-read table keeps its
    file groups and every round writes one log to each of them. In ``shape``'s order."""
    rng = np.random.default_rng([SEED, 3, round_])
    numbers = np.sort(rng.choice(existing_rows, size=min(n, existing_rows), replace=False)).astype(np.int64)
    ts = UPDATE_TS + round_ * existing_rows + np.arange(len(numbers), dtype=np.int64)
    return _rows(numbers, ts, rng, shape, salt=1000 + round_)


def shuffled(table: pa.Table) -> pa.Table:
    """``table``'s rows in a fixed random order: written in that order, every file of a
    table holds keys from all over the key space (what clustering is there to fix)."""
    rng = np.random.default_rng([SEED, 4, table.num_rows])
    return table.take(pa.array(rng.permutation(table.num_rows)))


def prepare_inputs(
    workdir: Path, rows: int, appends: int, read_keys: int, shape: Shape = SORTED_SEQUENTIAL, delta_read: str = "scan"
) -> dict[str, Any]:
    """The write benchmark's inputs (``bench write``, ``lookup``, ``scale``, ``services``):
    the append batches and the upsert batch as Parquet under ``workdir/input``, in
    ``shape``, and the run's ``spec.json`` (which states the shape, the range read, and
    how the children read deltalake: ``scan`` or ``dataset``)."""
    import pyarrow.parquet as pq

    per = rows // appends
    total = per * appends
    inputs = workdir / "input"
    inputs.mkdir(parents=True, exist_ok=True)
    for i in range(appends):
        pq.write_table(append_batch(i, per, shape), inputs / f"append_{i:02d}.parquet")
    upsert_rows = max(2, total // 10)
    pq.write_table(upsert_batch(total, upsert_rows, shape), inputs / "upsert.parquet")
    a, b = read_range(total, read_keys, shape, new_rows=upsert_rows - upsert_rows // 2)
    spec = {
        **shape.as_dict(),
        "delta_read": delta_read,
        "rows": total,
        "appends": appends,
        "rows_per_append": per,
        "upsert_rows": upsert_rows,
        "read_a": a,
        "read_b": b,
        "read_keys": min(read_keys, total),
        "upsert_bytes": (inputs / "upsert.parquet").stat().st_size,
    }
    (workdir / "spec.json").write_text(json.dumps(spec, indent=2))
    return spec


def in_fresh_process(fn: Callable[..., T], *args: Any) -> T:
    """``fn(*args)`` in a fresh (spawned) interpreter. Why: a process's peak memory on
    Linux starts from its parent's at fork, so a benchmark that generated its data in
    the parent (5M uuid keys, their order, the range read) would lend that memory to
    every step's child, whose ``ru_maxrss`` is the step's reported peak."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()
