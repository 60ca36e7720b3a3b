"""Child process for the service tests: one table service in its own process, so a fault
point (``LAKELINE_FAULTS``) can kill it at any step, as a machine loss would, or hold it
at a step (``=wait``) while the test acts.

Arguments (JSON): PATH TIMELINE SERVICE KWARGS. TIMELINE is null (filesystem store) or a
``postgresql://`` URL; SERVICE names the ``t.services`` method to run (``archive``,
``clean``, ``cluster``, ``compact``) and KWARGS its keyword arguments, e.g.
``"clean" {"retain": 1, "dry_run": false}``. Runs ``t.services.SERVICE(**KWARGS)`` and
prints the result's stats with the instant's id and state:
{"instant": id or null, "state": ... or null, **stats}.

Start it with ``tests.helpers.run_script(SERVICE_CHILD, [path, timeline, service, kwargs])``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lakeline.table import Table

SERVICE_CHILD = Path(__file__).resolve()
SERVICES = ("archive", "clean", "cluster", "compact")


def main(argv: list[str]) -> None:
    path, timeline, service, kwargs = (json.loads(a) for a in argv)
    if service not in SERVICES:
        raise SystemExit(f"unknown service {service!r}: one of {', '.join(SERVICES)}")
    r = getattr(Table.open(path, timeline=timeline).services, service)(**kwargs)
    out = {**r.stats, "instant": r.instant.id if r.instant else None, "state": r.instant.state if r.instant else None}
    print(json.dumps(out, default=str), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
