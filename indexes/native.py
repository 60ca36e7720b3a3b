"""The C loops of index entries, when lakeline was installed with them.

``_native`` (``indexes/_native.c``, built by ``setup.py``) computes text hashes, HLL
registers and bloom bits in one pass each and without the GIL; the numpy code in
:mod:`.hashing`, :mod:`.hll` and :mod:`.bloom` computes the same values and is used
when the extension was not built (no C compiler at install time). Both give
byte-identical entries, so tables move freely between installs with and without it.

``LAKELINE_NATIVE=0`` in the environment turns the extension off (to compare or to
rule it out); ``make test`` runs the model tests a second time that way. A malformed
input to a loop (a count, offset or header its buffers do not back: a damaged file) is
a ``CorruptFileError``, never a read outside a buffer.

The loops release the GIL, so a long one is split in two halves, one on a helper
thread (:func:`in_halves`): a 5M-row insert's key hashes and key bounds run before its
files are written, on one core of two otherwise (issue 30's appends).
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import ModuleType
from typing import TypeVar

T = TypeVar("T")

#: Rows from which :func:`in_halves` splits a loop: below it the hop to the helper
#: thread costs more than the half it saves.
SPLIT_ROWS = 1_000_000


def load_extension(name: str) -> ModuleType | None:
    """The optional C extension module ``name`` (``lakeline.…``), or None when it was not
    built or ``LAKELINE_NATIVE=0`` turns lakeline's extensions off."""
    if os.environ.get("LAKELINE_NATIVE", "1") == "0":
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


#: The extension module, or None when numpy does the work.
NATIVE: ModuleType | None = load_extension("lakeline.indexes._native")


_helper: ThreadPoolExecutor | None = None
_helper_lock = threading.Lock()


def _forget_helper() -> None:
    global _helper
    _helper = None  # a forked child has none of its parent's threads


os.register_at_fork(after_in_child=_forget_helper)


def in_halves(loop: Callable[[int, int], T], n: int) -> list[T]:
    """``loop(start, stop)`` over rows ``[0, n)``: as two halves, the second on a helper
    thread, when the extension is built and ``n`` is at least :data:`SPLIT_ROWS`; else
    in one call. ``loop`` must release the GIL to gain, and must not call this itself
    (the one helper thread would wait on itself)."""
    global _helper
    if NATIVE is None or n < SPLIT_ROWS:
        return [loop(0, n)]
    with _helper_lock:
        if _helper is None:
            _helper = ThreadPoolExecutor(1, thread_name_prefix="lakeline-native")
        pool = _helper
    mid = n // 2
    second = pool.submit(loop, mid, n)
    return [loop(0, mid), second.result()]
