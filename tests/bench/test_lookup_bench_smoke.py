"""Smoke test of the lookup benchmark's harness (``python -m bench lookup``), not of speed.

Runs the whole benchmark at 20,000 rows through the code path of a full run (data, one
subprocess per system and step, evaluation, rich tables, the markdown section) and
checks that it measured every metric the issue-4 targets need, and that every system
answered both queries with the rows the generated data says they must return, before
and after the upsert. A harness whose systems read different rows, or whose lakeline
tables had no ready index, would compare numbers that mean different things.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

pytest.importorskip("deltalake", reason="the benchmark's peers come with the bench extra: pip install -e '.[bench]'")

import pyarrow as pa
import pyarrow.compute as pc

from bench import data
from bench.lookup import bench as lookup_bench
from bench.lookup import systems as lookup_systems
from bench.lookup.report import findings, markdown, metric_rows, rich_tables
from bench.report import update_section
from bench.write.bench import APPENDS, READ_KEYS
from bench.write.child import _digest
from bench.write.systems import BASELINE, LAKELINE

ROWS = 20_000


def expected_answers(rows: int, lookup_ts: int) -> dict[str, dict[str, pa.Table]]:
    """Phase -> the whole table, the 1,000-key window and the ts lookup's row, straight
    from the generated data (updates carry a larger ts, so they win)."""
    per = rows // APPENDS
    base = pa.concat_tables([data.append_batch(i, per) for i in range(APPENDS)])
    ups = data.upsert_batch(per * APPENDS, per * APPENDS // 10)
    kept = base.filter(pc.invert(pc.is_in(base.column("key"), value_set=ups.column("key"))))
    a, b = data.read_range(per * APPENDS, READ_KEYS)
    out = {}
    for phase, table in (("appended", base), ("upserted", pa.concat_tables([kept, ups]))):
        out[phase] = {
            "table": table,
            "range": table.filter((pc.field("key") >= a) & (pc.field("key") < b)),
            "ts": table.filter(pc.field("ts") == lookup_ts),
        }
    return out


@pytest.mark.timeout(120)
def test_every_metric_measured_and_systems_agree(tmp_path: Path) -> None:
    run = lookup_bench.run_benchmark(ROWS, tmp_path / "work", step_timeout=60, repeat=1, log=lambda _m: None)

    steps = {"append", "index", "upsert"} | {f"{q}@{p}" for q in lookup_systems.QUERIES for p in lookup_systems.PHASES}
    for system in lookup_systems.SYSTEMS:
        want = steps - ({"index"} if system == BASELINE else set())
        assert set(run.results[system]) == want, system
    failed = {f"{s}/{st}": r.error for s, by in run.results.items() for st, r in by.items() if not r.ok}
    assert failed == {}

    want = expected_answers(ROWS, run.lookup_ts)
    final = want["upserted"]["table"]
    for system in lookup_systems.SYSTEMS:
        for q in lookup_systems.QUERIES:
            for phase in lookup_systems.PHASES:
                r = run.get(system, f"{q}@{phase}")
                answer = want[phase][q]
                assert answer.num_rows == {"range": READ_KEYS, "ts": 1}[q]
                assert (r.rows_read, r.read_digest) == (answer.num_rows, _digest(answer)), (system, q, phase)
                assert r.files_read >= 1 and r.seconds > 0 and r.detail["bytes_read"] > 0
                if system != BASELINE:  # pruning stages come from Scan.explain()
                    assert r.detail["explain"]["files_after_bloom_pruning"] == r.files_read
        up = run.get(system, "upsert")
        assert (up.rows_total, up.distinct_keys) == (final.num_rows, final.num_rows)
        assert up.sum_ts == pc.sum(final.column("ts")).as_py()
    assert run.consistent is True, run.consistency_note

    # Every number the issue-4 targets need was measured, on both lakeline table types.
    for system in LAKELINE:
        timings = run.get(system, "upsert").detail["timings"]
        assert {"tag_s", "index_s", "write_s", "commit_s", "total_s"} <= set(timings)
        built = run.get(system, "index").detail["indexes_s"]
        assert set(built) == {kw.get("name", kind) for kind, kw in lookup_systems.INDEXES}
    assert len(run.targets) == 2 * 2 + 2 + 1  # reads (as appended) x lakeline types, tagging x 2, cow upsert
    assert {t.ok for t in run.targets} <= {True, False}  # none left unmeasured

    # The report shows every metric with a value, and says where and how it was measured.
    for label, cells in metric_rows(run):
        assert not any(c in ("FAILED", "timeout") for c in cells), label
        assert cells[0] != "-", label  # lakeline-cow has every metric
    md = markdown(run, "python -m bench lookup --rows 20000", findings(run))
    for fact in (
        "Measured ",
        "load average",
        "deltalake ",
        "lakeline at ",
        "Command: `python -m bench lookup",
        "tag_s",
        "| **PASS** |" if any(t.ok for t in run.targets) else "| **MISS** |",
    ):
        assert fact in md, fact
    page = tmp_path / "performance.md"
    update_section(lookup_bench.SECTION, md, page)
    assert page.read_text().count("<!-- lookup-bench:start -->") == 1
    from rich.console import Console

    con = Console(file=io.StringIO(), width=200)
    for t in rich_tables(run):
        con.print(t)


def test_arguments() -> None:
    args = lookup_bench.parse(["--rows", "20000", "--repeat", "1", "--no-docs"])
    assert (args.rows, args.repeat, args.no_docs) == (20000, 1, True)
    with pytest.raises(SystemExit):
        lookup_bench.parse(["--repeat", "0"])
