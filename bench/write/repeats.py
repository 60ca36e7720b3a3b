"""Repeats: of a short step (several runs, the median kept), and of a whole benchmark over
several data shapes (one section of docs/performance.md for all of them).

Why: ten appends of the write benchmark take a second or two on the object store, where
the loopback server shares two cores with the client and one run varies by half; the
project's rule is the median of several runs where one run is short. Each repeat writes
a table of its own (:data:`~.systems.TABLE_SUFFIX`), so the last run's table is the one
the later steps use, and the median run's times stand for the step.

And a number means something only for the data it was measured on (issue 30): ``bench
write --keys sequential,uuid`` runs the benchmark once per shape, and its section holds
every run, with a summary of lakeline's ratios to deltalake per shape first, so a reader
sees at once what random keys or unsorted batches cost.
"""

from __future__ import annotations

from collections.abc import Sequence

from .report import Run, StepResult, _ratio, run_shape
from .systems import BASELINE


def seconds_of(res: StepResult) -> str:
    return f"{res.seconds:.2f} s" if res.ok and res.seconds is not None else f"FAILED: {res.error}"


def keep_median_run(last: StepResult, earlier: list[StepResult]) -> None:
    """Give ``last`` (the run whose table later steps use) the times of the median of all
    runs of its step, and the list of every run's time (``detail["runs_s"]``); where the
    runs timed deltalake's other read path too, its own median."""
    runs = [r for r in [*earlier, last] if r.ok and r.seconds is not None]
    if not earlier or not last.ok or len(runs) < 2:
        return
    other = sorted(r.detail["other_read_s"] for r in runs if "other_read_s" in r.detail)
    if other:
        last.detail["other_read_s"] = other[(len(other) - 1) // 2]
    runs.sort(key=lambda r: r.seconds or 0.0)
    median = runs[(len(runs) - 1) // 2]
    last.detail["runs_s"] = [r.seconds for r in [*earlier, last] if r.ok]
    if median is not last:
        last.seconds = median.seconds
        for key in ("create_s", "appends_s", "probe_s"):
            if key in median.detail:
                last.detail[key] = median.detail[key]


def one_section(runs: Sequence[Run], bodies: Sequence[str], columns: Sequence[tuple[str, str, str]]) -> str:
    """One markdown section from one body per run (each starting with its ``## `` heading
    and a blank line): the first heading, a table of ``columns`` ((label, system, step):
    that step's time as a ratio to deltalake's; those of systems the runs measured) with a
    row per run's shape, then every
    body under a ``### `` heading naming its shape."""
    heading = bodies[0].split("\n", 1)[0]
    columns = [c for c in columns if c[1] in runs[0].results]
    lines = [
        heading,
        "",
        f"{len(runs)} runs, one per data shape, one after the other; each below in full. "
        "lakeline's time as a ratio to deltalake's, per shape:",
        "",
        "| data shape | " + " | ".join(label for label, _, _ in columns) + " |",
        "|---|" + "---:|" * len(columns),
    ]
    for run in runs:
        cells = []
        for _, system, step in columns:
            r, base = run.get(system, step), run.get(BASELINE, step)
            ratio = _ratio(r.seconds if r and r.ok else None, base.seconds if base and base.ok else None)
            cells.append("-" if ratio is None else f"{ratio:.2f}x")
        lines.append(f"| {run_shape(run).label} | " + " | ".join(cells) + " |")
    for run, body in zip(runs, bodies):
        lines += ["", f"### {run_shape(run).label}", "", body.split("\n", 2)[2].lstrip("\n")]
    return "\n".join(lines)


__all__ = ["keep_median_run", "one_section", "seconds_of"]
