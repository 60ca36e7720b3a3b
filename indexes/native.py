"""The C loops of index entries, when lakeline was installed with them.

``_native`` (``indexes/_native.c``, built by ``setup.py``) computes text hashes, HLL
registers and bloom bits in one pass each and without the GIL; the numpy code in
:mod:`.hashing`, :mod:`.hll` and :mod:`.bloom` computes the same values and is used
when the extension was not built (no C compiler at install time). Both give
byte-identical entries, so tables move freely between installs with and without it.

``LAKELINE_NATIVE=0`` in the environment turns the extension off (to compare or to
rule it out).
"""

from __future__ import annotations

import os
from types import ModuleType


def _load() -> ModuleType | None:
    if os.environ.get("LAKELINE_NATIVE", "1") == "0":
        return None
    try:
        from . import _native
    except ImportError:
        return None
    return _native


#: The extension module, or None when numpy does the work.
NATIVE: ModuleType | None = _load()
