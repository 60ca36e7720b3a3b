"""Smoke test of the services benchmark's harness (``python -m bench services``), not of speed.

Runs the whole benchmark at 20,000 rows through the code path of a full run (data, one
subprocess per step, evaluation, the markdown section) and checks that every metric the
issue-6 proof points need was measured, and that every read returned the rows the
generated data says it must: the merge-on-read table before and after compaction, and
lakeline and deltalake after z-order. A harness whose systems read different rows would
compare numbers that mean different things.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("deltalake", reason="the benchmark's peers come with the bench extra: pip install -e '.[bench]'")

import pyarrow as pa
import pyarrow.compute as pc

from bench import data
from bench.lookup.systems import expression
from bench.report import update_section
from bench.services import bench as services_bench
from bench.services import steps as ss
from bench.write.bench import APPENDS
from bench.write.child import _digest

ROWS = 20_000


def expected_tables(rows: int) -> tuple[pa.Table, pa.Table]:
    """(the merge-on-read table after every update round, the z-order tables' rows),
    straight from the generated data: a later round's larger ts wins."""
    per = rows // APPENDS
    appended = pa.concat_tables([data.append_batch(i, per) for i in range(APPENDS)])
    table = appended
    for r in range(services_bench.UPDATE_ROUNDS):
        ups = data.update_batch(rows, rows // services_bench.UPDATE_SHARE, r)
        kept = table.filter(pc.invert(pc.is_in(table.column("key"), value_set=ups.column("key"))))
        table = pa.concat_tables([kept, ups])
    return table, appended


@pytest.mark.timeout(120)
def test_every_metric_measured_and_reads_agree(tmp_path: Path) -> None:
    run = services_bench.run_benchmark(ROWS, tmp_path / "work", step_timeout=60, repeat=1, log=lambda _m: None)

    want_steps = {
        ss.MOR: {"build", "compact"} | {f"{r}@{p}" for r in ss.MOR_READS for p in ss.PHASES},
        ss.PLAIN: {"plain@before", "plain@after"},
        ss.COW: {"zbuild", *ss.ZQUERIES},
        ss.DELTA: {"zbuild", *ss.ZQUERIES},
    }
    assert {s: set(steps) for s, steps in run.results.items()} == want_steps
    failed = {f"{s}/{st}": r.error for s, by in run.results.items() for st, r in by.items() if not r.ok}
    assert failed == {}

    # Every group had 5 logs, and compaction and the plain job wrote every row.
    build = run.get(ss.MOR, "build").detail
    assert build["logs_per_group"] == [services_bench.UPDATE_ROUNDS] * 2 and build["file_groups"] == APPENDS
    for system, step in ((ss.MOR, "compact"), (ss.PLAIN, "plain@before"), (ss.PLAIN, "plain@after")):
        r = run.get(system, step)
        assert r.rows_total == ROWS and r.seconds > 0 and r.files_read == APPENDS * (1 + services_bench.UPDATE_ROUNDS)

    # The merge-on-read reads return the generated table, with logs and after compaction.
    final, appended = expected_tables(ROWS)
    point = final.filter(expression(run.spec["point_query"]))
    for phase in ss.PHASES:
        full = run.get(ss.MOR, f"full@{phase}")
        assert (full.rows_read, full.read_digest) == (ROWS, ss.fingerprint(final)), phase
        r = run.get(ss.MOR, f"point@{phase}")
        assert (r.rows_read, r.read_digest) == (1, _digest(point)), phase
    assert run.get(ss.MOR, "full@compacted").files_read == APPENDS  # one base per group, no logs

    # lakeline and deltalake return the same rows after z-order, the rows the data holds.
    for q in ss.ZQUERIES:
        answer = appended.filter(expression(run.spec["z_queries"][q]))
        assert answer.num_rows > 0
        for system in ss.ZSYSTEMS:
            r = run.get(system, q)
            assert (r.rows_read, r.read_digest) == (answer.num_rows, _digest(answer)), (system, q)
            assert 1 <= r.files_read <= r.detail["files_total"]
    assert run.get(ss.COW, "zkeys").rows_read == run.spec["read_keys"]
    for system in ss.ZSYSTEMS:
        assert run.get(system, "zbuild").detail["files_after"] >= 2  # the target size cut several files
    assert run.consistent is True, run.consistency_note

    # Every target was measured, and the report shows each number and how it was made.
    assert len(run.targets) == 3 and {t.ok for t in run.targets} <= {True, False}
    md = services_bench.markdown(run, "python -m bench services --rows 20000", services_bench.findings(run))
    for fact in (
        "Measured ",
        "load average",
        "deltalake ",
        "lakeline at ",
        "Command: `python -m bench services",
        "compaction throughput",
        "after z-order",
        "with logs / after",
        "| **PASS** |" if any(t.ok for t in run.targets) else "| **FAIL** |",
    ):
        assert fact in md, fact
    assert "FAILED" not in md and "timeout" not in md
    page = tmp_path / "performance.md"
    update_section(services_bench.SECTION, md, page)
    assert page.read_text().count("<!-- services-bench:start -->") == 1


def test_arguments() -> None:
    args = services_bench.parse(["--rows", "20000", "--repeat", "1", "--no-docs"])
    assert (args.rows, args.repeat, args.no_docs) == (20000, 1, True)
    with pytest.raises(SystemExit):
        services_bench.parse(["--repeat", "0"])
    with pytest.raises(SystemExit):
        services_bench.parse(["--rows", "100"])
