"""The project explains itself: no dangling design references, and a map that names every module.

Why (issue 26, item 4): code and tests used to cite a design file that lived outside the
repository, so a reader met references to a page they could not open; the design the code
cites is now docs/design.md and the pages beside it. And docs/architecture.md is the map a
newcomer reads first: a module it does not name is a room missing from the plan.

* No file of the checkout (outside the virtualenv, git's folder, build output and caches)
  refers to the old design file, by its name or by a section sign after it.
* Every module of the installed packages (the folders of ``package-dir`` in
  ``pyproject.toml``, subpackages included) is named in backticks in its folder's section
  of docs/architecture.md (the part that starts with the folder's bold heading,
  ``**`timeline/`**``): a module directly in the folder by its file name (`` `log.py` ``),
  one in a subpackage by its path inside the folder (`` `storage/event_log/protocol.py` ``), so that
  modules of the same name in different folders (``engine.py``, ``validators.py``) are
  each named where they live; ``path::name`` counts as naming ``path``. A package's
  ``__init__.py`` is left out: it is the package's import surface, named by the folder
  itself.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"

#: Folders that are not the project's own text: the virtualenv, git, build output, caches,
#: and what runs leave behind (.gitignore's list).
SKIPPED_DIRS = {
    ".git",
    ".venv",
    "venv",
    "build",
    "dist",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    "node_modules",
    "spark-warehouse",
    "metastore_db",
}
#: The same, by path from the checkout: benchmark inputs and outputs.
SKIPPED_PATHS = {"bench/data", "bench/out"}
#: No text file of the project is this large; bigger files are data, not read.
MAX_TEXT_BYTES = 4 << 20

#: The old design file, by name or by section sign (written so that this file does not
#: match itself).
DESIGN_REFERENCE = re.compile(r"\bDESIGN(?:\.md\b|\s*§)")


def repository_files(root: Path) -> list[Path]:
    """Every file under ``root``, minus the folders of :data:`SKIPPED_DIRS`,
    :data:`SKIPPED_PATHS` and ``*.egg-info``."""
    found = []
    for folder, dirs, files in os.walk(root):
        here = Path(folder).relative_to(root)
        dirs[:] = [
            d
            for d in dirs
            if d not in SKIPPED_DIRS and not d.endswith(".egg-info") and (here / d).as_posix() not in SKIPPED_PATHS
        ]
        found.extend(Path(folder, f) for f in files)
    return found


def design_references(root: Path) -> list[str]:
    """``path:line: text`` of every line of a text file under ``root`` citing the old design file."""
    hits = []
    for path in repository_files(root):
        try:
            if path.stat().st_size > MAX_TEXT_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):  # binary (images, Parquet) or unreadable
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if DESIGN_REFERENCE.search(line):
                hits.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    return hits


def package_folders(root: Path) -> list[str]:
    """The top-level folders installed as ``lakeline.<folder>`` (``package-dir``)."""
    pyproject = tomllib.loads((root / "pyproject.toml").read_text())
    return sorted(pyproject["tool"]["setuptools"]["package-dir"].values())


def package_modules(root: Path, folder: str) -> list[str]:
    """The modules of ``folder`` and its subpackages, as paths inside ``folder``."""
    return sorted(
        p.relative_to(root / folder).as_posix()
        for p in (root / folder).rglob("*.py")
        if "__pycache__" not in p.parts and p.name != "__init__.py"
    )


def sections(markdown: str) -> dict[str, str]:
    """The text of each folder's section: from its ``**`folder/`**`` line to the next such
    line or the next ``#`` heading."""
    found: dict[str, str] = {}
    current: str | None = None
    for line in markdown.splitlines():
        heading = re.match(r"\*\*`([\w/]+)/`\*\*", line)
        if heading:
            current = heading.group(1)
            found[current] = ""
        elif line.startswith("#"):
            current = None
        if current is not None:
            found[current] += line + "\n"
    return found


def named(section: str) -> set[str]:
    """What the section names in backticks, ``path::name`` counted as ``path``."""
    return {code.split("::")[0] for code in re.findall(r"`([^`\n]+)`", section)}


def unnamed_modules(root: Path, markdown: str) -> list[str]:
    """``folder/module.py`` of every package module its folder's section does not name."""
    by_folder = sections(markdown)
    missing = []
    for folder in package_folders(root):
        names = named(by_folder.get(folder, ""))
        for module in package_modules(root, folder):
            if module not in names and f"{folder}/{module}" not in names:
                missing.append(f"{folder}/{module}")
    return missing


def test_nothing_refers_to_the_old_design_file() -> None:
    hits = design_references(ROOT)
    assert not hits, "cite the page of docs/ that says it (docs/design.md, ...) instead:\n" + "\n".join(hits)


def test_architecture_names_every_package_module() -> None:
    missing = unnamed_modules(ROOT, ARCHITECTURE.read_text())
    assert not missing, "docs/architecture.md does not name these in their folder's section:\n" + "\n".join(missing)


def test_the_checks_catch_what_they_guard(tmp_path: Path) -> None:
    """Each check fails when violated: a reference in any text file, a module left out, and
    a module named only in another folder's section (same file name)."""
    (tmp_path / "pyproject.toml").write_text('[tool.setuptools.package-dir]\n"lakeline.a" = "a"\n"lakeline.b" = "b"\n')
    for module in (
        "a/__init__.py",
        "a/engine.py",
        "a/sub/__init__.py",
        "a/sub/store.py",
        "b/__init__.py",
        "b/engine.py",
        "b/extra.py",
    ):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text('"""A module."""\n')
    markdown = (
        "# Map\n\n**`a/`**: `engine.py`, `sub/store.py::Store`.\n\n**`b/`**: `extra.py`.\n\n## Elsewhere\n`engine.py`\n"
    )
    assert unnamed_modules(tmp_path, markdown) == ["b/engine.py"]
    assert unnamed_modules(tmp_path, markdown.replace("`extra.py`.", "`extra.py`, `b/engine.py`.")) == []
    bare = markdown.replace("`sub/store.py::Store`", "`store.py`")  # a subpackage's module by file name only
    assert unnamed_modules(tmp_path, bare) == ["a/sub/store.py", "b/engine.py"]

    assert design_references(tmp_path) == []
    (tmp_path / "b" / "extra.py").write_text('"""See ' + "DESIGN" + '.md section 3."""\n')
    (tmp_path / "notes.sh").write_text("# as " + "DESIGN" + " §4 says\n")
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "x.py").write_text("DESIGN" + ".md\n")
    assert sorted(design_references(tmp_path)) == [
        'b/extra.py:1: """See ' + "DESIGN" + '.md section 3."""',
        "notes.sh:1: # as " + "DESIGN" + " §4 says",
    ]
