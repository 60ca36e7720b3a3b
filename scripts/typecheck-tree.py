#!/usr/bin/env python3
"""Mirror the installed ``lakeline`` namespace as symlinks, for mypy.

Why: the subsystems are top-level folders installed as ``lakeline.<folder>`` through the
``package-dir`` mapping of ``pyproject.toml``; an editable install maps them with an
import hook that mypy cannot see, and mypy run on the folders would call them ``config``,
``table``, ... and fail on every ``lakeline.…`` import. This script makes
``<root>/lakeline/<name>`` a symlink to each mapped folder, so ``mypy_path = <root>`` and
``packages = ["lakeline"]`` (``[tool.mypy]``) check the package under its real names.
It reads the mapping itself, so a new subsystem needs no change here, and drops links
whose subsystem is gone.

Usage: scripts/typecheck-tree.py [ROOT]   (default build/typecheck, from the repository)
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(root: Path) -> None:
    mapping = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    tree = root / "lakeline"
    tree.mkdir(parents=True, exist_ok=True)
    wanted = {}
    for package, folder in mapping.items():
        namespace, _, name = package.partition(".")
        if namespace != "lakeline" or "." in name:
            sys.exit(f"typecheck-tree: unexpected package-dir entry {package!r}")
        wanted[name] = (REPO / folder).resolve()
    for link in tree.iterdir():
        if link.name not in wanted:
            link.unlink()
    for name, target in wanted.items():
        link = tree / name
        if link.is_symlink() and link.resolve() == target:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target, target_is_directory=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "build" / "typecheck")
