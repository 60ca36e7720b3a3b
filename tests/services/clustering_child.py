"""Child process for the clustering tests: one clustering in its own process, so a fault
point (``LAKELINE_FAULTS``) can kill it at any step, as a machine loss would.

Arguments (JSON): PATH TIMELINE SORT_BY STRATEGY; TIMELINE null (filesystem store) or a
``postgresql://`` URL. Runs ``t.services.cluster(sort_by, strategy)`` and prints
{"instant": id or null, "state": ...}.
"""

from __future__ import annotations

import json
import sys

from lakeline.table import Table


def main(argv: list[str]) -> None:
    path, timeline, sort_by, strategy = (json.loads(a) for a in argv)
    r = Table.open(path, timeline=timeline).services.cluster(sort_by=sort_by, strategy=strategy)
    print(json.dumps({"instant": r.instant.id if r.instant else None,
                      "state": r.instant.state if r.instant else None}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
