"""How the suite is split over pytest-xdist's workers (``-n 4 --dist loadgroup``, pyproject).

xdist sends a worker a whole *group* of tests at a time; the groups here are:

- every test file is a group of its own: module-scoped fixtures (servers, streams) are made
  once per file, as in a serial run;
- the tests that share the worker's SparkSession (tests/spark, but for test_spark_connect.py)
  are one group, ``spark``, so one worker makes that session and its JVM once. What starts a
  JVM of its own is a group of its own, handed out early beside it: tests/spark_cluster
  (``spark_cluster``: a standalone cluster, made once for the package),
  tests/spark/test_spark_connect.py (a Spark Connect server) and each example that imports
  pyspark or jetstream_sync.spark (tests/test_examples.py runs it in a process of its own).
  One group for all of them made the run as long as that one worker's ~13 minutes;
- nats-py's ported tests (tests/natspy) are one group, ``natspy``: they start nats-server on
  nats-py's fixed ports (4222-4225, 4555, 6223-6225, 8222-8225), so they must run one after
  the other. No other test binds a fixed port: their servers get theirs from the kernel
  (port 0 / ``-p -1``, the ephemeral range, 32768 and up here) or, in test_retry_connect,
  from just below that range (20768 and up), so the natspy group needs no lock beyond
  running on one worker.

The heavy groups (FIRST, then the Spark examples) are handed out first, then the other files
largest first, tests/unit's last (quick, they even out the end), so the run does not end
waiting on one worker. With ``--dist`` other than ``loadgroup`` (``-n 0``, ``--dist load``),
xdist's own scheduling applies.
"""

from __future__ import annotations

import compileall
import functools
import os
import re
import sys
from pathlib import Path
from typing import Any, Dict, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent

# Every JVM the suite starts (the shared SparkSession's, the standalone cluster's master, workers
# and executors, the Spark Connect server's, each Spark example's) compiles with C1 alone and
# collects with the serial collector. They live seconds to minutes and do little work each, so
# C2's compiler threads and G1's concurrent threads were CPU spent for nothing: on the 2-core
# machine they took about a third of a short session's CPU (20 s -> 13 s for one start and two
# small jobs), and the run has three or four at once. Nothing a test checks depends on the JIT or
# the collector. JAVA_TOOL_OPTIONS reaches JVMs started by other programs (spark-submit,
# spark-class, a Spark worker starting an executor); each prints "Picked up JAVA_TOOL_OPTIONS"
# on its stderr. A value already set is left alone.
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
os.environ.setdefault("JAVA_TOOL_OPTIONS", JVM_OPTIONS)

SPARK = "spark"
SPARK_CLUSTER = "spark_cluster"
SPARK_CONNECT = "tests/spark/test_spark_connect.py"
NATSPY = "natspy"
SPARK_EXAMPLE = "spark example "  # + the example's file name: one group each
# handed out in this order, before every other group: the longest first, so that the run
# does not end waiting on one of them
FIRST = (SPARK, SPARK_CLUSTER, SPARK_CONNECT, NATSPY)

_EXAMPLE = re.compile(r"^tests/test_examples\.py::test_example_runs\[(?P<name>[^\]]+)\]$")
_SPARK_IMPORT = re.compile(
    r"^\s*(?:import pyspark|from pyspark|import jetstream_sync\.spark|from jetstream_sync\.spark"
    r"|from jetstream_sync import spark)",
    re.MULTILINE,
)


@functools.cache
def _example_needs_spark(name: str) -> bool:
    try:
        source = (ROOT / "examples" / name).read_text(encoding="utf-8")
    except OSError:
        return False
    return _SPARK_IMPORT.search(source) is not None


def group_of(nodeid: str) -> str:
    """The group of the test ``nodeid`` (relative to the rootdir, as xdist reports it)."""
    path = nodeid.split("::", 1)[0]
    if path == SPARK_CONNECT:
        return SPARK_CONNECT
    if path.startswith("tests/spark/"):
        return SPARK
    if path.startswith("tests/spark_cluster/"):
        return SPARK_CLUSTER
    if path.startswith("tests/natspy/"):
        return NATSPY
    example = _EXAMPLE.match(nodeid)
    if example is not None and _example_needs_spark(example.group("name")):
        return SPARK_EXAMPLE + example.group("name")
    return path


def _weight(unit: Tuple[str, Dict[str, bool]]) -> Tuple[bool, int]:
    group, tests = unit
    return group.startswith("tests/unit/"), -len(tests)


def pytest_configure(config: Any) -> None:
    """Once, in the process that starts the workers: the package's bytecode, when Python is
    told not to write it (PYTHONDONTWRITEBYTECODE, as on the machines this project runs on).

    The package is installed editable, so its .pyc files are written on first import, or never
    with that setting: then each of the run's processes that imports it (the workers, each
    Spark Python worker, each example and helper program: several hundred) compiled its
    29,000 lines again, about 0.17 s of CPU each. Python reads .pyc files it was told not to
    write, so they are written here once, where Python would have put them itself."""
    if sys.flags.dont_write_bytecode and not hasattr(config, "workerinput"):
        compileall.compile_dir(str(ROOT / "jetstream_sync"), quiet=1)


def pytest_xdist_make_scheduler(config: Any, log: Any) -> Optional[Any]:
    """xdist's hook: our group scheduler for ``--dist loadgroup``, xdist's own otherwise."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """LoadScopeScheduling with :func:`group_of` as the scope, heavy groups first."""

        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

        def _assign_work_unit(self, node: Any) -> None:
            if not self._ordered:
                # Once, before the first unit goes out: FIRST's groups, then the files that
                # start servers, largest first, then tests/unit's (no servers, quick: they
                # fill the end of the run evenly).
                self._ordered = True
                units = list(self.workqueue.items())
                rank = {name: i for i, name in enumerate(FIRST)}

                def order(unit: Tuple[str, Dict[str, bool]]) -> Tuple[int, bool, int]:
                    if unit[0].startswith(SPARK_EXAMPLE):  # a JVM each: right after FIRST
                        return (len(FIRST), *_weight(unit))
                    return (rank.get(unit[0], len(FIRST) + 1), *_weight(unit))

                units.sort(key=order)
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return GroupScheduling(config, log)
