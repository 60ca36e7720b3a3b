"""bench/report.py: what every benchmark shares. A benchmark's main that SIGTERM unwinds
while it runs, and that leaves the caller's handler in place afterwards (a test process
that ran a benchmark's smoke test keeps its own handling of SIGTERM)."""

from __future__ import annotations

import os
import signal

import pytest

from bench.report import unwinds_on_sigterm


def test_sigterm_unwinds_a_running_benchmark_and_the_callers_handler_comes_back() -> None:
    mine = signal.getsignal(signal.SIGTERM)

    @unwinds_on_sigterm
    def killed(argv: list[str]) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        return 0

    @unwinds_on_sigterm
    def finished(argv: list[str]) -> int:
        assert signal.getsignal(signal.SIGTERM) is not mine
        return 7

    with pytest.raises(SystemExit) as exc:
        killed([])
    assert exc.value.code == 143
    assert signal.getsignal(signal.SIGTERM) is mine
    assert finished([]) == 7 and signal.getsignal(signal.SIGTERM) is mine
