"""The hashes of the record-index deltas a process wrote, kept for its later lookups.

A lookup asks every delta written since the last fold whether it holds one of its keys
(:meth:`.lookup.RecordIndexReader.entries`): it decodes the delta's hashes and asks each of
the lookup's probe set, 13 ms for a 500k-entry delta. The tenth 500k insert of random
keys into an indexed table paid that for nine deltas holding none of its keys, and most of
them were the ones the same process had just written.

So a writer remembers the hashes of each delta it writes (a reference to the array it wrote
from, no copy), and a thread of its own sorts them and sets their bits in a bit table it
shares with the deltas remembered before it (:mod:`.hash_bits`; 16 to 32 bits an entry, in
tiers: :class:`DeltaHashes`). That work (50 ms for a 500k-entry delta) is done while the
writer goes on, on the other core, not by the next lookup; a lookup that comes first does
it itself. A lookup then asks each of its keys once per tier; only the few that pass (3-6%)
are searched in each delta's sorted hashes, and only a delta that holds one is read. The
tagging of the tenth 500k insert: 0.17 s became 0.06-0.08 s, then 0.03-0.04 s once
neither its keys were sorted nor the deltas prepared on its path.

A generation's bucket files are kept the same way, read on a lookup's first use (a
generation built or folded by another process included): a record index the table built
by itself on 500k rows cost each later insert of new keys 0.1 s of reading its bucket
files, which none of the keys was in (:meth:`.lookup.RecordIndexReader.entries`).

Why it is safe: a delta or bucket file never changes once written. A delta's name
carries its instant and a random token
(:meth:`lakeline.indexes.metadata_table.MetadataTable.write_updates`), a generation's
folder its position and one, so a path names one content for good; a delta rolled back
or folded away is simply never asked again, and leaves when the entries kept pass
:data:`MAX_ENTRIES` (oldest first). Deltas this process did not write are read as before:
a process that only looks up pays nothing extra, and one that writes once pays nothing
but the reference.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from . import hash_bits

#: Entries kept at most (8 bytes each, and 2-4 in the bit tables): 8M is about 100 MB.
MAX_ENTRIES = 8_000_000


# eq=False: tiers are told apart by identity. A generated ``__eq__`` compares the bit
# arrays, so ``list.remove`` of a tier that is not first among equal widths raised
# "truth value of an array is ambiguous" once a process had evicted past MAX_ENTRIES.
@dataclass(eq=False)
class _Tier:
    """A bit table over the deltas added while it had room (mutable, under the lock)."""

    width: int
    bits: np.ndarray
    #: Entries it takes before a new tier starts: 16 bits each at least (about 6% pass).
    capacity: int
    entries: int = 0
    #: Deltas of it still kept: it goes with the last.
    live: int = 0


class DeltaHashes:
    """Delta paths -> their sorted hashes, and bit tables over them (thread-safe).

    The bit tables are tiers: a table is sized when it starts (for as many entries as
    were kept by then, at least the delta that starts it) and takes deltas until full;
    then a new, larger one starts. Nothing is rebuilt (rebuilding one table for 4.5M
    entries cost a lookup 0.16 s), and a lookup asks a few tables."""

    def __init__(self, max_entries: int = MAX_ENTRIES, prepare_ahead: bool = True) -> None:
        self.max_entries = max_entries
        self.prepare_ahead = prepare_ahead
        self._lock = threading.Lock()
        self._worker: ThreadPoolExecutor | None = None
        self._reset()

    def _reset(self) -> None:
        self._raw: OrderedDict[str, np.ndarray] = OrderedDict()  # written, not yet prepared
        self._sorted: OrderedDict[str, np.ndarray] = OrderedDict()
        self._tier_of: dict[str, _Tier] = {}
        self._tiers: list[_Tier] = []
        self._entries = 0

    def remember(self, path: str, hashes: np.ndarray) -> None:
        """Keep ``hashes`` (int64), the entries of the delta just written at ``path``."""
        with self._lock:
            if path in self._raw or path in self._sorted:
                return
            self._raw[path] = hashes
            self._entries += len(hashes)
            self._evict(keep=(path,))
            if self.prepare_ahead:
                if self._worker is None:
                    self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lakeline-delta-hashes")
                self._worker.submit(self._prepare, path)

    def held(self, paths: Sequence[str], probes: np.ndarray) -> tuple[dict[str, np.ndarray], list[str]]:
        """For each of ``paths`` this process remembers, the probes (of ``probes``, int64,
        in any order) whose hashes it holds, sorted; and the paths it does not remember,
        which the caller reads."""
        with self._lock:
            for path in paths:
                if path in self._raw:
                    self._prepare_locked(path)  # asked before the worker got to it
                elif path in self._sorted:
                    self._sorted.move_to_end(path)
            known = [(p, self._sorted[p], self._tier_of[p]) for p in paths if p in self._sorted]
        # Outside the lock: a tier's bits only gain bits meanwhile, a superset of its deltas.
        passed: dict[int, np.ndarray] = {}
        out = {}
        for path, stored, tier in known:
            if id(tier) not in passed:
                # Only the few probes that pass are sorted (the binary search wants them so).
                passed[id(tier)] = np.sort(probes[hash_bits.maybe(tier.bits, tier.width, probes)])
            mine = passed[id(tier)]
            out[path] = mine[hash_bits.in_sorted(stored, mine)]
        return out, [p for p in paths if p not in out]

    def keep(self, key: str, read: Callable[[], np.ndarray]) -> None:
        """Keep the hashes of the immutable index files ``key`` names (a generation's
        folder: all its bucket files), calling ``read()`` for them if not kept yet."""
        with self._lock:
            if key in self._raw or key in self._sorted:
                return
        self.remember(key, read())

    def clear(self) -> None:
        with self._lock:
            self._reset()

    def _prepare(self, path: str) -> None:
        # Under the lock, so a lookup asking meanwhile waits for it instead of doing it
        # twice; numpy's sort releases the GIL, so the writer's thread goes on.
        with self._lock:
            if path in self._raw:
                self._prepare_locked(path)

    # -- under the lock ---------------------------------------------------------------

    def _prepare_locked(self, path: str) -> None:
        self._add(path, np.sort(self._raw.pop(path)))

    def _add(self, path: str, stored: np.ndarray) -> None:
        tier = self._tiers[-1] if self._tiers else None
        if tier is None or tier.entries + len(stored) > tier.capacity:
            width = hash_bits.width_for(max(len(stored), self._entries), lo=16, hi=30)
            tier = _Tier(width, hash_bits.empty_table(width), (1 << width) // 16)
            self._tiers.append(tier)
        hash_bits.set_bits(tier.bits, tier.width, stored)
        tier.entries += len(stored)
        tier.live += 1
        self._sorted[path] = stored
        self._tier_of[path] = tier

    def _evict(self, keep: Sequence[str]) -> None:
        for cache in (self._sorted, self._raw):
            for path in list(cache):
                if self._entries <= self.max_entries:
                    return
                if path not in keep:
                    self._entries -= len(cache.pop(path))
                    tier = self._tier_of.pop(path, None)
                    if tier is not None:
                        tier.live -= 1
                        if not tier.live:
                            self._tiers.remove(tier)


#: The process's deltas (:func:`lakeline.indexes.entries.write_delta` remembers them).
DELTA_HASHES = DeltaHashes()


def _forget_in_child() -> None:
    # A fork copies the lock as it was: held by a thread the child does not have, it
    # would never be released. The child starts empty with a fresh lock (what it did not
    # write, it reads).
    # The worker thread is not the child's either: it starts its own when it writes.
    DELTA_HASHES._lock = threading.Lock()
    DELTA_HASHES._worker = None
    DELTA_HASHES._reset()


os.register_at_fork(after_in_child=_forget_in_child)
