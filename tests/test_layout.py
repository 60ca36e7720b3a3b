"""The package layout of docs/architecture.md ("The map", "Import direction"), checked
against the tree.

Each top-level subsystem folder is installed as ``lakeline.<folder>`` through an explicit
list in ``pyproject.toml``; a folder added without being listed would silently be
missing from ``pip install .``, and heavy optional dependencies leaking into
``lakeline.table`` would make every user pay for Spark and PostgreSQL.

The layering: imports point ``config → timeline → indexes → table → services → spark, cli``
(docs/architecture.md). The tests below read the imports of every module of the package
from its source (``ast``: top-level, inside functions and under ``TYPE_CHECKING`` alike,
because a late import is still a dependency) and check the direction, the one declared
seam, and which modules may import the heavy optional dependencies. The layout of the
test and benchmark trees is checked by ``test_tree_layout.py``.
"""

from __future__ import annotations

import ast
import fnmatch
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Folders with an __init__.py that are deliberately not installed: benchmarks run from
#: a checkout (``python -m bench``), tests are not shipped.
NOT_INSTALLED = {"bench", "tests"}

#: The subsystems of docs/architecture.md, in import order.
SUBSYSTEMS = {"config", "timeline", "indexes", "table", "services", "spark", "cli"}

#: Optional dependencies that only their own subsystem may import.
HEAVY = ("pyspark", "psycopg", "apscheduler")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_folders() -> set[str]:
    return {
        p.name for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / "__init__.py").is_file()
    } - NOT_INSTALLED


def _subpackages(folder: str) -> list[str]:
    """``lakeline.<folder>`` and every package folder below it."""
    return [
        f"lakeline.{'.'.join(p.parent.relative_to(ROOT).parts)}"
        for p in (ROOT / folder).rglob("__init__.py")
        if "__pycache__" not in p.parts
    ]


def test_packages_match_folders() -> None:
    setuptools = _pyproject()["tool"]["setuptools"]
    folders = _package_folders()
    assert folders == SUBSYSTEMS
    assert sorted(setuptools["packages"]) == sorted(p for f in folders for p in _subpackages(f))
    assert setuptools["package-dir"] == {f"lakeline.{f}": f for f in folders}


def test_every_default_property_is_documented() -> None:
    raw = tomllib.loads((ROOT / "config" / "defaults.toml").read_text())
    assert raw, "defaults.toml defines no property"
    undocumented = [k for k, v in raw.items() if not isinstance(v.get("doc"), str) or not v["doc"].strip()]
    assert undocumented == []
    assert all("default" in v for v in raw.values())


@pytest.mark.parametrize("module", ["lakeline.table", "lakeline.cli.main"])
def test_import_stays_light(module: str) -> None:
    code = (
        f"import sys, json, {module}\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120)
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def _can_build_in_place() -> bool:
    """Whether this environment has what the build backend needs without an isolated
    build environment: setuptools builds wheels itself from 70.1 on, before that only
    with the ``wheel`` package installed. Otherwise pip fetches the backend from the
    package index into an isolated environment (slower, but what ``pip install .`` does)."""
    import importlib.metadata as md
    import importlib.util

    if importlib.util.find_spec("wheel") is not None:
        return True
    major, minor = (int(x) for x in md.version("setuptools").split(".")[:2])
    return (major, minor) >= (70, 1)


def test_wheel_layout(tmp_path: Path) -> None:
    """What ``pip install .`` installs, from a wheel built off a copy of the tree (so
    the build leaves no ``build/`` or egg-info behind in the checkout)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for folder in _pyproject()["tool"]["setuptools"]["package-dir"].values():
        shutil.copytree(ROOT / folder, src / folder, ignore=ignore)
    out = tmp_path / "wheels"
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(out), str(src)]
    if _can_build_in_place():
        cmd[4:4] = ["--no-build-isolation", "--no-index"]  # offline and fast
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = out.glob("lakeline-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in (
        "lakeline/timeline/__init__.py",
        "lakeline/timeline/log.py",
        "lakeline/table/table.py",
        "lakeline/timeline/storage/event_log/postgresql.py",
        "lakeline/config/defaults.toml",
        "lakeline/cli/__main__.py",
        "lakeline/cli/main.py",
    ):
        assert required in names, required
    # Only the lakeline namespace: nothing under a generic top-level name.
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"lakeline"}
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[console_scripts]" in text
    assert "lakeline = lakeline.cli.main:main" in text


# --- layering ---------------------------------------------------------------------------

#: Rank of each subsystem in the import direction. A module may import its own subsystem
#: and any subsystem of a lower rank; spark and cli share the top rank as peers, so
#: neither imports the other.
RANK = {"config": 0, "timeline": 1, "indexes": 2, "table": 3, "services": 4, "spark": 5, "cli": 5}

#: The one declared seam against the direction: the ``Table`` handle is the user's facade,
#: and its ``t.services`` and ``t.indexes`` properties hand out the service and index APIs,
#: which sit above it (they run on tables). Only these two edges, importer to imported
#: module, are allowed; anything else in ``lakeline.services`` stays out of ``table/``.
SEAM = {
    ("lakeline.table.table", "lakeline.services.table_services"),
    ("lakeline.table.table", "lakeline.services.indexing.table_indexes"),
}

#: Which modules may import each heavy optional dependency (fnmatch patterns on module names).
HEAVY_IMPORTERS = {
    "pyspark": ("lakeline.spark", "lakeline.spark.*"),
    "psycopg": ("lakeline.timeline.storage.event_log.postgresql*",),
    "apscheduler": ("lakeline.services.runner", "lakeline.services.runner.*"),
}
assert set(HEAVY_IMPORTERS) == set(HEAVY)


@dataclass(frozen=True)
class Import:
    """One imported module, as written at one place of one module."""

    importer: str  # the importing module, e.g. lakeline.table.table
    target: str  # absolute module name, e.g. lakeline.services.table_services or pyarrow.compute
    line: int

    def __str__(self) -> str:
        return f"{self.importer} (line {self.line}) imports {self.target}"


def _modules() -> dict[str, Path]:
    """Every module of the package by its installed name; a package is named by its
    ``__init__.py``."""
    mods = {}
    for folder in SUBSYSTEMS:
        for path in (ROOT / folder).rglob("*.py"):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(ROOT).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            mods[".".join(("lakeline", *parts))] = path
    return mods


def _package_of(module: str, path: Path) -> str:
    """The package a relative import in ``module`` is resolved against."""
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imports_of(module: str, path: Path, known: set[str] | dict[str, Path]) -> Iterator[Import]:
    """The modules ``module`` imports anywhere in its source, as absolute names.

    ``from X import name`` counts as importing ``X.name`` when that is a module of the
    package (``from ..services import table_services``), else as importing ``X``.
    """
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, alias.name, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = _package_of(module, path).split(".")
                if node.level - 1 >= len(package):
                    raise AssertionError(f"{module} line {node.lineno}: relative import beyond the top")
                base = ".".join(package[: len(package) - (node.level - 1)])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                yield Import(module, sub if sub in known else source, node.lineno)


def _subsystem(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "lakeline" and len(parts) > 1 else None


def layering_violations(modules: dict[str, Path]) -> list[str]:
    """Every import of ``modules`` that breaks the rules, one line each."""
    problems = []
    for module, path in sorted(modules.items()):
        own = _subsystem(module)
        assert own in RANK, module
        for imp in imports_of(module, path, modules):
            top = imp.target.split(".")[0]
            if top in RANK:
                problems.append(f"{imp}: a bare subsystem name; write lakeline.{imp.target} or a relative import")
            elif top in HEAVY_IMPORTERS:
                if not any(fnmatch.fnmatchcase(module, pat) for pat in HEAVY_IMPORTERS[top]):
                    allowed = ", ".join(HEAVY_IMPORTERS[top])
                    problems.append(f"{imp}: only {allowed} may import {top}")
            elif top == "lakeline":
                target = _subsystem(imp.target)
                if target is None:
                    problems.append(f"{imp}: the bare namespace; import from a subsystem")
                elif target not in RANK:
                    problems.append(f"{imp}: {target} is no subsystem")
                elif target != own and RANK[target] >= RANK[own] and (module, imp.target) not in SEAM:
                    problems.append(
                        f"{imp}: {own} may not import {target} (the direction is "
                        "config -> timeline -> indexes -> table -> services -> spark, cli)"
                    )
    return problems


#: Rooms inside a subsystem with rules of their own: the lakeline modules outside the room
#: that its modules may import. What a process reports (diagnostics) and filters as data
#: (expressions) sit at the bottom, so every layer can use them without a cycle. Field
#: ids (``timeline/field_ids.py``, pyarrow only) are a leaf too: the Substrait serializer
#: takes a schema stripped of them at every depth.
ROOM_IMPORTS = {
    "lakeline.timeline.diagnostics": {"lakeline.timeline.errors"},
    "lakeline.indexes.expressions": {"lakeline.timeline.errors", "lakeline.timeline.field_ids"},
}

#: Rooms nothing else in their subsystem may import: the scheduled runner sits on top of
#: the services (it runs them); no service depends on it.
TOP_ROOMS = {"lakeline.services.runner"}


def _in(module: str, room: str) -> bool:
    return module == room or module.startswith(room + ".")


def room_violations(modules: dict[str, Path]) -> list[str]:
    """Every import that breaks :data:`ROOM_IMPORTS` or :data:`TOP_ROOMS`, one line each."""
    problems = []
    for module, path in sorted(modules.items()):
        for imp in imports_of(module, path, modules):
            if not imp.target.startswith("lakeline."):
                continue
            for room, allowed in ROOM_IMPORTS.items():
                if _in(module, room) and not _in(imp.target, room) and imp.target not in allowed:
                    problems.append(f"{imp}: {room} may import only {sorted(allowed)} outside itself")
            for room in TOP_ROOMS:
                own = room.rpartition(".")[0]
                if _in(imp.target, room) and not _in(module, room) and _subsystem(module) == _subsystem(own):
                    problems.append(f"{imp}: nothing in {own} may import {room}, which runs on top of it")
    return problems


def test_rooms_keep_their_own_rules() -> None:
    """Inside the subsystems, the rooms of docs/architecture.md keep their direction."""
    modules = _modules()
    assert set(ROOM_IMPORTS) | TOP_ROOMS <= set(modules), "a room of the rules does not exist"
    problems = room_violations(modules)
    assert problems == [], "room violations:\n" + "\n".join(problems)
    # What a bottom room may import stays at the bottom: it imports no lakeline module but
    # the errors, so the room still has no way up to the layers that use it.
    for allowed in {m for a in ROOM_IMPORTS.values() for m in a} - {"lakeline.timeline.errors"}:
        up = [i.target for i in imports_of(allowed, modules[allowed], modules) if i.target.startswith("lakeline.")]
        assert set(up) <= {"lakeline.timeline.errors"}, f"{allowed} imports {up}: no longer a leaf"


@pytest.mark.parametrize(
    ("module", "source", "fragment"),
    [
        ("lakeline.timeline.diagnostics.metrics", "from ..log import EventLog", "may import only"),
        ("lakeline.indexes.expressions.tree", "from ..pruning import prune", "may import only"),
        ("lakeline.services.compaction", "from .runner.runner import Runner", "nothing in lakeline.services"),
    ],
)
def test_planted_room_violation_is_caught(tmp_path: Path, module: str, source: str, fragment: str) -> None:
    path = tmp_path / "module.py"
    path.write_text(f"def late():\n    {source}\n")
    modules = {**_modules(), module: path}
    problems = [p for p in room_violations(modules) if p.startswith(module + " ")]
    assert len(problems) == 1 and fragment in problems[0], problems


def test_imports_follow_the_layering() -> None:
    """Every module of the package imports only its own subsystem and those before it
    (plus the declared seam), and the heavy optional dependencies only where allowed."""
    modules = _modules()
    assert len(modules) > 50, "the package's modules were not found"
    problems = layering_violations(modules)
    assert problems == [], "layering violations:\n" + "\n".join(problems)


def test_seam_is_in_use() -> None:
    """The declared seam names modules that exist and an import that is really there,
    so a stale entry cannot silently widen the rules."""
    modules = _modules()
    edges = {
        (imp.importer, imp.target)
        for importer in {i for i, _ in SEAM}
        for imp in imports_of(importer, modules[importer], modules)
    }
    assert SEAM <= edges


_STORE = "lakeline.timeline.storage.event_log"


@pytest.mark.parametrize(
    ("importer", "source", "expected"),
    [
        # a relative import in a module resolves against its package...
        (f"{_STORE}.filesystem", "from ...errors import TimelineError", "lakeline.timeline.errors"),
        (f"{_STORE}.filesystem", "from .protocol import TimelineStore", f"{_STORE}.protocol"),
        # ...in a package's __init__ against the package itself
        (_STORE, "from .protocol import TimelineStore", f"{_STORE}.protocol"),
        ("lakeline.timeline.storage.event_log", "from ...errors import TimelineError", "lakeline.timeline.errors"),
        (
            "lakeline.table.table",
            "from ..services.indexing import table_indexes",
            "lakeline.services.indexing.table_indexes",
        ),
        ("lakeline.table.table", "from .. import services", "lakeline.services"),
        ("lakeline.table.table", "import pyspark.sql", "pyspark.sql"),
    ],
)
def test_import_resolution(tmp_path: Path, importer: str, source: str, expected: str) -> None:
    name = "__init__.py" if importer == "lakeline.timeline.storage.event_log" else "module.py"
    path = tmp_path / name
    path.write_text(f"def late():\n    {source}\n")
    known = {
        "lakeline.services",
        "lakeline.services.indexing.table_indexes",
        "lakeline.timeline.storage.event_log.protocol",
    }
    assert [i.target for i in imports_of(importer, path, known)] == [expected]


@pytest.mark.parametrize(
    ("module", "source", "fragment"),
    [
        ("lakeline.timeline.log", "from ..table.table import Table", "timeline may not import table"),
        (
            "lakeline.table.read.scan",
            "from ...services.indexing.table_indexes import TableIndexes",
            "table may not import services",
        ),
        ("lakeline.cli.main", "from ..spark import engine", "cli may not import spark"),
        ("lakeline.spark.engine", "from ..cli import main", "spark may not import cli"),
        ("lakeline.table.table", "from ..services import TableServices", "table may not import services"),
        ("lakeline.indexes.bloom", "import pyspark", "may import pyspark"),
        ("lakeline.timeline.storage.filesystem", "from psycopg import sql", "may import psycopg"),
        ("lakeline.services.phases", "import apscheduler.schedulers", "may import apscheduler"),
        ("lakeline.table.read.scan", "from timeline.log import EventLog", "bare subsystem name"),
    ],
)
def test_planted_violation_is_caught(tmp_path: Path, module: str, source: str, fragment: str) -> None:
    """The checker itself: each kind of violation, planted in a module under ``TYPE_CHECKING``,
    is reported."""
    path = tmp_path / "module.py"
    path.write_text(f"from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    {source}\n")
    problems = layering_violations({module: path})
    assert len(problems) == 1 and fragment in problems[0], problems
