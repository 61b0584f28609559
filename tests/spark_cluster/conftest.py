"""A real Spark standalone cluster for the ``jetstream`` data source (issue 18, 2).

A master and two workers (one core, 1 GiB each) started from the pyspark package as separate
processes on loopback, a driver in this process with one executor on each worker, and a
nats-server. ``local[*]`` runs every task in one JVM and never showed that a retried write
task after a shuffle reads its rows in another order; here a retry really moves to the other
executor (JVM, Python workers, shuffle blocks fetched in another order).

Package-scoped: everything is stopped after the last test of this directory, and every
process of the cluster is killed even when a test fails (see _cluster.SparkCluster.stop).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator, List

import pytest

pytest.importorskip(
    "pyspark",
    reason="pyspark is not installed: install the test extra (pip install -e '.[test]')",
)
pytest.importorskip("pyarrow", reason="pyarrow is not installed: install the test extra")

from pyspark import cloudpickle

from jetstream_sync.server import NATSServer

from . import _executor
from ._cluster import Sessions, SparkCluster, java_missing

# The executors cannot import the tests: ship the executor-side helpers by value.
cloudpickle.register_pickle_by_value(_executor)

# Setting speculation needs another SparkContext: those tests run last, so the session is
# made twice, not once per switch.
_LAST = ("test_speculation.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    here = Path(__file__).parent
    ours = [i for i in items if here in i.path.parents]
    if not ours:
        return
    first = items.index(ours[0])
    rest = [i for i in items if i not in ours]
    ordered = sorted(ours, key=lambda i: i.path.name in _LAST)  # stable
    items[:] = rest[:first] + ordered + rest[first:]


@pytest.fixture(scope="package")
def cluster_nats() -> Iterator[NATSServer]:
    with NATSServer(jetstream=True) as srv:
        yield srv


@pytest.fixture(scope="package")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    why = java_missing()
    if why:
        pytest.skip(f"the Spark cluster tests need Java 17+: {why}")
    with SparkCluster(tmp_path_factory.mktemp("spark-cluster")) as c:
        yield c


@pytest.fixture(scope="package")
def sessions(cluster: SparkCluster, cluster_nats: NATSServer) -> Iterator[Sessions]:
    s = Sessions(cluster)
    try:
        yield s
    finally:
        s.stop()  # before the cluster and the server go


@pytest.fixture
def spark(sessions: Sessions) -> Any:
    return sessions.healthy()


@pytest.fixture
def marks(tmp_path: Path) -> Path:
    """A directory the executors write their marks in (same machine, so shared)."""
    path = tmp_path / "marks"
    path.mkdir()
    os.chmod(path, 0o777)
    return path
