"""Smoke test of the object-store benchmarks' harness (``python -m bench write --store s3``
and ``python -m bench object-store``), not of speed.

Runs both, tiny, on the session's SeaweedFS through the same code path as a full run
(children per step, the store's options passed to every system, bytes listed on the
store, requests counted on the wire, the markdown section) and checks that the tables
really are on the store, every system ends in the same state, and every number the page
shows was measured. A harness that wrote a table to local disk, or counted no request,
would report a store's numbers that are not.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("deltalake", reason="the benchmark's peers come with the bench extra: pip install -e '.[bench]'")

from bench.object_store import bench as store_bench
from bench.write import bench as write_bench
from bench.write.object_store import S3_SYSTEMS, StoreConfig, list_objects
from tests.seaweedfs import SeaweedServer

ROWS = 4_000


@pytest.mark.timeout(120)
def test_the_write_benchmark_runs_on_the_store(
    s3: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sections: dict[str, str] = {}
    monkeypatch.setattr(write_bench, "update_section", lambda name, body: sections.__setitem__(name, body))
    out, work = tmp_path / "run.json", tmp_path / "work"
    cache_dir = os.environ["LAKELINE_CACHE_DIR"]
    assert write_bench.parse(["--store", "s3"]).systems == list(S3_SYSTEMS)  # pyiceberg is left out on the store
    # Two systems, not three: each runs its appends three times (the median kept).
    systems = ["lakeline-mor", "deltalake"]
    argv = ["--store", "s3", "--rows", str(ROWS), "--systems", ",".join(systems), "--no-local"]
    assert write_bench.main([*argv, "--workdir", str(work), "--json", str(out)], server=s3) == 0
    run = json.loads(out.read_text())

    results = run["results"]
    assert set(results) == set(systems)
    failed = {f"{s}/{step}": r["error"] for s, steps in results.items() for step, r in steps.items() if not r["ok"]}
    assert failed == {}
    assert run["consistent"] is True
    assert {s: steps["read"]["rows_total"] for s, steps in results.items()} == dict.fromkeys(systems, ROWS + ROWS // 20)

    store = StoreConfig.load(work)
    assert store is not None and store.base.startswith(f"s3://{s3.bucket}/")
    for system in systems:  # on the store, and nothing on local disk
        assert list_objects(store.uri(system), store.options), system
        assert results[system]["append"]["bytes_written"] > 0
    assert not (work / "tables").exists()
    # The probe ran once in the parent; the children created their tables on its
    # remembered verdict, without probing.
    assert run["probe_s"] is not None
    assert results["lakeline-mor"]["append"]["detail"]["probe_s"] == 0
    assert len(results["lakeline-mor"]["append"]["detail"]["runs_s"]) == 3
    assert os.environ["LAKELINE_CACHE_DIR"] == cache_dir  # restored after the run
    assert {t["ok"] for t in run["targets"]} <= {True, False}  # none left unmeasured
    assert any("0.8x" in t["limit"] for t in run["targets"])  # the store's targets, not the local ones
    body = sections["write-s3-bench"]
    assert body.startswith("## Object storage (SeaweedFS on loopback)") and "--store s3" in body
    assert s3.secret_key not in body and s3.secret_key not in out.read_text()


@pytest.mark.timeout(120)
def test_one_row_upserts_and_the_open_are_timed_and_counted(
    s3: SeaweedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sections: dict[str, str] = {}
    monkeypatch.setattr(store_bench, "update_section", lambda name, body: sections.__setitem__(name, body))
    out = tmp_path / "run.json"
    # Two of the four systems (a child process each, kept short); 6 upserts, so the
    # compacting table compacts inline once (after its 5th log).
    systems = ["lakeline-mor-compacting", "deltalake"]
    argv = ["--upserts", "6", "--rows", "2000", "--repeat", "1", "--events", "24", "--open-repeat", "1"]
    argv += ["--systems", ",".join(systems), "--json", str(out), "--workdir", str(tmp_path / "w")]
    assert store_bench.main(argv, server=s3) == 0
    res = json.loads(out.read_text())
    summary = res["summary"]

    assert summary["failed"] == []
    assert set(summary["systems"]) == set(systems)
    for name, s in summary["systems"].items():
        assert s["rate"] > 0, name
        assert s["updated_ok"], name  # every upsert landed as an update of its key
        assert s["wire"]["per_unit"] >= 1, name  # a commit is at least one request on the wire
    # lakeline's commits write their events as create-only objects of the event log
    assert summary["systems"]["lakeline-mor-compacting"]["wire"]["by_area"]["event slots"] >= 3
    assert summary["systems"]["deltalake"]["wire"]["by_area"]["log"] >= 1

    opened = summary["open"]
    assert opened["events"] >= 24 and opened["median"] > 0
    assert opened["counted"]["wire_open"]["requests"] > 0
    body = sections["object-store-bench"]
    assert "One-row upserts" in body and "Opening a long table" in body
    assert s3.secret_key not in body and s3.secret_key not in out.read_text()
