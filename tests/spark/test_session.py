"""The session lakeline builds: loopback, the driver's Python, the data source registered."""

from __future__ import annotations

import sys
from typing import Any


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
