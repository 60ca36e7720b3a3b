"""The metrics hook: a no-op by default, a bound sink sees every observation, timed blocks
report their duration even when they raise, and the previous sink comes back."""

from __future__ import annotations

import pytest
from lakeline.timeline.diagnostics import metrics


def test_default_sink_drops_and_recording_collects() -> None:
    assert isinstance(metrics.get_sink(), metrics.NoopSink)
    metrics.observe("x.y_seconds", 1.0)  # dropped, no error
    with metrics.recording() as sink:
        metrics.observe("a_seconds", 2.0, table="t1")
        with pytest.raises(RuntimeError), metrics.timed("b_seconds", service="s"):
            raise RuntimeError("boom")
    assert isinstance(metrics.get_sink(), metrics.NoopSink)
    assert sink.values("a_seconds") == [2.0]
    assert [o.labels for o in sink.observations] == [{"table": "t1"}, {"service": "s"}]
    assert len(sink.values("b_seconds")) == 1 and sink.values("b_seconds")[0] >= 0


def test_set_sink_returns_the_previous_one() -> None:
    mine = metrics.RecordingSink()
    previous = metrics.set_sink(mine)
    try:
        assert metrics.get_sink() is mine
    finally:
        assert metrics.set_sink(previous) is mine
