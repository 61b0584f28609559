"""Spark tests: one local SparkSession (``local[2,4]``: two cores, a failed task is retried
up to 4 times) and one monitored nats-server for the whole directory."""

from __future__ import annotations

import os
import sys
import uuid
from typing import Any, Callable, Iterator, List, Optional

import pytest

pytest.importorskip(
    "pyspark",
    reason="pyspark is not installed: install the test extra (pip install -e '.[test]'), "
    "which includes pyspark, pyarrow and pandas, to run the Spark tests",
)
pytest.importorskip("pyarrow", reason="pyarrow is not installed: install the test extra")

import jetstream_sync as nats
from jetstream_sync.server import NATSServer


@pytest.fixture(scope="session")
def spark_nats() -> Iterator[NATSServer]:
    """A JetStream server with the monitoring endpoint (for /connz), and one file stream that
    is never deleted: nats-server 2.15.1 removes the account's store directory
    (``<store>/jetstream/$G``) when a memory stream is deleted while no file stream is left,
    and a file stream made meanwhile fails with "could not create storage directory ... no
    such file or directory" (err_code 10077)."""
    with NATSServer(jetstream=True, monitoring=True) as srv:
        with nats.connect(srv.url, name="keep-store-dir") as nc:
            nc.jetstream().add_stream(name="KEEP_STORE_DIR", subjects=["keep-store-dir"])
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


@pytest.fixture(scope="module")
def nc(spark_nats: NATSServer) -> Iterator[nats.Client]:
    """A client of the module's own (tests without Spark: the reader and the publisher)."""
    with nats.connect(spark_nats.url, name="spark-tests") as client:
        yield client


@pytest.fixture
def js(nc: nats.Client) -> Any:
    return nc.jetstream()


@pytest.fixture
def new_stream(js: Any) -> Iterator[Callable[..., str]]:
    """Makes streams (unique names unless given) capturing ``<lowercase name>.>``, memory
    storage unless told; deleted afterwards."""
    made: List[str] = []

    def make(
        storage: str = "memory",
        allow_direct: bool = False,
        name: Optional[str] = None,
        **config: Any,
    ) -> str:
        name = name or f"T_{uuid.uuid4().hex[:10].upper()}"
        js.add_stream(
            name=name,
            subjects=[f"{name.lower()}.>"],
            storage=storage,
            allow_direct=allow_direct,
            **config,
        )
        made.append(name)
        return name

    yield make
    for name in made:
        try:
            js.delete_stream(name)
        except nats.NATSError:
            pass
