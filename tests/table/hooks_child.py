"""Child process for tests/table/test_hooks.py: a service process beside the writers.

  compact-loop PATH STOP
      ``t.services.run("compaction")`` in a loop (what a runner does on a schedule)
      until the file STOP exists; prints {"runs": instants it executed}.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lakeline.table import Table


def compact_loop(path: str, stop: str) -> None:
    t = Table.open(path)
    runs = 0
    while not Path(stop).exists():
        runs += sum(1 for r in t.services.run("compaction") if r.instant is not None)
        time.sleep(0.1)
    print(json.dumps({"runs": runs}))


if __name__ == "__main__":
    name, *args = (json.loads(a) for a in sys.argv[1:])
    {"compact-loop": compact_loop}[name](*args)
