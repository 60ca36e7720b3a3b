"""Smoke test of ``python -m bench scale``'s harness, not of speed: two small sizes, one
run per step, every system and step measured, the floor without an upsert, and every
table format holding the same rows after the upsert."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("deltalake", reason="the benchmark's peers come with the bench extra: pip install -e '.[bench]'")

from bench import scale_bench


@pytest.mark.timeout(240)
def test_every_size_measures_every_step_and_the_systems_agree(tmp_path: Path) -> None:
    out = tmp_path / "run.json"
    rc = scale_bench.main(
        ["--sizes", "20k,40k", "--repeats", "1", "--workdir", str(tmp_path / "work"), "--no-docs", "--json", str(out)]
        + ["--keys", "uuid"]
    )
    assert rc == 0
    runs = json.loads(out.read_text())
    assert runs.pop("shape") == {"keys": "uuid", "order": "random"}
    assert sorted(runs) == ["20000", "40000"]
    for size, systems in runs.items():
        assert sorted(systems) == sorted(scale_bench.SYSTEMS)
        for system, steps in systems.items():
            want = {"append", "read appended"} | (set() if system == "pyarrow" else {"upsert", "read"})
            assert set(steps) == want, (size, system)
            assert all(m["seconds"] > 0 and m["peak_rss"] > 0 for m in steps.values())
        states = {s: tuple(steps["read"]["state"]) for s, steps in systems.items() if "read" in steps}
        assert len(set(states.values())) == 1, states
        rows = int(size)
        assert states["deltalake"][0] == rows + rows // 10 // 2  # half of the upsert is new keys
