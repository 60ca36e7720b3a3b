"""A real Spark for the Spark tests: one ``local[2]`` session per test run, and one
standalone cluster per test run for the tests whose drivers run in child processes.

The cluster is shared because its three JVMs take 10-20 s to come up on a loaded
2-core machine, and each test's driver is its own Spark application on it (executors,
their Python workers and the tables are the application's own), so a test sees nothing
of another's run but the master's and workers' logs.

Every test in this folder is marked ``spark``. Without Java or pyspark a developer run
skips them saying why; under ``CI=true`` that fails the run instead (docs/design.md,
"How it is checked": a CI run that silently skipped Spark would prove nothing about it).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.ci import under_ci
from tests.seaweedfs import SeaweedServer
from tests.spark.cluster import Cluster, run_cluster_app


def spark_missing() -> str | None:
    """Why Spark cannot run here, or None."""
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return "no Java (install a JDK 17, e.g. `apt-get install openjdk-17-jre-headless`)"
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (`pip install lakeline[spark]`)"
    return None


def pytest_collection_modifyitems(config: Any, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def spark_available() -> None:
    """Java and pyspark are here (tests whose Spark applications run in child processes)."""
    problem = spark_missing()
    if problem is not None:
        if under_ci():
            pytest.fail(f"Spark tests cannot run under CI=true: {problem}", pytrace=False)
        pytest.skip(problem)


@pytest.fixture(scope="session")
def spark(spark_available: None) -> Iterator[Any]:
    """A ``local[2]`` SparkSession with the lakeline data source registered."""
    from lakeline.spark import session

    s = session("local[2]", "lakeline-tests")
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="session")
def cluster(spark_available: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A standalone cluster (a master and two one-core workers) for the whole run."""
    c = Cluster(tmp_path_factory.mktemp("spark-cluster")).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def cluster_app(cluster: Cluster, s3: SeaweedServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The one application every cluster test reads its part of (:func:`run_cluster_app`)."""
    return run_cluster_app(cluster, s3, tmp_path_factory.mktemp("cluster-app"))
