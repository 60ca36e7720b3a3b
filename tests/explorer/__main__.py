"""Command line of the schedule explorer (``make explore`` runs a campaign).

    python -m tests.explorer --seed 17             # replay one random schedule, print it
    python -m tests.explorer --campaign 200        # seeds 0..199, summary + each failure
    python -m tests.explorer --scenario lost_delete                    # enumerate it
    python -m tests.explorer --scenario lost_delete --choices A,A,B    # replay one
    python -m tests.explorer --scenarios          # enumerate every scenario

Exit status 1 when any schedule broke an invariant.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter

from .explorer import PrefixChooser, RunReport, exhaustive, parse_choices, run_random, run_schedule
from .scenarios import SCENARIOS


def _kinds(args: argparse.Namespace) -> tuple[str, ...] | None:
    return tuple(k.strip() for k in args.kinds.split(",")) if args.kinds else None


def _campaign(args: argparse.Namespace) -> tuple[int, list[RunReport]]:
    bad: list[RunReport] = []
    started = time.perf_counter()
    n = 0
    tally: Counter[str] = Counter()
    for seed in range(args.start, args.start + args.campaign):
        if args.budget and time.perf_counter() - started > args.budget:
            break
        r = run_random(seed, args.actors, args.ops, _kinds(args), args.table_type)
        n += 1
        tally.update(r.tally)
        if not r.ok:
            bad.append(r)
            print(r.format(), flush=True)
            if not args.keep_going:
                break
        elif args.verbose:
            print(f"seed {seed}: ok, {r.steps} steps, {r.seconds:.1f} s", flush=True)
    print(
        f"random schedules run: {n} (seeds {args.start}..{args.start + n - 1}), violations: {len(bad)}, "
        f"{time.perf_counter() - started:.0f} s",
        flush=True,
    )
    _print_tally(tally)
    return n, bad


def _print_tally(tally: Counter[str]) -> None:
    """How the schema and index operations ended, the writes refused for their schema,
    and the key-pinned reads: whether a campaign met the races it was meant to."""
    refused = ("SchemaMismatchError", "UnknownColumnError")
    shown = sorted(k for k in tally if k.startswith(("schema", "index_create", "pinned")) or k.endswith(refused))
    if shown:
        print("  " + "; ".join(f"{k} x{tally[k]}" for k in shown), flush=True)


def _enumerate(names: list[str], args: argparse.Namespace) -> tuple[int, list[RunReport]]:
    bad: list[RunReport] = []
    total = 0
    for name in names:
        started = time.perf_counter()
        runs = 0
        for r in exhaustive(
            SCENARIOS[name], name, args.preemptions, args.crashes, args.max_runs, stop_on_violation=not args.keep_going
        ):
            runs += 1
            if not r.ok:
                bad.append(r)
                print(r.format(), flush=True)
        print(
            f"scenario {name}: {runs} schedules (preemptions <= {args.preemptions}, crashes <= "
            f"{args.crashes}), violations: {sum(1 for b in bad if name in b.replay)}, "
            f"{time.perf_counter() - started:.0f} s",
            flush=True,
        )
        total += runs
    return total, bad


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m tests.explorer", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--seed", type=int)
    p.add_argument("--campaign", type=int, default=0, help="run this many random seeds")
    p.add_argument("--start", type=int, default=0, help="first seed of a campaign")
    p.add_argument("--budget", type=float, default=0, help="stop a campaign after this many seconds")
    p.add_argument("--actors", type=int)
    p.add_argument("--ops", type=int)
    p.add_argument("--kinds", help="random operations only of these kinds (comma-separated, e.g. upsert,delete)")
    p.add_argument("--table-type", choices=["cow", "mor"])
    p.add_argument("--scenario", choices=sorted(SCENARIOS))
    p.add_argument("--scenarios", action="store_true", help="enumerate every scenario")
    p.add_argument("--choices", help="replay these decisions of --scenario (A,B,xA: A crashes)")
    p.add_argument("--preemptions", type=int, default=1)
    p.add_argument("--crashes", type=int, default=0)
    p.add_argument("--max-runs", type=int, default=300)
    p.add_argument("--keep-going", action="store_true")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args(argv)
    bad: list[RunReport] = []
    runs = 0
    if args.seed is not None:
        r = run_random(args.seed, args.actors, args.ops, _kinds(args), args.table_type)
        print(r.format())
        bad += [] if r.ok else [r]
        runs += 1
    if args.scenario and args.choices:
        r = run_schedule(
            SCENARIOS[args.scenario],
            PrefixChooser(parse_choices(args.choices)),
            replay=f"python -m tests.explorer --scenario {args.scenario} --choices {args.choices}",
        )
        print(r.format())
        bad += [] if r.ok else [r]
        runs += 1
    elif args.scenario or args.scenarios:
        n, found = _enumerate([args.scenario] if args.scenario else sorted(SCENARIOS), args)
        runs, bad = runs + n, bad + found
    if args.campaign:
        n, found = _campaign(args)
        runs, bad = runs + n, bad + found
    kinds = sorted({v.kind for r in bad for v in r.violations})
    print(f"explorer summary: {runs} schedules run, {len(bad)} with violations {kinds if kinds else ''}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
