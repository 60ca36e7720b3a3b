"""Writing whole generations of a record index: the bulk build and the fold of deltas.

Both write a new generation beside the old one and publish it with its manifest last
(:func:`.store.publish`), then remove what it supersedes: older generations, the deltas
it folded, the deltas of rolled-back instants. A crash at any point leaves either the
old generation (and its deltas) or the new one complete; what it leaves half-written is
named by no manifest and removed by the next build or fold.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import pyarrow as pa

from ...timeline.diagnostics import faults
from ...timeline.errors import IndexBuildError
from ...timeline.storage.filesystem import Storage
from ...timeline.timeline import Timeline
from ..entries import IndexTarget, MapFn, serial_map
from . import spill as spilling
from .live_entries import partial_rewrites
from .spill import remove_spill, spill, write_buckets, write_in_memory
from .store import (
    Generation,
    folder_of,
    new_token,
    newest_generation,
    publish,
    remove_older,
    remove_unnamed,
    row_count,
    settled_deltas,
    visible_deltas,
)


@dataclass(frozen=True)
class Built:
    """What a bulk build wrote."""

    generation: Generation
    files: int
    entries: int


def build(
    storage: Storage,
    files: Collection[tuple[str, int]],
    base: Timeline,
    target: IndexTarget,
    schema: pa.Schema,
    map_fn: MapFn = serial_map,
    lost: Callable[[list[str]], list[str]] | None = None,
    fence: Callable[[], None] | None = None,
    sweep: bool = True,
) -> Built:
    """A generation at ``base`` (a snapshot) from its live data ``files`` (path, bytes).

    Args:
        lost: of the data files found missing, those still live (their entries cannot
            be left out); None: every missing file is lost.
        fence: raises when this attempt may no longer publish (checked right before).
        sweep: first remove what killed attempts left (the indexer's build; not a
            rebuild of a ready index, whose folds may be writing beside it).

    Raises:
        IndexBuildError: a live data file cannot be read, or a key cannot be indexed.
    """
    partition = target.partition
    keep = newest_generation(storage, partition)
    if sweep and keep is not None and keep.seq == base.last_seq and keep.buckets == target.buckets:
        # An earlier attempt published this very generation (same snapshot, same
        # entries) and died after: resume from it.
        for p in settled_deltas(storage, partition, base):
            storage.delete(p)
        return Built(keep, len(files), keep.rows)
    if sweep:
        # A killed attempt's spill and unpublished folders go first: restart, never
        # resume from half-written files.
        remove_unnamed(storage, partition, {keep.token} if keep else set(), base.last_seq, spills=True)
    token = new_token()
    folder = folder_of(partition, base.last_seq, token)
    if sum(size for _, size in files) <= spilling.IN_MEMORY_BYTES:
        counts, spilled = write_in_memory(storage, list(files), target, schema, folder, map_fn)
    else:
        spilled = spill(storage, list(files), target, schema, token, map_fn)
    missing = list(spilled.gone)
    still = lost(missing) if lost is not None else missing
    if still:
        if spilled.folder:
            remove_spill(storage, spilled)
        raise IndexBuildError(f"index {target.name!r}: {len(still)} live data file(s) cannot be read, e.g. {still[0]}")
    faults.point("record_index.after_spill")
    if spilled.folder:
        counts = write_buckets(storage, spilled.files, spilled.rows, target, schema, folder, map_fn)
        remove_spill(storage, spilled)
    if fence is not None:
        fence()
    faults.point("record_index.before_publish")
    gen = publish(storage, partition, base.last_seq, token, target.buckets, counts)
    remove_older(storage, partition, gen)
    for p in settled_deltas(storage, partition, base):
        storage.delete(p)
    return Built(gen, len(files) - len(missing), spilled.rows)


def fold(
    storage: Storage,
    timeline: Timeline,
    live: Collection[str],
    target: IndexTarget,
    schema: pa.Schema,
    map_fn: MapFn = serial_map,
) -> Generation | None:
    """Fold the deltas of instants completed in ``timeline`` into a new generation at its
    position, keeping the entries of ``live`` files only (the files of its snapshot);
    None when there was nothing to fold."""
    partition = target.partition
    old = newest_generation(storage, partition)
    after = old.seq if old is not None else -1
    if after >= timeline.last_seq:
        return None  # a fold at or past this position was published meanwhile
    deltas = visible_deltas(storage, partition, timeline, after)
    if not deltas and old is not None:
        return None
    token = new_token()
    folder = folder_of(partition, timeline.last_seq, token)
    rows = (old.rows if old is not None else 0) + row_count(storage, deltas)
    own = {b: storage.path(p) for b, (p, _) in old.files.items()} if old is not None else {}
    seals = {storage.path(p): seal for p, seal in old.seals.items()} if old is not None else {}
    live_paths = pa.array(sorted(live), pa.string())
    # Partial rewrites' chains are resolved here: the generation names each key by
    # the live file holding it, so it needs no chain.
    try:
        partial = partial_rewrites(storage, deltas)
        counts = write_buckets(storage, deltas, rows, target, schema, folder, map_fn, live_paths, own, partial, seals)
    except FileNotFoundError:
        newer = newest_generation(storage, partition)
        if newer is not None and newer.seq > after:
            # Another fold (a service's beside a writer's) published first and removed
            # the deltas it took: nothing is left for this one. Its half-written folder
            # is removed by the next fold (remove_unnamed).
            return None
        raise
    faults.point("record_index.before_publish")
    gen = publish(storage, partition, timeline.last_seq, token, target.buckets, counts)
    remove_older(storage, partition, gen)
    for p in settled_deltas(storage, partition, timeline):
        storage.delete(p)
    return gen
