"""Every numeric table property has a documented lower and upper bound (issue 25, audit
B1c): a value outside them, a non-finite float or a bool where a number belongs is
refused by ``Table.create`` with ``InvalidPropertyError`` and nothing is written; any
value inside them gives a table that works.

``heartbeat.interval-ms = 10**30`` used to be accepted and then killed the heartbeat
thread of every write with an ``OverflowError``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lakeline.config import PropertyProblem, specs
from lakeline.table import Table
from lakeline.timeline.errors import InvalidPropertyError

DEFAULTS = tomllib.loads((Path(__file__).resolve().parents[2] / "config" / "defaults.toml").read_text())
NUMERIC = sorted(
    k for k, v in DEFAULTS.items() if isinstance(v["default"], int | float) and not isinstance(v["default"], bool)
)
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_every_number_has_documented_bounds_around_its_default() -> None:
    assert NUMERIC, "no numeric property found"
    for key in NUMERIC:
        entry = DEFAULTS[key]
        assert "min" in entry and "max" in entry, f"{key} lacks a min or a max"
        assert type(entry["max"]) is type(entry["default"]), key
        assert entry["min"] <= entry["default"] <= entry["max"], key
        assert specs()[key].max == entry["max"]


OUT_OF_BOUNDS: list[tuple[str, Any]] = [
    ("heartbeat.interval-ms", 10**30),  # the audit's repro
    ("heartbeat.interval-ms", 86_400_001),
    ("clean.retain", 2**70),
    ("clean.retain", 10**6 + 1),
    ("service.nice", 100),
    ("service.nice", 20),
    ("service.nice", -1),
    ("lock.lease-ms", 10**12),
    ("commit.max-retries", 10**4),
    ("write.target-file-size-bytes", 2**41),
    ("engine.parallelism", 10**5),
    ("compaction.log-ratio", math.nan),
    ("compaction.log-ratio", math.inf),
    ("compaction.log-ratio", -math.inf),
    ("clustering.small-file-ratio", 1.5),
    ("commit.max-retries", True),
    ("compaction.log-ratio", False),
    ("engine.parallelism", math.inf),
    ("clean.retain", -(10**5000)),
    ("clean.retain", "1" * 5000),
]


@pytest.mark.parametrize(("key", "value"), OUT_OF_BOUNDS, ids=[f"{k}-{n}" for n, (k, _) in enumerate(OUT_OF_BOUNDS)])
def test_out_of_bounds_is_refused_at_create_and_nothing_is_written(tmp_path: Path, key: str, value: Any) -> None:
    path = tmp_path / "t"
    with pytest.raises(InvalidPropertyError, match=key.replace(".", r"\.")) as info:
        Table.create(path, SCHEMA, record_key="id", properties={key: value})
    assert len(str(info.value)) < 300  # a huge value is not spelled out
    assert not path.exists()


@pytest.mark.parametrize("key", NUMERIC)
def test_both_bounds_themselves_are_accepted(key: str) -> None:
    spec = specs()[key]
    assert spec.coerce(spec.max) == spec.max
    assert spec.coerce(spec.min) == spec.min
    assert spec.coerce(str(spec.max)) == spec.max  # as the CLI's -p passes it
    with pytest.raises(PropertyProblem, match="above the maximum"):
        spec.coerce(spec.max * 2 + 1)


def test_the_audit_repro_heartbeat_at_one_day_works(tmp_path: Path) -> None:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id", properties={"heartbeat.interval-ms": 86_400_000})
    t.upsert(pa.table({"id": [1], "v": ["a"]}, schema=SCHEMA))
    assert t.to_arrow().num_rows == 1


values = st.one_of(
    st.integers(min_value=-(2**80), max_value=2**80),
    st.integers(min_value=-5, max_value=25),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.booleans(),
    st.integers(min_value=0, max_value=10**7).map(str),
)


@FAST
@given(key=st.sampled_from(NUMERIC), value=values)
def test_any_value_is_refused_cleanly_or_gives_a_working_table(key: str, value: Any) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t")
        try:
            t = Table.create(path, SCHEMA, record_key="id", properties={key: value})
        except InvalidPropertyError:
            assert not os.path.exists(path)
            return
        spec = specs()[key]
        got = getattr(t.config.props, key.replace(".", "_").replace("-", "_"))
        assert spec.min <= got <= spec.max and not isinstance(value, bool)
        assert not isinstance(got, float) or math.isfinite(got)
        t.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
        assert sorted(Table.open(path).to_arrow().column("id").to_pylist()) == [1, 2]


@st.composite
def in_bounds(draw: st.DrawFn) -> tuple[str, Any]:
    """A numeric property and a value inside its documented bounds (ends included)."""
    key = draw(st.sampled_from(NUMERIC))
    spec = specs()[key]
    assert spec.min is not None and spec.max is not None
    if isinstance(spec.default, float):
        value: Any = draw(st.floats(min_value=spec.min, max_value=spec.max) | st.sampled_from([spec.min, spec.max]))
    else:
        value = draw(
            st.integers(min_value=int(spec.min), max_value=int(spec.max))
            | st.sampled_from([int(spec.min), int(spec.max)])
        )
    return key, draw(st.sampled_from([value, str(value)]))


@FAST
@given(kv=in_bounds())
def test_every_value_inside_the_bounds_gives_a_working_table(kv: tuple[str, Any]) -> None:
    key, value = kv
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t")
        t = Table.create(path, SCHEMA, record_key="id", properties={key: value})
        t.upsert(pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=SCHEMA))
        t.upsert(pa.table({"id": [2], "v": ["c"]}, schema=SCHEMA))
        assert Table.open(path).to_arrow().sort_by("id").column("v").to_pylist() == ["a", "c"]


def test_a_table_stored_above_a_new_maximum_still_opens_and_reads_it_as_the_maximum(tmp_path: Path) -> None:
    """Versions before the upper bounds stored any value (and any float, infinity and
    bools included): such a table stays readable (nothing committed is lost), the value
    read as the nearest bound; a new value above it is still refused."""
    schema = pa.schema([("id", pa.int64())])
    t = Table.create(tmp_path / "t", schema, record_key="id")
    t.upsert(pa.table({"id": [1]}, schema=schema))
    event = sorted((tmp_path / "t" / ".lakeline" / "timeline").glob("*.json"))
    schema_done = [p for p in event if '"schema"' in p.read_text() and '"completed"' in p.read_text()][-1]
    raw = json.loads(schema_done.read_text())
    raw.pop("crc")  # as those versions wrote it: before events carried a checksum
    raw["payload"]["config"]["properties"] = {
        "clean.retain": 2**70,
        "heartbeat.interval-ms": 10**30,
        "compaction.log-ratio": math.inf,
        "clustering.small-file-ratio": True,
    }
    schema_done.write_text(json.dumps(raw))
    old = Table.open(tmp_path / "t")
    assert old.config.props.clean_retain == specs()["clean.retain"].max
    assert old.config.props.heartbeat_interval_ms == specs()["heartbeat.interval-ms"].max
    assert old.config.props.compaction_log_ratio == specs()["compaction.log-ratio"].max
    assert old.config.props.clustering_small_file_ratio == 1.0
    old.upsert(pa.table({"id": [2]}, schema=schema))
    assert sorted(old.to_arrow().column("id").to_pylist()) == [1, 2]
    with pytest.raises(InvalidPropertyError, match="above the maximum"):
        Table.create(tmp_path / "new", schema, record_key="id", properties={"clean.retain": 2**70})
