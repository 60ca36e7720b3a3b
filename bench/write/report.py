"""The write benchmark's results and how they are shown.

The records a run produces (:class:`StepResult`, :class:`Target`, :class:`Run`), the
terminal tables (rich) and the markdown section of docs/performance.md; the description
of the machine, library versions and lakeline source a run measured is
:mod:`.environment`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..report import today
from .environment import machine_line, versions
from .systems import BASELINE, LAKELINE

GiB = 1024**3
MiB = 1024**2


@dataclass
class StepResult:
    system: str
    step: str
    ok: bool = False
    error: str | None = None
    seconds: float | None = None
    peak_rss: int | None = None
    base_rss: int | None = None
    bytes_written: int | None = None
    files_written: int | None = None
    table_bytes: int | None = None
    files_read: int | None = None
    rows_read: int | None = None
    read_digest: str | None = None
    rows_total: int | None = None
    distinct_keys: int | None = None
    sum_ts: int | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0


@dataclass
class Target:
    name: str
    measured: str
    limit: str
    ok: bool | None  # None: could not be measured


@dataclass
class Run:
    rows: int
    appends: int
    upsert_rows: int
    input_upsert_bytes: int
    read_range: tuple[str, str]
    read_keys: int
    results: dict[str, dict[str, StepResult]]
    targets: list[Target] = field(default_factory=list)
    consistent: bool | None = None
    consistency_note: str = ""
    total_s: float = 0.0
    load: tuple[float, float] | None = None  # 1-minute load average at start and end
    source: str = ""  # the lakeline code measured (git commit, uncommitted changes)
    probe_s: float | None = None  # on a store: lakeline's probe, run once before the steps
    #: The data's shape (:class:`bench.data.Shape`): keys sequential|uuid, order random|sorted.
    shape: dict[str, str] = field(default_factory=lambda: {"keys": "sequential", "order": "sorted"})
    delta_read: str = "scan"  # how deltalake's read step read: its own scan, or to_pyarrow_dataset

    def get(self, system: str, step: str) -> StepResult | None:
        return self.results.get(system, {}).get(step)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b


def _fmt_s(r: StepResult | None) -> str:
    if r is None:
        return "-"
    if not r.ok:
        return "FAILED" if not (r.error or "").startswith("timed out") else "timeout"
    return f"{r.seconds:.2f} s"


def _fmt_b(n: int | None) -> str:
    if n is None:
        return "-"
    if n >= GiB:
        return f"{n / GiB:.2f} GiB"
    return f"{n / MiB:.1f} MiB"


def metric_rows(run: Run) -> list[tuple[str, list[str]]]:
    """(label, one cell per system) for the results table, shared by rich and markdown."""
    systems = list(run.results)

    def cells(fn: Callable[[StepResult], str], step: str) -> list[str]:
        out = []
        for s in systems:
            r = run.get(s, step)
            out.append("-" if r is None else (fn(r) if r.ok else _fmt_s(r)))
        return out

    def vs_base(step: str) -> list[str]:
        base = run.get(BASELINE, step)
        out = []
        for s in systems:
            r = run.get(s, step)
            ratio = _ratio(r.seconds if r and r.ok else None, base.seconds if base and base.ok else None)
            out.append("-" if ratio is None else f"{ratio:.2f}x")
        return out

    def mean_append(r: StepResult) -> str:
        each = r.detail.get("appends_s") or []
        return f"{each[0]:.2f} / {each[-1]:.2f} s" if each else "-"

    def phases(r: StepResult) -> str:
        t = r.detail.get("timings") or {}
        return " / ".join(f"{k[:-2]} {t[k]:.2f}" for k in PHASES if t.get(k, 0) >= 0.005) or "-"

    def other_read(r: StepResult) -> str:
        s = r.detail.get("other_read_s")
        return "-" if s is None else f"{s * 1000:.0f} ms via {r.detail.get('other_read')}"

    return [
        (f"append: {run.appends} appends, total", cells(lambda r: f"{r.seconds:.2f} s", "append")),
        ("append: vs deltalake", vs_base("append")),
        ("append: first / last append", cells(mean_append, "append")),
        ("append: phases, s (lakeline's timings, summed)", cells(phases, "append")),
        ("append: bytes written", cells(lambda r: _fmt_b(r.bytes_written), "append")),
        ("append: peak memory", cells(lambda r: _fmt_b(r.peak_rss), "append")),
        (f"upsert {run.upsert_rows:,} rows: time", cells(lambda r: f"{r.seconds:.2f} s", "upsert")),
        ("upsert: vs deltalake", vs_base("upsert")),
        ("upsert: phases, s (lakeline's timings)", cells(phases, "upsert")),
        ("upsert: bytes written", cells(lambda r: _fmt_b(r.bytes_written), "upsert")),
        (
            "upsert: bytes written / input",
            cells(lambda r: f"{r.bytes_written / run.input_upsert_bytes:.2f}x", "upsert"),
        ),
        ("upsert: files written", cells(lambda r: f"{r.files_written}", "upsert")),
        ("upsert: peak memory", cells(lambda r: _fmt_b(r.peak_rss), "upsert")),
        ("on disk after upsert (old versions kept)", cells(lambda r: _fmt_b(r.table_bytes), "upsert")),
        (
            f"read {run.read_keys:,} keys: time{_median_of(run, 'read')}",
            cells(lambda r: f"{r.seconds * 1000:.0f} ms", "read"),
        ),
        ("read: vs deltalake", vs_base("read")),
        ("read: deltalake's other read path, after the step", cells(other_read, "read")),
        ("read: data files read", cells(lambda r: f"{r.files_read}", "read")),
        ("read: peak memory", cells(lambda r: _fmt_b(r.peak_rss), "read")),
        ("rows in table after upsert", cells(lambda r: f"{r.rows_total:,}", "read")),
    ]


def _median_of(run: Run, step: str) -> str:
    """`` (median of N)`` when the step ran N > 1 times per system."""
    n = max((len(r.detail.get("runs_s") or []) for steps in run.results.values() if (r := steps.get(step))), default=0)
    return f" (median of {n})" if n > 1 else ""


#: ``WriteResult.timings`` shown, in order (``tag_s`` is inside ``plan_s``).
PHASES = ("plan_s", "tag_s", "write_s", "index_s", "validate_s", "commit_s", "upkeep_s")


def run_shape(run: Run) -> Any:
    """The run's :class:`bench.data.Shape`."""
    from ..data import Shape

    return Shape(**run.shape)


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "MISS")


def rich_tables(run: Run) -> list[Any]:
    from rich.table import Table as RichTable

    res = RichTable(
        title=f"write benchmark ({run_shape(run).label}): {run.rows:,} rows in {run.appends} appends, "
        f"upsert {run.upsert_rows:,}, read {run.read_keys:,} keys"
    )
    res.add_column("metric")
    for s in run.results:
        res.add_column(s, justify="right")
    for label, cells in metric_rows(run):
        res.add_row(label, *cells)
    return [res, targets_table("targets (lakeline vs deltalake, same run)", run.targets)]


def targets_table(title: str, targets: list[Target]) -> Any:
    """A benchmark's targets as a rich table, each verdict in its colour."""
    from rich.table import Table as RichTable

    tgt = RichTable(title=title)
    for col in ("target", "measured", "limit", "result"):
        tgt.add_column(col)
    colour = {"PASS": "green", "MISS": "red", "n/a": "yellow"}
    for t in targets:
        v = _verdict(t.ok)
        tgt.add_row(t.name, t.measured, t.limit, f"[{colour[v]}]{v}[/{colour[v]}]")
    return tgt


def markdown(run: Run, command: str, notes: list[str]) -> str:
    systems = list(run.results)
    load = (
        f"; 1-minute load average {run.load[0]:.1f} at the start, {run.load[1]:.1f} at the end, "
        f"on {os.cpu_count()} cores"
        if run.load
        else ""
    )
    lines = [
        "## Write path: appends, upsert, 1,000-key read (vs deltalake, pyiceberg)",
        "",
        f"Measured {today()} on {machine_line()}; {versions()}; lakeline at {run.source}.",
        "",
        f"Command: `{command}` (whole run {run.total_s / 60:.1f} min{load})",
        "",
        (
            f"Data: {run.rows:,} rows (`key` string, `ts` int64, `value` double, "
            f"`category` string of 100 values) written as {run.appends} appends of "
            f"{run.rows // run.appends:,}; then an upsert of {run.upsert_rows:,} rows "
            f"({run.upsert_rows // 2:,} updates of keys drawn uniformly from the whole key space "
            f"with a larger `ts`, {run.upsert_rows - run.upsert_rows // 2:,} new keys; "
            f"{run.input_upsert_bytes / MiB:.1f} MiB as Parquet); then a read of {run.read_keys:,} "
            f"consecutive keys (`key >= '{run.read_range[0]}' AND key < '{run.read_range[1]}'`). "
            + run_shape(run).describe()
        ),
        "",
        "| metric | " + " | ".join(systems) + " |",
        "|---|" + "---:|" * len(systems),
    ]
    for label, cells in metric_rows(run):
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "| target | measured | limit | result |", "|---|---|---|---|"]
    for t in run.targets:
        lines.append(f"| {t.name} | {t.measured} | {t.limit} | **{_verdict(t.ok)}** |")
    lines += [
        "",
        f"Consistency: {run.consistency_note}.",
        "",
        (
            "How it is measured: every system/step runs in a fresh Python process; *time* covers "
            "opening the table and the operation (the input batch is read from Parquet before the "
            "timer starts; the first append includes creating the table); *peak memory* is the "
            "process's `ru_maxrss`, interpreter and libraries included; *bytes written* is the "
            "size of files under the table's folder that are new or changed after the step "
            "(data, logs, metadata; pyiceberg's sqlite catalog included); *data files read* is "
            "lakeline's `Scan.files()`, deltalake's dataset fragments left after its min/max "
            "pruning, pyiceberg's `plan_files()`. lakeline and deltalake write Snappy Parquet, "
            "pyiceberg its default (zstd)."
        ),
    ]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines)


# Targets: lakeline / deltalake ratios, bytes against the input, memory.
APPEND_RATIO = 1.2
MOR_UPSERT_RATIO = 1.0
MOR_UPSERT_BYTES_RATIO = 2.0
COW_UPSERT_RATIO = 1.5
PEAK_MEMORY = 2 * 1024**3


def evaluate(run: Run) -> None:
    """Targets (PASS/MISS) and the cross-system consistency check."""
    targets: list[Target] = []
    base = run.results.get(BASELINE, {})

    def sec(system: str, step: str) -> float | None:
        r = run.get(system, step)
        return r.seconds if r is not None and r.ok else None

    def ratio_target(name: str, system: str, step: str, limit: float) -> None:
        r = _ratio(sec(system, step), sec(BASELINE, step))
        measured = "n/a" if r is None else f"{r:.2f}x ({sec(system, step):.1f} s vs {sec(BASELINE, step):.1f} s)"
        targets.append(Target(name, measured, f"<= {limit:g}x", None if r is None else r <= limit))

    if base:
        for s in LAKELINE:
            if s in run.results:
                ratio_target(f"{s} append (10 appends) vs deltalake", s, "append", APPEND_RATIO)
        if "lakeline-mor" in run.results:
            ratio_target("lakeline-mor upsert vs deltalake merge", "lakeline-mor", "upsert", MOR_UPSERT_RATIO)
        if "lakeline-cow" in run.results:
            ratio_target("lakeline-cow upsert vs deltalake merge", "lakeline-cow", "upsert", COW_UPSERT_RATIO)
    mor = run.get("lakeline-mor", "upsert")
    if mor is not None:
        r = _ratio(mor.bytes_written if mor.ok else None, run.input_upsert_bytes)
        measured = (
            "n/a"
            if r is None
            else (f"{r:.2f}x ({mor.bytes_written / MiB:.1f} MiB vs {run.input_upsert_bytes / MiB:.1f} MiB input)")
        )
        targets.append(
            Target(
                "lakeline-mor upsert bytes written vs input Parquet",
                measured,
                f"<= {MOR_UPSERT_BYTES_RATIO:g}x",
                None if r is None else r <= MOR_UPSERT_BYTES_RATIO,
            )
        )
    for s in LAKELINE:
        steps = run.results.get(s)
        if not steps:
            continue
        peaks = [(r.peak_rss, st) for st, r in steps.items() if r.ok and r.peak_rss is not None]
        complete = len(peaks) == len(steps)
        if peaks:
            peak, at = max(peaks)
            measured = f"{peak / GiB:.2f} GiB ({at})" + ("" if complete else ", some steps failed")
        else:
            measured = "n/a"
        targets.append(
            Target(
                f"{s} peak memory of any step",
                measured,
                "<= 2 GiB",
                None if not peaks else (peak <= PEAK_MEMORY and complete),
            )
        )
    run.targets = targets

    reads = {s: run.get(s, "read") for s in run.results}
    complete = {s: r for s, r in reads.items() if r is not None and r.ok and all(x.ok for x in run.results[s].values())}
    skipped = sorted(set(run.results) - set(complete))
    if len(complete) < 1:
        run.consistent, run.consistency_note = None, "no system completed every step"
        return
    expect = {"rows_total": run.rows + run.upsert_rows - run.upsert_rows // 2, "rows_read": run.read_keys}
    fields = ("rows_total", "distinct_keys", "sum_ts", "rows_read", "read_digest")
    seen = {f: {s: getattr(r, f) for s, r in complete.items()} for f in fields}
    bad = [f for f in fields if len(set(seen[f].values())) > 1]
    bad += [f"{f} != {v}" for f, v in expect.items() if any(x != v for x in seen[f].values())]
    bad += [f"{s}: distinct keys != rows" for s, r in complete.items() if r.distinct_keys != r.rows_total]
    run.consistent = not bad
    note = (
        (
            f"{len(complete)} systems agree: {next(iter(seen['rows_total'].values())):,} rows, "
            f"1,000-key read digest {next(iter(seen['read_digest'].values()))}"
        )
        if not bad
        else "MISMATCH: " + "; ".join(f"{b}: {seen.get(b.split(' ')[0], '')}" for b in bad)
    )
    if skipped:
        note += f" (not compared: {', '.join(skipped)}, which did not complete every step)"
    run.consistency_note = note
