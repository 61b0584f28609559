"""The ``jetstream`` data source over Spark Connect: a client with no JVM of its own
registers the source and runs a batch read, a batch write and an ``AvailableNow`` stream,
checked row for row.

The server is the Spark Connect server the pyspark package ships
(``sbin/start-connect-server.sh --wait``: in the foreground, so this module owns the process),
on loopback and a free port, its Python workers on this interpreter. The client is made with
Connect's own builder: ``pyspark.sql.SparkSession.builder.remote(url)`` returns the same
class, but refuses while a classic session lives in the process, as the ``spark`` fixture's
does when the whole directory runs.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

import jetstream_sync as nats
import jetstream_sync.spark
from jetstream_sync.msg import Headers
from jetstream_sync.server import NATSServer

START_TIMEOUT = 120.0  # a JVM on a busy 2-core machine can take 20 s and more
STOP_TIMEOUT = 20.0
# SparkConnectServer's line once its gRPC service listens
_STARTED = re.compile(r"Spark Connect server started at: \S+:(\d+)")

# subject, data, headers (None: none), msg_id (None: none)
Msg = Tuple[str, bytes, Optional[Dict[str, List[str]]], Optional[str]]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def _stat(pid: int) -> Optional[Tuple[int, str]]:
    """Parent and start time of a live process (None: gone or a zombie)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return None if fields[0] == "Z" else (int(fields[1]), fields[19])


def _descendants(root: int) -> Dict[int, str]:
    """The live descendants of ``root`` and their start times: the JVM, and the Python
    workers it started (pyspark's daemon leaves the JVM's process group)."""
    stats = {int(e): _stat(int(e)) for e in os.listdir("/proc") if e.isdigit()}
    found: Dict[int, str] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, st in stats.items():
            if st is not None and st[0] == parent:
                found[pid] = st[1]
                todo.append(pid)
    return found


def _kill(pid: int, sig: int, group: bool = False) -> None:
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class ConnectServer:
    """``start-connect-server.sh --wait`` in its own process group; logs in ``root``."""

    def __init__(self, root: Path) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).resolve().parent
        self.root = root
        self.log = root / "server.log"
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _env(self) -> Dict[str, str]:
        env = dict(os.environ)
        for var in ("SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_CONNECT_MODE_ENABLED"):
            env.pop(var, None)
        (self.root / "conf").mkdir(exist_ok=True)
        env.update(
            SPARK_HOME=str(self.home),
            SPARK_CONF_DIR=str(self.root / "conf"),  # empty: no spark-defaults from elsewhere
            SPARK_PID_DIR=str(self.root),
            SPARK_LOG_DIR=str(self.root),
            SPARK_LOCAL_IP="127.0.0.1",
            PYSPARK_PYTHON=sys.executable,  # the workers import jetstream_sync from here
            PYSPARK_DRIVER_PYTHON=sys.executable,
        )
        return env

    def start(self) -> str:
        """Start it and wait until it listens; its ``sc://`` address. Port 0: the server
        binds a free port, and says which in its log."""
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": "0",
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            "spark.python.worker.reuse": "true",
            "spark.sql.warehouse.dir": str(self.root / "warehouse"),
        }
        args = [str(self.home / "sbin" / "start-connect-server.sh"), "--wait"]
        args += ["--master", "local[2,4]"]
        for key, value in conf.items():
            args += ["--conf", f"{key}={value}"]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                args,
                env=self._env(),
                cwd=str(self.root),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: killpg takes the JVM
            )
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            found = _STARTED.search(self.log.read_text(errors="replace"))
            if found and _listening(int(found.group(1))):
                return f"sc://127.0.0.1:{found.group(1)}"
            if self.proc.poll() is not None:
                pytest.fail(
                    f"the Spark Connect server exited with {self.proc.returncode} while "
                    f"starting; its log ({self.log}) ends with:\n{self.tail()}"
                )
            if time.monotonic() >= deadline:
                pytest.fail(
                    f"the Spark Connect server did not start within {START_TIMEOUT:g} s; "
                    f"its log ({self.log}) ends with:\n{self.tail()}"
                )
            time.sleep(0.25)

    def stop(self) -> None:
        """SIGTERM to the group: the JVM stops, and the Python workers it started end with
        it. Whatever of them still runs after STOP_TIMEOUT gets SIGKILL."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        left = _descendants(proc.pid)
        _kill(proc.pid, signal.SIGTERM, group=True)
        deadline = time.monotonic() + STOP_TIMEOUT
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            # gone, a zombie, or its pid now another process's
            left = {p: t for p, t in left.items() if (_stat(p) or (0, ""))[1] == t}
        if proc.poll() is None:
            _kill(proc.pid, signal.SIGKILL, group=True)
        for pid in left:
            _kill(pid, signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT)


@pytest.fixture(scope="module")
def connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark Connect session on a server of its own, stopped after the module."""
    if os.name != "posix":
        pytest.skip("start-connect-server.sh is a POSIX shell script")
    # Imported here, not at the top: it brings grpc and pandas (0.7 s of CPU), and every xdist
    # worker imports every test module to collect it, while one runs these tests.
    try:
        from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as exc:  # grpcio, zstandard, ... missing or too old
        pytest.skip(
            f"the Spark Connect client cannot be imported ({exc}): install the test extra, "
            "which includes pyspark[connect]"
        )
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK)) and not (
        shutil.which("java")
    ):
        pytest.skip("the Spark Connect server needs Java 17+ (no JAVA_HOME/bin/java, no java)")
    server = ConnectServer(tmp_path_factory.mktemp("spark-connect"))
    session = None
    try:
        url = server.start()
        session = ConnectSession.builder.remote(url).create()
        yield session
    finally:
        if session is not None:
            session.stop()
        server.stop()


@pytest.fixture(scope="module")
def registered(connect: Any) -> type:
    return jetstream_sync.spark.register(connect)


def _headers(h: Optional[Headers]) -> Dict[str, List[str]]:
    return {k: h.get_all(k) for k in h} if h else {}


def _without_id(h: Dict[str, List[str]]) -> Dict[str, List[str]]:
    return {k: v for k, v in h.items() if k != "Nats-Msg-Id"}


def _check_id(got: Dict[str, List[str]], msg_id: Optional[str]) -> None:
    """The row's msg_id, or one the writer made when it had none; never both."""
    ids = got.get("Nats-Msg-Id", [])
    if msg_id:
        assert ids == [msg_id]
    else:
        assert len(ids) == 1 and ids[0]


def _add_stream(url: str, name: str) -> None:
    with nats.connect(url) as nc:
        nc.jetstream().add_stream(name=name, subjects=[f"{name.lower()}.>"])


def _publish(url: str, stream: str, msgs: List[Msg]) -> None:
    with nats.connect(url) as nc:
        js = nc.jetstream()
        for subject, data, headers, msg_id in msgs:
            js.publish_async(subject, data, headers=headers, msg_id=msg_id)
        js.publish_async_completed(timeout=30)


def _messages(prefix: str, n: int, start: int = 0) -> List[Msg]:
    """On <prefix>.a / <prefix>.b; every fifth with headers, every seventh with an id."""
    return [
        (
            f"{prefix}.{'a' if i % 3 == 0 else 'b'}",
            b"m%d" % i,
            {"K": ["v1", str(i)]} if i % 5 == 0 else None,
            f"id-{i}" if i % 7 == 0 else None,
        )
        for i in range(start, start + n)
    ]


def _stored(url: str, stream: str) -> List[Any]:
    """Every message of ``stream``, by sequence."""
    with nats.connect(url) as nc:
        js = nc.jetstream()
        n = js.stream_info(stream).state.messages
        msgs = [js.get_msg(stream, seq) for seq in range(1, n + 1)]
    assert [m.seq for m in msgs] == list(range(1, n + 1))
    return msgs


def test_register_over_connect(connect: Any, registered: type) -> None:
    with pytest.raises(AttributeError, match="sparkContext"):  # no SparkContext over Connect
        connect.sparkContext  # noqa: B018
    assert registered.__name__ == "JetStreamDataSource"
    assert "default_partitions" not in vars(registered)  # not asked: no default parallelism
    assert connect.conf.get("spark.sql.python.filterPushdown.enabled") == "true"


def test_batch_read(connect: Any, registered: type, spark_nats: NATSServer) -> None:
    url = spark_nats.url
    sent = _messages("cxr", 500)
    _add_stream(url, "CXR")
    _publish(url, "CXR", sent)

    def read(**options: Any) -> Any:
        reader = connect.read.format("jetstream").option("servers", url).option("stream", "CXR")
        for key, value in options.items():
            reader = reader.option(key, str(value))
        return reader.load()

    def check(rows: List[Any], seqs: List[int]) -> None:
        assert [r.stream_seq for r in rows] == seqs
        for r in rows:
            subject, data, headers, msg_id = sent[r.stream_seq - 1]
            want = {**(headers or {}), **({"Nats-Msg-Id": [msg_id]} if msg_id else {})}
            assert (r.subject, bytes(r.data), r.stream, r.msg_id) == (subject, data, "CXR", msg_id)
            assert {k: list(v) for k, v in (r.headers or {}).items()} == want
            assert r.timestamp is not None

    check(read().orderBy("stream_seq").collect(), list(range(1, 501)))
    ranged = read().where("stream_seq >= 100 AND stream_seq < 200").orderBy("stream_seq")
    check(ranged.collect(), list(range(100, 200)))
    only_a = read(filter_subject="cxr.a").orderBy("stream_seq").collect()
    check(only_a, [i + 1 for i in range(500) if i % 3 == 0])


def test_batch_write(connect: Any, registered: type, spark_nats: NATSServer) -> None:
    url = spark_nats.url
    _add_stream(url, "CXW")
    n = 300
    rows = [
        (
            f"cxw.{i % 3}",
            b"row-%d" % i,
            {"Row": [str(i)], "Two": ["x", "y"]} if i % 4 == 0 else None,
            f"w-{i}" if i % 2 == 0 else None,
        )
        for i in range(n)
    ]
    df = connect.createDataFrame(
        rows, schema="subject string, data binary, headers map<string,array<string>>, msg_id string"
    )
    df.write.format("jetstream").option("servers", url).option("stream", "CXW").mode(
        "append"
    ).save()

    stored = _stored(url, "CXW")
    assert len(stored) == n
    by_data = {m.data: m for m in stored}
    assert sorted(by_data) == sorted(r[1] for r in rows)  # each row once
    for subject, data, headers, msg_id in rows:
        m = by_data[data]
        got = _headers(m.headers)
        assert m.subject == subject
        assert _without_id(got) == (headers or {})
        _check_id(got, msg_id)


def test_available_now_stream(
    connect: Any, registered: type, spark_nats: NATSServer, tmp_path: Path
) -> None:
    """Source CXS (cxs.>) to target CXT (cxt.>): the subjects get a ``cxt.`` in front, so
    nothing written goes back into the source. One partition per micro-batch keeps the order;
    a second run from the checkpoint takes only what came since."""
    url = spark_nats.url
    _add_stream(url, "CXS")
    _add_stream(url, "CXT")
    sent = _messages("cxs", 400)
    _publish(url, "CXS", sent)
    checkpoint = tmp_path / "checkpoint"

    def run() -> List[Any]:
        query = (
            connect.readStream.format("jetstream")
            .option("servers", url)
            .option("stream", "CXS")
            .option("partitions", "1")
            .option("max_rows_per_trigger", "150")
            .load()
            .selectExpr("concat('cxt.', subject) AS subject", "data", "headers", "msg_id")
            .writeStream.format("jetstream")
            .option("servers", url)
            .option("stream", "CXT")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(120), "the AvailableNow query did not end"
        finally:
            if query.isActive:
                query.stop()
        assert query.exception() is None
        return [p.numInputRows for p in query.recentProgress]

    def check() -> None:
        stored = _stored(url, "CXT")
        assert len(stored) == len(sent)
        for m, (subject, data, headers, msg_id) in zip(stored, sent):
            got = _headers(m.headers)
            assert (m.subject, m.data) == (f"cxt.{subject}", data)
            assert _without_id(got) == (headers or {})
            _check_id(got, msg_id)  # the msg_id column carries the source's

    assert [b for b in run() if b] == [150, 150, 100]
    check()

    more = _messages("cxs", 100, start=400)
    _publish(url, "CXS", more)
    sent += more
    assert [b for b in run() if b] == [100]  # resumed from the checkpoint
    check()
