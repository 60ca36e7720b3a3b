"""``lakeline timeline report PATH --html FILE``: a picture of a table's timeline.

One self-contained HTML page (inline CSS and SVG, no script, nothing fetched), so it can
be mailed, attached to a ticket or opened from a CI artifact. It is built in two steps:
:func:`report_data` reads the table into a plain data model (spans of instants, files per
partition over time, index states), and :func:`render_html` turns that model into the
page, escaping every value that came from the table. Hovering a bar shows the plan and
the commit-metadata summary (SVG ``<title>`` tooltips); the same facts are in a table
below the picture, which is what screen readers and text browsers get.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from html import escape
from typing import Any

from ...indexes.states import list_indexes
from ...table import Table
from ...timeline.instant import Instant, State
from ...timeline.timeline import Timeline

#: Fill colour of a bar by the instant's state (also in the legend and the text table).
STATE_COLOURS: dict[str, str] = {
    "completed": "#2e7d32",
    "inflight": "#ef6c00",
    "requested": "#757575",
    "rolled_back": "#c62828",
}
#: Data instants for which files per partition are drawn (the newest ones).
_MAX_SNAPSHOTS = 200
_WIDTH, _LANE_H, _LEFT = 1100, 28, 130


@dataclass(frozen=True)
class Span:
    """One instant on the time axis."""

    instant: int
    action: str
    state: str
    requested_us: int
    inflight_us: int | None
    end_us: int | None  # completed or rolled back; None while pending
    summary: str


@dataclass(frozen=True)
class PartitionPoint:
    """Files and bytes of one partition in the snapshot right after ``instant``."""

    instant: int
    at_us: int
    partition: str
    files: int
    bytes: int


@dataclass(frozen=True)
class ReportData:
    table: str
    spans: tuple[Span, ...]
    partitions: tuple[PartitionPoint, ...]
    indexes: tuple[tuple[str, str, str, str], ...]  # name, kind, columns, state
    generated_us: int


def _summary(inst: Instant) -> str:
    """The plan and the metadata's counts, short enough for a tooltip."""
    plan = {k: v for k, v in inst.plan.items() if not isinstance(v, (list, dict))}
    stats = inst.metadata.get("stats") if isinstance(inst.metadata.get("stats"), Mapping) else {}
    counts = {k: v for k, v in inst.metadata.items() if isinstance(v, (int, float, str)) and k != "operation"}
    parts = [f"instant {inst.id} {inst.action.value} {inst.state.value}"]
    if plan:
        parts.append("plan: " + json.dumps(plan, default=str, sort_keys=True)[:300])
    if stats or counts:
        parts.append("metadata: " + json.dumps({**counts, **dict(stats or {})}, default=str, sort_keys=True)[:300])
    return "\n".join(parts)


def report_data(table: Table, timeline: Timeline | None = None) -> ReportData:
    """The report's model of ``table`` (its timeline read now unless given)."""
    tl = timeline if timeline is not None else table.timeline
    times: dict[int, dict[State, int]] = {}
    for ev in tl.events:
        times.setdefault(ev.instant, {})[ev.state] = ev.ts_us
    spans = []
    for inst in tl.instants():
        t = times.get(inst.id, {})
        end = t.get(State.COMPLETED, t.get(State.ROLLED_BACK))
        spans.append(
            Span(
                inst.id,
                inst.action.value,
                inst.state.value,
                t.get(State.REQUESTED, inst.requested_us),
                t.get(State.INFLIGHT),
                end,
                _summary(inst),
            )
        )
    points = []
    data = [i for i in tl.completed() if i.action.writes_data][-_MAX_SNAPSHOTS:]
    for inst in data:
        view = table.view(tl.as_of_seq(int(inst.completed_seq or 0)))
        for part in view.partitions():
            slices = view.latest_slices(part)
            points.append(
                PartitionPoint(
                    inst.id,
                    int(inst.completed_us or 0),
                    part or "(unpartitioned)",
                    sum(len(s.files) for s in slices),
                    sum(s.bytes for s in slices),
                )
            )
    indexes = tuple((d.name, d.kind, ", ".join(d.columns), str(d.state)) for d in list_indexes(tl))
    now = int(datetime.now(UTC).timestamp() * 1e6)
    return ReportData(table.path, tuple(spans), tuple(points), indexes, now)


def _time(us: int | None) -> str:
    if us is None:
        return "-"
    return datetime.fromtimestamp(us / 1e6, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def _lanes_svg(d: ReportData) -> str:
    lanes = sorted({s.action for s in d.spans})
    if not d.spans:
        return "<p>The timeline has no instants.</p>"
    lo = min(s.requested_us for s in d.spans)
    hi = max(max(s.end_us or d.generated_us, s.requested_us) for s in d.spans)
    span = max(hi - lo, 1)
    plot = _WIDTH - _LEFT - 20

    def x(us: int) -> float:
        return _LEFT + (us - lo) / span * plot

    height = len(lanes) * _LANE_H + 40
    out = [
        f'<svg class="lanes" role="img" width="{_WIDTH}" height="{height}" viewBox="0 0 {_WIDTH} {height}" '
        f'aria-label="{escape(f"{len(d.spans)} instants in {len(lanes)} lanes, one per action", quote=True)}">'
    ]
    for n, lane in enumerate(lanes):
        y = 10 + n * _LANE_H
        out.append(
            f'<rect class="lane" x="0" y="{y}" width="{_WIDTH}" height="{_LANE_H - 2}" '
            f'fill="{"#f4f4f4" if n % 2 else "#ffffff"}"/>'
        )
        out.append(f'<text x="6" y="{y + _LANE_H / 2 + 4}" font-size="13">{escape(lane)}</text>')
    for s in d.spans:
        y = 10 + lanes.index(s.action) * _LANE_H + 4
        x0, x1 = x(s.requested_us), x(s.end_us or d.generated_us)
        w = max(x1 - x0, 4.0)
        colour = STATE_COLOURS.get(s.state, "#000000")
        out.append(
            f'<g class="instant {escape(s.state, quote=True)}"><title>{escape(s.summary)}</title>'
            f'<rect x="{x0:.1f}" y="{y}" width="{w:.1f}" height="{_LANE_H - 10}" fill="{colour}"/>'
        )
        if s.inflight_us is not None:  # where the work started
            xi = x(s.inflight_us)
            out.append(
                f'<line x1="{xi:.1f}" x2="{xi:.1f}" y1="{y}" y2="{y + _LANE_H - 10}" stroke="#000" stroke-width="1"/>'
            )
        if s.state == "rolled_back":
            out.append(f'<text x="{x0 + w + 2:.1f}" y="{y + 13}" font-size="13" fill="{colour}">✕</text>')
        out.append("</g>")
    axis_y = 10 + len(lanes) * _LANE_H + 16
    out.append(f'<text x="{_LEFT}" y="{axis_y}" font-size="11">{escape(_time(lo))}</text>')
    out.append(f'<text x="{_WIDTH - 20}" y="{axis_y}" font-size="11" text-anchor="end">{escape(_time(hi))}</text>')
    out.append("</svg>")
    return "".join(out)


def _partitions_svg(points: Sequence[PartitionPoint]) -> str:
    if not points:
        return "<p>No data files yet.</p>"
    parts = sorted({p.partition for p in points})
    ids = sorted({p.instant for p in points})
    top = max(p.bytes for p in points) or 1
    w, h, left = 700, 220, 60
    palette = ["#1565c0", "#6a1b9a", "#00838f", "#9e9d24", "#4e342e", "#ad1457", "#283593", "#2e7d32"]
    out = [
        f'<svg class="partitions" role="img" width="{w + 220}" height="{h + 30}" '
        f'aria-label="bytes per partition after each data instant ({len(parts)} partitions)">'
    ]
    for n, part in enumerate(parts):
        pts = [p for p in points if p.partition == part]
        coords = " ".join(
            f"{left + ids.index(p.instant) / max(len(ids) - 1, 1) * (w - left):.1f},{h - p.bytes / top * (h - 10):.1f}"
            for p in pts
        )
        colour = palette[n % len(palette)]
        out.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{coords}">'
            f"<title>{escape(part)}</title></polyline>"
        )
        out.append(f'<text x="{w + 10}" y="{14 + n * 16}" font-size="12" fill="{colour}">{escape(part)}</text>')
    out.append(f'<text x="0" y="14" font-size="11">{_size(top)}</text>')
    out.append(f'<text x="0" y="{h}" font-size="11">0</text></svg>')
    return "".join(out)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f'<th scope="col">{escape(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(d: ReportData) -> str:
    """The page: legend, lanes, partitions over time, indexes, and the text table."""
    legend = "".join(
        f'<span class="key"><span class="swatch" style="background:{c}"></span>{escape(s)}</span>'
        for s, c in STATE_COLOURS.items()
    )
    latest: dict[str, PartitionPoint] = {}
    for p in d.partitions:
        latest[p.partition] = p
    instants = [
        (
            s.instant,
            s.action,
            s.state,
            _time(s.requested_us),
            _time(s.inflight_us),
            _time(s.end_us),
            s.summary.replace("\n", "; "),
        )
        for s in d.spans
    ]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>lakeline timeline: {escape(d.table)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; font-size: 13px; margin: 0.5em 0 1.5em; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: left; vertical-align: top; }}
.key {{ margin-right: 1.2em; }} .swatch {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; }}
svg {{ display: block; margin: 0.5em 0 1em; }}
</style></head><body>
<h1>Timeline of {escape(d.table)}</h1>
<p>{len(d.spans)} instants; generated {escape(_time(d.generated_us))} UTC. Bars run from <em>requested</em>
to <em>completed</em> (or rolled back, marked ✕); the black tick is <em>inflight</em>. Hover a bar for its
plan and metadata; every fact is also in the table at the end.</p>
<p class="legend">{legend}</p>
<h2>Instants, one lane per action</h2>
{_lanes_svg(d)}
<h2>Files and sizes per partition over time</h2>
{_partitions_svg(d.partitions)}
{_table(["partition", "files now", "bytes now"], [(p.partition, p.files, p.bytes) for p in latest.values()])}
<h2>Indexes</h2>
{_table(["name", "kind", "columns", "state"], d.indexes) if d.indexes else "<p>No indexes.</p>"}
<details open><summary><h2 style="display:inline">Every instant (text)</h2></summary>
{_table(["id", "action", "state", "requested", "inflight", "ended", "plan and metadata"], instants)}
</details>
</body></html>
"""
