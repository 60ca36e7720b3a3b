"""The runner as a daemon, in one process: two daemons serve their own metrics on loopback,
and ``stop`` asks a running compaction to give up, which rolls it back (issue 15, point 4;
split out of ``test_runner.py``, the multi-process proof is ``test_runner_processes.py``)."""

from __future__ import annotations

import threading
import time
import urllib.request
from pathlib import Path

import pytest
from lakeline.services.runner import Runner
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.instant import Action, State

from tests.services.runner.runner_helpers import completed, config, free_port, mor_table

pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return str(r.read().decode())


def sample(text: str, name: str, **labels: str) -> float | None:
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and line.split("{", 1)[1].split("}", 1)[0] == want:
            return float(line.rsplit(" ", 1)[1])
        if not labels and line.startswith(f"{name} "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_two_daemons_serve_their_own_metrics_on_loopback(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", commits=2)
    runners = []
    for n in range(2):
        port = free_port()
        path = tmp_path / f"runner-{n}.toml"
        path.write_text(f"""
[runner]
threads = 1
metrics_port = {port}
[[tables]]
path = "{t.path}"
compaction = "every 1s"
rollback = "every 1s"
""")
        runners.append((Runner.from_toml(path), port))
    try:
        for r, _ in runners:
            r.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not completed(t, Action.COMPACTION):
            time.sleep(0.1)
        time.sleep(1.5)  # both have run a few ticks since
        texts = [scrape(port) for _, port in runners]
    finally:
        assert all(r.stop(grace_seconds=10) for r, _ in runners)
    [inst] = completed(t, Action.COMPACTION)
    done = [sample(text, "lakeline_runner_instants_total", service="compaction", table=t.path) for text in texts]
    assert sorted(d or 0 for d in done) == [0, 1], done  # one runner compacted, the other did not
    for text in texts:
        assert (sample(text, "lakeline_runner_runs_total", service="rollback", table=t.path) or 0) >= 1
        assert sample(text, "lakeline_runner_failures_total", service="compaction", table=t.path) in (None, 0.0)
        assert sample(text, "lakeline_table_files", table=t.path) is not None
        assert sample(text, "lakeline_table_pending_instants", service="compaction", table=t.path) == 0
        assert sample(text, "lakeline_table_log_files_per_slice", table=t.path) is not None
        assert sample(text, "lakeline_table_small_file_share", table=t.path) is not None
    winner = texts[[d or 0 for d in done].index(1)]
    assert (
        sample(winner, "lakeline_runner_last_success_timestamp_seconds", service="compaction", table=t.path) or 0
    ) > time.time() - 120
    assert t.log.refresh().get(inst).state is State.COMPLETED
    with pytest.raises(OSError):
        scrape(runners[0][1])  # stopped: the endpoint is gone


def test_stop_asks_a_running_compaction_to_give_up_and_it_rolls_back(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", commits=2)
    path = config(tmp_path, f"[runner]\ngrace_seconds = 2\n[[tables]]\npath = '{t.path}'\ncompaction = 'every 1s'\n")
    runner = Runner.from_toml(path)
    reached = threading.Event()

    def hold_until_the_runner_gives_up() -> None:
        reached.set()
        deadline = time.monotonic() + 30
        while not runner.giving_up and time.monotonic() < deadline:
            time.sleep(0.01)

    faults.on("compaction.after_inflight", hold_until_the_runner_gives_up)
    runner.start()
    try:
        assert reached.wait(30), "the runner never started a compaction"
    finally:
        t0 = time.monotonic()
        finished = runner.stop()
        took = time.monotonic() - t0
    assert finished and took < 2.5, took
    tl = t.log.refresh()
    [inst] = tl.by_action(Action.COMPACTION)
    assert inst.state is State.ROLLED_BACK and tl.pending() == []
    assert [o.outcome for o in runner.outcomes()] == ["aborted"]
    assert (
        runner.metrics.registry.get_sample_value(
            "lakeline_runner_aborts_total", {"table": t.path, "service": "compaction"}
        )
        == 1
    )
    assert sorted(t.to_arrow().column("v").to_pylist()) == ["u1"] * 20
