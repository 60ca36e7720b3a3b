"""The runner in one process: its config, a one-shot pass, its queue order, its lease,
its catalogs and its command line (issue 15, points 3 and 4); its metrics endpoint and its
stop are in ``test_runner_daemon.py``.

The multi-process proof (two runner processes, writers, SIGTERM, kill -9) is in
``test_runner_processes.py``; these are the fast checks of each promise on its own.
"""

from __future__ import annotations

import importlib.resources
import json
import tomllib
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.services.runner import Runner, trigger_of
from lakeline.services.runner.config import RunnerConfig
from lakeline.services.runner.due_queue import DueQueue
from lakeline.services.runner.schedules import Cron, Every, parse_schedule
from lakeline.services.runner.tables import Target
from lakeline.timeline.errors import RunnerConfigError
from lakeline.timeline.instant import Action

from tests.services.runner.runner_helpers import PROPS, SCHEMA, completed, config, mor_table

pytestmark = pytest.mark.usefixtures("no_faults")  # no fault point armed before or after a test


# -- config ----------------------------------------------------------------------------


def test_the_example_config_loads() -> None:
    text = importlib.resources.files("lakeline.config").joinpath("runner.example.toml").read_text()
    cfg = RunnerConfig.from_dict(tomllib.loads(text), "runner.example.toml")
    Runner(cfg)  # its cron expressions are valid too
    assert (cfg.runner.threads, cfg.runner.metrics_port, cfg.runner.grace_seconds) == (2, 0, 30.0)
    assert [t.path for t in cfg.tables] == ["/data/events", "s3://lake/orders"]
    assert set(cfg.tables[0].schedules) == {"compaction", "clustering", "cleaning", "archival", "rollback", "indexing"}
    assert cfg.tables[0].schedules["compaction"] == Every(300)
    assert cfg.tables[0].schedules["clustering"] == Cron("0 * * * *")
    assert cfg.tables[1].timeline is not None and cfg.tables[1].timeline.startswith("postgresql://")
    assert cfg.catalogs[0].namespace == "sales" and cfg.catalogs[0].schedules["cleaning"] == Every(3600)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("every 30s", Every(30)),
        ("every 5m", Every(300)),
        ("EVERY 2 h", Every(7200)),
        ("every 1s", Every(1)),
        ("0 * * * *", Cron("0 * * * *")),
        ("*/15  2-4 * jan mon-fri", Cron("*/15 2-4 * jan mon-fri")),
    ],
)
def test_schedules_parse(text: str, expected: object) -> None:
    assert parse_schedule(text, "x") == expected


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("[[tables]]\npath = '/t'\ncompacton = 'every 1m'\n", "unknown key(s) 'compacton'"),
        ("[runner]\nthread = 2\n[[tables]]\npath = '/t'\n", "[runner]: unknown key(s) 'thread'"),
        ("[runners]\n[[tables]]\npath = '/t'\n", "unknown key(s) 'runners'"),
        ("[[tables]]\npath = '/t'\ncompaction = 'every 0s'\n", "no interval"),
        ("[[tables]]\npath = '/t'\ncompaction = 'every 5 days'\n", "is not a schedule"),
        ("[[tables]]\npath = '/t'\ncompaction = '* * *'\n", "is not a schedule"),
        ("[[tables]]\npath = '/t'\ncompaction = 5\n", "a schedule is a string"),
        ("[[tables]]\ncompaction = 'every 1m'\n", "path must be a non-empty string"),
        ("[[tables]]\npath = '/t'\ntimeline = 'mysql://x'\n", "timeline must be a postgresql:// URL"),
        ("[[catalogs]]\ncompaction = 'every 1m'\n", "timeline must be a non-empty string"),
        ("[runner]\nthreads = 0\n[[tables]]\npath = '/t'\n", "threads must be a whole number from 1"),
        ("[runner]\nmetrics_port = '9090'\n[[tables]]\npath = '/t'\n", "metrics_port must be a whole number"),
        ("[runner]\ngrace_seconds = -1\n[[tables]]\npath = '/t'\n", "grace_seconds must be a number"),
        ("[runner]\nthreads = 2\n", "nothing to do"),
        ("tables = 'x'\n", "tables must be an array of tables"),
        ("[[tables]\n", "is not TOML"),
    ],
)
def test_bad_configs_are_refused_before_anything_runs(tmp_path: Path, body: str, fragment: str) -> None:
    path = config(tmp_path, body)
    with pytest.raises(RunnerConfigError) as e:
        Runner.from_toml(path)
    assert fragment in str(e.value)
    assert str(path) in str(e.value) or "TOML" in str(e.value)


def test_a_cron_field_out_of_range_is_refused_when_the_runner_is_built(tmp_path: Path) -> None:
    path = config(tmp_path, "[[tables]]\npath = '/t'\ncleaning = '61 * * * *'\n")
    RunnerConfig.from_toml(path)  # the shape is fine ...
    with pytest.raises(RunnerConfigError, match=r"\[\[tables\]\] #1 cleaning: cron expression '61 \* \* \* \*'"):
        Runner.from_toml(path)  # ... the minute is not
    with pytest.raises(RunnerConfigError, match="no such file|runner config"):
        Runner.from_toml(tmp_path / "missing.toml")
    assert trigger_of(Every(5), "x").interval.total_seconds() == 5  # type: ignore[attr-defined]


def test_metrics_port_option_overrides_the_config(tmp_path: Path) -> None:
    path = config(tmp_path, "[runner]\nmetrics_port = 9100\n[[tables]]\npath = '/t'\nrollback = 'every 1m'\n")
    assert Runner.from_toml(path).config.runner.metrics_port == 9100
    assert Runner.from_toml(path, metrics_port=0).config.runner.metrics_port == 0
    with pytest.raises(RunnerConfigError):
        Runner.from_toml(path, metrics_port=70000)


# -- one pass --------------------------------------------------------------------------


def test_run_once_runs_what_is_due_and_a_failing_table_does_not_stop_the_others(tmp_path: Path) -> None:
    good = mor_table(tmp_path / "good", commits=3)
    # A table whose clustering always fails (its sort column does not exist): one
    # failing service of a table that is otherwise fine.
    bad = mor_table(tmp_path / "bad", commits=3, **{"clustering.sort-columns": "nope"})
    path = config(
        tmp_path,
        f"""
[runner]
threads = 2
[[tables]]
path = "{tmp_path / "missing"}"
compaction = "every 1s"
[[tables]]
path = "{bad.path}"
clustering = "every 1s"
compaction = "every 1s"
[[tables]]
path = "{good.path}"
compaction = "every 1s"
cleaning = "every 1h"
rollback = "every 1m"
""",
    )
    runner = Runner.from_toml(path)
    outcomes = {(o.table, o.service): o for o in runner.run_once()}
    assert len(outcomes) == 6
    assert outcomes[(str(tmp_path / "missing"), "compaction")].outcome == "failed"
    assert "TableNotFoundError" in (outcomes[(str(tmp_path / "missing"), "compaction")].error or "")
    assert outcomes[(bad.path, "clustering")].outcome == "failed"
    assert "UnknownColumnError" in (outcomes[(bad.path, "clustering")].error or "")
    # The same table's other service, and the other table, ran.
    assert outcomes[(bad.path, "compaction")].outcome == "done"
    assert outcomes[(good.path, "compaction")].outcome == "done"
    assert outcomes[(good.path, "compaction")].instants == tuple(completed(good, Action.COMPACTION))
    assert outcomes[(good.path, "rollback")].outcome == "idle"
    assert good.log.refresh().pending() == [] and bad.log.refresh().pending() == []
    assert sorted(good.to_arrow().column("v").to_pylist()) == ["u2"] * 20
    reg = runner.metrics.registry
    assert reg.get_sample_value("lakeline_runner_failures_total", {"table": bad.path, "service": "clustering"}) == 1
    assert reg.get_sample_value("lakeline_runner_instants_total", {"table": good.path, "service": "compaction"}) == 1
    assert reg.get_sample_value("lakeline_runner_runs_total", {"table": good.path, "service": "rollback"}) == 1
    # Nothing was due any more: the next pass plans nothing and fails the same way.
    again = {(o.table, o.service): o.outcome for o in runner.run_once()}
    assert again[(good.path, "compaction")] == "idle"
    assert again[(bad.path, "clustering")] == "failed"


def test_the_biggest_backlog_goes_first_when_threads_are_few(tmp_path: Path) -> None:
    small = mor_table(tmp_path / "small", commits=2)
    big = mor_table(tmp_path / "big", commits=6, **{"compaction.delta-commits": 10})
    assert completed(big, Action.COMPACTION) == []
    path = config(
        tmp_path,
        f"""
[runner]
threads = 1
[[tables]]
path = "{small.path}"
compaction = "every 1m"
[[tables]]
path = "{big.path}"
compaction = "every 1m"
""",
    )
    outcomes = Runner.from_toml(path).run_once()
    # Listed second, run first: 6 log files against 2.
    assert [o.table for o in outcomes] == [big.path, small.path]


def test_missed_ticks_go_before_any_backlog() -> None:
    q = DueQueue()
    big, small = Target("big", {}), Target("small", {})
    assert q.put(big, "compaction", backlog=1000)
    assert q.put(small, "compaction", backlog=1)
    assert not q.put(small, "compaction", backlog=1)  # its schedule fired again while it waited
    first = q.take(wait=False)
    assert first is not None and first.target is small and first.missed == 1
    assert not q.put(small, "compaction", backlog=1)  # running: not queued again
    second = q.take(wait=False)
    assert second is not None and second.target is big
    assert q.take(wait=False) is None
    q.done(first)
    assert q.put(small, "compaction", backlog=1)
    q.close()
    assert q.take(wait=True) is None and not q.put(big, "compaction", backlog=1)


def test_a_run_whose_lease_another_runner_holds_is_skipped(tmp_path: Path) -> None:
    t = mor_table(tmp_path / "t", commits=2)
    path = config(tmp_path, f'[[tables]]\npath = "{t.path}"\ncompaction = "every 1s"\n')
    other = t.log.store.lock("runner-compaction", 60_000)
    assert other.try_acquire()
    try:
        runner = Runner.from_toml(path)
        [o] = runner.run_once()
        assert o.outcome == "skipped" and completed(t, Action.COMPACTION) == []
        assert (
            runner.metrics.registry.get_sample_value(
                "lakeline_runner_skips_total", {"table": t.path, "service": "compaction"}
            )
            == 1
        )
    finally:
        other.release()
    [o] = Runner.from_toml(path).run_once()
    assert o.outcome == "done" and completed(t, Action.COMPACTION) == list(o.instants)


# -- catalogs --------------------------------------------------------------------------


def test_a_catalog_entry_keeps_every_table_of_its_namespace(tmp_path: Path, pg_url: str) -> None:
    from lakeline.table import Catalog

    ns, other = f"runner_{uuid.uuid4().hex[:8]}", f"other_{uuid.uuid4().hex[:8]}"
    with Catalog(pg_url) as cat:
        names = [f"{ns}.a", f"{ns}.b", f"{other}.c"]
        for name in names:
            t = cat.create_table(name, tmp_path / name, SCHEMA, record_key="id", table_type="mor", properties=PROPS)
            for n in range(3):  # a base, then two delta commits: compaction is due
                t.upsert(pa.table({"id": list(range(20)), "v": [f"u{n}"] * 20}, schema=SCHEMA))
            t.log.store.close()
        # A catalog that cannot be reached is counted and left out; the other goes on.
        path = config(
            tmp_path,
            f"""
[[catalogs]]
timeline = "{pg_url}"
namespace = "{ns}"
compaction = "every 1s"
[[catalogs]]
timeline = "postgresql://nobody:secret@127.0.0.1:1/none?connect_timeout=2"
compaction = "every 1s"
""",
        )
        runner = Runner.from_toml(path)
        outcomes = runner.run_once()
        assert sorted((o.table, o.outcome) for o in outcomes) == [(f"{ns}.a", "done"), (f"{ns}.b", "done")]
        for name in names:
            t = cat.load_table(name)
            assert (len(completed(t, Action.COMPACTION)) == 1) == name.startswith(ns), name
            t.log.store.close()
        errors = [
            s
            for m in runner.metrics.registry.collect()
            if m.name == "lakeline_runner_catalog_errors"
            for s in m.samples
            if s.name.endswith("_total")
        ]
        assert [(s.labels["catalog"], s.value) for s in errors] == [
            ("postgresql://nobody:***@127.0.0.1:1/none?connect_timeout=2", 1.0)
        ]


# -- the command line ------------------------------------------------------------------


def test_cli_once_and_status(tmp_path: Path) -> None:
    from click.testing import CliRunner
    from lakeline.cli.main import cli

    t = mor_table(tmp_path / "t", commits=2)
    path = config(
        tmp_path,
        f"""
[[tables]]
path = "{t.path}"
compaction = "every 1s"
cleaning = "0 3 * * *"
[[tables]]
path = "{tmp_path / "missing"}"
rollback = "every 1m"
""",
    )
    before = json.loads(CliRunner().invoke(cli, ["runner", "status", "--config", str(path), "--json"]).output)
    rows = {(r["table"], r["service"]): r for r in before}
    row = rows[(t.path, "compaction")]
    assert (row["schedule"], row["pending"], row["log_files"], row["last_completed"]) == ("every 1s", 0, 2, None)
    assert row["log_files_per_slice"] == row["log_files"] / row["slices"] and row["files"] == row["slices"] + 2
    assert rows[(t.path, "cleaning")]["schedule"] == "0 3 * * *"
    assert "TableNotFoundError" in rows[(str(tmp_path / "missing"), "rollback")]["error"]

    once = CliRunner().invoke(cli, ["runner", "--config", str(path), "--once", "--json"])
    assert once.exit_code == 1, once.output  # a run failed (the missing table): cron sees it
    outcomes = {(o["table"], o["service"]): o for o in json.loads(once.output)}
    assert outcomes[(t.path, "compaction")]["outcome"] == "done"
    assert outcomes[(str(tmp_path / "missing"), "rollback")]["outcome"] == "failed"

    after = json.loads(CliRunner().invoke(cli, ["runner", "status", "--config", str(path), "--json"]).output)
    row = {(r["table"], r["service"]): r for r in after}[(t.path, "compaction")]
    assert row["log_files"] == 0 and row["last_completed"] is not None
    text = CliRunner().invoke(cli, ["runner", "status", "--config", str(path)], env={"COLUMNS": "200"}).output
    assert "every 1s" in text and "compaction" in text and "TableNotFoundError" in text

    usage = CliRunner().invoke(cli, ["runner"])
    assert usage.exit_code == 2 and "--config FILE is required" in usage.output
    bad = config(tmp_path, "[[tables]]\npath = '/t'\ncompacton = 'every 1m'\n")
    refused = CliRunner().invoke(cli, ["runner", "--config", str(bad), "--once"])
    assert refused.exit_code == 2 and "RunnerConfigError" in refused.output and "compacton" in refused.output
