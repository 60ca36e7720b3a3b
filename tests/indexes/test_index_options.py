"""Index create refuses a bad request before anything is written (issue 25, audit B4b,
B4c, B4d), and binary keys of any bytes work with both index kinds (audit D2g).

A refusal must leave the table as it was: no ``indexing`` instant on the timeline and
no metadata-table folder, in Python, through ``services.schedule`` and through
``lakeline index create`` (exit 2, one line). Binary keys that are not UTF-8 used to
fail every write once a bloom filter existed (``ArrowInvalid`` after files were
written); they must now write, build, prune and validate like any other key.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner
from lakeline.cli.main import cli
from lakeline.indexes.hashing import BINARY_HEX_TAG, binary_bound_text, binary_bound_value, min_max_text
from lakeline.table import Table
from lakeline.timeline.errors import IndexBuildError, InvalidIndexError, InvalidIndexOptionsError

SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.int64()), ("v", pa.string())])


@pytest.fixture
def table(tmp_path: Path) -> Table:
    t = Table.create(tmp_path / "t", SCHEMA, record_key="id")
    t.upsert(pa.table({"id": [1, 2], "ts": [1, 1], "v": ["a", "b"]}, schema=SCHEMA))
    return t


def _state(t: Table) -> tuple[list[tuple[int, str, str]], bool]:
    """Every instant (id, action, state) and whether a metadata-table folder exists."""
    tl = t.log.refresh()
    instants = [(i.id, str(i.action), str(i.state)) for i in tl.completed() + tl.pending()]
    return sorted(instants), (Path(t.path) / ".lakeline" / "metadata").exists()


BAD_OPTIONS: list[tuple[str, dict[str, Any], type[InvalidIndexError]]] = [
    ("fpp0", {"options": {"fpp": 0}}, InvalidIndexOptionsError),  # B4c
    ("fpp1", {"options": {"fpp": 1}}, InvalidIndexOptionsError),
    ("fpp5", {"options": {"fpp": 5}}, InvalidIndexOptionsError),  # B4b
    ("fppneg", {"options": {"fpp": -0.1}}, InvalidIndexOptionsError),
    ("fppnan", {"options": {"fpp": math.nan}}, InvalidIndexOptionsError),
    ("fppinf", {"options": {"fpp": math.inf}}, InvalidIndexOptionsError),
    ("fpptrue", {"options": {"fpp": True}}, InvalidIndexOptionsError),
    ("fppstr", {"options": {"fpp": "0.1"}}, InvalidIndexOptionsError),
    ("fpptiny", {"options": {"fpp": 1e-300}}, InvalidIndexOptionsError),
    ("unknown", {"options": {"zzz": 1}}, InvalidIndexOptionsError),  # B4b
    ("notdict", {"options": [("fpp", 0.1)]}, InvalidIndexOptionsError),
    ("dupcols", {"columns": ["v", "v"]}, InvalidIndexError),  # B4b
    ("strcols", {"columns": "v"}, InvalidIndexError),
    ("emptycol", {"columns": [""]}, InvalidIndexError),
    ("nul", {"name": "a\x00b"}, InvalidIndexError),  # B4d
    ("long", {"name": "x" * 300}, InvalidIndexError),  # B4d
    ("empty", {"name": ""}, InvalidIndexError),
    ("slash", {"name": "a/b"}, InvalidIndexError),
    ("dots", {"name": ".."}, InvalidIndexError),
    ("at", {"name": "a@1"}, InvalidIndexError),
    ("space", {"name": "a b"}, InvalidIndexError),
    ("nonstr", {"name": 5}, InvalidIndexError),
]


@pytest.mark.parametrize(("case", "kwargs", "error"), BAD_OPTIONS, ids=[c[0] for c in BAD_OPTIONS])
def test_bad_bloom_request_is_refused_before_the_instant(
    table: Table, case: str, kwargs: dict[str, Any], error: type[InvalidIndexError]
) -> None:
    before = _state(table)
    with pytest.raises(error):
        table.indexes.create("bloom_filters", **kwargs)
    # The scheduling path of the runner and `index create --no-wait` refuses the same.
    with pytest.raises(error):
        table.services.schedule(
            "indexing",
            op="create",
            index=kwargs.get("name", "bloom_filters"),
            kind="bloom_filters",
            columns=kwargs.get("columns"),
            options=kwargs.get("options"),
        )
    assert _state(table) == before
    assert before[1] is False
    assert table.indexes.list() == []


def test_column_stats_takes_no_options_and_unknown_kinds_are_refused(table: Table) -> None:
    before = _state(table)
    with pytest.raises(InvalidIndexOptionsError, match="known: none"):
        table.indexes.create("column_stats", columns=["ts"], options={"fpp": 0.1})
    with pytest.raises(InvalidIndexError, match="unknown index kind"):
        table.indexes.create("hash")
    with pytest.raises(InvalidIndexError, match="columns named twice"):
        table.indexes.create("column_stats", columns=["ts", "v", "ts"])
    assert _state(table) == before


def test_unknown_option_message_lists_the_known_ones(table: Table) -> None:
    with pytest.raises(InvalidIndexOptionsError, match=r"unknown options \['zzz'\].*known: fpp"):
        table.indexes.create("bloom_filters", options={"zzz": 1, "fpp": 0.1})


@pytest.mark.parametrize("name", ["bf", "bloom_s", "torture_stats", "a-b_C9", "x" * 100])
def test_good_names_and_fpps_are_built(table: Table, name: str) -> None:
    idx = table.indexes.create("bloom_filters", name=name, options={"fpp": 1e-6})
    assert (idx.name, idx.state, dict(idx.options)) == (name, "ready", {"fpp": 1e-6})
    assert table.indexes.validate()["mismatches"] == []


def test_an_int_like_fpp_is_stored_as_a_float(table: Table) -> None:
    import numpy as np

    idx = table.indexes.create("bloom_filters", options={"fpp": np.float32(0.25)})
    assert isinstance(idx.options["fpp"], float) and idx.options["fpp"] == pytest.approx(0.25)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--fpp", "0"], "InvalidIndexOptionsError"),
        (["--fpp", "5"], "InvalidIndexOptionsError"),
        (["--fpp", "nan"], "InvalidIndexOptionsError"),
        (["--columns", "v,v"], "InvalidIndexError"),
        (["--name", "a b"], "InvalidIndexError"),
        (["--name", "y" * 300], "InvalidIndexError"),
        (["--name", "a b", "--no-wait"], "InvalidIndexError"),
        (["--fpp", "0", "--no-wait"], "InvalidIndexOptionsError"),
    ],
)
def test_cli_refuses_what_python_refuses(table: Table, args: list[str], error: str) -> None:
    before = _state(table)
    res = CliRunner().invoke(cli, ["index", "create", table.path, "bloom_filters", *args])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and f"[{error}]" in lines[0], res.stderr
    assert _state(table) == before


# --- D2g: binary keys of any bytes ----------------------------------------------------

NASTY = [b"\xff\xfe", b"", b"\x00", b"a\x00b", b"\x80", "é".encode(), b"plain", BINARY_HEX_TAG.encode() + b"ab"]


def test_binary_bound_text_round_trips_and_keeps_utf8_text() -> None:
    for raw in NASTY:
        assert binary_bound_value(binary_bound_text(raw)) == raw
    assert binary_bound_text(b"abc") == "abc"  # what entries written before hold
    assert binary_bound_text(b"\xff").startswith(BINARY_HEX_TAG)
    assert min_max_text(pa.array([b"\xff\xfe", b"a", None])) == ("a", BINARY_HEX_TAG + "fffe")
    assert min_max_text(pa.array([b"b\x00", b"ab"], pa.binary(2))) == ("ab", "b\x00")
    assert min_max_text(pa.array(["b", "a"])) == ("a", "b")  # strings as before


@pytest.mark.parametrize("typ", [pa.binary(), pa.large_binary()], ids=str)
def test_binary_keys_write_build_prune_and_validate(tmp_path: Path, typ: pa.DataType) -> None:
    # audit Appendix A repro_binary.py, then every index kind over such data.
    s = pa.schema([("k", typ), ("v", pa.int64())])
    t = Table.create(tmp_path / "t", s, record_key="k", table_type="mor")
    t.upsert(pa.table({"k": [b"abc"], "v": [0]}, schema=s))
    t.indexes.create("bloom_filters")
    t.upsert(pa.table({"k": NASTY, "v": list(range(1, len(NASTY) + 1))}, schema=s))
    t.indexes.create("column_stats")  # built over the existing non-UTF-8 data
    t.upsert(pa.table({"k": [b"\xfe\xff"], "v": [99]}, schema=s))
    for i, key in enumerate(NASTY, start=1):
        got = t.to_arrow(filter=pc.field("k") == pa.scalar(key, typ)).to_pylist()
        assert got == [{"k": key, "v": i}], key
    t.delete(pa.table({"k": [b"\xff\xfe"]}, schema=pa.schema([("k", typ)])))
    assert t.to_arrow(filter=pc.field("k") == pa.scalar(b"\xff\xfe", typ)).num_rows == 0
    t.services.compact()
    report = t.indexes.validate()
    assert report["mismatches"] == [] and report["files_checked"] > 0


def test_binary_parts_of_a_composite_key_and_fixed_size_binary(tmp_path: Path) -> None:
    s = pa.schema([("a", pa.binary(2)), ("b", pa.binary()), ("n", pa.int64())])
    t = Table.create(tmp_path / "t", s, record_key=["a", "b"])
    t.upsert(pa.table({"a": [b"\xff\xfe"], "b": [b"\xff"], "n": [1]}, schema=s))
    t.indexes.create("bloom_filters")
    t.indexes.create("column_stats")
    t.upsert(pa.table({"a": [b"\xff\xff", b"ok"], "b": [b"\xfe", b""], "n": [2, 3]}, schema=s))
    assert t.to_arrow(filter=pc.field("b") == pa.scalar(b"\xfe")).column("n").to_pylist() == [2]
    assert t.indexes.validate()["mismatches"] == []


def test_a_build_arrow_cannot_compute_is_an_index_build_error(table: Table, monkeypatch: pytest.MonkeyPatch) -> None:
    import lakeline.indexes.build as build

    def broken(task: Any) -> pa.Table:
        raise pa.ArrowInvalid("Invalid UTF8 payload")

    monkeypatch.setattr(build, "build_task", broken)
    with pytest.raises(IndexBuildError, match="cannot be computed"):
        table.indexes.create("column_stats")
    assert table.indexes.list() == []  # rolled back
