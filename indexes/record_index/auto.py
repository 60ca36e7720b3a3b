"""When a keyed table builds its record index by itself (issue 30, item 2).

Without a record index, a key check (an insert's duplicate check, an upsert's or a
delete's tagging) reads the key column of every file whose key range may hold one of a
batch's keys. Keys that arrive in order (sequences, timestamps) put a new batch past
every file's range, so nothing is read; random keys (UUIDs, hashes) give every file a
range spanning the key space, so every check reads the whole table: ten 500k-row inserts
took 3.3-3.6x deltalake's appends, the tenth eight times the first (docs/performance.md,
"Defaults for keyed tables"). An index makes a check cost the batch, but it costs every
write a delta (about the bytes of the data file again), which pays only for random keys.

So a keyed table starts without one, as Hudi's record index is opt-in, and builds it
itself once what it holds shows its keys are random, as Paimon's dynamic-bucket tables
keep a key index nobody asked for:

- the table holds at least ``index.record-index.auto-rows`` rows (below that a check
  reads little), and
- most of an insert's keys fall inside the key range the table's files cover (new keys
  that do not arrive in order), or most of its writes' key ranges overlap one another
  (the files of batches of random keys, whatever the write now; one write's own files
  overlap whenever its rows come in random order, so they count as one range).

An upsert's batch inside the table's range says nothing by itself (its updates name
keys the table holds), hence the second test. Both look at file statistics and a sample
of the batch: the decision costs well under a millisecond of key comparisons. Only a
single-column key has ranges to compare; a composite key keeps the user's choice.

A table created with ``index.record-index`` set to false never builds one, and an index
built this way that a user drops stays dropped (:func:`dropped_before`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...timeline.instant import Action
from ...timeline.plans import IndexCreatePlan, IndexDropPlan, index_plan
from ...timeline.timeline import Timeline
from ...timeline.view.file_group import FileSlice
from ..states import IndexKind

#: Keys of a batch compared with the table's key range: enough to tell "most" from
#: "a few late arrivals" (a share's error is under 2% at this size), cheap at any size.
SAMPLE_KEYS = 1024
#: Share of the sampled keys inside the table's key range (or of files whose ranges
#: overlap) from which the keys count as random.
MOST = 0.5


def _bounds(slices: Sequence[FileSlice]) -> list[tuple[Any, Any]]:
    """The key range of each write's files: for each instant that wrote a slice's base
    (its first log without one), the union of those slices' ranges. One write's files
    overlap one another whenever its rows come in random order (a large batch split
    over files, keys in order or not), so only ranges of different writes tell random
    keys. A slice whose range is unknown (a file written before ranges were recorded)
    neither proves nor disproves anything.

    Raises:
        TypeError: ranges of types that do not compare (after a schema change).
    """
    by_write: dict[int, tuple[Any, Any]] = {}
    for s in slices:
        if not any(f.rows for f in s.files) or (b := s.key_bounds()) is None:
            continue
        lo, hi = by_write.get(s.files[0].instant, b)
        by_write[s.files[0].instant] = (min(lo, b[0]), max(hi, b[1]))
    return list(by_write.values())


def ranges_overlap(bounds: Sequence[tuple[Any, Any]]) -> bool:
    """Whether most of the key ranges cover a common key: the most ranges holding one
    key is at least two and at least half of them (files of random keys each span the
    key space; files of keys in order lie side by side, a batch's few files at most
    overlapping one another)."""
    if len(bounds) < 2:
        return False
    # A range opens before one closing at the same key ends: they share that key.
    events = sorted([(lo, 0) for lo, _ in bounds] + [(hi, 1) for _, hi in bounds])
    depth = deepest = 0
    for _, closing in events:
        depth += -1 if closing else 1
        deepest = max(deepest, depth)
    return deepest >= 2 and deepest >= MOST * len(bounds)


def share_inside(keys: pa.Array | pa.ChunkedArray, lo: Any, hi: Any) -> float:
    """The share of an evenly spaced sample of ``keys`` that lies in ``[lo, hi]``."""
    n = len(keys)
    if n == 0:
        return 0.0
    picks = pa.array(np.linspace(0, n - 1, num=min(n, SAMPLE_KEYS), dtype=np.int64))
    sample = keys.take(picks)
    lo_s, hi_s = pa.scalar(lo, sample.type), pa.scalar(hi, sample.type)
    inside = pc.and_(pc.greater_equal(sample, lo_s), pc.less_equal(sample, hi_s))
    return pc.sum(inside.cast(pa.int64())).as_py() / len(sample)


def keys_look_random(slices: Sequence[FileSlice], inserted: pa.Array | pa.ChunkedArray | None, min_rows: int) -> bool:
    """Whether a table of these latest ``slices`` should build its record index before
    a write whose new keys (an insert's; None for other writes) are ``inserted``."""
    if min_rows <= 0 or sum(f.rows for s in slices for f in s.files) < min_rows:
        return False
    try:
        bounds = _bounds(slices)
        if not bounds:
            return False
        if inserted is not None:
            lo, hi = min(b[0] for b in bounds), max(b[1] for b in bounds)
            if share_inside(inserted, lo, hi) >= MOST:
                return True
        return ranges_overlap(bounds)
    except (TypeError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return False  # bounds of types that do not compare (a schema change): no opinion


def dropped_before(timeline: Timeline) -> bool:
    """Whether a record index was dropped in ``timeline`` (its active part): a table
    never builds one again by itself after a user dropped one."""
    created: dict[int, bool] = {}
    for inst in timeline.by_action(Action.INDEXING):
        plan = index_plan(inst.plan)
        if isinstance(plan, IndexCreatePlan):
            created[inst.id] = plan.kind == IndexKind.RECORD_INDEX
        elif isinstance(plan, IndexDropPlan) and created.get(plan.created if plan.created is not None else -1):
            return True
    return False
