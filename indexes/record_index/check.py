"""``validate`` of a record index: recompute it from the data files, compare entry by entry.

The data files' entries are recomputed the way a build computes them (spilled file by
file, :mod:`.spill`) and compared with what a reader of the snapshot gets (the
generation and the deltas, entries of live files only), one range of buckets at a time,
so validation holds no more in memory than a build. An entry is identified by its file
and row (``path``, ``pos``): each row of a data file has exactly one. A mismatch is an
entry ``missing`` from the index, one the index holds that the data does not
(``extra``), one whose key, hash, bucket or delete flag ``differs``, or one held twice
(``duplicate``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.errors import SnapshotExpiredError
from ...timeline.storage.filesystem import Storage
from ..entries import IndexTarget, MapFn, serial_map
from .rows import BUCKET, DELETED, HASH, PATH, POS, key_columns
from .spill import RANGE_ROWS, RangeTask, range_rows, remove_spill, spill
from .store import CHECK_PREFIX, Generation, new_token, ranges

#: Mismatches reported per range of buckets (a broken index would otherwise list
#: every entry of the table).
MAX_REPORTED = 1000


@dataclass(frozen=True)
class CompareTask:
    """Compare the recomputed and the stored entries of buckets ``[lo, hi)``."""

    expected: RangeTask
    stored: RangeTask
    name: str


def _plain(rows: pa.Table) -> pa.Table:
    return rows.set_column(rows.schema.get_field_index(PATH), PATH, pc.cast(rows.column(PATH), pa.string()))


def compare_task(task: CompareTask) -> list[dict[str, Any]]:
    key = key_columns(task.expected.key)
    exp = _plain(range_rows(task.expected))
    got = _plain(range_rows(task.stored))
    out: list[dict[str, Any]] = []

    def report(rows: pa.Table, problem: str) -> None:
        for r in rows.slice(0, MAX_REPORTED - len(out)).to_pylist():
            out.append(
                {"index": task.name, "path": r[PATH], "pos": r[POS], "key": [r[k] for k in key], "problem": problem}
            )

    counts = got.group_by([PATH, POS], use_threads=False).aggregate([([], "count_all")])
    dupes = counts.filter(pc.greater(counts.column("count_all"), 1))
    if dupes.num_rows:
        report(got.join(dupes.select([PATH, POS]), [PATH, POS], join_type="left semi", use_threads=False), "duplicate")
    report(exp.join(got, [PATH, POS], join_type="left anti", use_threads=False), "missing")
    report(got.join(exp, [PATH, POS], join_type="left anti", use_threads=False), "extra")
    both = exp.join(got, [PATH, POS], join_type="inner", right_suffix="__stored", use_threads=False)
    if both.num_rows:
        same = np.ones(both.num_rows, dtype=bool)
        for c in [BUCKET, HASH, DELETED, *key]:
            eq = pc.fill_null(pc.equal(both.column(c), both.column(f"{c}__stored")), False)
            same &= eq.to_numpy(zero_copy_only=False)
        report(both.filter(pa.array(~same)), "differs")
    return out[:MAX_REPORTED]


def validate(
    storage: Storage,
    files: Sequence[tuple[str, int]],
    generation: Generation | None,
    deltas: Sequence[str],
    target: IndexTarget,
    schema: pa.Schema,
    map_fn: MapFn = serial_map,
) -> list[dict[str, Any]]:
    """Every mismatch between the entries of the live data ``files`` (path, bytes) and
    what the index holds for them: ``generation`` plus ``deltas`` (absolute paths; the
    deltas a reader of the snapshot reads).

    Raises:
        SnapshotExpiredError: a live data file is missing.
    """
    spilled = spill(storage, files, target, schema, new_token(), map_fn, prefix=CHECK_PREFIX)
    try:
        if spilled.gone:
            raise SnapshotExpiredError(f"data file {spilled.gone[0]} of the snapshot being validated is missing")
        live = pa.array(sorted(p for p, _ in files), pa.string())
        own = {b: storage.path(p) for b, (p, _) in generation.files.items()} if generation is not None else {}
        stored_rows = generation.rows if generation is not None else 0
        key = target.columns
        tasks = []
        for lo, hi in ranges(target.buckets, max(spilled.rows, stored_rows), RANGE_ROWS):
            mine = tuple(p for b, p in sorted(own.items()) if lo <= b < hi)
            tasks.append(
                CompareTask(
                    RangeTask(storage, spilled.files, lo, hi, "", key, schema),
                    RangeTask(storage, tuple(deltas) + mine, lo, hi, "", key, schema, live),
                    target.name,
                )
            )
        return [m for part in map_fn(compare_task, tasks) for m in part]
    finally:
        remove_spill(storage, spilled)
