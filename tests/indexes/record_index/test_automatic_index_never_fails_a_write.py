"""The automatic record index never fails the write it runs before (issue 45 item 6):
whatever its build raises, a bug's ``RuntimeError`` as much as a typed error, is
logged with its traceback and the write goes on reading the data; only what stops a
process (``KeyboardInterrupt``) goes through."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.timeline.diagnostics import faults

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])
AUTO = {"index.record-index.auto-rows": 1000}

pytestmark = pytest.mark.usefixtures("no_faults")


def random_batch(rng: random.Random, n: int, v: int) -> pa.Table:
    return pa.table({"id": [f"{rng.getrandbits(128):032x}" for _ in range(n)], "v": [v] * n}, schema=SCHEMA)


def due(tmp: Path) -> tuple[Table, random.Random]:
    """A table whose next insert of random keys builds the index first."""
    rng = random.Random(7)
    t = Table.create(tmp / "t", SCHEMA, record_key="id", properties=AUTO)
    t.insert(random_batch(rng, 1200, 0))
    return t, rng


def test_an_untyped_error_of_the_build_is_logged_and_the_write_lands(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    t, rng = due(tmp_path)
    reached: list[str] = []

    def bug() -> None:
        reached.append("build")
        raise RuntimeError("a bug in the index build")

    faults.on("indexing.after_build", bug)
    second = random_batch(rng, 800, 1)
    with caplog.at_level(logging.WARNING, logger="lakeline.services.indexing.automatic"):
        r = t.insert(second)
    assert reached == ["build"]  # the build ran and failed
    assert r.instant is not None and r.instant.state == "completed"
    assert t.to_arrow().num_rows == 2000
    [record] = [rec for rec in caplog.records if "was not built" in rec.getMessage()]
    assert "a bug in the index build" in record.getMessage()
    assert record.exc_info is not None and record.exc_info[0] is RuntimeError  # with its traceback
    assert [d.state for d in t.indexes.list() if d.state == "ready"] == []


def test_a_keyboard_interrupt_still_stops_the_write(tmp_path: Path) -> None:
    t, rng = due(tmp_path)

    def interrupt() -> None:
        raise KeyboardInterrupt

    faults.on("indexing.after_build", interrupt)
    with pytest.raises(KeyboardInterrupt):
        t.insert(random_batch(rng, 800, 1))
    assert Table.open(t.path).to_arrow().num_rows == 1200
