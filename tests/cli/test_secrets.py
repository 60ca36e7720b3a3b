"""No password lakeline is given ever comes out again (issue 25, audit R7a/R7b/R10/R11/R12).

One test plants a password in every form a DSN carries one (``user:PW@`` and
``?password=PW``, reachable and unreachable servers, misspelt schemes, libpq's
``key=value`` form), drives everything a user or an operator can make lakeline print,
and greps all of it for the password: the CLI as a real process (stdout and stderr of
``timeline``, ``index``, ``service``, ``tables``, ``report``, ``runner --once``,
``runner status``, the runner daemon's log and its Prometheus text, the HTML report),
Python error messages, reprs, and logging captured at DEBUG. The server of
``scripts/with-postgres.sh`` trusts every connection, so the planted password is
accepted and ignored, which is what lets a real run carry it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.services.runner import Runner
from lakeline.services.runner.config import RunnerConfig
from lakeline.table import Catalog, Table
from lakeline.timeline.diagnostics.redact import redact
from lakeline.timeline.errors import LakelineError, RunnerConfigError, TimelineConfigError
from lakeline.timeline.storage.event_log.postgresql import safe_dsn

from tests.cli._data import SCHEMA, rows

pytestmark = pytest.mark.postgres

#: The password planted everywhere; nothing lakeline prints may contain it.
SECRET = "Pl4ntedS3cretXyz"
#: A port nothing listens on (privileged, never bound in tests): an unreachable server.
DEAD = f"postgresql://postgres:{SECRET}@127.0.0.1:1/x"
DEAD_QUERY = f"postgresql://postgres@127.0.0.1:1/x?password={SECRET}&connect_timeout=2"
#: Timelines refused for their form, each carrying the password.
BAD_FORMS = [
    f"postgresq://postgres:{SECRET}@127.0.0.1/db",
    f"postgres-ql://u:{SECRET}@127.0.0.1/db",
    f"mysql://u:{SECRET}@127.0.0.1/db",
    f"host=127.0.0.1 password={SECRET} dbname=db",
    f"host=127.0.0.1 password='{SECRET}",
    f"u:{SECRET}@127.0.0.1/db",
]


def _with_password(url: str, *, query: bool) -> str:
    """``url`` (the test server's) with the planted password in its userinfo or its query."""
    parts = urlsplit(url)
    if query:
        sep = "&" if parts.query else ""
        return urlunsplit(parts._replace(query=f"{parts.query}{sep}password={SECRET}"))
    user, _, host = parts.netloc.rpartition("@")
    return urlunsplit(parts._replace(netloc=f"{user.split(':')[0]}:{SECRET}@{host}"))


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "lakeline"
    return [str(script)] if script.exists() else [sys.executable, "-m", "lakeline.cli"]


def _run(*args: str, expect: tuple[int, ...] = (0,)) -> str:
    """Run the CLI; returns stdout + stderr (checked for its exit code)."""
    proc = subprocess.run([*_cli(), *args], capture_output=True, text=True, timeout=60, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode in expect, f"{args}: exit {proc.returncode}\n{out}"
    return out


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def planted(pg_url: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """Two PostgreSQL-timeline tables made with the password in the DSN (one in each form),
    one catalog table in namespace ``secrets``, each written to."""
    userinfo, query = _with_password(pg_url, query=False), _with_password(pg_url, query=True)
    a = Table.create(tmp_path / "a", SCHEMA, record_key="id", ordering_field="ts", table_type="mor", timeline=userinfo)
    a.upsert(rows([1, 2, 3]))
    last = a.upsert(rows([2, 4], ts=2)).instant
    a.log.store.close()
    b = Table.create(tmp_path / "b", SCHEMA, record_key="id", timeline=query)
    b.upsert(rows([5]))
    b.log.store.close()
    namespace = f"secrets_{os.getpid()}_{time.monotonic_ns()}"
    with Catalog(query) as cat:
        c = cat.create_table(f"{namespace}.c", tmp_path / "c", SCHEMA, record_key="id")
        c.upsert(rows([7, 8]))
        c.log.store.close()
    yield {
        "a": str(tmp_path / "a"),
        "b": str(tmp_path / "b"),
        "userinfo": userinfo,
        "query": query,
        "namespace": namespace,
        "last": str(getattr(last, "id", last)),
    }


def _runner_config(tmp_path: Path, p: dict[str, str], name: str) -> str:
    """A runner config whose every timeline carries the password: tables and catalogs,
    reachable and not (port 1)."""
    text = f"""
[runner]
threads = 2
grace_seconds = 5

[[tables]]
path = "{p["a"]}"
timeline = "{p["userinfo"]}"
compaction = "every 1s"
cleaning = "every 1s"

[[tables]]
path = "{p["b"]}"
timeline = "{DEAD}"
cleaning = "every 1s"

[[catalogs]]
timeline = "{p["query"]}"
namespace = "{p["namespace"]}"
cleaning = "every 1s"

[[catalogs]]
timeline = "{DEAD_QUERY}"
cleaning = "every 1s"
"""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def _daemon_output(config: str) -> str:
    """The runner daemon's log and its metrics text, read while a few ticks run."""
    port = _free_port()
    proc = subprocess.Popen(
        [*_cli(), "runner", "--config", config, "--metrics-port", str(port), "-v"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    metrics = ""
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            time.sleep(0.5)
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    metrics = r.read().decode()
            except OSError:
                continue
            # Both failing sources seen: the dead catalog's counter and the dead table's failure.
            if "lakeline_runner_catalog_errors_total{" in metrics and "lakeline_runner_failures_total{" in metrics:
                break
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert "lakeline_runner_catalog_errors_total{" in metrics, metrics
    assert proc.returncode == 0, err
    return metrics + out + err


def _bad_config(tmp_path: Path, form: str, n: int) -> str:
    """A runner config refused for its timeline's form (tables or catalogs, by turns)."""
    path = tmp_path / f"bad{n}.toml"
    entry = '[[tables]]\npath = "/x"' if n % 2 else "[[catalogs]]"
    path.write_text(f'{entry}\ntimeline = "{form}"\ncleaning = "every 1h"\n', encoding="utf-8")
    return str(path)


def test_a_planted_password_appears_nowhere(
    planted: dict[str, str], tmp_path: Path, parquet_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p = planted
    a, ui, q = p["a"], p["userinfo"], p["query"]
    html = tmp_path / "report.html"
    config = _runner_config(tmp_path, p, "runner.toml")
    ns = p["namespace"]
    # As real processes (what a shell and a journal see): one of each command kind, the
    # runner's (they configure logging) and its daemon.
    commands: list[tuple[tuple[str, ...], tuple[int, ...]]] = [
        (("timeline", "show", a, "--timeline", ui), (0,)),
        (("timeline", "show", a, "--timeline", q, "--json"), (0,)),
        (("timeline", "inspect", a, p["last"], "--timeline", q, "--json"), (0,)),
        (("index", "list", a, "--timeline", ui), (0,)),
        (("service", "run", a, "cleaning", "--timeline", q), (0,)),
        (("timeline", "report", a, "--html", str(html), "--timeline", ui), (0,)),
        (("tables", "list", "--catalog", q), (0,)),
        (("tables", "show", f"{ns}.c", "--catalog", ui, "--json"), (0,)),
        # An unreachable server, a misspelt scheme, libpq's key=value form: one line, exit 2.
        (("timeline", "show", a, "--timeline", DEAD_QUERY, "--json"), (2,)),
        (("tables", "list", "--catalog", f"host=127.0.0.1 password={SECRET}"), (2,)),
        (("timeline", "show", a, "--timeline", BAD_FORMS[1]), (2,)),
        # The runner: one pass and its status, text and JSON (the dead entries fail: exit 1).
        (("runner", "--config", config, "--once"), (0, 1)),
        (("runner", "--config", config, "--once", "--json", "-v"), (0, 1)),
        (("runner", "status", "--config", config), (0,)),
        (("runner", "status", "--config", config, "--json"), (0,)),
        (("runner", "--config", _bad_config(tmp_path, BAD_FORMS[0], 0), "--once"), (2,)),
    ]
    # In this process (same output, without the start-up cost): the other variants.
    in_process: list[tuple[tuple[str, ...], tuple[int, ...]]] = [
        (("timeline", "inspect", a, p["last"], "--timeline", ui), (0,)),
        (("index", "list", a, "--timeline", q, "--json"), (0,)),
        (("service", "run", a, "cleaning", "--timeline", ui, "--json"), (0,)),
        (("tables", "list", ns, "--catalog", ui, "--json"), (0,)),
        (("tables", "show", f"{ns}.c", "--catalog", q), (0,)),
        (("timeline", "show", a, "--timeline", DEAD), (2,)),
        (("tables", "list", "--catalog", DEAD_QUERY), (2,)),
        (("tables", "show", "x.y", "--catalog", BAD_FORMS[2]), (2,)),
        (
            (
                "create",
                str(tmp_path / "new"),
                "--schema-from",
                str(parquet_file),
                "--key",
                "id",
                "--timeline",
                BAD_FORMS[2],
            ),
            (2,),
        ),
        *(
            (("runner", "--config", _bad_config(tmp_path, form, n), "--once"), (2,))
            for n, form in enumerate(BAD_FORMS)
            if n
        ),
    ]

    with ThreadPoolExecutor(3) as pool:
        outputs = list(pool.map(lambda c: _run(*c[0], expect=c[1]), commands))
    daemon = _daemon_output(config)
    for args, code in in_process:
        res = CliRunner().invoke(cli, list(args))
        assert res.exit_code in code, f"{args}: exit {res.exit_code}\n{res.output}"
        commands.append((args, code))
        outputs.append(res.output)  # stdout and stderr, as a terminal shows them
    for (args, _), out in zip(commands, outputs, strict=True):
        assert SECRET not in out, f"{args} printed the password:\n{out}"
    wordy = [
        (args, out)
        for (args, code), out in zip(commands, outputs, strict=True)
        if code == (2,) and out.strip().count("\n")
    ]
    assert not wordy, f"a refused command printed more than one line: {wordy}"
    assert SECRET not in daemon, f"the runner daemon or its metrics printed the password:\n{daemon}"
    assert SECRET not in html.read_text(encoding="utf-8"), "the HTML report holds the password"

    # Python: errors, reprs, and everything logged at DEBUG.
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []
    for form in BAD_FORMS:
        for make in (
            lambda f: Table.create(tmp_path / "never", SCHEMA, record_key="id", timeline=f),
            lambda f: Table.open(a, timeline=f),
            Catalog,
            lambda f: RunnerConfig.from_dict({"tables": [{"path": a, "timeline": f, "cleaning": "every 1h"}]}),
            lambda f: RunnerConfig.from_dict({"catalogs": [{"timeline": f, "cleaning": "every 1h"}]}),
        ):
            with pytest.raises((TimelineConfigError, RunnerConfigError)) as info:
                make(form)
            seen += [str(info.value), repr(info.value)]
        seen += [safe_dsn(form), redact(form)]
    for dsn in (DEAD, DEAD_QUERY):
        with pytest.raises(LakelineError) as info:
            Table.open(a, timeline=dsn).to_arrow()
        seen += [str(info.value), repr(info.value)]
        seen.append(safe_dsn(dsn))
    t = Table.open(a, timeline=q)
    cat = Catalog(ui)
    seen += [repr(t), repr(t.log.store), repr(cat), repr(cat.load_table(f"{ns}.c").log.store), repr(t.log)]
    t.log.store.close()
    cat.close()
    runner = Runner(RunnerConfig.from_toml(config))
    seen += [repr(runner.config), *map(repr, runner.targets())]
    outcomes = runner.run_once()
    assert any(o.outcome == "failed" for o in outcomes)  # the dead table was tried
    seen += [repr(o) for o in outcomes] + [repr(s) for s in runner.status()]
    seen += [caplog.text] + [r.exc_text or "" for r in caplog.records]
    leaks = [s for s in seen if SECRET in s]
    assert not leaks, f"the password leaked through: {leaks}"
