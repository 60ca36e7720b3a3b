"""Fault points (timeline/diagnostics/faults.py): a point does nothing unless armed, fires
on its n-th hit only, and can be armed from the environment or with a callback."""

from __future__ import annotations

import pytest
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import FaultInjectedError

pytestmark = pytest.mark.usefixtures("no_faults")


def test_unarmed_point_does_nothing() -> None:
    faults.point("test.nowhere")


def test_armed_point_raises_on_its_nth_hit_only() -> None:
    faults.arm("test.third", on_hit=3)
    faults.point("test.third")
    faults.point("test.third")
    with pytest.raises(FaultInjectedError, match="test.third"):
        faults.point("test.third")
    faults.point("test.third")  # fired once, then quiet


def test_callback_and_hook_run_at_the_point() -> None:
    seen: list[str] = []
    faults.on("test.cb", lambda: seen.append("cb"))
    previous = faults.set_hook(seen.append)
    try:
        faults.point("test.cb")
        faults.point("test.other")
    finally:
        faults.set_hook(previous)
    assert seen == ["test.cb", "cb", "test.other"]


def test_environment_arms_and_disarm_all_clears(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV_VAR, "test.env=raise@2, test.bad=explode")
    faults.point("test.env")
    with pytest.raises(FaultInjectedError):
        faults.point("test.env")
    with pytest.raises(FaultInjectedError, match="unknown action 'explode'"):
        faults.point("test.bad")
    faults.disarm_all()
    faults.arm("test.env")
    faults.disarm_all()
    faults.point("test.env")
