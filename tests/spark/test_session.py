"""The session lakeline builds: loopback, the driver's Python, the data source registered,
and pyspark raising lakeline's errors as themselves."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
from lakeline.spark import create_table
from lakeline.spark.errors import install, typed_error
from lakeline.table import Table
from lakeline.timeline.errors import DuplicateKeyError


def test_session_runs_python_tasks_with_this_interpreter(spark: Any) -> None:
    def which(it: Any) -> Any:
        import sys as worker_sys

        import pyarrow as pa

        for _ in it:
            yield pa.RecordBatch.from_pydict({"exe": [worker_sys.executable]})

    rows = spark.range(4, numPartitions=2).mapInArrow(which, "exe string").collect()
    assert {r.exe for r in rows} == {sys.executable}
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.driver.host") == "127.0.0.1"
    assert conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"


COMMIT_FAILED = (
    "[PYTHON_DATA_SOURCE_ERROR] Failed to commit or abort Python data source write: Traceback (most recent "
    'call last):\n  File "/x/source_writer.py", line 113, in commit\n    self._commit(messages, None)\n'
    "lakeline.timeline.errors.DuplicateKeyError: insert carries 1 key(s) the table already holds\n"
    "and a second line of it\n SQLSTATE: 38000"
)


def test_typed_errors_are_rebuilt_from_sparks_text_and_installed_once(spark: Any) -> None:
    """The text Spark gives a data source's failure: the lakeline error's message ends
    where Spark's SQL state starts; a qualified match never takes another module's
    class of the same name. ``register`` installed the conversion, once."""
    e = typed_error(ValueError(COMMIT_FAILED), qualified=True)
    assert isinstance(e, DuplicateKeyError)
    assert str(e) == "insert carries 1 key(s) the table already holds\nand a second line of it"
    assert typed_error(ValueError("Traceback ...\nmine.DuplicateKeyError: not lakeline's"), qualified=True) is None
    from pyspark.errors.exceptions import captured

    installed = captured.convert_exception
    assert getattr(installed, "lakeline", False)
    install()
    assert captured.convert_exception is installed


def test_create_table_writes_the_schema_and_none_of_the_rows(spark: Any, tmp_path: Path) -> None:
    """docs/spark.md says what ``create_table(path, df)`` writes: the table, its schema
    from ``df.schema`` and one schema instant; none of ``df``'s rows."""
    df = spark.createDataFrame([(1, "a", 2.5), (2, "b", None)], "id long, v string, x double")
    t = create_table(str(tmp_path / "t"), df, record_key="id")
    assert t.config.schema.names == ["id", "v", "x"] and t.config.schema.field("x").type == pa.float64()
    assert [i.action.value for i in t.timeline.completed()] == ["schema"]
    assert Table.open(t.path).to_arrow().num_rows == 0
