"""TableProperties, the typed view of the table properties, kept in step with defaults.toml.

``defaults.toml`` is the source of truth: a property added there without a field here (or
with a field of another type) would be validated but unreadable in typed form, so the
fields and the TOML are compared key by key.
"""

from __future__ import annotations

import pickle
import tomllib
import typing
from dataclasses import FrozenInstanceError, fields
from pathlib import Path

import pyarrow as pa
import pytest
from lakeline.config import PropertyProblem, TableProperties, resolve
from lakeline.config.table_properties import field_name
from lakeline.timeline.errors import InvalidPropertyError
from lakeline.timeline.table_config import TableConfig

DEFAULTS = tomllib.loads((Path(__file__).resolve().parents[2] / "config" / "defaults.toml").read_text())


def test_fields_are_exactly_the_documented_keys() -> None:
    names = [f.name for f in fields(TableProperties)]
    assert names == [field_name(k) for k in DEFAULTS] + ["merge_aggregates", "user"]


@pytest.mark.parametrize("key", list(DEFAULTS))
def test_field_type_matches_the_default(key: str) -> None:
    hint = typing.get_type_hints(TableProperties)[field_name(key)]
    entry = DEFAULTS[key]
    default = entry["default"]
    if typing.get_origin(hint) is typing.Literal:
        assert set(typing.get_args(hint)) == set(entry["choices"]), "the Literal lists the TOML's choices"
        assert all(type(a) is type(default) for a in typing.get_args(hint))
        assert default in typing.get_args(hint)
    else:
        assert "choices" not in entry, f"{key} has choices: its field should be a Literal of them"
        assert hint is type(default)


def test_defaults_and_user_keys() -> None:
    p = TableProperties.resolve({"commit.max-retries": "7", "user.owner": "me"})
    assert p.commit_max_retries == 7
    assert p.write_target_file_size_bytes == DEFAULTS["write.target-file-size-bytes"]["default"]
    assert p.compaction_log_ratio == 0.5 and p.write_insert_key_check is True
    assert dict(p.user) == {"user.owner": "me"}
    with pytest.raises(TypeError):
        p.user["user.x"] = 1  # type: ignore[index]
    with pytest.raises(FrozenInstanceError):
        p.commit_max_retries = 1  # type: ignore[misc]


def test_to_dict_is_what_resolve_returns() -> None:
    user = {"clean.policy": "keep_latest_hours", "user.a": [1, 2]}
    p = TableProperties.resolve(user)
    assert p.to_dict() == resolve(user)
    assert TableProperties.from_resolved(p.to_dict()) == p


def test_pickles() -> None:
    p = TableProperties.resolve({"user.a": "b", "engine.parallelism": 3})
    assert pickle.loads(pickle.dumps(p)) == p


@pytest.mark.parametrize(
    "user, needle",
    [
        ({"write.target-file-size-byte": 1}, "unknown table property"),
        ({"commit.max-retries": "x"}, "is not a valid int"),
        ({"clean.policy": "keep_all"}, "is not one of"),
    ],
)
def test_invalid_properties_raise_as_before(user: dict, needle: str) -> None:
    with pytest.raises(PropertyProblem, match=needle):
        TableProperties.resolve(user)


def test_table_config_props() -> None:
    cfg = TableConfig.build(
        pa.schema([("id", pa.int64())]), "id", None, None, "cow", {"heartbeat.interval-ms": 50}, "u"
    )
    assert cfg.props is cfg.props  # cached
    assert cfg.props.heartbeat_interval_ms == 50
    assert cfg.to_dict()["properties"] == {"heartbeat.interval-ms": 50}  # on disk: only what was set
    assert pickle.loads(pickle.dumps(cfg)).props == cfg.props
    raw = cfg.to_dict()
    raw["properties"] = {"no.such-key": 1}
    with pytest.raises(InvalidPropertyError, match="unknown table property"):
        TableConfig.from_dict(raw)
