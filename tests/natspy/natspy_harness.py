"""What nats-py's tests import as ``tests.utils``, written here for threads.

nats-py's test cases start ``nats-server`` processes on fixed ports (4222 to 4225, 4555,
routes on 6223 to 6225), with the users, tokens, TLS files and configuration files its
tests expect; this module starts the same servers (the binary ``jetstream_sync.server``
finds) and writes its own certificates and configuration files. ``async_test`` runs a
ported test body on a thread and fails it after nats-py's own limit (5 s; 20 s for
``async_long_test``), as nats-py's ``asyncio.wait_for`` around each test does.

The fixed ports are nats-py's: its tests connect to ``nats://127.0.0.1:4223`` and to the
default ``localhost:4222``. A port already taken on this machine skips the test, naming it.
"""

from __future__ import annotations

import faulthandler
import functools
import gc
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import unittest
import unittest.mock  # nats-py's test_js.py uses unittest.mock without importing it
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import natspy_threadio

from jetstream_sync.server import find_nats_server


def _server_version() -> None:
    """nats-py's tests read the server's version from $NATS_SERVER_VERSION (its CI sets it)
    to skip tests an old server cannot pass; here it is the version of the server we run."""
    if "NATS_SERVER_VERSION" in os.environ:
        return
    out = subprocess.run(
        [find_nats_server(), "--version"], capture_output=True, text=True, timeout=30
    ).stdout
    version = out.strip().rpartition(" ")[2]  # "nats-server: v2.15.1"
    if version.startswith("v"):
        os.environ["NATS_SERVER_VERSION"] = version


_server_version()

_FILES: Dict[str, str] = {}
_FILES_LOCK = threading.Lock()

_JS_LIMITS_CONF = """
jetstream: {
  domain: "test-domain"
}
no_auth_user: "foo"
accounts: {
  A {
    users: [{ user: "foo" }]
    jetstream: {
      max_mem: 64MB, max_file: 32MB, max_streams: 10, max_consumers: 20,
      max_ack_pending: 100, memory_max_stream_bytes: 2048, store_max_stream_bytes: 4096,
      max_stream_bytes: true
    }
  }
}
"""

_NO_AUTH_USER_CONF = """
port: 4555
accounts {
  a {
    users = [ { user: 'foo', pass: 'foo',
      permissions: {
        subscribe: { allow: ["foo", "_INBOX.>"], deny: ["bar"] },
        publish: { allow: ["foo", "_INBOX.>"], deny: ["bar"] }
      } } ]
  }
  b {
    users = [ { user: 'bar', pass: 'bar',
      permissions: {
        subscribe: { allow: ["bar"], deny: [">"] },
        publish: { allow: ["bar"], deny: [">"] }
      } } ]
  }
}
no_auth_user = "foo"
"""


def _files() -> Dict[str, str]:
    """Certificates (a CA, a server certificate for localhost and 127.0.0.1, a client one)
    and configuration files, written once per run into a temporary directory."""
    with _FILES_LOCK:
        if _FILES:
            return _FILES
        from jetstream_sync.testpki import PKI

        d = Path(tempfile.mkdtemp(prefix="natspy-files-"))
        pki = PKI(d, server_names=("localhost",))
        _FILES.update(
            {
                "certs/ca.pem": str(pki.ca),
                "certs/server-cert.pem": str(pki.server),
                "certs/server-key.pem": str(pki.server_key),
                "certs/client-cert.pem": str(pki.client),
                "certs/client-key.pem": str(pki.client_key),
            }
        )
        confs = {
            "conf/js-limits.conf": _JS_LIMITS_CONF,
            "conf/no_auth_user.conf": _NO_AUTH_USER_CONF,
            "conf/tls_handshake_first.conf": "port: 4224\n"
            + pki.server_config(verify=True, handshake_first=True),
        }
        for name, text in confs.items():
            path = d / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            _FILES[name] = str(path)
        return _FILES


def get_config_file(file_path: str) -> str:
    files = _files()
    if file_path not in files:
        raise unittest.SkipTest(f"the harness has no {file_path} (nats-py's tests/{file_path})")
    return files[file_path]


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


class NATSD:
    """One nats-server on nats-py's fixed ports, as nats-py's tests configure it."""

    def __init__(
        self,
        port: int = 4222,
        user: str = "",
        password: str = "",
        token: str = "",
        timeout: int = 0,
        http_port: int = 8222,
        debug: bool = False,
        tls: bool = False,
        cluster_listen: Optional[str] = None,
        routes: Optional[List[str]] = None,
        config_file: Optional[str] = None,
        with_jetstream: Optional[bool] = None,
    ) -> None:
        self.port = port
        self.user = user
        self.password = password
        self.token = token
        self.http_port = http_port
        self.tls = tls
        self.cluster_listen = cluster_listen
        self.routes = routes or []
        self.config_file = config_file
        self.with_jetstream = with_jetstream
        self.store_dir = tempfile.mkdtemp(prefix="natspy-js-") if with_jetstream else None
        self.proc: Optional[subprocess.Popen[bytes]] = None

    def _cmd(self) -> List[str]:
        cmd = [find_nats_server(), "-p", str(self.port), "-m", str(self.http_port)]
        cmd += ["-a", "127.0.0.1"]
        if self.user:
            cmd += ["--user", self.user]
        if self.password:
            cmd += ["--pass", self.password]
        if self.token:
            cmd += ["--auth", self.token]
        if self.with_jetstream:
            cmd += ["-js", f"-sd={self.store_dir}"]
        if self.tls:
            cmd += ["--tls", "--tlscert", get_config_file("certs/server-cert.pem")]
            cmd += ["--tlskey", get_config_file("certs/server-key.pem"), "--tlsverify"]
            cmd += ["--tlscacert", get_config_file("certs/ca.pem")]
        if self.cluster_listen is not None:
            cmd += ["--cluster_listen", self.cluster_listen]
        if self.routes:
            cmd += ["--routes", ",".join(self.routes), "--cluster_name", "CLUSTER"]
        if self.config_file is not None:
            cmd += ["--config", self.config_file]
        return cmd

    def start(self) -> Optional[subprocess.Popen[bytes]]:
        for port in (self.port, self.http_port):
            if not _port_free(port):
                raise unittest.SkipTest(f"port {port}, which nats-py's test uses, is taken")
        self.proc = subprocess.Popen(
            self._cmd(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        return self.proc

    def send_signal(self, sig: int) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def start_natsd(natsd: NATSD) -> None:
    """Start it and wait (up to 10 s) until its client port takes connections."""
    natsd.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if natsd.proc is not None and natsd.proc.poll() is not None:
            raise RuntimeError(f"nats-server on port {natsd.port} exited at start")
        try:
            with socket.create_connection(("127.0.0.1", natsd.port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nats-server on port {natsd.port} did not start within 10 s")


def _tls_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context(purpose=ssl.Purpose.SERVER_AUTH)
    ctx.load_verify_locations(get_config_file("certs/ca.pem"))
    ctx.load_cert_chain(
        certfile=get_config_file("certs/client-cert.pem"),
        keyfile=get_config_file("certs/client-key.pem"),
    )
    return ctx


def _close_left_clients() -> None:
    """Clients a test left open (a failed test does) would reconnect to the next test's
    server on the same port; nats-py's are stopped with the test's event loop, ours here."""
    from jetstream_sync.client import Client

    for obj in gc.get_objects():
        if isinstance(obj, Client) and not obj.is_closed:
            try:
                obj.close()
            except Exception:
                pass


class _ServersTestCase(unittest.TestCase):
    """Start ``self.server_pool`` (all of it, or the first ``start_count``); stop it after."""

    start_count: Optional[int] = None

    def servers(self) -> List[NATSD]:
        raise NotImplementedError

    def setUp(self) -> None:
        super().setUp()
        self.loop = natspy_threadio.new_event_loop()
        self.server_pool = self.servers()
        try:
            for natsd in self.server_pool[: self.start_count]:
                start_natsd(natsd)
        except BaseException:
            self.tearDown()
            raise

    def tearDown(self) -> None:
        natspy_threadio.close_all()
        _close_left_clients()
        for natsd in self.server_pool:
            natsd.stop()
            if natsd.store_dir:
                shutil.rmtree(natsd.store_dir, ignore_errors=True)


class SingleServerTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        return [NATSD(port=4222)]


class MultiServerAuthTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        return [
            NATSD(port=4223, user="foo", password="bar", http_port=8223),
            NATSD(port=4224, user="hoge", password="fuga", http_port=8224),
        ]


class MultiServerAuthTokenTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        return [
            NATSD(port=4223, token="token", http_port=8223),
            NATSD(port=4224, token="token", http_port=8224),
            NATSD(port=4225, token="secret", http_port=8225),
        ]


class TLSServerTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        self.ssl_ctx = _tls_context()
        self.natsd = NATSD(port=4224, tls=True)
        return [self.natsd]


class TLSServerHandshakeFirstTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        self.ssl_ctx = _tls_context()
        self.natsd = NATSD(port=4224, config_file=get_config_file("conf/tls_handshake_first.conf"))
        return [self.natsd]


class MultiTLSServerAuthTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        self.ssl_ctx = _tls_context()
        return [
            NATSD(port=4223, user="foo", password="bar", http_port=8223, tls=True),
            NATSD(port=4224, user="hoge", password="fuga", http_port=8224, tls=True),
        ]


_ROUTES = ["nats://127.0.0.1:6223", "nats://127.0.0.1:6224", "nats://127.0.0.1:6225"]


class ClusteringTestCase(_ServersTestCase):
    start_count = 1  # nats-py's starts the first server only; the tests start the others

    def servers(self) -> List[NATSD]:
        return [
            NATSD(port=4222 + i, http_port=8222 + i, cluster_listen=_ROUTES[i - 1], routes=_ROUTES)
            for i in (1, 2, 3)
        ]


class ClusteringDiscoveryAuthTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        return [
            NATSD(
                port=4222 + i,
                user="foo",
                password="bar",
                http_port=8222 + i,
                cluster_listen=_ROUTES[i - 1],
                routes=_ROUTES[:1],
            )
            for i in (1, 2, 3)
        ]


class SingleJetStreamServerTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        return [NATSD(port=4222, with_jetstream=True)]


class SingleJetStreamServerLimitsTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        return [
            NATSD(
                port=4222, with_jetstream=True, config_file=get_config_file("conf/js-limits.conf")
            )
        ]


class NoAuthUserServerTestCase(_ServersTestCase):
    def servers(self) -> List[NATSD]:
        return [NATSD(port=4555, config_file=get_config_file("conf/no_auth_user.conf"))]


def _with_limit(limit: float) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        if os.environ.get("NATSPY_RUN") == "nats-py":  # the baseline: nats-py's own way
            import asyncio

            @functools.wraps(fn)
            def on_asyncio(test_case: Any, *args: Any, **kw: Any) -> Any:
                return asyncio.run(asyncio.wait_for(fn(test_case, *args, **kw), limit))

            return on_asyncio

        @functools.wraps(fn)
        def wrapper(test_case: Any, *args: Any, **kw: Any) -> Any:
            if threading.current_thread() is not threading.main_thread():
                return _on_a_thread(fn, limit, test_case, *args, **kw)
            return _on_the_main_thread(fn, limit, test_case, *args, **kw)

        return wrapper

    return decorate


class _TestTimeout(Exception):
    pass


def _on_the_main_thread(fn: Callable[..., Any], limit: float, *args: Any, **kw: Any) -> Any:
    """The body on the test's own thread (as nats-py's, so ``signal`` works in it), stopped
    by SIGALRM after ``limit``; pytest-timeout's own alarm is put back afterwards."""

    def expire(signum: int, frame: Any) -> None:
        # Every thread's stack, so a hang says where it hung (pytest shows captured stderr).
        faulthandler.dump_traceback(all_threads=True)
        raise _TestTimeout(f"the test did not finish within {limit} s (nats-py's limit)")

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, limit)
    try:
        return fn(*args, **kw)
    except _TestTimeout as exc:
        raise TimeoutError(str(exc)) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:
            left = outer - (time.monotonic() - started)
            signal.setitimer(signal.ITIMER_REAL, max(left, 0.001))


def _on_a_thread(fn: Callable[..., Any], limit: float, *args: Any, **kw: Any) -> Any:
    outcome: Dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["value"] = fn(*args, **kw)
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=body, name=f"ported:{fn.__name__}", daemon=True)
    worker.start()
    worker.join(limit)
    if worker.is_alive():
        raise TimeoutError(f"the test did not finish within {limit} s (nats-py's limit)")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def async_test(fn: Callable[..., Any], timeout: float = 5) -> Callable[..., Any]:
    return _with_limit(timeout)(fn)


def async_long_test(fn: Callable[..., Any], timeout: float = 20) -> Callable[..., Any]:
    return _with_limit(timeout)(fn)


def async_debug_test(fn: Callable[..., Any], timeout: float = 3600) -> Callable[..., Any]:
    return _with_limit(timeout)(fn)


__all__ = [
    "NATSD",
    "ClusteringDiscoveryAuthTestCase",
    "ClusteringTestCase",
    "MultiServerAuthTestCase",
    "MultiServerAuthTokenTestCase",
    "MultiTLSServerAuthTestCase",
    "NoAuthUserServerTestCase",
    "SingleJetStreamServerLimitsTestCase",
    "SingleJetStreamServerTestCase",
    "SingleServerTestCase",
    "TLSServerHandshakeFirstTestCase",
    "TLSServerTestCase",
    "async_debug_test",
    "async_long_test",
    "async_test",
    "get_config_file",
    "start_natsd",
]
