"""A table on S3 read or written from Spark with no endpoint or credentials configured
says which option is missing (issue 46, item 6): ``lakeline.spark.read`` and ``write``
and the data source alike, at once and without any network (the options' check runs
before a request; ``AWS_EC2_METADATA_DISABLED`` keeps obstore from the instance metadata
service). Before, ``read`` raised ``StoragePermissionError ... 169.254.169.254 ... 403``.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from lakeline.spark import read, write
from lakeline.timeline.errors import StorageConfigError

#: A port nothing listens on: a request there would be refused, not answered.
NOWHERE = "http://127.0.0.1:9"


@pytest.fixture(autouse=True)
def nothing_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def test_spark_entry_points_name_the_missing_options(spark: Any) -> None:
    t0 = time.monotonic()
    with pytest.raises(StorageConfigError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.*AWS_ENDPOINT_URL"):
        read(spark, "s3://lake/t")
    df = spark.createDataFrame([(1, "a")], "id long, v string")
    with pytest.raises(StorageConfigError, match=f"no credentials for the store at {NOWHERE}"):
        write(df, "s3://lake/t", "insert", storage_options={"AWS_ENDPOINT_URL": NOWHERE})
    # The data source opens the table in a Python worker of its own; the option names the
    # endpoint, so the refusal does not depend on that worker's environment.
    with pytest.raises(StorageConfigError, match="AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"):
        spark.read.format("lakeline").option("AWS_ENDPOINT_URL", NOWHERE).load("s3://lake/t").collect()
    assert time.monotonic() - t0 < 30
