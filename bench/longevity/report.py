"""How the longevity benchmark's results (:mod:`bench.longevity.bench`) are judged and shown:
the targets of issues 16 and 15, the markdown section of docs/performance.md and the
summary printed at the end of a run."""

from __future__ import annotations

from typing import Any

from ..report import machine, today
from .systems import RUNNER_FALLBACK

#: Issue 16: merge-on-read without compaction stays within 1.3x of round 0 in every round;
#: issue 15: with the runner, the last round is within 1.1x of round 0.
MOR_TARGET, RUNNER_TARGET = 1.3, 1.1


def targets(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 16's and issue 15's targets, for the systems that ran."""
    s = {name: r["summary"] for name, r in out["systems"].items()}
    n = out["rounds"]
    found = []
    if "lakeline-mor" in s:
        v = s["lakeline-mor"]["worst_over_round0"]
        found.append(
            {
                "target": f"lakeline-mor (no compaction): every round within {MOR_TARGET}x of round 0 (issue 16)",
                "value": f"worst {v:.3f}x",
                "pass": v <= MOR_TARGET,
            }
        )
    if "lakeline-mor-runner" in s:
        v = s["lakeline-mor-runner"]["last_over_round0"]
        found.append(
            {
                "target": f"lakeline-mor-runner: round {n} within {RUNNER_TARGET}x of round 0 (issue 15)",
                "value": f"{v:.3f}x",
                "pass": v <= RUNNER_TARGET,
            }
        )
        for peer in ("deltalake", "deltalake-optimize"):
            if peer in s:
                a, b = s["lakeline-mor-runner"]["maintenance_s"], s[peer]["maintenance_s"]
                found.append(
                    {
                        "target": f"lakeline-mor-runner maintenance faster than {peer}'s (issue 15)",
                        "value": f"{a:.2f} s against {b:.2f} s ({a / b:.2f}x)",
                        "pass": a < b,
                    }
                )
    return found


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB"


def report(result: dict[str, Any], command: str) -> str:
    from .bench import QUERIES, WINDOW_START  # here, not at the top: bench imports this module

    systems = result["systems"]
    names = list(systems)
    n = result["rounds"]
    lines = [
        "## Longevity: TPC-DS queries over rounds of data maintenance (after LST-Bench WP1)",
        "",
        f"{today()}, {machine()}. Command: `{command}`",
        "",
        f"TPC-DS `store_sales` at scale factor {result['sf']:g} ({result['rows']:,} rows, record key "
        f"`ss_item_sk, ss_ticket_number`), each system in its own folder. Round 0 queries the fresh table; each of "
        f"{n} rounds then inserts 1% new tickets and deletes a 14-day `ss_sold_date_sk` window (moving, from "
        f"{WINDOW_START}), and queries again. Query time = reading the 6 `store_sales` columns the queries use "
        f"through the system's Arrow reader + TPC-DS queries {', '.join(map(str, QUERIES))} in DuckDB over it, "
        f"best of {result['repeat']}, systems in turns. Degradation rate: LST-Bench's mean relative change of "
        "the query time from round to round. Bytes written: every new file in the table's folder during the "
        "rounds (background compaction included, the initial load not). The systems are measured in turns, so "
        "load from other work on the machine slows them alike: the ratio over deltalake's own shows the drift "
        "that is the system's.",
        "",
        f"| system | round 0 | round {n} | round {n} / round 0 | "
        f"worst / round 0 | degradation rate | round {n} / round 0 over deltalake's | "
        f"maintenance, {n} rounds | bytes written | files (logs) at the end |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        s = systems[name]["summary"]
        lines.append(
            f"| {name} | {s['round0_s']:.2f} s | {s['last_s']:.2f} s | {s['last_over_round0']:.2f}x | "
            f"{s['worst_over_round0']:.2f}x | {s['degradation_rate']:+.1%} | "
            + (f"{s['last_over_round0_vs_deltalake']:.2f}x" if "last_over_round0_vs_deltalake" in s else "-")
            + f" | {s['maintenance_s']:.2f} s | "
            f"{_mib(s['bytes_written'])} | {s['files']} ({s['log_files']}) |"
        )
    lines += [
        "",
        "Query time per round, read + queries (seconds):",
        "",
        "| round | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for i in range(n + 1):
        cells = [systems[name]["rounds"][i] for name in names]
        lines.append(
            f"| {i} | "
            + " | ".join(f"{c['query_time_s']:.2f} ({c['read_s']:.2f} + {c['queries_s']:.2f})" for c in cells)
            + " |"
        )
    lines += [
        "",
        "Maintenance per round, insert + delete (+ optimize), seconds; files the snapshot reads "
        "(merge-on-read logs among them):",
        "",
        "| round | " + " | ".join(names) + " |",
        "|---:|" + "---:|" * len(names),
    ]
    for i in range(1, n + 1):
        cells = [systems[name]["rounds"][i] for name in names]
        lines.append(
            f"| {i} | "
            + " | ".join(
                f"{c['insert_s']:.2f} + {c['delete_s']:.2f}"
                + (f" + {c['optimize_s']:.2f}" if c["optimize_s"] else "")
                + f"; {c['files']} ({c['log_files']})"
                for c in cells
            )
            + " |"
        )
    lines += ["", "Targets:", ""]
    lines += [f"- {t['target']}: {t['value']}: **{'PASS' if t['pass'] else 'FAIL'}**" for t in result["targets"]]
    if "lakeline-mor-runner" in systems:
        bg = systems["lakeline-mor-runner"]["background"]
        lines += [
            "",
            f"lakeline-mor-runner: {bg.get('mode', '')}; {bg.get('compactions', 0)} compactions and "
            f"{bg.get('cleans', 0)} cleans completed during the run; table property "
            "`compaction.delta-commits = 1`.",
        ]
        if RUNNER_FALLBACK in bg.get("mode", ""):
            lines.append("**The lakeline runner did not exist when this ran: the numbers are the fallback's.**")
    same = not result["mismatches"]
    lines += ["", f"Every system returned the same query results in every round: {'yes' if same else '**NO**'}."]
    return "\n".join(lines)


def print_summary(result: dict[str, Any]) -> None:
    """The per-system summary as a rich table on stderr (the markdown goes to stdout)."""
    from rich.console import Console
    from rich.table import Table as RichTable

    n = result["rounds"]
    table = RichTable(title="longevity")
    for col in ("system", "round 0", f"round {n}", "ratio", "degradation", "maintenance", "written", "files"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for name, r in result["systems"].items():
        s = r["summary"]
        table.add_row(
            name,
            f"{s['round0_s']:.2f} s",
            f"{s['last_s']:.2f} s",
            f"{s['last_over_round0']:.2f}x",
            f"{s['degradation_rate']:+.1%}",
            f"{s['maintenance_s']:.2f} s",
            _mib(s["bytes_written"]),
            f"{s['files']} ({s['log_files']})",
        )
    console = Console(stderr=True, width=160)
    console.print(table)
    for t in result["targets"]:
        console.print(f"{'PASS' if t['pass'] else 'FAIL'}  {t['target']}: {t['value']}")
