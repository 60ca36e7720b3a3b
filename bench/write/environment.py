"""Where a benchmark's numbers come from: the machine, the peers' library versions and the
lakeline source a run measured (the commit, and which folders had uncommitted changes).

Split out of :mod:`.report` (the write benchmark's tables and targets); the services and
lookup benchmarks print the same lines.
"""

from __future__ import annotations

import os
import re
import subprocess

from ..report import ROOT, machine

GiB = 1024**3


def ram_bytes() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def versions() -> str:
    return ", ".join(f"{pkg} {_version(pkg)}" for pkg in ("deltalake", "pyiceberg"))


def machine_line() -> str:
    """The machine, without the instant load average (the run records its own, at the
    start and the end)."""
    ram = ram_bytes()
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    line = re.sub(r", load average [0-9.]+", "", machine())
    return f"{line}, nproc {nproc}, {ram / GiB:.1f} GiB RAM" if ram else line


def _version(pkg: str) -> str:
    from importlib import metadata

    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "?"


def source_state(folders: tuple[str, ...] = ("table", "timeline", "config")) -> str:
    """Which lakeline code was measured: the commit, and which of ``folders`` (the code
    the benchmark exercises) had uncommitted changes (others edit them while benchmarks run)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--", *folders], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return "unknown (not a git checkout)"
    # Lines are "XY path": the path starts at the fourth character (X may be a space).
    changed = sorted({line[3:].split("/")[0] for line in status.splitlines() if line.strip()})
    if not changed:
        return f"commit {head}"
    return f"commit {head} with uncommitted changes in {', '.join(f + '/' for f in changed)}"
