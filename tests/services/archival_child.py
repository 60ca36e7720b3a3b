"""Child process for the archival tests: one archival in its own process, so a fault
point (``LAKELINE_FAULTS``) can kill it at any step, as a machine loss would.

Arguments (JSON): PATH TIMELINE, TIMELINE null (filesystem store) or a ``postgresql://``
URL. Runs ``t.services.archive()`` and prints {"instant": id or null, "stats": {...}}.
"""

from __future__ import annotations

import json
import sys

from lakeline.table import Table


def main(argv: list[str]) -> None:
    path, timeline = (json.loads(a) for a in argv)
    r = Table.open(path, timeline=timeline).services.archive()
    print(json.dumps({"instant": r.instant.id if r.instant else None, "stats": r.stats}, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
