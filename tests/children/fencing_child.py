"""Child process for the fencing tests: one service execution in its own process, so a
fault point (``LAKELINE_FAULTS=...=wait``) can hold it at a step and the test can stall
it there (SIGSTOP) while another executor takes the instant over.

Commands (arguments are JSON): ``create PATH TIMELINE KIND`` runs ``t.indexes.create(KIND)``
and prints {"ok": true, "state": ...} or {"ok": false, "error": ...}; ``compact PATH
TIMELINE`` runs ``t.services.compact()`` and prints {"instant", "state"} (a refused
stale attempt ends the process with its error). TIMELINE is null (filesystem store) or
a ``postgresql://`` URL.
"""

from __future__ import annotations

import json
import sys

from lakeline.table import Table
from lakeline.timeline.errors import LakelineError


def main(argv: list[str]) -> None:
    cmd, path, timeline, *rest = [json.loads(a) for a in argv]
    t = Table.open(path, timeline=timeline)
    if cmd == "create":
        try:
            d = t.indexes.create(rest[0])
            print(json.dumps({"ok": True, "state": d.state}), flush=True)
        except LakelineError as e:
            print(json.dumps({"ok": False, "error": type(e).__name__, "message": str(e)}), flush=True)
    elif cmd == "compact":
        r = t.services.compact()
        print(
            json.dumps(
                {"instant": r.instant.id if r.instant else None, "state": r.instant.state if r.instant else None}
            ),
            flush=True,
        )
    else:
        raise SystemExit(f"unknown command {cmd!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
