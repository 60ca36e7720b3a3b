"""``python -m bench [NAME ...]``: run registered benchmarks (all of them without a name).

Registration is a plain dict of name -> module path so adding a benchmark is one line
and importing the dispatcher does not import every benchmark's dependencies.
Arguments after the name go to that benchmark: ``python -m bench timeline --events 2000``.
"""

from __future__ import annotations

import importlib
import sys

#: name -> module exposing ``main(argv: list[str]) -> int``.
BENCHMARKS: dict[str, str] = {
    "timeline": "bench.timeline_bench",
    "write": "bench.write.bench",
    "index": "bench.index_bench",
    "open": "bench.open_bench",
    "async-index": "bench.async_index_bench",
    "lookup": "bench.lookup.bench",
    "services": "bench.services.bench",
    "stream": "bench.stream_bench",
    "spark": "bench.spark_bench",
    "scale": "bench.scale_bench",
    "mor-reads": "bench.mor_reads_bench",
    "longevity": "bench.longevity.bench",
    "object-store": "bench.object_store.bench",
    "dedupe": "bench.dedupe_bench",
    "mor-piles": "bench.lookup.mor_piles",
    "record-index": "bench.lookup.record_index",
    "change-feed": "bench.lookup.change_feed",
    "cdc": "bench.cdc_bench",
    "merge": "bench.write.merge",
    "first-load": "bench.longevity.first_load",
}


def usage() -> str:
    names = "|".join(BENCHMARKS)
    return (
        f"usage: python -m bench [{names}] [ARGS...]\n"
        "  no name: run every benchmark with its defaults\n"
        "  python -m bench NAME --help: the benchmark's own options"
    )


def main(argv: list[str] | None = None) -> int:
    """Dispatch to one benchmark, or run all of them in registration order."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in ("-h", "--help"):
        print(usage())
        return 0
    if not args:
        worst = 0
        for module in BENCHMARKS.values():
            worst = max(worst, importlib.import_module(module).main([]))
        return worst
    name, rest = args[0], args[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}\n{usage()}", file=sys.stderr)
        return 2
    return int(importlib.import_module(BENCHMARKS[name]).main(rest))


if __name__ == "__main__":
    sys.exit(main())
