"""Writer processes for the fault tests: each opens a table and writes one row per key,
reporting what each write answered.

Why processes, not threads: a store's races are between clients that share nothing
(their own connections, caches, per-process checks), as separate machines are. A
writer prints one JSON line per key, ``{"key", "outcome", "error"}``, where the outcome
is what a caller would conclude: ``committed`` (the call returned), ``unknown``
(:class:`CommitOutcomeUnknownError`: present 0 or 1 time) or ``failed`` (any other
error: a definite failure, so the row must be absent).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import pyarrow as pa

from tests.object_storage.s3_tables import SCHEMA

_WRITER = """
import json, sys
import pyarrow as pa
from lakeline.table import Table
from lakeline.timeline.errors import CommitOutcomeUnknownError

uri, options, op, keys = json.loads(sys.argv[1])
schema = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64()), ("day", pa.string())])
try:
    table = Table.open(uri, storage_options=options)
except Exception as e:
    for k in keys:
        print(json.dumps({"key": k, "outcome": "failed", "error": "open: " + type(e).__name__}), flush=True)
    raise SystemExit(0)
for k in keys:
    batch = pa.table({"id": [k], "ts": [1], "v": [1.0], "day": ["d1"]}, schema=schema)
    try:
        getattr(table, op)(batch)
        outcome, error = "committed", ""
    except CommitOutcomeUnknownError as e:
        outcome, error = "unknown", f"{type(e).__name__}: {e}"[:300]
    except Exception as e:
        outcome, error = "failed", f"{type(e).__name__}: {e}"[:300]
    print(json.dumps({"key": k, "outcome": outcome, "error": error}), flush=True)
"""


@dataclass(frozen=True)
class Outcome:
    """What one write answered."""

    key: str
    outcome: str
    error: str


def run_writers(
    uri: str, options: Iterable[Mapping[str, str]], op: str, per_writer: int, env: Mapping[str, str] | None = None
) -> list[Outcome]:
    """Start one process per options (its endpoint: a proxy, the server), each writing
    ``per_writer`` keys ``w<i>-<n>`` with ``op`` (``insert``/``upsert``), all at once."""
    procs = []
    for w, opts in enumerate(options):
        keys = [f"w{w}-{n:03d}" for n in range(per_writer)]
        arg = json.dumps([uri, dict(opts), op, keys])
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", _WRITER, arg],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=dict(os.environ, **(env or {})),
            )
        )
    outcomes: list[Outcome] = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        outcomes += [Outcome(**json.loads(line)) for line in out.splitlines() if line.startswith("{")]
    return outcomes


def check_model(outcomes: list[Outcome], ids: list[str]) -> Counter[str]:
    """The completion-order model against the rows a table holds (``ids``, one per row):
    every write reported committed is present exactly once, no write that failed
    definitely is present, an unknown one is present at most once. Returns the tally."""
    present = Counter(ids)
    tally: Counter[str] = Counter(o.outcome for o in outcomes)
    for o in outcomes:
        n = present[o.key]
        if o.outcome == "committed":
            assert n == 1, f"{o.key} reported committed, present {n} times"
        elif o.outcome == "failed":
            assert n == 0, f"{o.key} failed ({o.error}), yet present {n} times"
        else:
            assert n <= 1, f"{o.key} outcome unknown, present {n} times"
            tally["unknown present"] += n
    assert set(present) <= {o.key for o in outcomes} | {"seed"}, set(present) - {o.key for o in outcomes}
    return tally


def seed_row() -> pa.Table:
    """The one row a table starts with (key ``seed``), so the writers open an existing table."""
    return pa.table({"id": ["seed"], "ts": [1], "v": [1.0], "day": ["d1"]}, schema=SCHEMA)


__all__ = ["Outcome", "check_model", "run_writers", "seed_row"]
