"""Child process for the async-indexer tests: one index action in its own process, so a
fault point (``LAKELINE_FAULTS``) can kill it at any step, or two of them can race.

Commands (arguments are JSON):
  create PATH KIND WAIT_FOR_FILE   wait until WAIT_FOR_FILE exists (a start barrier; null:
                                   no wait), then ``t.indexes.create(KIND)``; prints
                                   {"ok": true, "state": ...} or {"ok": false, "error": ...}
  run PATH                         ``t.services.run("indexing")``; prints the instants' states
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from lakeline.table import Table
from lakeline.timeline.errors import LakelineError


def main(argv: list[str]) -> None:
    cmd, *args = [json.loads(a) for a in argv]
    t = Table.open(args[0])
    if cmd == "create":
        barrier = args[2]
        while barrier is not None and not Path(barrier).exists():
            time.sleep(0.001)
        try:
            d = t.indexes.create(args[1])
            print(json.dumps({"ok": True, "state": d.state}), flush=True)
        except LakelineError as e:
            print(json.dumps({"ok": False, "error": type(e).__name__, "message": str(e)}), flush=True)
    elif cmd == "run":
        results = t.services.run("indexing")
        print(json.dumps([r.instant.state if r.instant else None for r in results]), flush=True)
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
