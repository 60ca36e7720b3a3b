"""A writer process for the schema-change races (tests/table/schema/test_schema_race.py):
one write of JSON rows, its outcome printed as JSON (the error's type when typed), so
the test can arm a fault point in it and change the schema meanwhile."""

from __future__ import annotations

import json
import sys
from typing import Any

import pyarrow as pa
from lakeline.table import Table
from lakeline.timeline.errors import LakelineError


def write(path: str, op: str, rows: list[dict[str, Any]]) -> None:
    t = Table.open(path)
    # Typed as the table's schema was when this writer opened it (the race changes it).
    types = {f.name: f.type for f in t.schema}
    data = pa.table({c: pa.array([r[c] for r in rows], types.get(c)) for c in rows[0]})
    try:
        r = getattr(t, op)(data)
    except LakelineError as e:
        print(json.dumps({"error": type(e).__name__, "message": str(e)}))
        return
    print(json.dumps({"instant": r.instant.id if r.instant is not None else None}))


def service(path: str, name: str) -> None:
    t = Table.open(path)
    r = t.services.compact() if name == "compaction" else t.services.cluster(sort_by=["id"])
    print(json.dumps({"instant": r.instant.id if r.instant is not None else None}))


COMMANDS = {"write": write, "service": service}

if __name__ == "__main__":
    name, *args = (json.loads(a) for a in sys.argv[1:])
    COMMANDS[name](*args)  # type: ignore[operator]
