"""Smoke test of the streaming benchmark (``python -m bench stream``), not of speed: at a
small size both reads (streamed and materialised) run in their own processes, agree on
every row, and the report says so."""

from __future__ import annotations

import pytest

from bench import stream_bench


def test_stream_bench_runs_and_both_reads_agree(capsys: pytest.CaptureFixture[str]) -> None:
    assert stream_bench.main(["--rows", "200000"]) == 0
    out = capsys.readouterr().out
    assert "reader: 210,000 rows" in out and "to_arrow: 210,000 rows" in out
    assert "MISMATCH" not in out
