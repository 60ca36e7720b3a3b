"""Writing benchmark results into ``docs/performance.md``, one owned section each.

A benchmark owns the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``
and replaces only that, so several benchmarks (and people) can share the page without
overwriting each other. Also: the facts about the run that make a number meaningful
(date, machine, versions, the command that produced it), and the command-line options
every benchmark run shares.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import shlex
import signal
import sys
from collections.abc import Callable
from datetime import date
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PERFORMANCE_MD = ROOT / "docs" / "performance.md"

_HEADER = """# Performance

Numbers measured by `python -m bench` (see `bench/`). Each section is written by one
benchmark between its markers and records the date, the machine and the exact command
that produced it; run the command again to reproduce or refresh it.
"""


def update_section(name: str, body: str, path: Path = PERFORMANCE_MD) -> None:
    """Replace (or append) the section ``name`` of ``path`` with ``body``."""
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    block = f"{start}\n{body.rstrip()}\n{end}"
    text = path.read_text() if path.exists() else _HEADER
    if start in text and end in text:
        head, rest = text.split(start, 1)
        _, tail = rest.split(end, 1)
        text = head + block + tail
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def machine() -> str:
    """One line about where the numbers come from."""
    try:
        pyarrow = metadata.version("pyarrow")
    except metadata.PackageNotFoundError:
        pyarrow = "?"
    # The load average says whether other work shared the machine during the run.
    load = f", load average {os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else ""
    return (
        f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores{load}, "
        f"Python {platform.python_version()}, pyarrow {pyarrow}"
    )


def today() -> str:
    return date.today().isoformat()


def command_line(benchmark: str, argv: list[str], with_postgres: bool) -> str:
    """The command that reproduces this run, relative to the repository root."""
    exe = Path(sys.executable)
    python = "python"
    try:
        python = str(exe.relative_to(ROOT)) if exe.is_relative_to(ROOT) else "python"
    except ValueError:
        pass
    cmd = shlex.join([python, "-m", "bench", benchmark, *argv])
    if with_postgres and (ROOT / "scripts" / "with-postgres.sh").exists():
        cmd = f"scripts/with-postgres.sh {cmd}"
    return cmd


def add_run_options(parser: argparse.ArgumentParser, repeat: int | None = None) -> None:
    """The options every benchmark run shares (where tables go, what it writes out, and,
    with ``repeat``, how many fresh-process runs of each read the median is taken over)."""
    if repeat is not None:
        parser.add_argument(
            "--repeat",
            type=_positive,
            default=repeat,
            help=f"runs of each read, each in a fresh process; the median is reported (default {repeat})",
        )
    parser.add_argument(
        "--step-timeout",
        type=float,
        default=None,
        help="seconds one step may take before it is killed (default scales with --rows)",
    )
    parser.add_argument("--workdir", type=Path, default=None, help="where tables go (default: a temp dir, removed)")
    parser.add_argument("--keep", action="store_true", help="keep the temp dir (tables, inputs)")
    parser.add_argument("--json", type=Path, default=None, help="also write the raw results as JSON here")
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/performance.md")
    parser.add_argument(
        "--check", action="store_true", help="exit 1 when a target is missed or the systems' answers disagree"
    )


def _positive(text: str) -> int:
    n = int(text)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def unwinds_on_sigterm(main: Callable[..., int]) -> Callable[..., int]:
    """A benchmark's ``main`` that a plain ``kill`` unwinds while it runs (``SystemExit``
    through its ``finally`` blocks, which stop the child process it waits for); the
    caller's own SIGTERM handler is back when it returns, so a test that ran a benchmark
    in its process leaves that process as it found it. Keyword arguments pass through
    (a test hands a benchmark the server its session already runs)."""

    @functools.wraps(main)
    def run(argv: list[str], **kwargs: Any) -> int:
        previous = signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        try:
            return main(argv, **kwargs)
        finally:
            signal.signal(signal.SIGTERM, previous)

    return run
