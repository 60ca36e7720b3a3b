"""Repeats of a short step: run it several times, keep the median run.

Why: ten appends of the write benchmark take a second or two on the object store, where
the loopback server shares two cores with the client and one run varies by half; the
project's rule is the median of several runs where one run is short. Each repeat writes
a table of its own (:data:`~.systems.TABLE_SUFFIX`), so the last run's table is the one
the later steps use, and the median run's times stand for the step.
"""

from __future__ import annotations

from .report import StepResult


def seconds_of(res: StepResult) -> str:
    return f"{res.seconds:.2f} s" if res.ok and res.seconds is not None else f"FAILED: {res.error}"


def keep_median_run(last: StepResult, earlier: list[StepResult]) -> None:
    """Give ``last`` (the run whose table later steps use) the times of the median of all
    runs of its step, and the list of every run's time (``detail["runs_s"]``)."""
    runs = [r for r in [*earlier, last] if r.ok and r.seconds is not None]
    if not earlier or not last.ok or len(runs) < 2:
        return
    runs.sort(key=lambda r: r.seconds or 0.0)
    median = runs[(len(runs) - 1) // 2]
    last.detail["runs_s"] = [r.seconds for r in [*earlier, last] if r.ok]
    if median is not last:
        last.seconds = median.seconds
        for key in ("create_s", "appends_s", "probe_s"):
            if key in median.detail:
                last.detail[key] = median.detail[key]


__all__ = ["keep_median_run", "seconds_of"]
