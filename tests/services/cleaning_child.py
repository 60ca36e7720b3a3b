"""Child process for the cleaning tests: one clean in its own process, so a fault point
(``LAKELINE_FAULTS``) can kill it mid-delete, as a machine loss would.

Arguments (JSON): PATH TIMELINE RETAIN, TIMELINE null (filesystem store) or a
``postgresql://`` URL. Runs ``t.services.clean(retain=RETAIN, dry_run=False)`` and prints
{"instant": id or null, "files_deleted": n}.
"""

from __future__ import annotations

import json
import sys

from lakeline.table import Table


def main(argv: list[str]) -> None:
    path, timeline, retain = (json.loads(a) for a in argv)
    r = Table.open(path, timeline=timeline).services.clean(retain=retain, dry_run=False)
    print(json.dumps({"instant": r.instant.id if r.instant else None,
                      "files_deleted": r.stats.get("files_deleted", 0)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
