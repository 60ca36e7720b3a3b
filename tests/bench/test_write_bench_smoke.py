"""Smoke test of the write benchmark's harness (``python -m bench write``), not of speed.

Runs the whole benchmark at 20,000 rows through the same code path as a full run (data
generation, one subprocess per system and step, evaluation, JSON output) and checks that
every system ends in the same state: the same rows in the table and the same answer to
the 1,000-key read, both equal to what the generated data says they must be. A harness
that timed a failing step, read the wrong range or upserted with different semantics on
one system would compare numbers that mean different things.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("deltalake", reason="the benchmark's peers come with the bench extra: pip install -e '.[bench]'")
pytest.importorskip("pyiceberg", reason="the benchmark's peers come with the bench extra: pip install -e '.[bench]'")

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench import data
from bench.write import bench as write_bench
from bench.write.child import _digest

ROWS = 20_000


def expected_state(rows: int, shape: data.Shape = data.DEFAULT) -> tuple[pa.Table, pa.Table]:
    """The table after the appends and the upsert, and its 1,000-key read, computed
    straight from the generated data (updates carry a larger ts, so they win)."""
    per = rows // write_bench.APPENDS
    total = per * write_bench.APPENDS
    base = pa.concat_tables([data.append_batch(i, per, shape) for i in range(write_bench.APPENDS)])
    ups = data.upsert_batch(total, total // 10, shape)
    kept = base.filter(pc.invert(pc.is_in(base.column("key"), value_set=ups.column("key"))))
    final = pa.concat_tables([kept, ups])
    a, b = data.read_range(total, write_bench.READ_KEYS, shape, new_rows=total // 10 - total // 20)
    return final, final.filter((pc.field("key") >= a) & (pc.field("key") < b))


@pytest.mark.timeout(180)
def test_every_system_ends_in_the_same_state(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    argv = ["--rows", str(ROWS), "--read-runs", "1"]  # the read's repeats: the test of the data shapes
    rc = write_bench.main([*argv, "--workdir", str(tmp_path / "work"), "--no-docs", "--json", str(out)])
    assert rc == 0
    run = json.loads(out.read_text())

    results = run["results"]
    assert set(results) == set(write_bench.DEFAULT_SYSTEMS)
    failed = {f"{s}/{step}": r["error"] for s, steps in results.items() for step, r in steps.items() if not r["ok"]}
    assert failed == {}
    assert all(set(steps) == set(write_bench.STEPS) for steps in results.values())

    final, window = expected_state(ROWS)
    assert window.num_rows == write_bench.READ_KEYS
    reads = {s: steps["read"] for s, steps in results.items()}
    assert {s: r["rows_total"] for s, r in reads.items()} == dict.fromkeys(reads, final.num_rows)
    assert {s: r["distinct_keys"] for s, r in reads.items()} == dict.fromkeys(reads, final.num_rows)
    assert {s: r["sum_ts"] for s, r in reads.items()} == dict.fromkeys(reads, pc.sum(final.column("ts")).as_py())
    assert {s: r["rows_read"] for s, r in reads.items()} == dict.fromkeys(reads, write_bench.READ_KEYS)
    assert {s: r["read_digest"] for s, r in reads.items()} == dict.fromkeys(reads, _digest(window))
    assert run["consistent"] is True

    # Every number the targets need was measured.
    for steps in results.values():
        for r in steps.values():
            assert r["seconds"] is not None and r["seconds"] >= 0
            assert r["peak_rss"] > 0
    assert results["lakeline-mor"]["upsert"]["bytes_written"] > 0
    assert run["input_upsert_bytes"] > 0
    assert {t["ok"] for t in run["targets"]} <= {True, False}  # none left unmeasured
    assert run["shape"] == {"keys": "sequential", "order": "random"}  # the default: batches unsorted
    assert run["delta_read"] == "scan"  # deltalake's own scan, the other path timed after it
    assert results["deltalake"]["read"]["detail"]["other_read"] == "dataset"
    assert results["deltalake"]["read"]["detail"]["other_read_s"] > 0
    assert {"tag_s", "write_s", "commit_s"} <= set(results["lakeline-mor"]["upsert"]["detail"]["timings"])


@pytest.mark.timeout(120)
def test_a_run_per_data_shape_in_one_section(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--keys sequential,uuid --order sorted`` runs once per shape: the flags reach the
    data, the systems agree on each, and the one section states every shape with its
    ratios. Two systems at 2,000 rows, to stay short."""
    sections: dict[str, str] = {}
    monkeypatch.setattr(write_bench, "update_section", lambda name, body: sections.__setitem__(name, body))
    rows, out, work = 2_000, tmp_path / "run.json", tmp_path / "work"
    argv = ["--rows", str(rows), "--systems", "lakeline-mor,deltalake", "--keys", "sequential,uuid"]
    argv += ["--order", "sorted"]
    assert write_bench.main([*argv, "--workdir", str(work), "--json", str(out)]) == 0
    runs = json.loads(out.read_text())["runs"]
    body = sections[write_bench.SECTION]
    assert body.startswith("## Write path") and "| data shape | mor append |" in body
    for run, keys in zip(runs, ("sequential", "uuid")):
        shape = data.Shape(keys, "sorted")
        assert run["shape"] == shape.as_dict() and run["consistent"] is True, run["consistency_note"]
        first = pq.read_table(work / f"{keys}-sorted" / "input" / "append_00.parquet").column("key").to_pylist()
        assert first == sorted(first) and all(len(k) == 32 for k in first) is (keys == "uuid")
        final, window = expected_state(rows, shape)
        for r in (steps["read"] for steps in run["results"].values()):
            assert (r["rows_total"], r["rows_read"], r["read_digest"]) == (
                final.num_rows,
                window.num_rows,
                _digest(window),
            )
        assert f"### {shape.label}" in body and shape.describe() in body
        for r in run["results"].values():  # the read ran 3 times per system, the median kept
            assert len(r["read"]["detail"]["runs_s"]) == 3
    assert body.count("read 1,000 keys: time (median of 3)") == 2


def test_the_object_store_run_keeps_its_stated_shape() -> None:
    """The --store s3 report says sequential keys in sorted batches: that is its default,
    and another shape is refused there."""
    assert write_bench.parse(["--store", "s3"]).shapes == [data.SORTED_SEQUENTIAL]
    assert write_bench.parse(["--store", "s3"]).delta_read == "dataset"
    assert write_bench.parse([]).shapes == [data.DEFAULT]
    with pytest.raises(SystemExit):
        write_bench.parse(["--store", "s3", "--keys", "uuid"])


def test_ri_systems_are_tables_created_with_a_record_index(tmp_path: Path) -> None:
    # Not in the default run; asked by name, each is its table type with the record
    # index from creation (index.record-index), the others without one.
    from bench.write.systems import make_system

    assert write_bench.parse(["--systems", "lakeline-cow-ri,lakeline-mor-ri,deltalake"]).systems == [
        "lakeline-cow-ri",
        "lakeline-mor-ri",
        "deltalake",
    ]
    for name, kind, indexes in (
        ("lakeline-mor-ri", "mor", ["record_index"]),
        ("lakeline-cow-ri", "cow", ["record_index"]),
        ("lakeline-mor", "mor", []),
    ):
        system = make_system(name, tmp_path)
        system.load()
        system.create(data.SCHEMA)
        assert system.name == name and system.table.config.table_type == kind
        assert [i.name for i in system.table.indexes.list()] == indexes
