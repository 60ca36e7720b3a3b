"""The CLI as a real process: ``python -m lakeline.cli`` (what the console script runs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lakeline.table import Table


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lakeline.cli", *args], check=False, capture_output=True, text=True, timeout=120
    )


def test_show_json_in_a_subprocess(busy_table: Table) -> None:
    proc = _run("timeline", "show", busy_table.path, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [i["id"] for i in out] == [i.id for i in busy_table.timeline.instants()]


def test_error_in_a_subprocess_has_no_traceback(tmp_path: Path) -> None:
    proc = _run("timeline", "show", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    expected = f"error: no lakeline table at {tmp_path.resolve() / 'missing'} [TableNotFoundError]"
    assert proc.stderr.strip().splitlines() == [expected]
