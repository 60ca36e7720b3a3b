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

import importlib
import os
from types import ModuleType


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
