"""Targets and the markdown section of the write benchmark on an object store.

Why apart from :mod:`.report`: the store has its own targets (issue 27: appends within
0.8x of deltalake, the merge-on-read upsert within 0.5x, the 1,000-key read within 1.0x,
peak memory as on local disk), its own section of docs/performance.md, and the same
steps on local disk beside it, so the cost of the store shows step by step.
"""

from __future__ import annotations

import os
from typing import Any

from ..report import today
from .environment import _version, machine_line
from .report import PEAK_MEMORY, GiB, MiB, Run, StepResult, Target, _fmt_b, _ratio, _verdict, metric_rows
from .systems import BASELINE, LAKELINE

SECTION = "write-s3-bench"
TITLE = "Object storage (SeaweedFS on loopback): appends, upsert, 1,000-key read (vs deltalake)"

#: lakeline / deltalake on the same store (issue 27, item 8).
APPEND_RATIO = 0.8
MOR_UPSERT_RATIO = 0.5
READ_RATIO = 1.0
STEPS = ("append", "upsert", "read")


def s3_targets(run: Run) -> list[Target]:
    """Issue 27's targets, lakeline against deltalake on the same store in the same run."""
    targets: list[Target] = []

    def sec(system: str, step: str) -> float | None:
        r = run.get(system, step)
        return r.seconds if r is not None and r.ok else None

    def ratio(name: str, system: str, step: str, limit: float) -> None:
        if system not in run.results or BASELINE not in run.results:
            return
        r = _ratio(sec(system, step), sec(BASELINE, step))
        a, b = sec(system, step), sec(BASELINE, step)
        measured = "n/a" if r is None or a is None or b is None else f"{r:.2f}x ({a:.2f} s vs {b:.2f} s)"
        targets.append(Target(name, measured, f"<= {limit:g}x", None if r is None else r <= limit))

    for s in LAKELINE:
        ratio(f"{s} appends ({run.appends}, create included) vs deltalake", s, "append", APPEND_RATIO)
    for s in LAKELINE:  # the same without creating the table
        r, base = run.get(s, "append"), sec(BASELINE, "append")
        create = r.detail.get("create_s") if r is not None and r.ok else None
        if r is None or r.seconds is None or create is None or base is None:
            continue
        alone = r.seconds - create
        targets.append(
            Target(
                f"{s} appends alone (create excluded) vs deltalake",
                f"{alone / base:.2f}x ({alone:.2f} s vs {base:.2f} s)",
                f"<= {APPEND_RATIO:g}x",
                alone / base <= APPEND_RATIO,
            )
        )
    ratio("lakeline-mor upsert vs deltalake merge", "lakeline-mor", "upsert", MOR_UPSERT_RATIO)
    for s in LAKELINE:
        ratio(f"{s} {run.read_keys:,}-key read vs deltalake", s, "read", READ_RATIO)
    for s in LAKELINE:
        steps = run.results.get(s)
        if not steps:
            continue
        peaks = [(r.peak_rss, st) for st, r in steps.items() if r.ok and r.peak_rss is not None]
        if not peaks:
            targets.append(Target(f"{s} peak memory of any step", "n/a", "<= 2 GiB", None))
            continue
        peak, at = max(peaks)
        complete = len(peaks) == len(steps)
        targets.append(
            Target(
                f"{s} peak memory of any step (the local-disk target)",
                f"{peak / GiB:.2f} GiB ({at})" + ("" if complete else ", some steps failed"),
                "<= 2 GiB",
                peak <= PEAK_MEMORY and complete,
            )
        )
    return targets


def store_rows(run: Run) -> list[tuple[str, list[str]]]:
    """The write benchmark's rows, worded for a store, plus lakeline's probe."""
    rows = []
    for label, cells in metric_rows(run):
        rows.append((label.replace("on disk after upsert", "on the store after upsert"), cells))
        if label.startswith("append: first / last"):
            rows.append(("append: of which create", [_create(run.get(s, "append")) for s in run.results]))
            rows.append(("append: every run's total (median kept)", [_runs(run.get(s, "append")) for s in run.results]))
    return rows


def _create(r: StepResult | None) -> str:
    if r is None or not r.ok:
        return "-"
    create, probe = r.detail.get("create_s"), r.detail.get("probe_s")
    if create is None:
        return "-"
    return f"{create:.2f} s" + (f" (probe {probe:.2f} s)" if probe else "")


def _append_runs(run: Run) -> int:
    counts = [len(r.detail.get("runs_s") or [1]) for s in run.results if (r := run.get(s, "append")) is not None]
    return max(counts, default=1)


def _runs(r: StepResult | None) -> str:
    runs = r.detail.get("runs_s") if r is not None and r.ok else None
    return " / ".join(f"{s:.2f}" for s in runs) + " s" if runs else "-"


def local_rows(run: Run, local: Run) -> list[tuple[str, list[str]]]:
    """Each step on the store against the same step on local disk, in the same run."""
    rows: list[tuple[str, list[str]]] = []
    systems = list(run.results)
    for step in STEPS:
        times, peaks = [], []
        for s in systems:
            a, b = run.get(s, step), local.get(s, step)
            if a is None or b is None or not (a.ok and b.ok) or a.seconds is None or b.seconds is None:
                times.append("-")
                peaks.append("-")
                continue
            r = _ratio(a.seconds, b.seconds)
            times.append(f"{_secs(a.seconds)} / {_secs(b.seconds)}" + ("" if r is None else f" ({r:.1f}x)"))
            pr = _ratio(a.peak_rss, b.peak_rss)
            peaks.append(f"{_fmt_b(a.peak_rss)} / {_fmt_b(b.peak_rss)}" + ("" if pr is None else f" ({pr:.2f}x)"))
        rows.append((f"{step}: time, store / local disk", times))
        rows.append((f"{step}: peak memory, store / local disk", peaks))
    return rows


def _secs(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s < 1 else f"{s:.2f} s"


def rich_tables(run: Run, local: Run | None) -> list[Any]:
    from rich.table import Table as RichTable

    from .report import targets_table

    tables = []
    for title, rows in [(f"write benchmark on the store: {run.rows:,} rows", store_rows(run))] + (
        [("the same steps on local disk, same run", local_rows(run, local))] if local is not None else []
    ):
        t = RichTable(title=title)
        t.add_column("metric")
        for s in run.results:
            t.add_column(s, justify="right")
        for label, cells in rows:
            t.add_row(label, *cells)
        tables.append(t)
    tables.append(targets_table("targets on the store (issue 27, lakeline vs deltalake, same run)", run.targets))
    return tables


def _table(systems: list[str], rows: list[tuple[str, list[str]]]) -> list[str]:
    lines = ["| metric | " + " | ".join(systems) + " |", "|---|" + "---:|" * len(systems)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows]
    return lines


def markdown(run: Run, local: Run | None, command: str, server: str, notes: list[str]) -> str:
    systems = list(run.results)
    load = (
        f"; 1-minute load average {run.load[0]:.1f} at the start, {run.load[1]:.1f} at the end, "
        f"on {os.cpu_count()} cores"
        if run.load
        else ""
    )
    lines = [
        f"## {TITLE}",
        "",
        f"Measured {today()} on {machine_line()}; deltalake {_version('deltalake')}, obstore "
        f"{_version('obstore')}, SeaweedFS {server}; lakeline at {run.source}.",
        "",
        f"Command: `{command}` (whole run {run.total_s / 60:.1f} min{load})",
        "",
        (
            f"Store: one SeaweedFS {server} (`weed mini`: master, volume server, filer and S3 gateway in one "
            "process) on 127.0.0.1, plain HTTP, signed requests, its data on the local disk; started once for "
            "the run, every system's table at a fresh `s3://` prefix of one bucket, with the same "
            "`storage_options` (deltalake's keys: `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, "
            "`AWS_SECRET_ACCESS_KEY`, `AWS_REGION`, `AWS_ALLOW_HTTP`). deltalake commits with conditional "
            "puts (no `AWS_S3_ALLOW_UNSAFE_RENAME`, no lock table); lakeline's event log is create-only "
            "objects on the same bucket. The server shares the 2 cores with the client."
        ),
        "",
        (
            f"Data: the write benchmark's: {run.rows:,} rows written as {run.appends} appends of "
            f"{run.rows // run.appends:,}; then an upsert of {run.upsert_rows:,} rows "
            f"({run.upsert_rows // 2:,} updates of keys drawn uniformly from the whole key space with a larger "
            f"`ts`, {run.upsert_rows - run.upsert_rows // 2:,} new keys; {run.input_upsert_bytes / MiB:.1f} MiB "
            f"as Parquet); then a read of {run.read_keys:,} consecutive keys (`key >= '{run.read_range[0]}' "
            f"AND key < '{run.read_range[1]}'`). Data shape: sequential keys (`k000000000` on), every "
            "append in key order and the upsert batch sorted by key: these numbers hold for sorted input "
            "only; random-order batches and random (UUID) keys are not measured on the store (issue 30). "
            "deltalake is read through `to_pyarrow_dataset`, not its own `scan(predicate=...)`, which may be faster."
        ),
        "",
        *_table(systems, store_rows(run)),
    ]
    if run.probe_s is not None:
        lines += [
            "",
            f"lakeline's conformance probe of the store ran once, before the steps: {run.probe_s:.2f} s (3 races "
            "of 8 create-only writers on one key; SeaweedFS holds a contended create's losers for a second or "
            "more). Its safe verdict is remembered per endpoint and bucket for a day (docs/object-storage.md), "
            "so every table of the run was created as a user's tables after their first on a bucket are: "
            "without it. The first table on a bucket pays it once on top of the create above.",
        ]
    if local is not None:
        lines += [
            "",
            "The same steps on local disk, in the same run right after (time and peak memory on the store / "
            "on local disk):",
            "",
            *_table(systems, local_rows(run, local)),
        ]
    lines += ["", "| target (issue 27) | measured | limit | result |", "|---|---|---|---|"]
    lines += [f"| {t.name} | {t.measured} | {t.limit} | **{_verdict(t.ok)}** |" for t in run.targets]
    lines += [
        "",
        f"Consistency: {run.consistency_note}.",
        "",
        (
            "How it is measured: as on local disk (the write benchmark above): every system/step in a fresh "
            "Python process, *time* covers opening the table and the operation, the first append includes "
            f"creating the table; the append step ran {_append_runs(run)} time(s) per system, the systems in "
            "turns, each on a table of its own, and its times are the median run's (the last run's table is "
            "the one the upsert and the read use); *peak memory* is the process's "
            "`ru_maxrss`; *bytes written* is the objects under the table's prefix that are new or have another "
            "ETag after the step (a listing with obstore before and after); *data files read* as locally. "
            "deltalake's read is the local benchmark's: `DeltaTable(uri, storage_options=...)"
            ".to_pyarrow_dataset()`, its fragments pruned by their min/max, rows filtered on `key` cast to "
            "string (delta-io/delta-rs#4579). pyiceberg is not measured on the store: it needs a catalog "
            "beside the bucket (its SQL catalog is a database), and its upsert took 74 s on local disk."
        ),
    ]
    if notes:
        lines += [""] + [f"- {n}" for n in notes]
    return "\n".join(lines)


__all__ = ["SECTION", "local_rows", "markdown", "rich_tables", "s3_targets", "store_rows"]
