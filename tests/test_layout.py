"""The package layout promised in DESIGN.md section 1, checked against the tree.

Each top-level subsystem folder is installed as ``lakeline.<folder>`` through an explicit
list in ``pyproject.toml``; a folder added without being listed would silently be
missing from ``pip install .``, and heavy optional dependencies leaking into
``lakeline.table`` would make every user pay for Spark and PostgreSQL.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Folders with an __init__.py that are deliberately not installed: benchmarks run from
#: a checkout (``python -m bench``), tests are not shipped.
NOT_INSTALLED = {"bench", "tests"}

#: The subsystems of DESIGN.md section 1, in import order.
SUBSYSTEMS = {"config", "timeline", "indexes", "table", "services", "spark", "cli"}

#: Optional dependencies that only their own subsystem may import.
HEAVY = ("pyspark", "psycopg", "apscheduler")


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_folders() -> set[str]:
    return {
        p.name for p in ROOT.iterdir()
        if p.is_dir() and not p.name.startswith(".") and (p / "__init__.py").is_file()
    } - NOT_INSTALLED


def _subpackages(folder: str) -> list[str]:
    """``lakeline.<folder>`` and every package folder below it."""
    return [f"lakeline.{'.'.join(p.parent.relative_to(ROOT).parts)}" for p in (ROOT / folder).rglob("__init__.py")
            if "__pycache__" not in p.parts]


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
    for required in ("lakeline/timeline/__init__.py", "lakeline/timeline/log.py", "lakeline/table/table.py",
                     "lakeline/timeline/stores/postgresql.py",
                     "lakeline/config/defaults.toml", "lakeline/cli/__main__.py", "lakeline/cli/main.py"):
        assert required in names, required
    # Only the lakeline namespace: nothing under a generic top-level name.
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"lakeline"}
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "[console_scripts]" in text
    assert "lakeline = lakeline.cli.main:main" in text
