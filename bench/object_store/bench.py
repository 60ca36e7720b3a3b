"""Object-store benchmark: one-row upserts and opening a long table, on SeaweedFS.

Why: on an object store every request is a round trip, so a table format's cost there
is counted in requests as much as in bytes (issue 27). Two questions, lakeline against
deltalake on the same server in one run:

* **One-row upserts** (a stream of small updates): a small table (``--rows``, one
  append), then ``--upserts`` upserts of one row each (an existing key, a larger
  ``ts``) through one table handle: lakeline copy-on-write and merge-on-read
  (``Table.upsert``), merge-on-read with compaction inline (``inline.services =
  compaction``: the default table compacts only when a service runs, so its one file
  slice gathers a log per upsert) and deltalake (``DeltaTable.merge`` when-matched-update-all /
  when-not-matched-insert-all, the write benchmark's merge). Commits per second is the
  median over ``--repeat`` runs, each a fresh process on a fresh table, the systems in
  turns; requests per commit are counted on the wire (:mod:`.wire`) in the first run,
  over the same upserts into a twin table.
* **Opening** a table whose log holds ``--events`` events, built with real one-row
  inserts (three events each): ``Table.open`` + ``t.timeline`` in a fresh process, median
  of ``--open-repeat`` (target: at most 0.5 s for 10,000 events), and the requests it
  makes; planning a full scan (``t.scan().files()``) is timed apart.

    python -m bench object-store [--upserts 200] [--rows 100000] [--repeat 3] [--events 10000]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..report import ROOT, add_run_options, command_line, today, unwinds_on_sigterm, update_section
from ..write.environment import machine_line, source_state
from ..write.object_store import StoreConfig, server_version, start_server
from .child import MARK, build
from .child import SYSTEMS as CHILD_SYSTEMS
from .report import SECTION, markdown, print_tables

if TYPE_CHECKING:
    from tests.seaweedfs import SeaweedServer

SYSTEMS = tuple(CHILD_SYSTEMS)
#: Events of ``Table.create`` (its schema instant) and of each insert.
CREATE_EVENTS, INSERT_EVENTS = 3, 3


def run_child(mode: str, workdir: Path, params: dict[str, Any], timeout: float) -> dict[str, Any]:
    """``python -m bench.object_store.child MODE ...`` and its parsed result."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "bench.object_store.child", mode, str(workdir), json.dumps(params)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"timed out after {timeout:.0f} s (killed)"}
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(MARK)), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"ok": False, "error": f"child exited {proc.returncode}: {' | '.join(tail)}"[:500]}
    out: dict[str, Any] = json.loads(line[len(MARK) :])
    out["wall_s"] = time.perf_counter() - t0
    return out


def measure_commits(
    store: StoreConfig,
    workdir: Path,
    systems: list[str],
    upserts: int,
    rows: int,
    repeat: int,
    timeout: float,
    log: Callable[[str], None],
) -> dict[str, Any]:
    """Every system's runs (the systems in turns, so they share the machine's moments)."""
    runs: dict[str, list[dict[str, Any]]] = {s: [] for s in systems}
    for r in range(repeat):
        for s in systems:
            uri = store.uri(f"commits-{s}-{r}")
            build(s, uri, rows, store.options, count=r == 0)  # untimed, in this process
            params = {"system": s, "uri": uri, "upserts": upserts, "rows": rows, "count": r == 0}
            res = run_child("commits", workdir, params, timeout)
            runs[s].append(res)
            if res["ok"]:
                wire = res.get("wire")
                counted = f", {wire['per_unit']:.1f} requests/commit" if wire else ""
                log(f"{s:13} run {r + 1}: {upserts / res['loop_s']:6.1f} commits/s{counted}")
            else:
                log(f"{s:13} run {r + 1}: FAILED {res['error']}")
    return {"upserts": upserts, "rows": rows, "repeat": repeat, "runs": runs}


def build_log(uri: str, options: dict[str, str], events: int, log: Callable[[str], None]) -> dict[str, Any]:
    """A merge-on-read table whose log holds about ``events`` events: real one-row inserts."""
    from lakeline.table import Table

    from .. import data

    inserts = max(1, math.ceil((events - CREATE_EVENTS) / INSERT_EVENTS))
    t0 = time.perf_counter()
    table = Table.create(
        uri, data.SCHEMA, record_key="key", ordering_field="ts", table_type="mor", storage_options=options
    )
    for i in range(inserts):
        table.insert(data.append_batch(i, 1))
        if (i + 1) % 500 == 0:
            log(f"open: built {i + 1:,} of {inserts:,} inserts ({time.perf_counter() - t0:.0f} s)")
    return {"inserts": inserts, "build_s": time.perf_counter() - t0, "events": table.timeline.last_seq + 1}


def measure_open(
    store: StoreConfig, workdir: Path, events: int, repeat: int, timeout: float, log: Callable[[str], None]
) -> dict[str, Any]:
    uri = store.uri("open")
    built = build_log(uri, store.options, events, log)
    log(f"open: {built['events']:,} events from {built['inserts']:,} inserts in {built['build_s']:.0f} s")
    runs = [run_child("open", workdir, {"uri": uri}, timeout) for _ in range(repeat)]
    counted = run_child("open", workdir, {"uri": uri, "count": True}, timeout)
    for i, r in enumerate(runs):
        log(f"open run {i + 1}: " + (f"{r['open_s'] * 1000:.0f} ms" if r["ok"] else f"FAILED {r['error']}"))
    return built | {"runs": runs, "counted": counted}


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench object-store", description=__doc__.split("\n\n")[0])
    p.add_argument("--upserts", type=int, default=200, help="one-row upserts per run and system (default 200)")
    p.add_argument("--rows", type=int, default=100_000, help="rows of the small table upserted into (default 100,000)")
    p.add_argument("--systems", default=",".join(SYSTEMS), help=f"comma-separated subset of {','.join(SYSTEMS)}")
    p.add_argument("--events", type=int, default=10_000, help="events in the opened table's log (default 10,000)")
    p.add_argument("--open-repeat", type=int, default=5, help="fresh-process opens; the median is reported (default 5)")
    p.add_argument("--skip", choices=("commits", "open"), default=None, help="leave one part out")
    add_run_options(p, repeat=3)
    args = p.parse_args(argv)
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if unknown := [s for s in args.systems if s not in SYSTEMS]:
        p.error(f"unknown system(s) {unknown}; choose from {', '.join(SYSTEMS)}")
    return args


@unwinds_on_sigterm
def main(argv: list[str], server: SeaweedServer | None = None) -> int:
    """Run both parts on ``server`` (a running SeaweedFS) or on one started for the run."""
    args = parse(argv)
    t_start, load_start = time.perf_counter(), os.getloadavg()[0]
    own_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="lakeline-object-store-bench-")) if own_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    timeout = args.step_timeout or max(300.0, args.upserts * 3.0)
    started = None
    res: dict[str, Any] = {"date": today(), "machine": machine_line(), "server": server_version()}

    def log(m: str) -> None:
        print(m, flush=True)

    try:
        if server is None:
            server = started = start_server()
        store = StoreConfig(f"s3://{server.bucket}/object-store-bench-{os.urandom(5).hex()}", server.options())
        store.save(workdir)
        log(f"object-store benchmark on {res['machine']}; SeaweedFS {res['server']} at {server.endpoint}")
        if args.skip != "commits":
            res["commits"] = measure_commits(
                store, workdir, args.systems, args.upserts, args.rows, args.repeat, timeout, log
            )
        if args.skip != "open":
            res["open"] = measure_open(store, workdir, args.events, args.open_repeat, timeout, log)
    finally:
        if started is not None:
            started.stop()
        if own_dir and not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    res |= {
        "total_s": time.perf_counter() - t_start,
        "load": (load_start, os.getloadavg()[0]),
        "source": source_state(),
    }
    summary = print_tables(res)
    if args.json is not None:
        args.json.write_text(json.dumps(res | {"summary": summary}, indent=2, default=str))
    if not args.no_docs:
        update_section(SECTION, markdown(res, summary, command_line("object-store", argv, with_postgres=False)))
        log(f"wrote the {SECTION} section of docs/performance.md")
    missed = summary["failed"] or any(ok is False for _, _, _, ok in summary["targets"])
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
