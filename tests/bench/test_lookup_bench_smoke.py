"""Smoke test of the lookup benchmark's harness (``python -m bench lookup``), not of speed.

Runs the whole benchmark at 20,000 rows through the code path of a full run (data, one
subprocess per system and step, evaluation, rich tables, the markdown section) and
checks that it measured every metric the issue-4 targets need, and that every system
answered every query with the rows the generated data says they must return, before
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


#: uuid keys in random order: the shape where the range read's answer differs before and
#: after the upsert (new keys land inside the range) and every file spans the key space.
SHAPE = data.Shape("uuid", "random")


def expected_answers(rows: int, lookup_ts: int, lookup_key: str) -> dict[str, dict[str, pa.Table]]:
    """Phase -> the whole table, the 1,000-key window and the key and ts lookups' row,
    straight from the generated data (updates carry a larger ts, so they win)."""
    per = rows // APPENDS
    total = per * APPENDS
    base = pa.concat_tables([data.append_batch(i, per, SHAPE) for i in range(APPENDS)])
    ups = data.upsert_batch(total, total // 10, SHAPE)
    kept = base.filter(pc.invert(pc.is_in(base.column("key"), value_set=ups.column("key"))))
    a, b = data.read_range(total, READ_KEYS, SHAPE, new_rows=total // 10 - total // 20)
    out = {}
    for phase, table in (("appended", base), ("upserted", pa.concat_tables([kept, ups]))):
        out[phase] = {
            "table": table,
            "range": table.filter((pc.field("key") >= a) & (pc.field("key") < b)),
            "key": table.filter(pc.field("key") == lookup_key),
            "ts": table.filter(pc.field("ts") == lookup_ts),
        }
    return out


@pytest.mark.timeout(120)
def test_every_metric_measured_and_systems_agree(tmp_path: Path) -> None:
    run = lookup_bench.run_benchmark(
        ROWS, tmp_path / "work", step_timeout=60, repeat=1, log=lambda _m: None, shape=SHAPE
    )
    assert run.shape == SHAPE.as_dict()

    steps = {"append", "index", "upsert"} | {f"{q}@{p}" for q in lookup_systems.QUERIES for p in lookup_systems.PHASES}
    for system in lookup_systems.SYSTEMS:
        want = steps - ({"index"} if system == BASELINE else set())
        assert set(run.results[system]) == want, system
    failed = {f"{s}/{st}": r.error for s, by in run.results.items() for st, r in by.items() if not r.ok}
    assert failed == {}

    want = expected_answers(ROWS, run.lookup_ts, run.lookup_key)
    assert len(run.lookup_key) == 32 and want["appended"]["range"].num_rows == run.read_rows_appended < READ_KEYS
    final = want["upserted"]["table"]
    for system in lookup_systems.SYSTEMS:
        for q in lookup_systems.QUERIES:
            for phase in lookup_systems.PHASES:
                r = run.get(system, f"{q}@{phase}")
                answer = want[phase][q]
                assert answer.num_rows == {"range": READ_KEYS, "key": 1, "ts": 1}[q] or (q, phase) == (
                    "range",
                    "appended",
                )
                assert (r.rows_read, r.read_digest) == (answer.num_rows, _digest(answer)), (system, q, phase)
                assert r.files_read >= 1 and r.seconds > 0 and r.detail["bytes_read"] > 0
                if system != BASELINE:  # pruning stages come from Scan.explain()
                    assert r.detail["explain"]["files_after_bloom_pruning"] == r.files_read
                else:  # its own scan timed; its dataset read after it, with the same answer
                    assert r.detail["dataset_s"] > 0 and r.detail["dataset_rows"] == r.rows_read
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
        assert cells[0] != "-" or "deltalake via" in label, label  # lakeline-cow has every metric of its own
    md = markdown(run, "python -m bench lookup --rows 20000", findings(run))
    for fact in (
        "Measured ",
        "load average",
        "deltalake ",
        "lakeline at ",
        "Command: `python -m bench lookup",
        "tag_s",
        SHAPE.describe(),
        "scan(predicate=...)",
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
    assert args.shapes == [data.DEFAULT]  # sequential keys, batches in random order
    both = [data.Shape("sequential", "sorted"), data.Shape("uuid", "sorted")]
    assert lookup_bench.parse(["--keys", "sequential,uuid", "--order", "sorted"]).shapes == both
    with pytest.raises(SystemExit):
        lookup_bench.parse(["--keys", "random"])
    with pytest.raises(SystemExit):
        lookup_bench.parse(["--repeat", "0"])


def test_the_change_feed_bench_compares_feeds_of_the_same_changes(tmp_path: Path) -> None:
    """``python -m bench change-feed`` at 20,000 rows: every feed (lakeline's from
    positions, its whole-read reference, deltalake's ``load_cdf``) holds one before and
    one after row per updated row (the harness refuses a run where they differ), and
    the report states the data and the upserts' write times."""
    import argparse

    from bench.lookup import change_feed

    args = argparse.Namespace(rows=20_000, upserts=2, upsert_rows=500, keys="uuid", repeats=1, whole_repeats=False)
    result = change_feed.run(args, tmp_path)
    assert result["feed_rows"] == 2 * 2 * 500
    assert set(result["seconds"]) == {"lakeline-positions", "lakeline-whole", "deltalake"}
    assert all(s > 0 for s in result["seconds"].values())
    text = change_feed.report(result, "python -m bench change-feed")
    assert "`uuid` keys" in text and "deltalake's `merge`" in text
