"""The report of the services benchmark (:mod:`bench.services.bench`): the markdown section
of docs/performance.md, and the findings a reader needs to read the numbers right."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..report import today
from ..write.bench import APPENDS
from ..write.environment import _version, machine_line
from ..write.report import StepResult, _fmt_b, _ratio
from . import steps as ss

if TYPE_CHECKING:
    from .bench import ServicesRun


def findings(run: ServicesRun) -> list[str]:
    """What a reader needs to read the z-order numbers right."""
    keys = run.get(ss.DELTA, "zkeys")
    if keys is None or not keys.ok or keys.files_read < 0.9 * (keys.detail.get("files_total") or 1e9):
        return []
    return [
        "deltalake's z-order hardly prunes the key read: delta-rs builds its z-order key from the "
        "first 16 bytes of each column's row encoding, interleaved bit by bit, and every `key` starts "
        "with the same bytes (`k000...`), so the leading bits of `value` decide the order and each "
        "file spans almost the whole key range. lakeline's `zorder` interleaves each column's rank "
        "instead (`table/zorder.py`)."
    ]


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|---|" + "---:|" * (len(header) - 1),
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _ms(r: StepResult | None) -> str:
    if r is None:
        return "-"
    if not r.ok:
        return "timeout" if (r.error or "").startswith("timed out") else "FAILED"
    every = [s for s in r.detail.get("seconds_all") or [] if s is not None]
    spread = f" ({min(every) * 1000:.0f}-{max(every) * 1000:.0f})" if len(every) > 1 else ""
    return f"{r.seconds * 1000:.0f} ms{spread}"


def _get(r: StepResult | None, fn: Callable[[StepResult], str]) -> str:
    return "-" if r is None or not r.ok else fn(r)


def markdown(run: ServicesRun, command: str, notes: list[str]) -> str:
    from .bench import REPEAT  # here, not at the top: bench imports this module

    spec, g = run.spec, run.get
    build, comp = g(ss.MOR, "build"), g(ss.MOR, "compact")
    plains = [g(ss.PLAIN, "plain@before"), g(ss.PLAIN, "plain@after")]
    load = (
        f"; 1-minute load average {run.load[0]:.1f} at the start, {run.load[1]:.1f} at the end, "
        f"on {os.cpu_count()} cores"
        if run.load
        else ""
    )
    logs = "-".join(str(n) for n in sorted(set(build.detail["logs_per_group"]))) if build and build.ok else "-"
    groups = _get(
        build,
        lambda r: (
            f"{r.detail['file_groups']} file groups with {logs} logs each "
            f"({_fmt_b(r.detail['base_bytes'])} of bases, "
            f"{_fmt_b(r.detail['log_bytes'])} of logs)"
        ),
    )
    lines = [
        "## Table services: compaction, z-order clustering, merge-on-read reads (vs pyarrow, deltalake)",
        "",
        f"Measured {today()} on {machine_line()}; deltalake {_version('deltalake')}; lakeline at {run.source}.",
        "",
        f"Command: `{command}` (whole run {run.total_s / 60:.1f} min{load})",
        "",
        (
            f"Data: {spec['rows']:,} rows of the write benchmark's data in {APPENDS} appends. Merge-on-read "
            f"table: then {spec['update_rounds']} rounds of {spec['update_rows']:,} updates each (keys drawn "
            f"uniformly from the whole key space, a larger `ts`): {groups}. Z-order tables: the same "
            f"{spec['rows']:,} rows shuffled, in {APPENDS} appends, files cut at "
            f"{_fmt_b(spec['z_target_bytes'])} by both systems."
        ),
        "",
        "**Compaction** (`t.services.compact()` against a plain pyarrow read + write of the same files)",
        "",
    ]
    col = [comp, *plains]
    lines += _table(
        ["", "lakeline compaction", "plain pyarrow, before", "plain pyarrow, after"],
        [
            ["time", *(_get(r, lambda r: f"{r.seconds:.2f} s") for r in col)],
            ["rows written", *(_get(r, lambda r: f"{r.rows_total:,}") for r in col)],
            ["files read / written", *(_get(r, lambda r: f"{r.files_read} / {r.files_written}") for r in col)],
            ["bytes read (Parquet)", *(_get(r, lambda r: _fmt_b(r.detail.get("bytes_read"))) for r in col)],
            ["bytes written", *(_get(r, lambda r: _fmt_b(r.bytes_written)) for r in col)],
            ["rows per second", *(_get(r, lambda r: f"{r.rows_total / r.seconds:,.0f}") for r in col)],
            ["peak memory", *(_get(r, lambda r: _fmt_b(r.peak_rss)) for r in col)],
        ],
    )
    lines += [
        "",
        f"**After z-order** on `key`, `value` (median of {run.spec.get('repeat', REPEAT)} runs, min-max in brackets)",
        "",
    ]
    zb = [g(s, "zbuild") for s in ss.ZSYSTEMS]
    rows = [
        [
            "files before / after z-order",
            *(_get(r, lambda r: f"{r.detail['files_before']} / {r.detail['files_after']}") for r in zb),
        ],
        ["z-order time", *(_get(r, lambda r: f"{r.seconds:.2f} s") for r in zb)],
    ]
    for q in ss.ZQUERIES:
        text = spec["z_queries"][q]["text"]
        zq = [g(s, q) for s in ss.ZSYSTEMS]
        rows += [
            [f"`{text}`: time", *(_ms(r) for r in zq)],
            [
                "files read / bytes",
                *(
                    _get(
                        r,
                        lambda r: (
                            f"{r.files_read} of {r.detail.get('files_total')} / {_fmt_b(r.detail.get('bytes_read'))}"
                        ),
                    )
                    for r in zq
                ),
            ],
            ["rows", *(_get(r, lambda r: f"{r.rows_read:,}") for r in zq)],
        ]
    lines += _table(["", "lakeline (`cluster`, strategy `zorder`)", "deltalake (`optimize.z_order`)"], rows)
    lines += [
        "",
        f"**Merge-on-read read** with {spec['update_rounds']} logs per group, and after compaction "
        f"(median of {run.spec.get('repeat', REPEAT)} runs)",
        "",
    ]
    rows = []
    for q, label in (("full", "full table"), ("point", f"point read `{spec['point_query']['text']}`")):
        logs, compacted = g(ss.MOR, f"{q}@logs"), g(ss.MOR, f"{q}@compacted")
        both = logs is not None and logs.ok and compacted is not None and compacted.ok
        r = _ratio(logs.seconds, compacted.seconds) if both else None  # type: ignore[union-attr]
        rows += [
            [f"{label}: time", _ms(logs), _ms(compacted), "-" if r is None else f"{r:.2f}x"],
            ["files read", _get(logs, lambda r: f"{r.files_read}"), _get(compacted, lambda r: f"{r.files_read}"), ""],
        ]
    lines += _table(["", "with logs", "after compaction", "with logs / after"], rows)
    lines += ["", "| target | measured | limit | result |", "|---|---|---|---|"]
    verdict = {True: "PASS", False: "FAIL", None: "n/a"}
    lines += [f"| {t.name} | {t.measured} | {t.limit} | **{verdict[t.ok]}** |" for t in run.targets]
    lines += [
        "",
        f"Consistency: {run.consistency_note}.",
        "",
        (
            "How it is measured: every step runs in a fresh Python process; times cover opening the "
            "table and the operation. The plain job reads each group's base and logs with "
            "`pq.read_table` and writes that group's row count with `pq.write_table` (Snappy, "
            f"{ss.ROW_GROUP_ROWS:,}-row groups, dictionary encoding on the columns lakeline's writer "
            "picks), one group after another; its time is the mean of its run "
            "before and after the compaction. The lakeline tables run services at niceness 0 "
            "(`service.nice`, default 10, would measure the neighbours' load on a shared machine). Files "
            "read: lakeline's `Scan.files()` (pruned by key ranges and the `column_stats` index), "
            "deltalake's dataset fragments left after its log's min/max pruning."
        ),
    ]
    return "\n".join(lines + ([""] + [f"- {n}" for n in notes] if notes else []))
