"""Runner inputs refused with one typed line (issue 25, audit R3b and R5).

An interval too long for apscheduler's clock (``every 99999999999999h`` overflowed a
``timedelta`` with a traceback) and a metrics port another process holds (``OSError``
EADDRINUSE, a traceback) are configuration mistakes: :class:`RunnerConfigError`, and
from the CLI one line and exit 2, like every other bad config.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.services.runner import Runner
from lakeline.services.runner.config import RunnerConfig
from lakeline.services.runner.schedules import MAX_EVERY_SECONDS, Every, parse_schedule
from lakeline.timeline.errors import RunnerConfigError


@pytest.mark.parametrize(
    "text", ["every 99999999999999h", "every 8785h", "every 31622401s", "every " + "9" * 5000 + "m"]
)
def test_an_interval_over_366_days_is_refused(text: str) -> None:
    with pytest.raises(RunnerConfigError, match="longer than 366 days"):
        parse_schedule(text, "compaction")


def test_the_longest_interval_is_accepted() -> None:
    assert parse_schedule("every 8784h", "x") == Every(MAX_EVERY_SECONDS)
    assert parse_schedule("every 0005m", "x") == Every(300)


def test_cli_refuses_a_huge_interval_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "r.toml"
    config.write_text(f'[[tables]]\npath = "{tmp_path}"\ncompaction = "every 99999999999999h"\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["runner", "--config", str(config), "--once"])
    assert res.exit_code == 2, res.output
    assert res.output.strip().count("\n") == 0 and "[RunnerConfigError]" in res.output


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield int(s.getsockname()[1])


def test_a_metrics_port_in_use_is_a_config_error(tmp_path: Path, busy_port: int) -> None:
    config = RunnerConfig.from_dict(
        {"runner": {"metrics_port": busy_port}, "tables": [{"path": str(tmp_path), "cleaning": "every 1h"}]}
    )
    runner = Runner(config)
    with pytest.raises(RunnerConfigError, match=f"metrics port 127.0.0.1:{busy_port}"):
        runner.start()
    runner.stop(0)  # nothing was started: stopping is harmless


def test_cli_refuses_a_metrics_port_in_use_in_one_line(tmp_path: Path, busy_port: int) -> None:
    config = tmp_path / "r.toml"
    config.write_text(f'[[tables]]\npath = "{tmp_path}"\ncleaning = "every 1h"\n', encoding="utf-8")
    res = CliRunner().invoke(cli, ["runner", "--config", str(config), "--metrics-port", str(busy_port)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and "[RunnerConfigError]" in res.output
    assert res.output.strip().count("\n") == 0, res.output
