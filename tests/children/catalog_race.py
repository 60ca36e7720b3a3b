"""Child-process entry point of the catalog race tests (``multiprocessing``, spawn).

Each child opens its own ``Catalog``, waits at a barrier so all children try at once,
and creates a table; the creation pauses inside ``Table.create`` (fault point
``create.after_requested``) so the winner still holds its reservation while the others
try. The outcome goes back on a queue: ``("ok", name, location)`` or
``("<ErrorClassName>", name, location)``.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from lakeline.table import Catalog
from lakeline.timeline.diagnostics import faults
from lakeline.timeline.errors import LakelineError

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("v", pa.string())])


def create_one(dsn: str, name: str, location: str, barrier: Any, out: Any) -> None:
    faults.arm("create.after_requested", "pause:0.5")
    cat = Catalog(dsn)
    try:
        cat.table_exists("race.warmup")  # connect before the barrier: the race is the create
        barrier.wait(timeout=60)
        t = cat.create_table(name, location, SCHEMA, record_key="id")
        t.log.store.close()
        out.put(("ok", name, location))
    except LakelineError as e:
        out.put((type(e).__name__, name, location))
    finally:
        cat.close()
