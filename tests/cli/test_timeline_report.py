"""``lakeline timeline report PATH --html FILE``: the page's structure, its escaping, and
the page as a real headless Chromium renders it (a screenshot whose pixels must show the
lanes' state colours, and no console error)."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.cli.timeline.report import STATE_COLOURS, render_html, report_data
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults

from tests.ci import under_ci

SCHEMA = pa.schema([("id", pa.int64()), ("day", pa.string()), ("note", pa.string())])
HOSTILE = '<script>alert("x")</script>'


def _demo_table(tmp_path: Path) -> Table:
    """Writes, a compaction, a rolled-back write, an index, and a hostile string."""
    t = Table.create(
        tmp_path / "t",
        SCHEMA,
        record_key="id",
        partition_by=["day"],
        table_type="mor",
        properties={"compaction.delta-commits": 1},
    )
    for n in range(3):  # the same keys again: merge-on-read logs, which compaction folds
        t.upsert(pa.table({"id": [1, 2], "day": ["a", "b"], "note": [HOSTILE, str(n)]}, schema=SCHEMA))
    t.services.compact()
    faults.arm("commit.before_complete", "raise")
    with pytest.raises(Exception):  # noqa: B017 - the injected fault, whatever its type
        t.upsert(pa.table({"id": [99], "day": ["a"], "note": ["lost"]}, schema=SCHEMA))
    faults.disarm_all()
    t.indexes.create("bloom_filters")
    t.delete(pa.table({"id": [1]}))
    return t


def test_the_page_has_a_lane_per_action_and_escapes_what_the_table_holds(tmp_path: Path) -> None:
    t = _demo_table(tmp_path)
    data = report_data(t)
    page = render_html(data)
    assert {s.action for s in data.spans} >= {"deltacommit", "compaction", "indexing", "schema"}
    assert any(s.state == "rolled_back" for s in data.spans)
    for lane in ("deltacommit", "compaction", "indexing"):
        assert f">{lane}</text>" in page
    assert page.count('<g class="instant') == len(data.spans) == len(t.timeline.instants())
    assert "<script" not in page.lower() and "http://" not in page and "https://" not in page
    assert {p.partition for p in data.partitions} == {"day=a", "day=b"}
    assert "bloom_filters" in page and "ready" in page
    # The text fallback lists every instant.
    assert page.count("<tr>") >= len(data.spans)


def test_the_cli_writes_the_page(tmp_path: Path) -> None:
    t = _demo_table(tmp_path)
    out = tmp_path / "report.html"
    r = CliRunner().invoke(cli, ["timeline", "report", t.path, "--html", str(out)])
    assert r.exit_code == 0, r.output
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert "instants" in r.output


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _png_pixels(png: bytes) -> np.ndarray:
    """The RGB(A) pixels of an 8-bit PNG (what Chromium writes), rows unfiltered."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width = 8, b"", 0
    height = colour = 0
    while pos < len(png):
        (length,), kind = struct.unpack(">I", png[pos : pos + 4]), png[pos + 4 : pos + 8]
        body = png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    bpp = 4 if colour == 6 else 3
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(height, 1 + width * bpp)
    out = np.zeros((height, width * bpp), np.int32)
    for y in range(height):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        prev = out[y - 1] if y else np.zeros(width * bpp, np.int32)
        if f == 0:
            out[y] = line
        elif f == 2:
            out[y] = (line + prev) % 256
        else:  # 1 (sub), 3 (average), 4 (Paeth): need the pixel to the left, one by one
            row = np.zeros(width * bpp, np.int32)
            for i in range(width * bpp):
                a = row[i - bpp] if i >= bpp else 0
                b, c = prev[i], (prev[i - bpp] if i >= bpp else 0)
                if f == 1:
                    pred = a
                elif f == 3:
                    pred = (a + b) // 2
                else:
                    p = a + b - c
                    pa_, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa_ <= pb and pa_ <= pc else (b if pb <= pc else c)
                row[i] = (line[i] + pred) % 256
            out[y] = row
    return out.reshape(height, width, bpp)[:, :, :3]


def test_chromium_renders_the_lanes_without_a_console_error(tmp_path: Path) -> None:
    browser = _chromium()
    if browser is None:
        if under_ci():
            pytest.fail("chromium is not installed (make test installs it); under CI=true it must not skip")
        pytest.skip("no chromium (apt-get install chromium)")
    page = tmp_path / "report.html"
    page.write_text(render_html(report_data(_demo_table(tmp_path))))
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,700",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shot.exists(), proc.stderr[-2000:]
    console_errors = [ln for ln in proc.stderr.splitlines() if "CONSOLE" in ln or "Uncaught" in ln]
    assert console_errors == []
    pixels = _png_pixels(shot.read_bytes())
    for state in ("completed", "rolled_back"):
        rgb = [int(STATE_COLOURS[state][i : i + 2], 16) for i in (1, 3, 5)]
        hits = np.all(np.abs(pixels - np.array(rgb)) <= 6, axis=2).sum()
        assert hits > 20, f"no {state} bar ({STATE_COLOURS[state]}) in the screenshot"
    if os.environ.get("LAKELINE_REPORT_SCREENSHOT"):
        shutil.copy(shot, os.environ["LAKELINE_REPORT_SCREENSHOT"])
