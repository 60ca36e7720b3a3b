"""The layout of the test and benchmark trees (issue 26), checked against the tree: no
folder of tests/ or bench/ holds more modules than a reader can take in at a glance, and
every child-process script of the tests lives in tests/children/. The package's own layout
(folders, installed packages, import direction) is checked by ``test_layout.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.test_layout import ROOT

#: At most this many modules (``__init__.py``, ``conftest.py`` and helpers included) directly
#: in one folder of tests/ or bench/ (issue 26): more, and a reader cannot see what is there.
MAX_MODULES_PER_FOLDER = 15

#: Where every child-process script of the tests lives (started by path, or imported as
#: ``tests.children.<module>`` by ``multiprocessing``): one folder, not one per subsystem.
CHILDREN = ROOT / "tests" / "children"


def _folders(top: Path) -> Iterator[Path]:
    yield top
    for p in sorted(top.rglob("*")):
        if p.is_dir() and "__pycache__" not in p.parts and not any(part.startswith(".") for part in p.parts):
            yield p


@pytest.mark.parametrize("top", ["tests", "bench"])
def test_no_folder_holds_more_than_fifteen_modules(top: str) -> None:
    crowded = {
        str(f.relative_to(ROOT)): n
        for f in _folders(ROOT / top)
        if (n := len(list(f.glob("*.py")))) > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_child_process_scripts_live_in_tests_children() -> None:
    patterns = ("*_child.py", "*_worker.py", "*_workers.py", "_child.py", "*_job.py", "catalog_race.py")
    stray = sorted(
        str(p.relative_to(ROOT))
        for pat in patterns
        for p in (ROOT / "tests").rglob(pat)
        if p.parent != CHILDREN and "__pycache__" not in p.parts
    )
    assert stray == []
    assert (CHILDREN / "table_workers.py").is_file()
