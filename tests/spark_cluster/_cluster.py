"""A Spark standalone cluster made of real processes, for tests and benchmarks.

One master and N workers, each a JVM started with the pyspark package's ``bin/spark-class``
in its own process group (so a worker, its executor JVM and the executor's Python workers can
be killed together). Everything listens on loopback: the master and worker 0 on 127.0.0.1,
worker ``i`` on ``127.0.0.<i + 1>`` — Spark never launches a speculative copy of a task on a
host that already runs an attempt of it, so with every worker on one address speculation
could not be tested. Ports are picked by binding to port 0; logs, work and conf directories
live under one temporary directory. :meth:`SparkCluster.stop` kills every process it started
or saw (process groups, then any descendant left), and is also registered with ``atexit``.

:class:`Sessions` makes the driver side: one SparkSession at a time on the cluster (a Python
process can hold one SparkContext), re-created when a test needs other settings.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Set, Union

__all__ = [
    "DEFAULT_CONF",
    "ClusterError",
    "Sessions",
    "SparkCluster",
    "descendants",
    "free_port",
    "java_missing",
    "wait_until",
]

START_TIMEOUT = 120.0  # a JVM on a busy 2-core machine can take 20 s; be generous
STOP_TIMEOUT = 15.0

# The driver's settings: two executors of one core, a task tried up to 4 times, and a task
# that failed on an executor retried on another one (excludeOnFailure).
DEFAULT_CONF: Dict[str, str] = {
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.executor.memory": "512m",
    "spark.task.maxFailures": "4",
    "spark.excludeOnFailure.enabled": "true",
    # ... but never for the whole application: failures the tests make on purpose (across
    # tests of one session) must not leave an executor without work or get it killed.
    "spark.excludeOnFailure.application.maxFailedTasksPerExecutor": "1000",
    "spark.excludeOnFailure.application.maxFailedExecutorsPerNode": "1000",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.python.worker.reuse": "true",
    "spark.locality.wait": "0s",  # no waiting for a preferred executor: tests stay short
}


class ClusterError(RuntimeError):
    pass


def java_missing() -> Optional[str]:
    """Why the cluster cannot start (no java), or None."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return None
    if shutil.which("java"):
        return None
    return "java is not installed (neither JAVA_HOME/bin/java nor java on PATH)"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_until(
    predicate: Callable[[], Any],
    what: Union[str, Callable[[], str]],
    timeout: float,
    every: float = 0.2,
) -> Any:
    """Poll ``predicate`` until it returns something true; fail naming ``what`` (or what it
    returns, asked at the deadline) at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            said = what if isinstance(what, str) else what()
            raise ClusterError(f"timed out after {timeout:g} s waiting for {said}")
        time.sleep(every)


def _ppid(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> List[int]:
    """Every live descendant of ``root`` (children first found, depth-first)."""
    children: Dict[int, List[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            parent = _ppid(int(entry))
            if parent is not None:
                children.setdefault(parent, []).append(int(entry))
    found: List[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def cmdline(pid: int) -> List[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [p.decode(errors="replace") for p in f.read().split(b"\0") if p]
    except OSError:
        return []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie is dead for our purposes.
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


class _Daemon:
    """A master or worker JVM: its process (the group leader) and its log."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.name = name
        self.proc = proc
        self.log = log
        self.seen: Set[int] = set()  # descendants seen while it ran (executors, Python)

    def remember_children(self) -> List[int]:
        kids = descendants(self.proc.pid)
        self.seen.update(kids)
        return kids

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


class SparkCluster:
    """A standalone master and ``workers`` workers (``cores`` cores and ``memory`` each)."""

    def __init__(
        self,
        root: Path,
        workers: int = 2,
        cores: int = 1,
        memory: str = "1g",
        env: Optional[Dict[str, str]] = None,
    ) -> None:
        self.root = Path(root)
        self.n_workers = workers
        self.cores = cores
        self.memory = memory
        self.extra_env = dict(env or {})
        self.home = _spark_home()
        self.master_port = 0
        self.webui_port = 0
        self.master: Optional[_Daemon] = None
        self.workers: Dict[int, _Daemon] = {}
        self._starts: Dict[int, int] = {}  # worker index -> how many times started
        self._stopped = False
        atexit.register(self.stop)

    # -- addresses ---------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def webui(self) -> str:
        return f"http://127.0.0.1:{self.webui_port}"

    @staticmethod
    def worker_host(index: int) -> str:
        return f"127.0.0.{index + 1}"

    # -- processes ---------------------------------------------------------------------

    def _env(self, host: str) -> Dict[str, str]:
        conf_dir = self.root / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.update(
            {
                "SPARK_HOME": str(self.home),
                "SPARK_CONF_DIR": str(conf_dir),  # empty: no spark-defaults from elsewhere
                "SPARK_LOCAL_IP": host,
                "SPARK_LOCAL_HOSTNAME": host,
                "SPARK_LOG_DIR": str(self.root / "logs"),
                "SPARK_WORKER_DIR": str(self.root / "work"),
                "SPARK_LOCAL_DIRS": str(self.root / "local"),
                "PYSPARK_PYTHON": sys.executable,
                "PYSPARK_DRIVER_PYTHON": sys.executable,
            }
        )
        env.update(self.extra_env)
        return env

    def _launch(self, name: str, args: List[str], host: str) -> _Daemon:
        logs = self.root / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log = logs / f"{name}.log"
        with open(log, "ab") as out:
            proc = subprocess.Popen(
                [str(self.home / "bin" / "spark-class"), *args],
                env=self._env(host),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killpg takes all of it
                cwd=str(self.root),
            )
        return _Daemon(name, proc, log)

    def status(self) -> Optional[Dict[str, Any]]:
        """The master's JSON status, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"{self.webui}/json/", timeout=5) as resp:
                return json.loads(resp.read().decode())  # type: ignore[no-any-return]
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def alive_workers(self) -> int:
        st = self.status()
        return int(st.get("aliveworkers", -1)) if st else -1

    def _wait_daemon(self, daemon: _Daemon, check: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not check():
            if daemon.proc.poll() is not None:
                raise ClusterError(
                    f"{daemon.name} exited with {daemon.proc.returncode} while starting; "
                    f"its log ({daemon.log}) ends with:\n{daemon.tail()}"
                )
            if time.monotonic() >= deadline:
                raise ClusterError(
                    f"timed out after {START_TIMEOUT:g} s waiting for {what}; "
                    f"{daemon.name}'s log ends with:\n{daemon.tail()}"
                )
            time.sleep(0.25)

    def start(self) -> SparkCluster:
        try:
            self._start_master()
            for i in range(self.n_workers):
                self.start_worker(i, wait=False)
            self.wait_workers(self.n_workers)
        except BaseException:
            self.stop()
            raise
        return self

    def _start_master(self) -> None:
        for attempt in range(3):  # a port picked free may be taken before the JVM binds it
            self.master_port, self.webui_port = free_port(), free_port()
            master = self._launch(
                f"master-{attempt}",
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(self.master_port),
                    "--webui-port",
                    str(self.webui_port),
                ],
                "127.0.0.1",
            )
            self.master = master

            def ready() -> bool:
                st = self.status()
                return bool(st and st.get("status") == "ALIVE")

            try:
                self._wait_daemon(master, ready, "the master's web UI")
            except ClusterError:
                if master.proc.poll() is None or attempt == 2:
                    raise
                continue
            st = self.status() or {}
            if st.get("url") != self.url:  # Spark moved to another port: not ours
                raise ClusterError(f"master at {st.get('url')!r}, expected {self.url!r}")
            return

    def start_worker(self, index: int, wait: bool = True) -> None:
        """Start worker ``index`` (again, after :meth:`kill_worker`) on its own address."""
        if index in self.workers and self.workers[index].proc.poll() is None:
            raise ClusterError(f"worker {index} is running")
        host = self.worker_host(index)
        starts = self._starts.get(index, 0)
        self._starts[index] = starts + 1
        work = self.root / "work" / f"worker-{index}-{starts}"
        work.mkdir(parents=True, exist_ok=True)
        before = self.alive_workers()
        self.workers[index] = self._launch(
            f"worker-{index}-{starts}",
            [
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                host,
                "--cores",
                str(self.cores),
                "--memory",
                self.memory,
                "--webui-port",
                str(free_port(host)),
                "--work-dir",
                str(work),
            ],
            host,
        )
        if wait:
            self._wait_daemon(
                self.workers[index],
                lambda: self.alive_workers() > before,
                f"worker {index} to register with the master",
            )

    def wait_workers(self, n: int, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() != n:
            for daemon in self.workers.values():
                if daemon.proc.poll() is not None and daemon.proc.returncode not in (
                    -signal.SIGKILL,
                    -signal.SIGTERM,
                ):
                    raise ClusterError(f"{daemon.name} exited:\n{daemon.tail()}")
            if time.monotonic() >= deadline:
                tails = "\n".join(f"--- {d.name}\n{d.tail(10)}" for d in self.workers.values())
                raise ClusterError(
                    f"timed out after {timeout:g} s waiting for {n} alive workers "
                    f"(the master reports {self.alive_workers()}):\n{tails}"
                )
            time.sleep(0.25)

    def executor_pids(self, index: int) -> List[int]:
        """The executor JVMs worker ``index`` launched (normally one)."""
        daemon = self.workers[index]
        return [
            pid
            for pid in daemon.remember_children()
            if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in cmdline(pid)
        ]

    def executor_id(self, index: int) -> Optional[str]:
        for pid in self.executor_pids(index):
            args = cmdline(pid)
            if "--executor-id" in args:
                return args[args.index("--executor-id") + 1]
        return None

    def kill_worker(self, index: int) -> List[int]:
        """SIGKILL worker ``index``, its executor JVM and their Python workers, as a lost
        machine; return the pids killed, once every one is gone."""
        daemon = self.workers[index]
        victims = [daemon.proc.pid, *daemon.remember_children()]
        self._kill(daemon, signal.SIGKILL)
        wait_until(
            lambda: not any(_alive(p) for p in victims),
            f"the processes of worker {index} to die",
            timeout=STOP_TIMEOUT,
        )
        return victims

    def _kill(self, daemon: _Daemon, sig: int) -> None:
        daemon.remember_children()
        try:
            os.killpg(daemon.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        for pid in daemon.seen:  # the Python daemon makes its own group (setpgid)
            if _alive(pid):
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
        if sig == signal.SIGKILL:
            try:
                daemon.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        """Kill every process of the cluster: SIGTERM (executors are told to stop), then
        SIGKILL whatever is left after a deadline. Safe to call more than once."""
        if self._stopped:
            return
        self._stopped = True
        daemons = [*self.workers.values(), *([self.master] if self.master else [])]
        for daemon in daemons:
            if daemon.proc.poll() is None:
                self._kill(daemon, signal.SIGTERM)
        deadline = time.monotonic() + STOP_TIMEOUT
        while time.monotonic() < deadline and any(
            d.proc.poll() is None or any(_alive(p) for p in d.seen) for d in daemons
        ):
            time.sleep(0.2)
        for daemon in daemons:
            self._kill(daemon, signal.SIGKILL)
        left = [p for d in daemons for p in [d.proc.pid, *d.seen] if _alive(p)]
        if left:
            raise ClusterError(f"processes of the cluster still alive after SIGKILL: {left}")

    def __enter__(self) -> SparkCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Sessions:
    """The driver: one SparkSession on the cluster at a time, re-created when asked for
    different settings (speculation is a SparkContext setting)."""

    def __init__(self, cluster: SparkCluster, app: str = "jetstream_sync-cluster-tests") -> None:
        self.cluster = cluster
        self.app = app
        self.current: Any = None
        self.conf: Dict[str, str] = {}

    def get(self, **extra: str) -> Any:
        conf = {**DEFAULT_CONF, **extra}
        if self.current is not None and conf == self.conf and _usable(self.current):
            self.wait_executors(self.cluster.n_workers)
            return self.current
        self.stop()
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from pyspark import SparkContext
        from pyspark.sql import SparkSession

        import jetstream_sync.spark

        active = SparkContext._active_spark_context
        if active is not None:
            # A session this process made before (tests/spark's local[2,4] one, when the
            # whole suite runs in one process): one SparkContext per process, so it must go.
            # The tests that used it have all run (pytest runs directories in order).
            active.stop()
        builder = SparkSession.builder.master(self.cluster.url).appName(self.app)
        for key, value in conf.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("ERROR")
        jetstream_sync.spark.register(session)
        self.current, self.conf = session, conf
        self.wait_executors(self.cluster.n_workers)
        return session

    def healthy(self, **extra: str) -> Any:
        """A session with every worker up and one executor on each: a test that killed a
        worker and failed before starting it again is repaired here."""
        for index, daemon in list(self.cluster.workers.items()):
            if daemon.proc.poll() is not None:
                self.cluster.start_worker(index)
        self.cluster.wait_workers(self.cluster.n_workers)
        return self.get(**extra)

    def executors(self) -> List[str]:
        """The ids of the registered executors (the driver's excluded)."""
        if self.current is None:
            return []
        ids = self.current.sparkContext._jsc.sc().getExecutorIds()  # a Scala Seq
        return sorted(str(ids.apply(i)) for i in range(ids.size()))

    def wait_executors(self, n: int, timeout: float = START_TIMEOUT) -> None:
        wait_until(lambda: len(self.executors()) == n, f"{n} executors", timeout)

    def stop(self) -> None:
        if self.current is not None:
            self.current.stop()
            self.current = None
        import jetstream_sync.spark

        jetstream_sync.spark.close_all()


def _usable(session: Any) -> bool:
    try:
        return not session.sparkContext._jsc.sc().isStopped()
    except Exception:
        return False
