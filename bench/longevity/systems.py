"""The systems ``python -m bench longevity`` runs its rounds on, each in its own folder.

One small interface (load, insert, delete a date window, the maintenance a system does
after a round, read the columns the queries need, count its files) over: lakeline
merge-on-read without compaction, the same with lakeline's service runner running
beside the rounds, lakeline copy-on-write (a reference), deltalake, and deltalake with
``optimize.compact()`` after each round (LST-Bench's "with optimize" variant).

The runner system starts ``lakeline runner --config <toml>`` as a subprocess (compaction
and cleaning on a timer) and stops it with SIGTERM. When the runner is not part of
lakeline yet (no ``lakeline.services.runner``), it falls back to an in-process thread
that runs ``services.run("compaction")`` and ``services.run("cleaning")`` on the same
timer, and says so in its ``mode``, which the report prints.
"""

from __future__ import annotations

import importlib.util
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

KEY = ["ss_item_sk", "ss_ticket_number"]
DATE = "ss_sold_date_sk"
SYSTEMS = ("lakeline-mor", "lakeline-mor-runner", "lakeline-cow", "deltalake", "deltalake-optimize")
#: Merge-on-read table properties of the runner system: compact a file group as soon as
#: one delta commit landed on it (the default, 5, would leave up to two rounds of logs).
RUNNER_TABLE_PROPERTIES = {"compaction.delta-commits": 1}
RUNNER_FALLBACK = "fallback: in-process thread running services.run('compaction'/'cleaning') (no lakeline runner)"


class System:
    """A table under test; subclasses do the work, this holds the name and folder."""

    mode = ""

    def __init__(self, name: str, path: Path) -> None:
        self.name, self.path = name, path

    def load(self, rows: Any) -> None:
        raise NotImplementedError

    def insert(self, rows: Any) -> None:
        raise NotImplementedError

    def delete_window(self, lo: int, hi: int) -> None:
        """Delete the rows with ``lo <= ss_sold_date_sk < hi``."""
        raise NotImplementedError

    def after_round(self) -> float:
        """Maintenance after a round's writes (seconds; 0 when the system does none)."""
        return 0.0

    def read(self, columns: list[str]) -> Any:
        """``store_sales`` (``columns``) as one Arrow table, as the queries see it."""
        raise NotImplementedError

    def files(self) -> dict[str, int]:
        """Files the current snapshot reads (``data``), of which merge-on-read logs (``logs``)."""
        raise NotImplementedError

    def start(self) -> None:
        """Start what runs beside the rounds (nothing by default)."""

    def stop(self) -> dict[str, Any]:
        """Stop it; what it did."""
        return {}


class Lakeline(System):
    def __init__(self, name: str, path: Path, table_type: str, properties: dict[str, Any] | None = None) -> None:
        super().__init__(name, path)
        self.table_type, self.properties = table_type, properties

    def _table(self) -> Any:
        from lakeline.table import Table

        return Table.open(str(self.path))

    def load(self, rows: Any) -> None:
        from lakeline.table import Table

        Table.create(
            str(self.path), rows.schema, record_key=KEY, table_type=self.table_type, properties=self.properties
        ).insert(rows)

    def insert(self, rows: Any) -> None:
        self._table().insert(rows)

    def delete_window(self, lo: int, hi: int) -> None:
        import pyarrow.compute as pc

        self._table().delete_where((pc.field(DATE) >= lo) & (pc.field(DATE) < hi))

    def read(self, columns: list[str]) -> Any:
        return self._table().to_arrow(columns=columns)

    def files(self) -> dict[str, int]:
        scan = self._table().scan()
        return {"data": len(scan.files()), "logs": sum(len(s.logs) for s in scan.slices)}

    def service_runs(self) -> dict[str, int]:
        """Completed compactions and cleans on the table's timeline."""
        done = [str(i.action) for i in self._table().timeline.completed()]
        return {"compactions": done.count("compaction"), "cleans": done.count("clean")}


def runner_available() -> bool:
    """Whether lakeline has its service runner (module and CLI) yet."""
    try:
        if importlib.util.find_spec("lakeline.services.runner") is None:
            return False
    except ImportError:
        return False
    cli = subprocess.run([sys.executable, "-m", "lakeline.cli", "runner", "--help"], capture_output=True, timeout=60)
    return cli.returncode == 0


class LakelineWithRunner(Lakeline):
    """Merge-on-read with compaction and cleaning every ``every`` beside the rounds."""

    def __init__(self, name: str, path: Path, every: str, use_runner: bool) -> None:
        super().__init__(name, path, "mor", RUNNER_TABLE_PROPERTIES)
        self.every, self.use_runner = every, use_runner
        self.mode = (
            f"lakeline runner subprocess, compaction and cleaning every {every}"
            if use_runner
            else f"{RUNNER_FALLBACK}, every {every}"
        )
        self._proc: subprocess.Popen[bytes] | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._errors: list[str] = []

    def config_text(self) -> str:
        return "\n".join(
            [
                "[runner]",
                "threads = 1",
                "metrics_port = 0",
                "grace_seconds = 30",
                "",
                "[[tables]]",
                f'path = "{self.path}"',
                f'compaction = "every {self.every}"',
                f'cleaning = "every {self.every}"',
                "",
            ]
        )

    def start(self) -> None:
        if self.use_runner:
            config = self.path.parent / f"{self.name}-runner.toml"
            config.write_text(self.config_text())
            self._log = open(self.path.parent / f"{self.name}-runner.log", "wb")
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "lakeline.cli", "runner", "--config", str(config)],
                stdout=self._log,
                stderr=subprocess.STDOUT,
            )
        else:
            self._thread = threading.Thread(target=self._loop, name="longevity-compaction", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        seconds = _seconds(self.every)
        while not self._stopping.wait(seconds):
            for service in ("compaction", "cleaning"):
                try:
                    self._table().services.run(service)
                except Exception as e:  # a runner logs, counts and retries next tick
                    self._errors.append(f"{service}: {type(e).__name__}: {e}")

    def stop(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode}
        if self._proc is not None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                out["exit_code"] = self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                out["exit_code"] = "killed after 60 s"
            self._log.close()
            out["log_tail"] = (self.path.parent / f"{self.name}-runner.log").read_text(errors="replace")[-2000:]
        if self._thread is not None:
            self._stopping.set()
            self._thread.join(timeout=120)
            out["errors"] = self._errors[-5:]
            out["error_count"] = len(self._errors)
        return {**out, **self.service_runs()}


def _seconds(every: str) -> float:
    """``"5s"``, ``"2m"`` or ``"1h"`` in seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    return float(every[:-1]) * units[every[-1]]


class Delta(System):
    def __init__(self, name: str, path: Path, optimize: bool) -> None:
        super().__init__(name, path)
        self.optimize = optimize

    def load(self, rows: Any) -> None:
        from deltalake import write_deltalake

        write_deltalake(str(self.path), rows)

    def insert(self, rows: Any) -> None:
        from deltalake import write_deltalake

        write_deltalake(str(self.path), rows, mode="append")

    def delete_window(self, lo: int, hi: int) -> None:
        from deltalake import DeltaTable

        DeltaTable(str(self.path)).delete(f"{DATE} >= {lo} AND {DATE} < {hi}")

    def after_round(self) -> float:
        if not self.optimize:
            return 0.0
        from deltalake import DeltaTable

        t0 = time.perf_counter()
        DeltaTable(str(self.path)).optimize.compact()
        return time.perf_counter() - t0

    def read(self, columns: list[str]) -> Any:
        from deltalake import DeltaTable

        return DeltaTable(str(self.path)).to_pyarrow_dataset().to_table(columns=columns)

    def files(self) -> dict[str, int]:
        from deltalake import DeltaTable

        return {"data": len(DeltaTable(str(self.path)).file_uris()), "logs": 0}


def make(name: str, work: Path, every: str, use_runner: bool) -> System:
    path = work / name
    if name == "lakeline-mor":
        return Lakeline(name, path, "mor")
    if name == "lakeline-mor-runner":
        return LakelineWithRunner(name, path, every, use_runner)
    if name == "lakeline-cow":
        return Lakeline(name, path, "cow")
    if name in ("deltalake", "deltalake-optimize"):
        return Delta(name, path, optimize=name == "deltalake-optimize")
    raise ValueError(f"unknown system {name!r}; one of {', '.join(SYSTEMS)}")
