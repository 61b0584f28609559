"""Spark tests: one local SparkSession (``local[2,4]``: two cores, a failed task is retried
up to 4 times) and one monitored nats-server for the whole directory."""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

import pytest

pytest.importorskip(
    "pyspark",
    reason="pyspark is not installed: install the test extra (pip install -e '.[test]'), "
    "which includes pyspark, pyarrow and pandas, to run the Spark tests",
)
pytest.importorskip("pyarrow", reason="pyarrow is not installed: install the test extra")

from jetstream_sync.server import NATSServer


@pytest.fixture(scope="session")
def spark_nats() -> Iterator[NATSServer]:
    """A JetStream server with the monitoring endpoint (for /connz)."""
    with NATSServer(jetstream=True, monitoring=True) as srv:
        yield srv


@pytest.fixture(scope="session")
def spark(spark_nats: NATSServer) -> Iterator[Any]:
    """The session; stopped before the server (its workers' clients would log the loss)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import jetstream_sync.spark

    session = (
        SparkSession.builder.master("local[2,4]")
        .appName("jetstream_sync-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    jetstream_sync.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
        jetstream_sync.spark.close_all()
