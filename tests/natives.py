"""lakeline's C extensions in the tests: whether they were built, and a switch that turns
them off or on in this process.

``LAKELINE_NATIVE=0`` turns the extensions off when lakeline is imported
(:func:`lakeline.indexes.native.load_extension`), and every module that has a C loop
keeps the result in its own ``NATIVE``. :func:`use_native` sets those attributes, so one
test can compare the C loops with their numpy and Arrow references on the same input,
whatever the environment. :func:`require` is what a C-vs-reference test asks first:
without the extension it skips, except under CI, where it fails (``make test`` builds
them).
"""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest

from tests.ci import under_ci

INDEX_LOOPS = "lakeline.indexes._native"
POSITION_FILTER = "lakeline.table._position_filter"

#: Each lakeline module that holds a ``NATIVE``, and the extension it holds
#: (``test_native.py`` checks the package has no other).
USERS: dict[str, str] = {
    "lakeline.indexes.native": INDEX_LOOPS,
    "lakeline.indexes.hashing": INDEX_LOOPS,
    "lakeline.indexes.coupons": INDEX_LOOPS,
    "lakeline.indexes.bloom": INDEX_LOOPS,
    "lakeline.indexes.record_index.hash_bits": INDEX_LOOPS,
    "lakeline.table.write.dedupe": INDEX_LOOPS,
    "lakeline.table.read.position_filter": POSITION_FILTER,
}


def built(name: str) -> ModuleType | None:
    """The extension module ``name`` if it was built, whatever ``LAKELINE_NATIVE`` says."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def require(name: str) -> ModuleType:
    """The extension ``name``; the test skips without it, or fails under CI."""
    module = built(name)
    if module is None:
        message = f"{name} was not built (no C compiler at install time?)"
        if under_ci():
            pytest.fail(f"{message}: under CI the C extensions must build", pytrace=False)
        pytest.skip(message)
    return module


def use_native(monkeypatch: pytest.MonkeyPatch, on: bool) -> None:
    """Every lakeline module's C loops on (the built extensions, which must exist) or
    off (numpy and Arrow), until the test ends; child processes inherit the choice."""
    for user, extension in USERS.items():
        monkeypatch.setattr(importlib.import_module(user), "NATIVE", require(extension) if on else None)
    monkeypatch.setenv("LAKELINE_NATIVE", "1" if on else "0")
