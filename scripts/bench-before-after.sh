#!/usr/bin/env bash
# Usage: scripts/bench-before-after.sh BASE [ROUNDS] [BENCH ...]   (default: 3 rounds of write lookup)
#
# A change that must not make lakeline slower is measured against the commit before it, in
# one session, interleaved: for each round and benchmark, BASE's code runs, then this
# checkout's, so a machine that gets busier or quieter meanwhile weighs on both alike. BASE
# runs from a git worktree with its own folders mapped to `lakeline.*` (a package root of
# symlinks first on PYTHONPATH, ahead of this checkout's editable install), and with this
# checkout's compiled C loops. Prints the median seconds of each lakeline step, before and
# after, and their ratio (lower is faster). Results stay in $OUT (default /tmp/bench-before-after);
# $BENCH_ARGS go to every run (e.g. BENCH_ARGS="--rows 200000" for a quick look).
set -euo pipefail
cd "$(dirname "$0")/.."
here=$(pwd)
base=${1:?usage: scripts/bench-before-after.sh BASE [ROUNDS] [BENCH ...]}
rounds=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
benches=("$@")
[ ${#benches[@]} -gt 0 ] || benches=(write lookup)
out=${OUT:-/tmp/bench-before-after}
py="$here/.venv/bin/python"

mkdir -p "$out"
tree="$out/base-tree" root="$out/base-root"
rm -rf "$tree" "$root"
git worktree prune
git worktree add -f --detach "$tree" "$base" >/dev/null
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || true' EXIT
mkdir -p "$root/lakeline"
for d in config timeline indexes table services spark cli; do ln -s "$tree/$d" "$root/lakeline/$d"; done
cp indexes/_native*.so "$tree/indexes/" 2>/dev/null || true
cp table/_position_filter*.so "$tree/table/" 2>/dev/null || true

for i in $(seq "$rounds"); do
  for b in "${benches[@]}"; do
    echo "$(date +%T) before $b round $i (load $(cut -d' ' -f1 /proc/loadavg))"
    (cd "$tree" && PYTHONPATH="$root:$tree" "$py" -m bench "$b" ${BENCH_ARGS:-} --no-docs --json "$out/before_${b}_$i.json" >"$out/before_${b}_$i.log" 2>&1)
    echo "$(date +%T) after $b round $i (load $(cut -d' ' -f1 /proc/loadavg))"
    "$py" -m bench "$b" ${BENCH_ARGS:-} --no-docs --json "$out/after_${b}_$i.json" >"$out/after_${b}_$i.log" 2>&1
  done
done

"$py" - "$out" "${benches[@]}" <<'EOF'
import glob, json, statistics, sys
from collections import defaultdict

out, benches = sys.argv[1], sys.argv[2:]
for bench in benches:
    seconds = defaultdict(lambda: defaultdict(list))
    for which in ("before", "after"):
        for path in sorted(glob.glob(f"{out}/{which}_{bench}_*.json")):
            for system, steps in json.load(open(path)).get("results", {}).items():
                for step, r in steps.items() if system.startswith("lakeline") else ():
                    if isinstance(r, dict) and r.get("ok") and r.get("seconds") is not None:
                        seconds[(system, step)][which].append(r["seconds"])
    print(f"== {bench}: median seconds, after/before")
    for (system, step), runs in sorted(seconds.items()):
        if runs["before"] and runs["after"]:
            b, a = statistics.median(runs["before"]), statistics.median(runs["after"])
            print(f"{system:14s} {step:18s} {b:8.3f} {a:8.3f} {a / b:6.2f}  ({len(runs['before'])}/{len(runs['after'])} runs)")
EOF
