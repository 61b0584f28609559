"""How the suite is split over pytest-xdist's workers (``-n 8 --dist loadgroup``, pyproject).

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

The order groups are handed out in: FIRST's, then the Spark examples, then the other files
longest first (by GROUP_SECONDS, measured; the files not in it by their number of tests),
tests/unit's last (quick, they even out the end), so the run does not end waiting on one
worker; a worker given work while it still has LONG_AHEAD seconds to run gets the queue's last
group (a short one) instead of its first. At most JVM_GROUPS_AT_ONCE groups that
start a JVM run at once; a worker asking for work meanwhile gets the next group that starts
none (unless only such groups are left).
With ``--dist`` other than ``loadgroup`` (``-n 0``, ``--dist load``), xdist's own scheduling
applies.

Eight workers, four of them busy while the JVMs run (WORKERS_WHILE_JVMS, JVM_TAIL): the first
minutes have three or four JVMs at once and both cores at 100%; more workers then only made
every test slower (with six busy from the start, tests with deadlines of milliseconds failed
and two Spark examples passed their 120 s guard). Once at most one group that starts a JVM is
left, the idle workers join: the tests that run then wait on servers, timers and other
processes, and with four workers the cores were 50-90% busy. On the 2-core machine (one run
each, same clone): four workers 414 s, six this way 370 s. With six, the last minute was
still many small files that mostly wait (module servers, timeouts, subprocesses) and the cores
were 35-70% busy; with eight they stayed 80-100% busy to the end: 359-363 s -> 339 s.
"""

from __future__ import annotations

import compileall
import functools
import os
import re
import sys
import sysconfig
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
# The groups that start a JVM of their own (with each Spark example, see starts_a_jvm): at most
# this many run at once (it matters with more than four workers). Four keep both cores busy;
# a fifth and sixth at once (six workers, no cap) made each JVM slower without making the run
# shorter.
JVM_GROUPS = (SPARK, SPARK_CLUSTER, SPARK_CONNECT)
JVM_GROUPS_AT_ONCE = 4
# While more than JVM_TAIL groups that start a JVM are left (queued or running), only
# WORKERS_WHILE_JVMS workers have work; the others wait, idle, and join when the JVMs are
# nearly all done. See the module docstring: the JVMs keep both cores busy, and more workers
# then only made every test slower.
WORKERS_WHILE_JVMS = 4
JVM_TAIL = 1

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


def starts_a_jvm(group: str) -> bool:
    """Whether the group starts a JVM (Spark) of its own: see JVM_GROUPS_AT_ONCE."""
    return group in JVM_GROUPS or group.startswith(SPARK_EXAMPLE)


# How long the groups that take longest for their number of tests ran (the middle of four runs
# of the whole suite with six workers on the 2-core machine, seconds from their first test's
# start to their last test's end). Only the hand-out uses it, twice:
# - the order: handed out by their number of tests, the fault table's 17 tests (86 s) and the
#   docs' 6 and 6 (which wait on one Sphinx build, ~60 s) went out 250-280 s into a run of
#   375 s, and the run ended with one worker busy for 15 s while the others had nothing left;
# - which group a busy worker is given: xdist gives a worker its next group while it still has
#   up to two tests to run (a worker runs a test only once it knows the next one), so a group
#   given to a worker starting a 35 s Spark example waited those 35 s while other workers went
#   idle (the usage matrix, 59 s, started ~60 s late, and the run's last 50 s used a quarter
#   to a half of the cores). A worker with
#   LONG_AHEAD seconds or more still to run is given the queue's last group instead, a short one.
# A file missing here or grown since is only handed out by its number of tests, as before.
GROUP_SECONDS: Dict[str, float] = {
    SPARK: 210,
    SPARK_CLUSTER: 170,
    NATSPY: 170,
    SPARK_CONNECT: 55,
    SPARK_EXAMPLE + "otel_pipeline.py": 46,
    SPARK_EXAMPLE + "spark_connect.py": 40,
    SPARK_EXAMPLE + "spark_pipeline.py": 36,
    SPARK_EXAMPLE + "pcgroups_spark.py": 25,
    "tests/integration/test_fault_proxy.py": 86,
    "tests/docs/test_api_reference.py": 68,
    "tests/docs/test_browser.py": 61,
    "tests/integration/test_usage_matrix.py": 59,
    "tests/integration/test_cluster.py": 53,
    "tests/test_examples.py": 43,
    "tests/integration/test_capability_faults.py": 39,
    "tests/integration/test_worker_pool.py": 38,
    "tests/otel/test_otel_judge.py": 36,
    "tests/integration/test_pcgroups_cluster.py": 35,
    "tests/interop/test_natsjs.py": 28,
    "tests/integration/test_consumer_late.py": 26,
    "tests/integration/test_pull.py": 25,
    "tests/integration/test_kv.py": 20,
    "tests/integration/test_pcgroups_judge.py": 19,
    "tests/integration/test_push.py": 18,
    "tests/integration/test_pcgroups_processes.py": 15,
    "tests/docs/test_code_blocks.py": 10,
    "tests/unit/test_js_api.py": 19,
    "tests/unit/test_protocol_properties.py": 15,
    "tests/unit/test_hostile_parser.py": 13,
}


LONG_AHEAD = 10.0
TEST_SECONDS = 0.5  # a test of a group not in GROUP_SECONDS (most take less)


def seconds_per_test(group: str, tests: int) -> float:
    """A test's share of its group's measured seconds (TEST_SECONDS when not measured)."""
    known = GROUP_SECONDS.get(group)
    return TEST_SECONDS if known is None else known / max(1, tests)


def _weight(unit: Tuple[str, Dict[str, bool]]) -> Tuple[bool, float, int]:
    """Sort key of a group within its rank (FIRST's, the Spark examples', the rest's):
    tests/unit's last, then the longest (GROUP_SECONDS) first, then the most tests first."""
    group, tests = unit
    return group.startswith("tests/unit/"), -GROUP_SECONDS.get(group, 0.0), -len(tests)


def pytest_configure(config: Any) -> None:
    """Once, in the process that starts the workers, work each worker would do again:

    - the package's bytecode, when Python is told not to write it (PYTHONDONTWRITEBYTECODE, as
      on the machines this project runs on). The package is installed editable, so its .pyc
      files are written on first import, or never with that setting: then each of the run's
      processes that imports it (the workers, each Spark Python worker, each example and
      helper program: several hundred) compiled its 29,000 lines again, about 0.17 s of CPU
      each. Python reads .pyc files it was told not to write, so they are written here once,
      where Python would have put them itself;
    - with that setting, the bytecode of the virtual environment's packages too (see
      _compile_venv);
    - the test files with their asserts rewritten (see _rewrite_test_files)."""
    if hasattr(config, "workerinput") or config.getoption("collectonly", False):
        return
    if sys.flags.dont_write_bytecode:
        compileall.compile_dir(str(ROOT / "jetstream_sync"), quiet=1)
        _compile_venv()
    if config.getoption("numprocesses", None) and config.getoption("assertmode") == "rewrite":
        _rewrite_test_files(config)


def _compile_venv() -> None:
    """The bytecode of the packages in the virtual environment, on every core, where it is missing.

    The README's test command installs with ``pip install --no-compile`` (pip compiles the test
    extra's ~7,900 modules on one core: 20 s of the command's wall time), counting on Python to
    write the bytecode of the modules the run imports. With PYTHONDONTWRITEBYTECODE set, Python
    never does: every process of the run (the xdist workers, ~130 Spark planner processes, ~60
    Spark Python workers, each example, the docs build) compiled pyspark's, pyarrow's and
    pandas' modules again. On the 2-core machine the same run took 943 CPU-s on a fresh clone
    and 727 CPU-s in a clone whose environment had its bytecode. Compiling it all here, on both
    cores, takes 13 s of the run's wall time (24 CPU-s, measured alone); a later run finds it
    there and spends about 3 s reading the 7,900 modules' headers.

    Only inside a virtual environment (``sys.prefix != sys.base_prefix``, as the README's
    command makes): nothing outside it is written."""
    if sys.prefix == sys.base_prefix:
        return
    for path in sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")}):
        # quiet=2: a package may ship a file on purpose that does not compile (a template, a
        # Python 2 example); Python never imports those, and they are no error of this run's
        compileall.compile_dir(path, quiet=2, workers=0)


def _rewrite_test_files(config: Any) -> None:
    """Rewrite the asserts of every test file and conftest once, into the cache pytest reads.

    Every xdist worker imports every test file to collect it, and pytest rewrites each file's
    asserts as it imports it: 4-5 s of CPU per worker for the suite's 140 test files, all at once
    as the run starts, once per worker. pytest caches a rewritten file (``__pycache__/*-pytest-*
    .pyc``) and reads that cache even where it does not write it; but on a fresh clone the
    workers all start with no cache, and with PYTHONDONTWRITEBYTECODE none is ever written.
    So it is written here, before the workers start, by one process per core: collection then
    takes a worker 3 s instead of 7-8 s (the first test ran 11 s into the run instead of 21 s).

    This uses pytest's own rewriting functions, which are private: if they are missing or
    fail, the workers rewrite the files themselves as before (slower, nothing else changes)."""
    try:
        from _pytest.assertion import rewrite
    except ImportError:
        return
    if not hasattr(os, "fork"):
        return
    files = sorted(
        str(path)
        for path in (ROOT / "tests").rglob("*.py")
        if path.name.startswith("test_") or path.name == "conftest.py"
    )

    def rewrite_file(name: str) -> None:
        source = Path(name)
        pyc = rewrite.get_cache_dir(source) / (source.name[:-3] + rewrite.PYC_TAIL)
        if rewrite._read_pyc(source, pyc) is not None:  # cached already, and current
            return
        pyc.parent.mkdir(parents=True, exist_ok=True)
        source_hash, code = rewrite._rewrite_test(source, config)
        rewrite._write_pyc(_QuietState(), code, source_hash, pyc)

    try:
        cores = len(os.sched_getaffinity(0))  # the cores this process may use
    except AttributeError:
        cores = os.cpu_count() or 1
    children = []
    for i in range(cores):
        pid = os.fork()
        if pid == 0:  # a child: its share of the files, then out without pytest's teardown
            try:
                for name in files[i::cores]:
                    try:
                        rewrite_file(name)
                    except Exception:
                        pass  # a worker rewrites this one itself, as before
            finally:
                os._exit(0)
        children.append(pid)
    for pid in children:
        os.waitpid(pid, 0)


class _QuietState:
    """Stands in for pytest's AssertionState, which _write_pyc only uses to trace errors."""

    def trace(self, *args: Any) -> None:
        pass


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
                # Once, before the first unit goes out: FIRST's groups, the Spark examples,
                # then the files that start servers, longest first, then tests/unit's
                # (no servers, quick: they fill the end of the run evenly).
                self._ordered = True
                units = list(self.workqueue.items())
                rank = {name: i for i, name in enumerate(FIRST)}

                def order(unit: Tuple[str, Dict[str, bool]]) -> Tuple[int, bool, float, int]:
                    if unit[0].startswith(SPARK_EXAMPLE):  # a JVM each: right after FIRST
                        return (len(FIRST), *_weight(unit))
                    return (rank.get(unit[0], len(FIRST) + 1), *_weight(unit))

                units.sort(key=order)
                self.workqueue.clear()
                self.workqueue.update(units)
            if not self._may_take_work(node):
                return
            # LoadScopeScheduling._assign_work_unit, with the group picked by _next_group
            # instead of the queue's first
            group = self._next_group(node)
            work_unit = self.workqueue.pop(group)
            self.assigned_work.setdefault(node, {})[group] = work_unit
            collection = self.registered_collections[node]
            node.send_runtest_some(
                [collection.index(nodeid) for nodeid, done in work_unit.items() if not done]
            )

        def _reschedule(self, node: Any) -> None:
            super()._reschedule(node)
            # Workers kept idle while the JVMs ran join as soon as they may (or, with the
            # queue empty, are shut down: a worker nobody asks again must be told).
            for other in self.nodes:
                if other is node or other not in self.registered_collections:
                    continue  # (a worker that replaces a crashed one, still collecting: its
                    # collection's arrival schedules it, as xdist does)
                idle = not self._pending_of(self.assigned_work.get(other, {}))
                if idle and self._may_take_work(other):
                    super()._reschedule(other)

        def _may_take_work(self, node: Any) -> bool:
            """False for an idle worker while the JVM groups need the cores (see
            WORKERS_WHILE_JVMS): it stays idle, and _reschedule asks again later."""
            if not self.workqueue or self._pending_of(self.assigned_work.get(node, {})):
                return True  # nothing to hold back, or a busy worker's next group
            groups = [*self.workqueue] + [
                group
                for units in self.assigned_work.values()
                for group, work in units.items()
                if not all(work.values())
            ]
            if sum(1 for group in groups if starts_a_jvm(group)) <= JVM_TAIL:
                return True
            busy = sum(1 for units in self.assigned_work.values() if self._pending_of(units))
            return busy < WORKERS_WHILE_JVMS

        def _next_group(self, node: Any) -> str:
            """The first group in the queue (the last, a short one, for a worker with
            LONG_AHEAD seconds still to run), passing over those that start a JVM while
            JVM_GROUPS_AT_ONCE of them run (handed out and not all done)."""
            running = sum(
                1
                for units in self.assigned_work.values()
                for group, work in units.items()
                if starts_a_jvm(group) and not all(work.values())
            )
            eligible = [
                group
                for group in self.workqueue
                if running < JVM_GROUPS_AT_ONCE or not starts_a_jvm(group)
            ]
            if not eligible:
                return next(iter(self.workqueue))  # nothing but JVM groups left
            return eligible[-1] if self._ahead(node) >= LONG_AHEAD else eligible[0]

        def _ahead(self, node: Any) -> float:
            """The estimated seconds of the tests the worker has still to run."""
            return sum(
                seconds_per_test(group, len(work)) * list(work.values()).count(False)
                for group, work in self.assigned_work.get(node, {}).items()
            )

    return GroupScheduling(config, log)
