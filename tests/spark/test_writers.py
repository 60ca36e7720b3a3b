"""Spark applications and plain Python processes writing one table at once.

Two Spark applications (each its own driver process, ``local[1]``) and two plain-Python
writer processes upsert and delete a shared key space concurrently. The final table must
equal the completion-order model of tests/table/concurrency/test_concurrency.py, with no key twice,
nothing pending and no file of a rolled-back attempt left: the Spark writer goes through
the same commit protocol, conflict rules and key check as every other writer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.table.concurrency.test_concurrency import check_against_model, run_workers


@pytest.mark.parametrize("table_type", ["mor", pytest.param("cow", marks=pytest.mark.soak)])
def test_two_spark_applications_and_two_processes_match_the_model(
    spark_available: None, tmp_path: Path, table_type: str
) -> None:
    spark_worker = {"spark": True, "max_rows": 6}
    python_worker = {"pause_s": 0.4, "max_rows": 6}
    t, records = run_workers(
        tmp_path,
        table_type,
        None,
        workers=4,
        commits=[4, 4, 12, 12],
        options=[spark_worker, spark_worker, python_worker, python_worker],
        keys=256,
        timeout=300,
    )
    counts = check_against_model(t, records)
    by_spark = [r for r in records if r["worker"] < 2 and r["outcome"] == "committed"]
    assert len(by_spark) >= 3, f"the Spark applications committed too little to prove anything: {dict(counts)}"
    print(f"{table_type}: {dict(counts)}")
