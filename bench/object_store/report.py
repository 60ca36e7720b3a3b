"""The object-store benchmark's summary, terminal tables and markdown section.

Why apart: the runs are raw (every latency, every counted request); the page shows
medians, ratios against deltalake and where the requests go, and one summary feeds the
terminal, the JSON and docs/performance.md alike.
"""

from __future__ import annotations

import os
import statistics
from typing import Any

SECTION = "object-store-bench"
OPEN_TARGET_S = 0.5
METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE", "LIST")
AREAS = ("event slots", "archival mark", "log checkpoint", "pointer", "metadata", "log", "data", "listing")
#: Upserts at each end of a run whose latencies are compared (does a commit slow down?).
DRIFT = 20
LAKELINE_PHASES = ("plan_s", "tag_s", "write_s", "index_s", "commit_s", "upkeep_s")


def _p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def _ms(s: float) -> str:
    return f"{s * 1000:.0f} ms" if s >= 0.0995 else f"{s * 1000:.1f} ms"


def summarize(res: dict[str, Any]) -> dict[str, Any]:
    """Per system: commits/s (median run, range), latencies, requests per commit; the open."""
    out: dict[str, Any] = {"systems": {}, "targets": [], "failed": []}
    commits: dict[str, Any] = res.get("commits") or {}
    for system, runs in commits.get("runs", {}).items():
        ok = [r for r in runs if r.get("ok")]
        out["failed"] += [f"{system}: {r['error']}" for r in runs if not r.get("ok")]
        if not ok:
            continue
        rates = [commits["upserts"] / r["loop_s"] for r in ok]
        median_run = sorted(ok, key=lambda r: r["loop_s"])[len(ok) // 2]
        lat = [x for r in ok for x in r["latencies"]]
        phases = {
            k: statistics.median(p.get(k, 0.0) for p in median_run["phases"])
            for k in LAKELINE_PHASES
            if any(k in p for p in median_run["phases"])
        }
        drift = min(DRIFT, max(1, len(median_run["latencies"]) // 2))
        out["systems"][system] = {
            "first": statistics.median(median_run["latencies"][:drift]),
            "last": statistics.median(median_run["latencies"][-drift:]),
            "rate": statistics.median(rates),
            "rates": rates,
            "p50": _p(lat, 0.5),
            "p95": _p(lat, 0.95),
            "wire": next((r["wire"] for r in ok if r.get("wire")), None),
            "phases": phases,
            "updated_ok": all(r.get("updated_ok") for r in ok),
            "peak_rss": max(r["peak_rss"] for r in ok),
        }
    opened = res.get("open")
    if opened is not None:
        ok = [r for r in opened["runs"] if r.get("ok")]
        out["failed"] += [f"open: {r['error']}" for r in opened["runs"] if not r.get("ok")]
        if ok:
            times = [r["open_s"] for r in ok]
            o = {
                "median": statistics.median(times),
                "min": min(times),
                "max": max(times),
                "plan": statistics.median(r["plan_s"] for r in ok),
                "import": statistics.median(r["import_s"] for r in ok),
                "events": ok[0]["events"],
                "files": ok[0]["files"],
                "counted": opened["counted"] if opened["counted"].get("ok") else None,
            }
            out["open"] = o
            verdict = o["median"] <= OPEN_TARGET_S
            out["targets"].append(
                (
                    f"open a table of {o['events']:,} events: `Table.open` + `t.timeline`, median",
                    _ms(o["median"]),
                    f"<= {OPEN_TARGET_S:g} s",
                    verdict,
                )
            )
    return out


def _counts(wire: dict[str, Any] | None, key: str, names: tuple[str, ...]) -> str:
    if not wire:
        return "-"
    got = wire[key]
    return ", ".join(f"{name} {got[name]:.1f}" for name in names if got.get(name, 0) >= 0.05) or "-"


def _listed(wire: dict[str, Any] | None) -> str:
    if not wire or not wire.get("listed"):
        return "-"
    return ", ".join(f"`{k}` {v:.1f}" for k, v in wire["listed"].items())


def commit_rows(summary: dict[str, Any]) -> list[tuple[str, list[str]]]:
    systems = summary["systems"]
    base = systems.get("deltalake")

    def each(fn: Any) -> list[str]:
        return [fn(s) for s in systems.values()]

    rows = [
        (
            "commits per second, median run (min-max)",
            each(lambda s: f"{s['rate']:.1f} ({min(s['rates']):.1f}-{max(s['rates']):.1f})"),
        ),
        ("commits per second vs deltalake", each(lambda s: f"{s['rate'] / base['rate']:.2f}x" if base else "-")),
        ("one upsert: median / p95 (all runs)", each(lambda s: f"{_ms(s['p50'])} / {_ms(s['p95'])}")),
        (
            f"one upsert: median of the first / last {DRIFT} (median run)",
            each(lambda s: f"{_ms(s['first'])} / {_ms(s['last'])}"),
        ),
        ("requests per commit (on the wire)", each(lambda s: f"{s['wire']['per_unit']:.1f}" if s["wire"] else "-")),
        (
            "requests per commit vs deltalake",
            each(
                lambda s: (
                    f"{s['wire']['per_unit'] / base['wire']['per_unit']:.2f}x"
                    if s["wire"] and base and base["wire"]
                    else "-"
                )
            ),
        ),
        ("requests per commit by method", each(lambda s: _counts(s["wire"], "by_method", METHODS))),
        ("requests per commit by object", each(lambda s: _counts(s["wire"], "by_area", AREAS))),
        ("listings per commit, of", each(lambda s: _listed(s["wire"]))),
        ("every upsert an update (rows, new ts)", each(lambda s: "yes" if s["updated_ok"] else "NO")),
        ("peak memory", each(lambda s: f"{s['peak_rss'] / 2**20:.0f} MiB")),
    ]
    return rows


def print_tables(res: dict[str, Any]) -> dict[str, Any]:
    """Print the results as rich tables; returns the summary they show."""
    from rich.console import Console
    from rich.table import Table as RichTable

    summary = summarize(res)
    con = Console(width=None if os.isatty(1) or "COLUMNS" in os.environ else 160)
    if summary["systems"]:
        t = RichTable(title=f"{res['commits']['upserts']} one-row upserts into {res['commits']['rows']:,} rows")
        t.add_column("metric")
        for s in summary["systems"]:
            t.add_column(s, justify="right")
        for label, cells in commit_rows(summary):
            t.add_row(label, *cells)
        con.print(t)
    for name, measured, limit, ok in summary["targets"]:
        con.print(f"{name}: {measured} ({limit}): " + ("[green]PASS" if ok else "[red]MISS"), highlight=False)
    for f in summary["failed"]:
        con.print(f"[yellow]{f}[/yellow]", highlight=False)
    return summary


def _phases(summary: dict[str, Any]) -> list[str]:
    out = []
    for name, s in summary["systems"].items():
        if s["phases"]:
            parts = ", ".join(f"{k[:-2]} {_ms(v)}" for k, v in s["phases"].items())
            out.append(f"{name}: {parts}")
    return out


def markdown(res: dict[str, Any], summary: dict[str, Any], command: str) -> str:
    load = res["load"]
    lines = [
        "### Object storage: one-row upserts and opening a long table (vs deltalake)",
        "",
        f"Measured {res['date']} on {res['machine']}; SeaweedFS {res['server']} `weed mini` on 127.0.0.1 "
        f"(the same setup as above); lakeline at {res['source']}.",
        "",
        f"Command: `{command}` (whole run {res['total_s'] / 60:.1f} min; 1-minute load average {load[0]:.1f} "
        f"at the start, {load[1]:.1f} at the end, on {os.cpu_count()} cores)",
    ]
    commits = res.get("commits")
    if summary["systems"] and commits:
        systems = list(summary["systems"])
        runs = f"{commits['repeat']} run{'s' if commits['repeat'] != 1 else ''}"
        lines += [
            "",
            f"**One-row upserts**: a table of {commits['rows']:,} rows (the write benchmark's, one append), then "
            f"{commits['upserts']} upserts of one row each (an existing key drawn at random, a larger `ts`) "
            f"through one table handle; {runs} per system, each a fresh process on a fresh "
            "table, the systems in turns. lakeline: `t.upsert(row)`; lakeline-mor-compacting is merge-on-read "
            "with `inline.services = compaction` (a file slice is compacted inline after the commit that gives it "
            "its `compaction.delta-commits` = 5th log; lakeline-mor, the default, compacts only when a service "
            "runs, so its one file slice gathers a log per upsert); deltalake: `dt.merge(row, 't.key = s.key')"
            ".when_matched_update_all().when_not_matched_insert_all().execute()` on one `DeltaTable`.",
            "",
            "| metric | " + " | ".join(systems) + " |",
            "|---|" + "---:|" * len(systems),
        ]
        lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in commit_rows(summary)]
        lines += [
            "",
            f"Requests are counted on the wire in the first run: the same {commits['upserts']} upserts into a "
            "twin table built alike, through a loopback proxy that forwards and counts every request "
            "(`tests/object_storage/proxy.py`; the proxy adds latency, so no timed upsert goes through it). "
            "*By object*: lakeline's event log (`.lakeline/timeline/`: event slots, the archival mark "
            "`archived_through`, log checkpoints and their hint), its pointer `.lakeline/table.json`, its other "
            "metadata (`.lakeline/`: metadata table, markers, heartbeats); deltalake's `_delta_log/`; data "
            "files; bucket listings (any prefix). A GET of a missing object (a free slot, an absent mark) "
            "counts as a request like any other.",
        ]
        phases = _phases(summary)
        if phases:
            intro = "lakeline's phases, median upsert of the median run (`WriteResult.timings`): "
            lines += ["", intro + "; ".join(phases) + "."]
    o = summary.get("open")
    opened = res.get("open")
    if o and opened:
        c = o["counted"]
        req_open = f"{c['wire_open']['requests']}" if c else "-"
        req_plan = f"{c['wire_plan']['requests']}" if c else "-"
        verdict = "**PASS**" if o["median"] <= OPEN_TARGET_S else "**MISS**"
        lines += [
            "",
            f"**Opening a long table**: a merge-on-read table built by {opened['inserts']:,} one-row inserts "
            f"({o['events']:,} events, {o['files']:,} files; built in {opened['build_s']:.0f} s), opened in "
            f"{len(opened['runs'])} fresh processes (median, min-max), then once more through the counting proxy.",
            "",
            "| step | time | requests | target | result |",
            "|---|---:|---:|---:|---|",
            f"| `Table.open(uri, storage_options=...)` + `t.timeline` | {_ms(o['median'])} "
            f"({_ms(o['min'])}-{_ms(o['max'])}) | {req_open} | <= {OPEN_TARGET_S:g} s | {verdict} |",
            f"| then `t.scan().files()` (planning a full scan) | {_ms(o['plan'])} | {req_plan} | - | - |",
            "",
            f"Import of `lakeline.table`: {_ms(o['import'])}, apart."
            + (f" Requests of the open by object: {_counts(c['wire_open'], 'by_area', AREAS)}." if c else ""),
        ]
    if summary["failed"]:
        lines += [""] + [f"- failed: {f}" for f in summary["failed"]]
    return "\n".join(lines)


__all__ = ["OPEN_TARGET_S", "SECTION", "markdown", "print_tables", "summarize"]
