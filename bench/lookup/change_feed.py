"""The change feed with before-images after merge-on-read upserts (issue 28, item 3):
``python -m bench change-feed``.

Why: ``changes(start, images=True)`` used to read every touched file group whole,
before and after each instant; it now reads, for groups the instants only gave logs,
the keys those logs carry and the base rows their positions point at
(``table/read/log_changes.py``). This times the feed of ``--upserts`` upserts three
ways, side by side on the same data, in turns, median of ``--repeats``:

* ``lakeline-positions``: ``t.changes(start, images=True)``, the default;
* ``lakeline-whole``: the same feed reading every touched slice whole (the reference
  the tests compare with, what the feed did before);
* ``deltalake``: ``DeltaTable.load_cdf(starting_version=...)`` on a table with
  ``delta.enableChangeDataFeed`` whose upserts were ``merge`` calls (Delta writes the
  before-images into ``_change_data`` files at write time, so its read is a scan).

Data: ``--rows`` rows (default 5M) written as 10 appends into a merge-on-read table
keyed on ``key`` (ordering ``ts``), then ``--upserts`` rounds of ``--upsert-rows``
updates of existing keys drawn uniformly (``bench.data.update_batch``), each batch in
random row order; ``--keys uuid`` for random 32-hex keys. Every system's feed must hold
one ``update_before``/``update_after`` pair (Delta: ``update_preimage``/
``update_postimage``) per updated row.

    python -m bench change-feed [--rows N] [--upserts N] [--upsert-rows N] [--keys sequential|uuid]
                                [--repeats N] [--json FILE] [--no-docs]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import data
from ..report import command_line, machine, today, update_section

APPENDS = 10


def build(work: Path, args: argparse.Namespace, write_s: dict[str, float]) -> dict[str, Callable[[], int]]:
    """Write both tables (the upserts' total seconds per system into ``write_s``); the
    feeds to time, each returning its row count."""
    from deltalake import DeltaTable, write_deltalake
    from lakeline.table import Table
    from lakeline.table.read import changes as changes_module

    shape = data.Shape(args.keys, "random")
    t = Table.create(str(work / "lakeline"), data.SCHEMA, record_key="key", ordering_field="ts", table_type="mor")
    per = args.rows // APPENDS
    delta = str(work / "delta")
    start = None
    for i in range(APPENDS):
        batch = data.append_batch(i, per, shape)
        start = t.insert(batch).instant
        write_deltalake(delta, batch, mode="append", configuration={"delta.enableChangeDataFeed": "true"})
    assert start is not None
    first_merge = DeltaTable(delta).version() + 1
    lakeline_s = delta_s = 0.0
    for r in range(args.upserts):
        batch = data.update_batch(per * APPENDS, args.upsert_rows, r, shape)
        began = time.perf_counter()
        t.upsert(batch)
        lakeline_s += time.perf_counter() - began
        began = time.perf_counter()
        (
            DeltaTable(delta)
            .merge(batch, predicate="t.key = s.key", source_alias="s", target_alias="t")
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .execute()
        )
        delta_s += time.perf_counter() - began
    start_id = start.id
    write_s["lakeline upserts"], write_s["deltalake merges"] = lakeline_s, delta_s

    def positions() -> int:
        return Table.open(str(work / "lakeline")).changes(start_id, images=True).num_rows

    def whole() -> int:
        table = Table.open(str(work / "lakeline"))
        return changes_module.changes(table.context(), table.view, start_id, None, True, reference=True).num_rows

    def deltalake() -> int:
        return DeltaTable(delta).load_cdf(starting_version=first_merge).read_all().num_rows

    return {"lakeline-positions": positions, "lakeline-whole": whole, "deltalake": deltalake}


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    write_s: dict[str, float] = {}
    feeds = build(work, args, write_s)
    times: dict[str, list[float]] = {name: [] for name in feeds}
    rows: dict[str, int] = {}
    names = list(feeds)
    for rep in range(args.repeats):
        for name in names[rep % len(names) :] + names[: rep % len(names)]:  # each first in turn
            if name == "lakeline-whole" and rep and not args.whole_repeats:
                continue  # minutes per read at 5M rows: once is enough to see the gap
            began = time.perf_counter()
            rows[name] = feeds[name]()
            times[name].append(time.perf_counter() - began)
    expected = 2 * args.upserts * args.upsert_rows
    # Every feed lists each updated row twice (before, after) and nothing else.
    wrong = {name: n for name, n in rows.items() if n != expected}
    if wrong:
        raise SystemExit(f"feeds of {expected} rows expected, got {wrong}")
    median = {name: statistics.median(ts) for name, ts in times.items()}
    return {
        "rows": args.rows,
        "upserts": args.upserts,
        "upsert_rows": args.upsert_rows,
        "keys": args.keys,
        "repeats": args.repeats,
        "feed_rows": expected,
        "seconds": median,
        "upserts_seconds": write_s,
        "runs": times,
        "vs_deltalake": {name: median[name] / median["deltalake"] for name in median},
    }


def report(result: dict[str, Any], command: str) -> str:
    lines = [
        "## The change feed after merge-on-read upserts (issue 28, item 3)",
        "",
        f"{today()}, {machine()}. Command: `{command}`",
        "",
        f"Data: {result['rows']:,} rows (`{result['keys']}` keys) in a merge-on-read table, then "
        f"{result['upserts']} upserts of {result['upsert_rows']:,} updates of existing keys drawn uniformly, "
        f"each batch in random row order; the feed from the last append on holds {result['feed_rows']:,} rows. "
        f"Median of {result['repeats']} reads each, the systems in turns (lakeline-whole once unless "
        "`--whole-repeats`).",
        "",
        "| feed | seconds | vs deltalake's load_cdf |",
        "|---|---|---|",
    ]
    for name, seconds in result["seconds"].items():
        lines.append(f"| {name} | {seconds:.3f} | {result['vs_deltalake'][name]:.2f}x |")
    w = result["upserts_seconds"]
    lines += [
        "",
        f"Writing the {result['upserts']} upserts took lakeline {w['lakeline upserts']:.2f} s and deltalake's "
        f"`merge` {w['deltalake merges']:.2f} s: Delta writes each merge's before- and after-images into "
        "`_change_data` files then, so its feed is a scan of them; lakeline's merge-on-read upsert writes a log "
        "and finds the before-images when the feed is read. Upserts and feed together: lakeline "
        f"{w['lakeline upserts'] + result['seconds']['lakeline-positions']:.2f} s, deltalake "
        f"{w['deltalake merges'] + result['seconds']['deltalake']:.2f} s.",
    ]
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench change-feed", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--upserts", type=int, default=10)
    parser.add_argument("--upsert-rows", type=int, default=5_000)
    parser.add_argument("--keys", choices=data.KEY_KINDS, default="sequential")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--whole-repeats", action="store_true", help="repeat the whole-read feed too")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--no-docs", action="store_true", help="do not update docs/performance.md")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lakeline-change-feed-") as tmp:
        result = run(args, Path(tmp))
    print(json.dumps(result["seconds"], indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    if not args.no_docs:
        update_section("change-feed-bench", report(result, command_line("change-feed", argv, False)))
    return 0
