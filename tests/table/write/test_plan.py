"""Write plans (lakeline.table.write.plan): a plan is empty only when it writes and
retires nothing; planning a real write fills the part its table type uses."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.table import Table
from lakeline.table.write.operations import plan_upsert
from lakeline.table.write.plan import NewFiles, WritePlan
from lakeline.timeline.commit_metadata import Operation

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])


def test_a_plan_is_empty_until_it_writes_or_retires_something() -> None:
    assert WritePlan(Operation.UPSERT).empty
    assert not WritePlan(Operation.UPSERT, new_files=[NewFiles("", pa.table({"id": [1]}))]).empty
    assert not WritePlan(Operation.OVERWRITE, replaced={"": ["g1"]}).empty
    # Stats and keys alone are no work.
    assert WritePlan(Operation.UPSERT, stats={"x": 1}, new_keys=pa.table({"id": [1]})).empty


@pytest.mark.parametrize(("table_type", "rewrites", "logs"), [("cow", 1, 0), ("mor", 0, 1)])
def test_an_upsert_of_an_existing_key_plans_a_rewrite_or_a_log(
    tmp_path: Path, table_type: str, rewrites: int, logs: int
) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", table_type=table_type)
    t.insert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
    plan = plan_upsert(t.context(), pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=SCHEMA))
    assert (len(plan.rewrites), len(plan.logs)) == (rewrites, logs)
    assert not plan.empty
    assert plan.new_keys is not None and plan.new_keys.column("id").to_pylist() == [3]
