"""One system, one step, one process: both sides of it for the write benchmark
(:mod:`bench.write.bench`). The parent starts a child with :func:`run_step`;
:func:`child_main` runs in the child (``python -m bench.write.bench --child``), prints its
result after ``mark`` and exits; the lookup and services benchmarks run their children
the same way."""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..report import ROOT
from .object_store import probe_seconds, snapshot
from .report import StepResult
from .systems import Delta, make_system

# --------------------------------------------------------------------------------------
# Child side: one system, one step, one process.

#: What precedes the JSON result line a child prints (each benchmark passes its own).
RESULT_MARK = "WRITE_BENCH_RESULT "


def _files(path: Path) -> dict[str, tuple[int, int, int]]:
    """path -> (size, mtime_ns, inode) of every file under ``path``."""
    out: dict[str, tuple[int, int, int]] = {}
    for dirpath, _dirs, names in os.walk(path):
        for n in names:
            p = os.path.join(dirpath, n)
            try:
                st = os.stat(p)
            except FileNotFoundError:
                continue
            out[p] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def _maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _digest(table: Any) -> str:
    """Order-independent fingerprint of rows (key, ts, value, category)."""
    import pyarrow as pa

    types = (pa.string(), pa.int64(), pa.float64(), pa.string())
    names = ["key", "ts", "value", "category"]
    # Plain types before sorting: deltalake's scan returns string_view, which Arrow cannot sort.
    t = pa.table([table.column(c).cast(typ) for c, typ in zip(names, types)], names=names).sort_by("key")
    h = hashlib.sha256()
    for col in names:
        h.update(col.encode())
        h.update(repr(t.column(col).to_pylist()).encode())
    return h.hexdigest()[:16]


def run_child(system_name: str, step: str, workdir: Path, profile: Path | None = None) -> dict[str, Any]:
    """Run one step of one system and describe it (the child's whole job)."""
    import pyarrow.compute as pcc
    import pyarrow.parquet as pq

    from .. import data

    spec = json.loads((workdir / "spec.json").read_text())
    system = make_system(system_name, workdir)
    system.load()
    out: dict[str, Any] = {"system": system_name, "step": step, "ok": False, "base_rss": _maxrss()}
    before = snapshot(system.path, system.options)
    inputs = workdir / "input"
    profiler = None
    if profile is not None:
        import cProfile

        profiler = cProfile.Profile()

    def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
        t0 = time.perf_counter()
        if profiler is not None:
            profiler.enable()
        try:
            res = fn()
        finally:
            if profiler is not None:
                profiler.disable()
        return res, time.perf_counter() - t0

    if step == "append":
        _, create_s = timed(lambda: system.create(data.SCHEMA))
        each = []
        for i in range(spec["appends"]):
            batch = pq.read_table(inputs / f"append_{i:02d}.parquet")
            _, s = timed(lambda batch=batch: system.append(batch))
            each.append(s)
            del batch
        out["seconds"] = create_s + sum(each)
        out["detail"] = {"create_s": create_s, "appends_s": each}
        if system.timings is not None:  # lakeline: where the appends' time went, summed
            out["detail"]["timings"] = system.timings
        if system.options is not None and system_name.startswith("lakeline"):
            out["detail"]["probe_s"] = probe_seconds()  # part of create_s
    elif step == "upsert":
        batch = pq.read_table(inputs / "upsert.parquet")
        stats, out["seconds"] = timed(lambda: system.upsert(batch))
        out["detail"] = {"stats": stats}
        if system.timings is not None:
            out["detail"]["timings"] = system.timings
    elif step == "read":
        (rows, count_files), out["seconds"] = timed(lambda: system.read(spec["read_a"], spec["read_b"]))
    else:
        raise ValueError(f"unknown step {step!r}")
    out["peak_rss"] = _maxrss()

    after = snapshot(system.path, system.options)
    changed = [p for p, st in after.items() if before.get(p) != st]
    out["bytes_written"] = sum(after[p][0] for p in changed)
    out["files_written"] = len(changed)
    out["table_bytes"] = sum(st[0] for st in after.values())
    if profiler is not None:
        profiler.dump_stats(str(profile))
    if step == "read":
        # Untimed: what the read returned and what the table holds, to check that every
        # system ends in the same state.
        out["files_read"] = count_files()
        if isinstance(system, Delta):  # the other way to read deltalake, timed after the step
            t0 = time.perf_counter()
            system.read_with(system.other_read, spec["read_a"], spec["read_b"])
            out["detail"] = {"read_via": system.read_via, "other_read": system.other_read}
            out["detail"]["other_read_s"] = time.perf_counter() - t0
        out["rows_read"] = rows.num_rows
        out["read_digest"] = _digest(rows)
        every = system.scan_all(["key", "ts"])
        out["rows_total"] = every.num_rows
        out["distinct_keys"] = pcc.count_distinct(every.column("key")).as_py()
        out["sum_ts"] = pcc.sum(every.column("ts")).as_py()
    out["ok"] = True
    return out


ChildRun = Callable[[str, str, Path, "Path | None"], dict[str, Any]]


def child_main(argv: list[str], run: ChildRun = run_child, mark: str = RESULT_MARK) -> int:
    """A child process's entry: run one step with ``run`` (by default this benchmark's
    :func:`run_child`) and print its report after ``mark`` for :func:`run_step`."""
    p = argparse.ArgumentParser(prog="python -m bench.<benchmark> --child")
    p.add_argument("--child", nargs=3, metavar=("SYSTEM", "STEP", "WORKDIR"), required=True)
    p.add_argument("--profile", type=Path, default=None)
    args = p.parse_args(argv)
    system, step, workdir = args.child
    try:
        out = run(system, step, Path(workdir), args.profile)
    except Exception as e:  # noqa: BLE001 - any failure is reported to the parent as a failed step
        out = {
            "system": system,
            "step": step,
            "ok": False,
            "error": f"{type(e).__name__}: {e}"[:500],
            "traceback": traceback.format_exc()[-4000:],
        }
    sys.stdout.write("\n" + mark + json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0 if out["ok"] else 1


def print_profile(path: Path, out: Any, limit: int = 30) -> None:
    import io
    import pstats

    buf = io.StringIO()
    st = pstats.Stats(str(path), stream=buf)
    st.sort_stats("cumulative").print_stats(limit)
    out.print(buf.getvalue(), markup=False, highlight=False)


def run_step(
    system: str,
    step: str,
    workdir: Path,
    timeout: float,
    profile: Path | None = None,
    module: str = "bench.write.bench",
    mark: str = RESULT_MARK,
    extra_env: dict[str, str] | None = None,
) -> StepResult:
    """Run one step in a fresh interpreter (``python -m MODULE --child``: this benchmark's
    child by default, another benchmark's whose ``__main__`` calls :func:`child_main`)
    and parse its report."""
    cmd = [sys.executable, "-m", module, "--child", system, step, str(workdir)]
    if profile is not None:
        cmd += ["--profile", str(profile)]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    env.update(extra_env or {})
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        return StepResult(
            system, step, error=f"timed out after {timeout:.0f} s (killed)", wall_s=time.perf_counter() - t0
        )
    wall = time.perf_counter() - t0
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith(mark)), None)
    if line is None:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return StepResult(system, step, error=f"child exited {proc.returncode}: {' | '.join(tail)}"[:500], wall_s=wall)
    raw = json.loads(line[len(mark) :])
    raw.pop("traceback", None) if raw.get("ok") else None
    known = {k: raw[k] for k in StepResult.__dataclass_fields__ if k in raw}
    res = StepResult(**known)
    res.wall_s = wall
    if not res.ok and "traceback" in raw:
        res.detail["traceback"] = raw["traceback"]
    return res
