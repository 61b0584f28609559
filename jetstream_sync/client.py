"""Client: one connection to a NATS server, with its threads.

Threads of one client, each short and stoppable:

* the **network thread** reads the socket, feeds the parser and routes each message to its
  subscription's queue; when the socket dies it runs the reconnect loop. It never runs user
  code and never blocks on anything but the socket. It waits for data with poll() outside
  the read lock, so a thread blocked in request() or flush() may take the lock and read
  (and route) the next bytes itself: its answer then reaches it without a thread wake-up.
  Whoever reads, the same routing runs; disconnects are always handled here.
* the **flusher** writes the shared write buffer with one ``send`` per wake-up, so
  publishes and acks from any thread are coalesced. Latency-sensitive calls (request,
  flush) write the buffer themselves instead of waiting for it. When the kernel's send
  buffer is full, the flusher waits for room (select, no lock held) and writes the rest; a
  write that makes no progress for ``write_timeout`` marks the connection stale.
* the **timer thread** sends pings and detects a stale connection.
* the **callback thread** runs the user's connection callbacks (error_cb, disconnected_cb,
  reconnected_cb, closed_cb) in order. Subscription callbacks run on their own
  per-subscription dispatcher thread (see subscription.py).

The outbound buffer is a ``collections.deque`` of frames, one per publish. A publish on a
connected client appends without any lock: ``deque.append`` is atomic, and the flusher takes
a batch atomically too (a ``None`` marker and ``iter(popleft, None)``, all in C). ``_wlock``
guards state changes, the ping queue and control frames whose order matters; ``_send_lock``
serialises writes to the socket (taken before ``_wlock`` whenever both are needed).

Writes have deadlines too: after the handshake the socket is non-blocking, so no thread
holds ``_send_lock`` (or any lock) across a write that waits. What the kernel did not take
stays on the connection as its ``tail``, written first by the next writer; waiting for room
happens outside every lock (``_write_slow``). A caller's timeout therefore holds whatever
the peer does, and ``close()`` gives the buffer a bounded last chance, then shuts the socket.
"""

from __future__ import annotations

import collections
import itertools
import logging
import os
import queue
import random
import re
import select
import socket
import ssl
import threading
import time
import weakref
from typing import (
    TYPE_CHECKING,
    Any,
    Callable,
    Deque,
    Dict,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from . import _protocol as proto
from . import errors
from ._auth import JWTCallback, PathOrSeed, SignatureCallback, UserAuth
from ._conn import Conn, Forget, Move, Waiter
from ._nuid import NUID
from ._servers import Server, parse_url
from ._timeouts import Deadline, check_timeout
from ._timers import Timers
from ._version import __version__
from .msg import HeadersLike, Msg, encode_headers
from .subscription import MessageHook, Subscription

if TYPE_CHECKING:  # pragma: no cover
    from ._seam import Core
    from .jetstream.context import JetStream

__all__ = ["DEFAULT_URL", "Client", "connect"]

log = logging.getLogger("jetstream_sync")

DEFAULT_URL = "nats://127.0.0.1:4222"
DEFAULT_PENDING_MSGS = 65536
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
_READ_SIZE = 256 * 1024
# Above this many queued frames (~300 KB of small messages) the publishing thread writes the
# buffer itself instead of waking the flusher: a tight publish loop then never hands the GIL
# to another thread, and memory stays bounded (back-pressure from the socket).
_HIGH_WATER = 2048
# close() gives what is buffered at most this long to leave (a peer that stops reading must
# not hold close() up).
_CLOSE_WRITE = 2.0
# The longest a thread waiting for room in the send buffer sleeps before it looks at the
# connection's state again (a shutdown wakes it sooner).
_WRITE_SLICE = 0.5
# Acks wait this long for a write that takes them along before the flusher is woken.
_ACK_LINGER = 0.002
# ...unless this many frames are waiting: then at once.
_ACK_BATCH = 32
_CRLF = b"\r\n"
# -ERR messages after which the server keeps the connection open.
_NON_FATAL_ERRS = ("permissions violation", "invalid subject", "invalid publish subject")
# The server's refusal of a SUB names the subject (and queue group): see Client._end_denied_sub.
_DENIED_SUB_RE = re.compile(
    r'permissions violation for subscription to "([^"]*)"(?: using queue "([^"]*)")?', re.I
)
# ... and of a PUB names its subject: see Client._fail_denied_request.
_DENIED_PUB_RE = re.compile(r'permissions violation for publish to "([^"]*)"', re.I)
# "<size>\r\n" for every payload size seen so far; a PUB frame is prefix + this + payload.
_SIZE_LINES: Dict[int, bytes] = {}

ErrorCallback = Callable[[Exception], None]
Callback = Callable[[], None]

# Connection states. Identity comparisons on small ints interned objects are the cheapest.
_NEW, _CONNECTED, _RECONNECTING, _CLOSED, _FORKED = (
    "new",
    "connected",
    "reconnecting",
    "closed",
    "forked",
)


# --- fork safety ---------------------------------------------------------------------

_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_live_clients):
        client._mark_forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _size_line(n: int) -> bytes:
    line = b"%d\r\n" % n
    if len(_SIZE_LINES) < 65536:
        _SIZE_LINES[n] = line
    return line


def _as_bytes(data: Any, what: str = "data") -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise errors.InvalidArgumentError(
        f"{what} must be bytes, got {type(data).__name__}"
        + ("; encode it first, e.g. data.encode()" if isinstance(data, str) else "")
    )


def _check_positive_int(value: Any, what: str, *, allow_none: bool = False) -> Optional[int]:
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise errors.InvalidArgumentError(f"{what} must be an int > 0, got {value!r}")
    return value


def _check_callable(value: Any, what: str) -> Any:
    if value is not None and not callable(value):
        raise errors.InvalidArgumentError(f"{what} must be callable, got {type(value).__name__}")
    return value


class Client:
    """A connection to NATS. Use :func:`connect` to make one."""

    def __init__(self) -> None:
        self._state = _NEW
        self._pub_fast = False  # True only while CONNECTED and publishes are allowed
        self._closing = False
        self._draining_pubs = False
        self._pid = os.getpid()
        self._wlock = threading.Lock()
        self._send_lock = threading.Lock()
        self._read_lock = threading.Lock()  # held while reading the socket and routing events
        self._out: Deque[Optional[bytes]] = collections.deque()
        self._kicked = False
        self._linger = False  # an ack's deferred flusher wake-up is scheduled
        self._kick = threading.Event()
        self._connected = threading.Event()
        self._stop = threading.Event()
        self._closed_event = threading.Event()
        self._conn: Optional[Conn] = None
        self._pool: List[Server] = []
        self._subs: Dict[int, Subscription] = {}
        self._sids = itertools.count(1)
        self._pub_cache: Dict[str, bytes] = {}
        self._max_payload = 1024 * 1024
        # Pings in wire order: (waiter or None, publishes enqueued before the ping).
        self._pings: Deque[Tuple[Optional[Union[Waiter, Forget, Move]], int]] = collections.deque()
        self._pings_in_buf = 0
        self._outstanding_pings = 0
        # Frames are counted as the flusher writes them (_written_frames); a PING's mark is
        # written + still queued, and its PONG confirms every frame up to that mark. The
        # publish path counts nothing of its own.
        self._written_frames = 0
        self._confirmed_frames = 0
        self._rbuf_bytes = 0  # bytes buffered while disconnected
        self._ctl_frames = 0  # frames that are not publishes (SUB, PING, ...): see stats
        self._dropped_frames = 0  # discarded unsent at close
        self._out_bytes = 0
        self._in_msgs = 0
        self._in_bytes = 0
        self._reconnects = 0
        self._errors_received = 0
        self._nuid = NUID()
        self._resp_lock = threading.Lock()
        self._resp_sub: Optional[Subscription] = None
        self._resp_prefix = ""
        self._resp_map: Dict[str, Waiter] = {}
        self._req_ids = itertools.count(1)
        self._cb_queue: queue.SimpleQueue[Optional[Tuple[Callable[..., None], Tuple[Any, ...]]]]
        self._cb_queue = queue.SimpleQueue()
        self._threads: List[threading.Thread] = []
        self._timers: Optional[Timers] = None
        self._close_hooks: List[Callable[[], None]] = []
        self._reconnect_hooks: List[Callable[[], None]] = []
        # Fault injection for tests: messages for which this returns True are dropped as if
        # the network had lost them. See jetstream_sync.testing.drop_inbound.
        self._inbound_filter: Optional[Callable[[Msg], bool]] = None
        # Run once after the messages of one read were routed (by the reading thread, under
        # the read lock): hooks that check a whole read at once register here.
        self._after_read: List[Callable[[], None]] = []
        self._last_error: Optional[errors.NATSError] = None
        self._write_timeout: float = 10.0
        self._core: Optional[Core] = None  # made by _seam.core_of on first use

    # --- connecting -------------------------------------------------------------------

    def connect(
        self,
        servers: Union[str, Sequence[str]] = DEFAULT_URL,
        *,
        name: Optional[str] = None,
        error_cb: Optional[ErrorCallback] = None,
        disconnected_cb: Optional[Callback] = None,
        reconnected_cb: Optional[Callback] = None,
        closed_cb: Optional[Callback] = None,
        user: Optional[str] = None,
        password: Optional[str] = None,
        token: Optional[str] = None,
        tls: Optional[ssl.SSLContext] = None,
        tls_hostname: Optional[str] = None,
        tls_handshake_first: bool = False,
        nkeys_seed: Optional[PathOrSeed] = None,
        user_credentials: Optional[PathOrSeed] = None,
        signature_cb: Optional[SignatureCallback] = None,
        user_jwt_cb: Optional[JWTCallback] = None,
        connect_timeout: float = 2.0,
        allow_reconnect: bool = True,
        max_reconnect_attempts: int = 60,
        reconnect_time_wait: float = 2.0,
        reconnect_jitter: float = 0.1,
        reconnect_buf_size: int = 8 * 1024 * 1024,
        ping_interval: float = 120.0,
        max_outstanding_pings: int = 2,
        write_timeout: float = 10.0,
        no_randomize: bool = False,
        echo: bool = True,
        inbox_prefix: str = "_INBOX",
        verbose: bool = False,
        pedantic: bool = False,
    ) -> Client:
        """Connect to the first reachable server of ``servers``; see :func:`connect`."""
        if self._state is not _NEW:
            raise errors.InvalidArgumentError(
                "this Client has already been connected; make a new one"
            )
        if isinstance(servers, str):
            urls = [u for u in servers.split(",") if u.strip()]
        elif isinstance(servers, (list, tuple)):
            urls = list(servers)
        else:
            raise errors.InvalidArgumentError(
                f"servers must be a URL string or a list of them, got {type(servers).__name__}"
            )
        if not urls:
            raise errors.InvalidArgumentError("servers is empty")
        self._pool = [parse_url(u) for u in urls]
        if not no_randomize and len(self._pool) > 1:
            random.shuffle(self._pool)
        for cb_name, cb in (
            ("error_cb", error_cb),
            ("disconnected_cb", disconnected_cb),
            ("reconnected_cb", reconnected_cb),
            ("closed_cb", closed_cb),
        ):
            _check_callable(cb, cb_name)
        if tls is not None and not isinstance(tls, ssl.SSLContext):
            raise errors.InvalidArgumentError(
                f"tls must be an ssl.SSLContext, got {type(tls).__name__}"
            )
        for what, value in (
            ("user", user),
            ("password", password),
            ("token", token),
            ("name", name),
            ("tls_hostname", tls_hostname),
        ):
            if value is not None and not isinstance(value, str):
                raise errors.InvalidArgumentError(
                    f"{what} must be a str, got {type(value).__name__}"
                )
        if not isinstance(tls_handshake_first, bool):
            raise errors.InvalidArgumentError(
                f"tls_handshake_first must be a bool, got {type(tls_handshake_first).__name__}"
            )
        if (user is None) != (password is None):
            raise errors.InvalidArgumentError("user and password go together: give both or neither")
        if not isinstance(max_reconnect_attempts, int) or isinstance(max_reconnect_attempts, bool):
            raise errors.InvalidArgumentError(
                "max_reconnect_attempts must be an int (-1 for no limit), "
                f"got {max_reconnect_attempts!r}"
            )
        proto.check_publish_subject(inbox_prefix, "inbox_prefix")
        self._connect_timeout = check_timeout(connect_timeout, "connect_timeout")
        self._reconnect_wait = check_timeout(reconnect_time_wait, "reconnect_time_wait")
        self._reconnect_jitter = check_timeout(reconnect_jitter, "reconnect_jitter")
        ping = check_timeout(ping_interval, "ping_interval")
        if not ping:
            raise errors.BadTimeoutError("ping_interval must be > 0 seconds")
        self._ping_interval: float = ping
        self._max_outstanding_pings = _check_positive_int(
            max_outstanding_pings, "max_outstanding_pings"
        )
        write_t = check_timeout(write_timeout, "write_timeout")
        if not write_t:
            raise errors.BadTimeoutError("write_timeout must be > 0 seconds")
        # A write that makes no progress for this long: the peer stopped reading, and the
        # connection is stale (then the reconnect path, as for unanswered pings).
        self._write_timeout = write_t
        self._reconnect_buf_size = (
            _check_positive_int(reconnect_buf_size, "reconnect_buf_size") or 0
        )
        self._name = name
        self._error_cb = error_cb
        self._disconnected_cb = disconnected_cb
        self._reconnected_cb = reconnected_cb
        self._closed_cb = closed_cb
        self._user, self._password, self._token = user, password, token
        self._tls = tls
        self._tls_hostname = tls_hostname
        # TLS before the server's INFO (a server configured with tls { handshake_first }):
        # nothing, not even INFO, crosses the network in the clear.
        self._tls_first = tls_handshake_first
        self._auth = UserAuth.from_options(nkeys_seed, user_credentials, signature_cb, user_jwt_cb)
        self._allow_reconnect = bool(allow_reconnect)
        self._max_reconnect_attempts = max_reconnect_attempts
        self._echo = bool(echo)
        self._verbose = bool(verbose)
        self._pedantic = bool(pedantic)
        self._inbox_prefix = inbox_prefix

        last: Optional[errors.NATSError] = None
        conn: Optional[Conn] = None
        for server in self._pool:
            server.last_attempt = time.monotonic()
            try:
                conn = self._open(server)
                break
            except errors.AuthorizationError:
                raise
            except errors.NATSError as exc:
                last = exc
        if conn is None:
            assert last is not None
            if isinstance(last, errors.SecureConnectionRequiredError):
                raise last
            raise errors.NoServersError(
                "could not connect to any server ("
                + ", ".join(s.url for s in self._pool)
                + f"): {last}"
            ) from last
        self._start_threads()
        self._install(conn, reconnect=False)
        _live_clients.add(self)
        return self

    def _open(self, server: Server) -> Conn:
        """Open a socket to ``server`` and complete the handshake, or raise a NATSError."""
        where = f"connect to {server.url}"
        deadline = Deadline(self._connect_timeout, where)
        sock: Optional[socket.socket] = None
        try:
            sock = socket.create_connection((server.host, server.port), timeout=deadline.check())
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            parser = proto.Parser(msg_owner=self, one_off_prefix=self._inbox_prefix.encode() + b".")
            if self._tls_first:
                sock = self._wrap_tls(sock, server, deadline)
            ev = self._read_event(sock, parser, deadline, where)
            if not isinstance(ev, proto.Info):
                raise errors.ProtocolError(f"{where}: expected INFO first, got {ev!r}")
            info = ev.data
            if not self._tls_first:
                sock = self._maybe_tls(sock, server, info, deadline)
            sock.settimeout(deadline.check())
            sock.sendall(
                proto.encode_connect(self._connect_options(server, info)) + proto.PING_FRAME
            )
            while True:
                ev = self._read_event(sock, parser, deadline, where)
                if ev is proto.PONG:
                    break
                if isinstance(ev, proto.Err):
                    raise self._handshake_error(server, ev.message)
                if isinstance(ev, proto.Info):
                    info = ev.data
                elif ev is proto.PING:
                    sock.sendall(proto.PONG_FRAME)
            # Non-blocking from here on: reads wait in poll, and no write can block a thread
            # (see _send). Inline reads pass MSG_DONTWAIT anyway.
            sock.settimeout(0.0)
            max_payload = info.get("max_payload")
            if isinstance(max_payload, int) and max_payload > 0:
                parser.max_payload = max(max_payload, proto.DEFAULT_MAX_INBOUND)
            return Conn(sock, parser, server, info)
        except BaseException as exc:
            if sock is not None:
                sock.close()
            if isinstance(exc, (errors.NATSError, OSError)):
                raise errors.map_os_error(exc, where=where) from exc
            raise

    @staticmethod
    def _read_event(
        sock: socket.socket, parser: proto.Parser, deadline: Deadline, where: str
    ) -> proto.Event:
        while True:
            ev = parser.next_event()
            if ev is not proto.NEED_DATA:
                return ev
            sock.settimeout(deadline.check())
            data = sock.recv(65536)
            if not data:
                raise errors.ConnectionLostError(f"{where}: server closed the connection")
            parser.receive_data(data)

    def _maybe_tls(
        self, sock: socket.socket, server: Server, info: Dict[str, Any], deadline: Deadline
    ) -> socket.socket:
        wanted = self._tls is not None or server.scheme == "tls"
        required = bool(info.get("tls_required"))
        available = required or bool(info.get("tls_available"))
        if wanted and not available:
            raise errors.SecureConnectionRequiredError(
                f"TLS was requested but server {server.url} does not offer it"
            )
        if not (wanted or required):
            return sock
        return self._wrap_tls(sock, server, deadline)

    def _wrap_tls(self, sock: socket.socket, server: Server, deadline: Deadline) -> socket.socket:
        # Like nats.go: a server that requires TLS gets it, with a default (verifying)
        # context when the caller gave none.
        context = self._tls or ssl.create_default_context()
        sock.settimeout(deadline.check())
        return context.wrap_socket(sock, server_hostname=self._tls_hostname or server.host)

    def _connect_options(self, server: Server, info: Dict[str, Any]) -> Dict[str, Any]:
        opts: Dict[str, Any] = {
            "verbose": self._verbose,
            "pedantic": self._pedantic,
            "tls_required": self._tls is not None
            or server.scheme == "tls"
            or bool(info.get("tls_required")),
            "name": self._name,
            "lang": "python3-sync",
            "version": __version__,
            "protocol": 1,
            "echo": self._echo,
            "headers": True,
            "no_responders": True,
        }
        if server.user is not None:
            opts["user"], opts["pass"] = server.user, server.password
        elif server.token is not None:
            opts["auth_token"] = server.token
        elif self._user is not None:
            opts["user"], opts["pass"] = self._user, self._password
        elif self._token is not None:
            opts["auth_token"] = self._token
        if self._auth is not None:
            nonce = info.get("nonce")
            opts.update(self._auth.connect_fields(nonce if isinstance(nonce, str) else None))
        return opts

    @staticmethod
    def _handshake_error(server: Server, message: str) -> errors.NATSError:
        low = message.lower()
        if "authorization" in low or "authentication" in low or "user" in low:
            return errors.AuthorizationError(
                f"server {server.url} refused the credentials: {message}"
            )
        if "secure connection" in low or "tls" in low:
            return errors.SecureConnectionRequiredError(f"server {server.url}: {message}")
        return errors.ServerError(f"server {server.url} refused the connection: {message}")

    def _start_threads(self) -> None:
        self._timers = Timers("nats-timers", self._on_internal_error)
        for target, name in (
            (self._run_network, "nats-network"),
            (self._run_flusher, "nats-flusher"),
            (self._run_callbacks, "nats-callbacks"),
        ):
            t = threading.Thread(target=target, name=name, daemon=True)
            self._threads.append(t)
        self._timers.call_later(self._ping_interval, self._ping_tick)

    def _install(self, conn: Conn, reconnect: bool) -> bool:
        """Make ``conn`` the live connection: resubscribe first, then buffered publishes."""
        with self._send_lock, self._wlock:
            if self._closing:
                conn.sock.close()
                return False
            self._conn = conn
            self._update_info(conn.info, conn.server)
            resubs = []
            for sub in self._subs.values():
                resubs.append(proto.encode_sub(sub.subject, sub.sid, sub.queue or None))
                if sub.max_msgs:
                    resubs.append(proto.encode_unsub(sub.sid, max(1, sub.max_msgs - sub.delivered)))
            self._out.extendleft(reversed(resubs))
            self._ctl_frames += len(resubs)
            self._state = _CONNECTED
            self._pub_fast = not self._draining_pubs
            self._outstanding_pings = 0
            conn.server.reconnects = 0
            self._kicked = True
            self._kick.set()
        self._connected.set()
        if reconnect:
            self._reconnects += 1
            for hook in list(self._reconnect_hooks):
                try:
                    hook()
                except Exception as exc:  # a bug in internal code: never stop the reconnect
                    self._on_internal_error(exc)
            self._callback(self._reconnected_cb)
        else:
            for t in self._threads:
                t.start()
        return True

    def _update_info(self, info: Dict[str, Any], server: Server) -> None:
        self._server_info = info
        max_payload = info.get("max_payload")
        if isinstance(max_payload, int) and max_payload > 0:
            self._max_payload = max_payload
        known = {(s.host, s.port) for s in self._pool}
        urls = info.get("connect_urls")
        for url in urls if isinstance(urls, list) else ():
            if not isinstance(url, str):  # a malformed INFO: ignore what is not a URL
                continue
            try:
                new = parse_url(url if "://" in url else f"{server.scheme}://{url}", implicit=True)
            except errors.InvalidArgumentError:
                continue
            if (new.host, new.port) not in known:
                known.add((new.host, new.port))
                self._pool.append(new)

    # --- the network thread -------------------------------------------------------------

    def _run_network(self) -> None:
        conn = self._conn
        while conn is not None:
            err = self._read_loop(conn)
            if self._closing or self._state is _FORKED:
                return
            self._on_disconnect(conn, err)
            if not self._allow_reconnect:
                self._shutdown(
                    errors.ConnectionClosedError(
                        f"connection to {conn.server.url} lost and allow_reconnect is False"
                    )
                )
                return
            conn = self._reconnect_loop()
        if not self._closing:
            self._shutdown(
                errors.NoServersError(
                    "reconnect gave up: no server reachable within max_reconnect_attempts"
                )
            )

    def _read_loop(self, conn: Conn) -> errors.NATSError:
        """Read until the socket fails; returns why.

        A plain TCP socket is waited on with poll() *without* the read lock and read
        (non-blocking) under it, so a thread blocked in request() or flush() can take the
        lock and read its own reply itself: no thread wake-up on the reply's path. TLS
        sockets, whose decrypted bytes poll() cannot see, are read blocking, here only.
        """
        with self._read_lock:
            err = self._dispatch(conn.parser.events())  # what came with the handshake
        if err is not None:
            conn.reader_left.set()  # (it never waited on the socket)
            return err
        if not conn.inline:
            return self._read_blocking(conn)
        poller: Any
        try:  # fileno() is -1 once close() got there first: register refuses it
            if hasattr(select, "epoll"):
                poller = select.epoll()
                with conn.quiet_lock:
                    poller.register(conn.sock.fileno(), conn.watch_mask())
                    conn.ep = poller
            else:
                poller = select.poll()
                poller.register(conn.sock.fileno(), select.POLLIN | select.POLLPRI)
        except (OSError, ValueError) as exc:
            return errors.map_os_error(exc, where=f"connection to {conn.server.url}")
        read_lock = self._read_lock
        try:
            while True:
                try:
                    poller.poll()
                except OSError as exc:
                    return errors.map_os_error(exc, where=f"connection to {conn.server.url}")
                with read_lock:
                    err = self._read_once(conn)
                if err is not None:
                    return err
        finally:
            conn.ep = None
            conn.reader_left.set()
            if hasattr(poller, "close"):
                poller.close()

    def _read_blocking(self, conn: Conn) -> errors.NATSError:
        """The TLS reader. The socket is non-blocking (so that writes cannot block): wait
        in poll() when OpenSSL has nothing decrypted left; a shutdown wakes that wait."""
        sock = conn.sock
        recv = sock.recv
        where = f"connection to {conn.server.url}"
        try:
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
            while True:
                try:
                    data = recv(_READ_SIZE)
                except ssl.SSLWantReadError:
                    poller.poll()
                    continue
                except ssl.SSLWantWriteError:  # a TLS exchange wants to write first
                    select.select([], [sock], [], _WRITE_SLICE)
                    continue
                with self._read_lock:
                    err = self._feed(conn, data)
                if err is not None:
                    return err
        except Exception as exc:
            return errors.map_os_error(exc, where=where)
        finally:
            conn.reader_left.set()

    def _read_once(self, conn: Conn) -> Optional[errors.NATSError]:
        """One non-blocking read and its events; the caller holds the read lock."""
        try:
            data = conn.sock.recv(_READ_SIZE, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return None  # another thread read it first
        except Exception as exc:
            return errors.map_os_error(exc, where=f"connection to {conn.server.url}")
        return self._feed(conn, data)

    def _feed(self, conn: Conn, data: bytes) -> Optional[errors.NATSError]:
        if not data:
            return errors.ConnectionLostError(f"server {conn.server.url} closed the connection")
        try:
            conn.parser.receive_data(data)
            return self._dispatch(conn.parser.events())
        except errors.ProtocolError as exc:
            self._report(exc)
            return exc

    def _dispatch(self, events: List[proto.Event]) -> Optional[errors.NATSError]:
        """Route events: messages to their subscription, the rest to _on_control. Hot."""
        subs = self._subs
        msg_cls = Msg
        nmsgs = nbytes = 0
        drop = self._inbound_filter
        if drop is not None:  # tests only (jetstream_sync.testing.drop_inbound)
            events = [ev for ev in events if ev.__class__ is not msg_cls or not drop(ev)]
        try:
            for ev in events:
                if ev.__class__ is msg_cls:
                    nmsgs += 1
                    nbytes += len(ev.data)
                    sub = subs.get(ev.sid)
                    if sub is not None:
                        hook = sub._hook  # internal subscriptions (replies, acks, pulls)
                        if hook is None or not hook(ev):
                            sub._deliver(ev)
                else:
                    self._on_control(ev)
            if self._after_read:
                after, self._after_read = self._after_read, []
                for fn in after:
                    fn()
        except Exception as exc:  # a bug in internal code: surface it, drop the connection
            log.exception("jetstream_sync: internal error routing a message")
            return errors.ProtocolError(f"internal error routing a message: {exc!r}")
        finally:
            if nmsgs:
                self._in_msgs += nmsgs
                self._in_bytes += nbytes
        return None

    def _await(self, waiter: Waiter, timeout: float) -> bool:
        """Wait for ``waiter`` up to ``timeout``; read the socket in this thread when no
        other thread is reading it, so the answer needs no thread hop to reach us."""
        lock = waiter.lock
        if lock.acquire(False):
            return True
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return lock.acquire(False)
            read = self._read_here(left, waiter.ready)
            if read is None:
                # Another thread is reading (it will wake us) or there is no connection.
                if lock.acquire(timeout=left if self._conn is None else min(left, 0.005)):
                    return True
            elif read and lock.acquire(False):
                return True

    def _read_here(self, timeout: float, ready: Callable[[], int]) -> Optional[int]:
        """Read and route what the socket has in this thread, waiting up to ``timeout`` for
        it, unless ``ready()`` already holds. This is how a thread waiting for an answer
        (request, flush, a full publish_async window) gets it without a thread wake-up.

        None when this thread cannot read: another thread holds the read lock (it will
        route what comes), or there is no connection this thread may read; otherwise
        ``ready()`` afterwards (truthy when it holds: a bool, or a queue's size).
        """
        conn = self._conn
        read_lock = self._read_lock
        if conn is None or not conn.inline or not read_lock.acquire(False):
            return None
        try:
            if ready():  # routed by another thread before we got the lock
                return True
            if self._state is not _CONNECTED or self._conn is not conn:
                return None
            # One poll object per call: a poll object is not for two threads.
            poller = select.poll()
            try:
                poller.register(conn.sock.fileno(), select.POLLIN | select.POLLPRI)
                err = self._read_once(conn) if poller.poll(timeout * 1000.0) else None
            except (OSError, ValueError) as exc:
                err = errors.map_os_error(exc, where=f"connection to {conn.server.url}")
            if err is not None:
                # The network thread owns disconnects: make sure it sees this.
                self._shutdown_socket(conn)
                return None
        finally:
            read_lock.release()
        return ready()

    @staticmethod
    def _shutdown_socket(conn: Conn) -> None:
        try:
            socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def _on_control(self, ev: proto.Event) -> None:
        if ev is proto.PING:
            self._enqueue(proto.PONG_FRAME)
        elif ev is proto.PONG:
            self._on_pong()
        elif isinstance(ev, proto.Info):
            conn = self._conn
            if conn is not None:
                with self._wlock:
                    self._update_info(ev.data, conn.server)
                if ev.data.get("ldm"):
                    self._lame_duck(conn)
        elif isinstance(ev, proto.Err):
            self._on_err(ev.message)

    def _lame_duck(self, conn: Conn) -> None:
        """The server will close its connections soon: report it and, when another server
        is known, move there now rather than wait to be cut off. The move waits for a PONG
        (see Move), so nothing written before it is in doubt."""
        server = conn.server
        if server.lame_until > time.monotonic():
            return  # announced twice
        server.lame_until = time.monotonic() + 120.0  # nats-server's default lame duck span
        with self._wlock:
            others = any(s is not server for s in self._pool)
            if others and self._state is _CONNECTED:
                self._out.append(proto.PING_FRAME)
                self._ctl_frames += 1
                self._pings.append((Move(conn), self._written_frames + len(self._out)))
                self._pings_in_buf += 1
                if not self._kicked:
                    self._kicked = True
                    self._kick.set()
        self._report(
            errors.LameDuckModeError(
                f"server {server.url} entered lame duck mode and will close connections soon; "
                + (
                    "moving to another server now"
                    if others
                    else "no other server is known to move to"
                )
            )
        )

    def _on_err(self, message: str) -> None:
        self._errors_received += 1
        low = message.lower()
        err: errors.NATSError
        if low.startswith("permissions violation"):
            err = errors.PermissionsError(f"server: {message}")
            self._end_denied_sub(message, err)
            self._fail_denied_request(message, err)
        elif "stale connection" in low:
            err = errors.StaleConnectionError(f"server: {message}")
        elif "authorization" in low or "authentication" in low:
            err = errors.AuthorizationError(f"server: {message}")
        else:
            err = errors.ServerError(f"server: {message}")
        self._report(err)
        if not low.startswith(_NON_FATAL_ERRS):
            # The server closes the connection after any other -ERR; closing our side at
            # once means the reconnect does not wait on a server that may never do it.
            conn = self._conn
            if conn is not None:
                self._shutdown_socket(conn)

    def _end_denied_sub(self, message: str, err: errors.NATSError) -> None:
        """The server refused a SUB: end the oldest live subscription it names with ``err``,
        so its next_msg / iteration raise that instead of waiting for messages that never
        come (error_cb still gets the error too)."""
        m = _DENIED_SUB_RE.match(message)
        if m is None:
            return
        subject, queue_name = m.group(1), m.group(2) or ""
        for sub in sorted(list(self._subs.values()), key=lambda s: s.sid):
            if sub.subject == subject and sub.queue == queue_name and sub.is_valid:
                self._forget_sub(sub)
                sub._end(err)
                return

    def _fail_denied_request(self, message: str, err: errors.NATSError) -> None:
        """The server refused a PUB: if a request to that subject waits for its reply, fail
        the oldest such request with ``err`` instead of letting it run into its timeout.
        The server answers every denied PUB with its own -ERR, in order, so the oldest
        waiting request to that subject is the one this -ERR is about."""
        m = _DENIED_PUB_RE.match(message)
        if m is None:
            return
        subject = m.group(1)
        for token, waiter in list(self._resp_map.items()):
            if waiter.subject == subject:
                if self._resp_map.pop(token, None) is waiter:
                    waiter.wake(error=err)
                return

    def _on_pong(self) -> None:
        self._outstanding_pings = 0
        try:
            waiter, mark = self._pings.popleft()
        except IndexError:
            return
        if mark > self._confirmed_frames:
            self._confirmed_frames = mark
        if waiter is not None:
            waiter.wake()

    def _on_disconnect(self, conn: Conn, err: errors.NATSError) -> None:
        unconfirmed = 0
        with self._wlock:
            if self._state is _CONNECTED:
                self._state = _RECONNECTING
            self._pub_fast = False
            self._connected.clear()
            unconfirmed = max(0, self._written_frames - self._confirmed_frames)
            self._confirmed_frames = self._written_frames
            self._rbuf_bytes = sum(map(len, filter(None, self._out)))
            # Pings already written died with the socket; those still buffered will be
            # sent on the next connection and keep their place in the queue.
            dead = len(self._pings) - self._pings_in_buf
            failed = [self._pings.popleft()[0] for _ in range(max(0, dead))]
        self._kill_socket(conn)
        lost = errors.ConnectionLostError(f"connection to {conn.server.url} lost: {err}")
        for waiter in failed:
            if waiter is not None:
                waiter.wake(error=lost)
        self._fail_requests(lost)
        report = errors.ConnectionLostError(
            f"disconnected from {conn.server.url}: {err}"
            + (
                f"; {unconfirmed} frame(s) written since the server last confirmed "
                "receipt may not have arrived"
                if unconfirmed
                else ""
            ),
            unconfirmed=unconfirmed,
        )
        report.__cause__ = err
        self._report(report)
        self._callback(self._disconnected_cb)

    def _reconnect_loop(self) -> Optional[Conn]:
        while not self._closing:
            server = self._pick_server()
            if server is None:
                return None
            delay = server.last_attempt + self._reconnect_wait - time.monotonic()
            if delay > 0:
                delay += random.uniform(0, self._reconnect_jitter)
                if self._stop.wait(delay):
                    return None
            server.last_attempt = time.monotonic()
            server.reconnects += 1
            try:
                conn = self._open(server)
            except errors.NATSError as exc:
                self._report(errors.ConnectionLostError(f"reconnect to {server.url} failed: {exc}"))
                continue
            if self._install(conn, reconnect=True):
                return conn
            return None
        return None

    def _pick_server(self) -> Optional[Server]:
        """The next server with attempts left; it moves to the back of the pool. Servers in
        lame duck mode come last."""
        now = time.monotonic()
        with self._wlock:
            limit = self._max_reconnect_attempts
            for lame_ok in (False, True):
                for i, server in enumerate(self._pool):
                    if (limit < 0 or server.reconnects < limit) and (
                        lame_ok or server.lame_until <= now
                    ):
                        self._pool.append(self._pool.pop(i))
                        return server
        return None

    def _kill_socket(self, conn: Conn) -> None:
        """Wake every thread blocked on ``conn``'s socket, then close it."""
        conn.broken = True
        self._shutdown_socket(conn)
        if conn.ep is not None or not conn.inline:
            # The network thread waits in (e)poll on this socket: let it see the shutdown
            # before the descriptor goes (and its number may be reused).
            conn.reader_left.wait(1.0)
        # Writers hold the send lock for one non-blocking send, never longer: the bound is
        # a safeguard only.
        locked = self._send_lock.acquire(timeout=2.0)
        try:
            conn.tail = None
            conn.sock.close()
        except OSError:
            pass
        finally:
            if locked:
                self._send_lock.release()

    # --- writing ------------------------------------------------------------------------

    def _run_flusher(self) -> None:
        kick = self._kick
        while True:
            kick.wait()
            kick.clear()
            if self._state is _CLOSED or self._state is _FORKED:
                return
            if not self._write_pending():
                self._write_slow()

    def _write_pending(self) -> bool:
        """Write the buffer to the socket without waiting, from whichever thread calls.

        True when nothing is left unsent on the connection; False when the kernel's send
        buffer is full and part of it waits as the connection's tail (the flusher is woken
        to wait for room: see _write_slow). Never blocks but for the locks, which no thread
        holds across a wait.
        """
        with self._send_lock:
            conn = self._conn
            if conn is None or conn.broken:
                return True
            tail = conn.tail
            if tail is not None and not self._send(conn, tail):
                return False  # the older bytes first: the new frames stay queued meanwhile
            with self._wlock:
                # Reset before taking: a publish that sees False after this point kicks
                # again, one that saw True before it is in this batch.
                self._kicked = False
                out = self._out
                if not out or self._state is not _CONNECTED or conn is not self._conn:
                    return True
                out.append(None)
                frames = list(iter(out.popleft, None))
                self._written_frames += len(frames)
                self._pings_in_buf = 0
            return self._send(conn, b"".join(frames))

    def _send(self, conn: Conn, data: Union[bytes, memoryview]) -> bool:
        """One non-blocking send of ``data`` (the caller holds the send lock); what the
        kernel did not take becomes the connection's tail. True when all of it went (or the
        socket is dead: the network thread reconnects, and nothing waits here)."""
        try:
            n = conn.sock.send(data)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            n = 0  # TLS: retried later with the same bytes, as OpenSSL requires
        except (OSError, ValueError):
            conn.tail = None
            conn.broken = True
            self._shutdown_socket(conn)  # the reader sees it too and reconnects; wake it now
            return True
        if n == len(data):
            conn.tail = None
            return True
        if n or conn.tail is None:
            conn.progress_at = time.monotonic()
        conn.tail = memoryview(data)[n:]
        self._kick.set()  # the flusher waits for room and writes the rest
        return False

    def _write_slow(self, until: Optional[float] = None) -> bool:
        """Wait for room in the send buffer and write, until the connection's tail is out
        (True), or ``until`` (a monotonic time) passes, or the connection is gone (False).
        No lock is held while waiting. A tail that makes no progress for write_timeout
        marks the connection stale: the socket is shut down and the network thread
        reconnects, as for unanswered pings."""
        conn = self._conn
        if conn is None:
            return True
        while conn.tail is not None:
            if conn.broken or self._conn is not conn or self._state is not _CONNECTED:
                return False
            now = time.monotonic()
            left = conn.progress_at + self._write_timeout - now
            if left <= 0:
                self._stale_write(conn)
                return False
            if until is not None:
                if now >= until:
                    return False
                left = min(left, until - now)
            try:
                # select, not poll: a descriptor closed meanwhile is an error, not a wait.
                select.select([], [conn.sock], [], min(left, _WRITE_SLICE))
            except (OSError, ValueError):
                return False
            self._write_pending()
        return True

    def _stale_write(self, conn: Conn) -> None:
        """The peer stopped reading: report it once and shut the socket (the network thread
        then sees the connection end and runs the normal reconnect)."""
        if conn.broken:
            return
        conn.broken = True
        self._report(
            errors.StaleConnectionError(
                f"server {conn.server.url}: a write made no progress for "
                f"{self._write_timeout} s (the peer stopped reading): connection is stale"
            )
        )
        self._shutdown_socket(conn)

    def _write_behind(self) -> None:
        """A publisher far ahead of the socket (past _HIGH_WATER) writes the buffer itself
        and, when the kernel's send buffer is full, waits for room: back-pressure, and
        bounded memory. The wait ends within write_timeout whatever the peer does."""
        if not self._write_pending():
            self._write_slow()

    def _enqueue(self, frame: bytes) -> None:
        """Queue a control frame (SUB, UNSUB, PONG) if there is a connection to send it on."""
        with self._wlock:
            self._enqueue_locked(frame)

    def _enqueue_locked(self, frame: bytes) -> None:
        # While disconnected, SUB/UNSUB are not buffered: the reconnect handshake
        # re-subscribes from the table, which must change in the same critical section.
        if self._state is _CONNECTED:
            self._out.append(frame)
            self._ctl_frames += 1
            if not self._kicked:
                self._kicked = True
                self._kick.set()

    # --- publishing ---------------------------------------------------------------------

    def publish(
        self,
        subject: str,
        data: bytes = b"",
        reply: Optional[str] = None,
        headers: Optional[HeadersLike] = None,
    ) -> None:
        """Publish ``data`` to ``subject``. Returns once queued; ``flush()`` confirms."""
        if reply is None and headers is None:
            try:  # (try costs nothing until it catches; a subscript beats .get())
                prefix = self._pub_cache[subject]
            except (KeyError, TypeError):
                prefix = self._cache_prefix(subject)
            if data.__class__ is not bytes:
                data = _as_bytes(data)
            n = len(data)
            if n > self._max_payload:
                raise errors.MaxPayloadError(
                    f"payload of {n} bytes exceeds the server's max_payload of {self._max_payload}"
                )
            try:
                size = _SIZE_LINES[n]
            except KeyError:
                size = _size_line(n)
            frame = b"".join((prefix, size, data, _CRLF))
        else:
            frame, n = self._build_pub(subject, data, reply, headers)
        if not self._pub_fast:
            self._enqueue_pub_slow(frame, n)
            return
        # No lock: deque.append is atomic, and the counter is only a statistic (an
        # interleaved += can at worst miss a count, never a message). out_msgs is derived.
        out = self._out
        out.append(frame)
        self._out_bytes += n
        if not self._kicked:
            self._kicked = True
            self._kick.set()
        if len(out) > _HIGH_WATER:
            self._write_behind()

    def _cache_prefix(self, subject: Any) -> bytes:
        prefix = proto.pub_prefix(subject)
        if len(self._pub_cache) >= 4096:
            self._pub_cache.clear()
        self._pub_cache[subject] = prefix
        return prefix

    def _build_pub(
        self, subject: str, data: Any, reply: Optional[str], headers: Optional[HeadersLike]
    ) -> Tuple[bytes, int]:
        data = _as_bytes(data)
        if reply is not None and not isinstance(reply, str):
            raise errors.BadSubjectError(f"reply subject must be a str, got {type(reply).__name__}")
        if headers is None:
            prefix = proto.pub_prefix(subject, reply)
            size = len(data)
            self._check_payload(size)
            return proto.PUB_TEMPLATE % (prefix, size, data), size
        block = encode_headers(headers)
        size = len(block) + len(data)
        self._check_payload(size)
        return proto.HPUB_TEMPLATE % (
            proto.hpub_prefix(subject, reply),
            len(block),
            size,
            block,
            data,
        ), size

    def _check_payload(self, size: int) -> None:
        if size > self._max_payload:
            raise errors.MaxPayloadError(
                f"message of {size} bytes (headers included) exceeds the server's "
                f"max_payload of {self._max_payload}"
            )

    def _enqueue_pub_slow(self, frame: bytes, n: int) -> None:
        self._check_usable_in_process()
        with self._wlock:
            state = self._state
            if state is _CLOSED or self._closing:
                raise errors.ConnectionClosedError("cannot publish: the client is closed")
            if self._draining_pubs:
                raise errors.ConnectionClosedError("cannot publish: the client is draining")
            if state is _NEW:
                raise errors.ConnectionClosedError("cannot publish: the client is not connected")
            if state is _RECONNECTING:
                if self._rbuf_bytes + len(frame) > self._reconnect_buf_size:
                    raise errors.OutboundBufferLimitError(
                        f"disconnected, and the reconnect buffer ({self._reconnect_buf_size} "
                        "bytes) is full: this message was not published"
                    )
                self._rbuf_bytes += len(frame)
            self._out.append(frame)
            self._out_bytes += n
            if state is _CONNECTED and not self._kicked:
                self._kicked = True
                self._kick.set()

    # --- subscribing --------------------------------------------------------------------

    def subscribe(
        self,
        subject: str,
        queue: Optional[str] = None,
        cb: Optional[Callable[[Msg], None]] = None,
        max_msgs: Optional[int] = None,
        pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
        pending_bytes_limit: int = DEFAULT_PENDING_BYTES,
    ) -> Subscription:
        """Subscribe to ``subject``; read with ``next_msg``, iteration, or ``cb``."""
        proto.check_subscribe_subject(subject)
        if queue is not None:
            proto.check_queue(queue)
        _check_callable(cb, "cb")
        _check_positive_int(max_msgs, "max_msgs", allow_none=True)
        _check_positive_int(pending_msgs_limit, "pending_msgs_limit")
        _check_positive_int(pending_bytes_limit, "pending_bytes_limit")
        return self._subscribe(
            subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit
        )

    def _subscribe(
        self,
        subject: str,
        queue: Optional[str],
        cb: Optional[Callable[[Msg], None]],
        max_msgs: Optional[int],
        pending_msgs_limit: int,
        pending_bytes_limit: int,
        hook: Optional[MessageHook] = None,
        on_take: Optional[MessageHook] = None,
    ) -> Subscription:
        """Subscribe without argument checks; ``hook`` is the internal reader-side filter,
        ``on_take`` the one run where the user takes a message (both in place before the
        server knows the subscription)."""
        self._check_open("subscribe")
        sid = next(self._sids)
        sub = Subscription(
            self,
            sid,
            subject,
            queue,
            cb,
            max_msgs,
            pending_msgs_limit,
            pending_bytes_limit,
            hook,
            on_take,
        )
        frame = proto.encode_sub(subject, sid, queue)
        if max_msgs:
            frame += proto.encode_unsub(sid, max_msgs)
        with self._wlock:
            self._subs[sid] = sub
            self._enqueue_locked(frame)
        return sub

    def _unsubscribe(self, sub: Subscription) -> None:
        with self._wlock:
            if self._subs.pop(sub.sid, None) is not None:
                self._enqueue_locked(proto.encode_unsub(sub.sid))
        sub._end(
            errors.BadSubscriptionError(
                f"subscription {sub.sid} on {sub.subject!r} is unsubscribed"
            )
        )

    def _auto_unsubscribe(self, sub: Subscription, limit: int) -> None:
        self._enqueue(proto.encode_unsub(sub.sid, limit))

    def _retire_sub(self, sub: Subscription) -> None:
        """UNSUB now, but keep routing ``sub``'s messages until the server has seen the
        UNSUB (the PONG of a PING sent right after it): what the server sent meanwhile
        reaches the hook instead of vanishing with an unknown sid."""
        with self._wlock:
            if self._subs.get(sub.sid) is not sub:
                return
            if self._state is not _CONNECTED:
                del self._subs[sub.sid]  # nothing in flight; a reconnect will not renew it
                return
            self._out.append(proto.encode_unsub(sub.sid))
            self._out.append(proto.PING_FRAME)
            self._ctl_frames += 2
            self._pings.append((Forget(self._subs, sub), self._written_frames + len(self._out)))
            self._pings_in_buf += 1
            if not self._kicked:
                self._kicked = True
                self._kick.set()

    def _drop_interest(self, sub: Subscription) -> None:
        """UNSUB and stop routing to ``sub``, but leave its queue open (an ordered push
        subscription keeps handing out what came, from its next inboxes)."""
        with self._wlock:
            if self._subs.pop(sub.sid, None) is not None:
                self._enqueue_locked(proto.encode_unsub(sub.sid))

    def _forget_sub(self, sub: Subscription) -> None:
        self._subs.pop(sub.sid, None)

    def _drain_sub(self, sub: Subscription, deadline: Deadline) -> None:
        """UNSUB, then a round trip so every message sent before it has arrived."""
        self._enqueue(proto.encode_unsub(sub.sid))
        try:
            if self._state is _CONNECTED:
                self.flush(deadline.remaining())
        finally:
            self._forget_sub(sub)
            sub._end(
                errors.BadSubscriptionError(f"subscription {sub.sid} on {sub.subject!r} is drained")
            )

    # --- request / reply ----------------------------------------------------------------

    def new_inbox(self) -> str:
        """A unique subject under this client's inbox prefix."""
        return f"{self._inbox_prefix}.{self._nuid.next()}"

    def _ensure_resp_sub(self) -> None:
        if self._resp_sub is not None:
            return
        with self._resp_lock:
            if self._resp_sub is None:
                prefix = f"{self._inbox_prefix}.{self._nuid.next()}."
                self._resp_prefix = prefix
                self._resp_sub = self._subscribe(
                    prefix + "*",
                    None,
                    None,
                    None,
                    DEFAULT_PENDING_MSGS,
                    DEFAULT_PENDING_BYTES,
                    hook=self._on_response,
                )

    def _on_response(self, msg: Msg) -> bool:
        waiter = self._resp_map.pop(msg.subject[len(self._resp_prefix) :], None)
        if waiter is not None:
            waiter.wake(msg)
        return True  # replies nobody waits for any more (timed out) are expected: drop

    def _fail_requests(self, error: errors.NATSError) -> None:
        while self._resp_map:
            try:
                _, waiter = self._resp_map.popitem()
            except KeyError:
                break
            waiter.wake(error=error)

    def request(
        self,
        subject: str,
        data: bytes = b"",
        timeout: float = 1.0,
        headers: Optional[HeadersLike] = None,
    ) -> Msg:
        """Publish a request and wait for the first reply.

        Raises :class:`NoRespondersError` when nobody is subscribed (status 503) and
        :class:`~jetstream_sync.TimeoutError` when no reply came in time.
        """
        t = check_timeout(timeout, "request timeout")
        return self._request(subject, data, t, headers, None)

    def _api_request(self, subject: str, data: bytes, timeout: float) -> Msg:
        """A request on a subject JetStream built from checked parts. A consumer-create
        subject ends with the consumer's filter, wildcards included (the server and nats.go
        do so), which the check of a user's publish subject refuses: only the subscribe
        rules apply here."""
        proto.check_subscribe_subject(subject)
        return self._request(subject, data, timeout, None, b"PUB %b " % subject.encode())

    def _request(
        self,
        subject: str,
        data: bytes,
        t: float,
        headers: Optional[HeadersLike],
        prefix: Optional[bytes],
    ) -> Msg:
        self._check_open("request")
        self._ensure_resp_sub()
        token = str(next(self._req_ids))
        waiter = Waiter(subject)
        self._resp_map[token] = waiter
        conn = self._conn
        if conn is not None and conn.inline:
            conn.quiet_begin()  # the reply is ours to read: the network thread sleeps on
        try:
            if prefix is None:
                self._send_request(subject, data, self._resp_prefix + token, headers)
            else:  # (never through the publish cache, which holds checked subjects only)
                data = _as_bytes(data)
                n = len(data)
                self._check_payload(n)
                reply = (self._resp_prefix + token).encode()
                size = _SIZE_LINES.get(n) or _size_line(n)
                self._send_frame(b"".join((prefix, reply, b" ", size, data, _CRLF)), n)
            if not self._await(waiter, t):
                raise errors.TimeoutError(f"request on {subject!r}: no reply within {t} s")
        finally:
            self._resp_map.pop(token, None)
            if conn is not None and conn.inline:
                conn.quiet_end()
        if waiter.error is not None:
            raise waiter.error
        msg = waiter.msg
        assert msg is not None
        if msg._hdr is not None and msg.status == 503:
            raise errors.NoRespondersError(f"no responders are listening on {subject!r}")
        return msg

    def _send_now(self, subject: str, data: Any, headers: Optional[HeadersLike] = None) -> None:
        """Publish and write from this thread at once (a reply: latency over batching)."""
        if headers is None and subject.__class__ is str:
            self._send_request(subject, data, "", None)
        else:
            frame, n = self._build_pub(subject, data, None, headers)
            self._send_frame(frame, n)

    def _send_request(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> None:
        """Queue a request and write it from this thread at once: waking the flusher
        would cost a thread hop."""
        self._send_frame(*self._frame_own_reply(subject, data, reply, headers))

    def _fixed_request(self, subject: str, data: bytes) -> Tuple[bytes, bytes, int]:
        """A request that is sent again and again with only its reply changing (fetch(1)'s
        pull): the frame's parts before and after the reply, checked once here. Send with
        ``_send_frame(head + reply.encode() + tail, n)``."""
        prefix = self._pub_cache.get(subject) or self._cache_prefix(subject)
        n = len(data)
        self._check_payload(n)
        return prefix, b" " + (_SIZE_LINES.get(n) or _size_line(n)) + data + _CRLF, n

    def _publish_own_reply(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> None:
        """publish() with a reply subject this client made (an inbox): no need to check it.
        publish_async's path: _frame_own_reply and _enqueue_frame inlined."""
        if headers is not None or subject.__class__ is not str or data.__class__ is not bytes:
            self._enqueue_frame(*self._frame_own_reply(subject, data, reply, headers))
            return
        prefix = self._pub_cache.get(subject)
        if prefix is None:
            prefix = self._cache_prefix(subject)
        n = len(data)
        if n > self._max_payload:
            self._check_payload(n)
        size = _SIZE_LINES.get(n) or _size_line(n)
        frame = b"".join((prefix, reply.encode(), b" ", size, data, _CRLF))
        if not self._pub_fast:
            self._enqueue_pub_slow(frame, n)
            return
        out = self._out
        out.append(frame)
        self._out_bytes += n
        if not self._kicked:
            self._kicked = True
            self._kick.set()
        if len(out) > _HIGH_WATER:
            self._write_behind()

    def _publish_trusted(self, subject: str, data: bytes) -> None:
        """Publish to a subject the server gave us (an ack subject): valid by construction,
        and unique, so neither checked nor cached."""
        n = len(data)
        try:
            size = _SIZE_LINES[n]
        except KeyError:
            size = _size_line(n)
        frame = b"".join((b"PUB ", subject.encode(), b" ", size, data, _CRLF))
        if not self._pub_fast:
            self._enqueue_pub_slow(frame, n)
            return
        out = self._out
        out.append(frame)
        self._out_bytes += n
        if len(out) > _HIGH_WATER:
            self._write_behind()
        elif self._kicked:
            pass
        elif len(out) >= _ACK_BATCH:
            # A batch being acked: let the server work through these while we go on.
            self._kicked = True
            self._kick.set()
        elif not self._linger:
            # An ack is not urgent, and the caller's next request (the next fetch) usually
            # writes it along within microseconds: wake the flusher only if that has not
            # happened within _ACK_LINGER, instead of a thread wake-up per ack.
            self._linger = True
            timers = self._timers
            if timers is None or self._closing:
                self._linger_done()
            else:
                timers.call_later(_ACK_LINGER, self._linger_done)

    def _linger_done(self) -> None:
        """Timer thread: acks left in the buffer since _ACK_LINGER go to the flusher."""
        self._linger = False
        if self._out and not self._kicked:
            self._kicked = True
            self._kick.set()

    def _enqueue_frame(self, frame: bytes, n: int) -> None:
        # publish() inlines this same tail rather than calling it: publish is the hottest
        # path there is, and a call is a tenth of its cost.
        if not self._pub_fast:
            self._enqueue_pub_slow(frame, n)
            return
        out = self._out
        out.append(frame)
        self._out_bytes += n
        if not self._kicked:
            self._kicked = True
            self._kick.set()
        if len(out) > _HIGH_WATER:
            self._write_behind()

    def _frame_own_reply(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> Tuple[bytes, int]:
        """A PUB frame; ``subject`` goes through the cached checks, ``reply`` (ours, valid by
        construction, or empty) through none."""
        if headers is not None:
            return self._build_pub(subject, data, reply or None, headers)
        prefix = self._pub_cache.get(subject) if subject.__class__ is str else None
        if prefix is None:
            prefix = self._cache_prefix(subject)
        if data.__class__ is not bytes:
            data = _as_bytes(data)
        n = len(data)
        self._check_payload(n)
        size = _SIZE_LINES.get(n) or _size_line(n)
        if reply:
            return b"".join((prefix, reply.encode(), b" ", size, data, _CRLF)), n
        return b"".join((prefix, size, data, _CRLF)), n

    def _send_frame(self, frame: bytes, n: int) -> None:
        if not self._pub_fast:
            self._enqueue_pub_slow(frame, n)
            return
        self._out.append(frame)
        self._out_bytes += n
        self._write_pending()

    # --- the seam JetStream builds on (besides subscription hooks) --------------------------

    def _call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run internal ``fn`` on the timer thread after ``delay`` (not after close)."""
        if self._timers is not None and not self._closing:
            self._timers.call_later(delay, fn)

    def _remove_close_hook(self, fn: Callable[[], None]) -> None:
        try:
            self._close_hooks.remove(fn)
        except ValueError:
            pass

    def _add_reconnect_hook(self, fn: Callable[[], None]) -> None:
        """Run internal ``fn`` on the network thread after each reconnect (it must not
        block: pull consumers use it to re-pull, since the server forgot their pulls)."""
        self._reconnect_hooks.append(fn)

    def _remove_reconnect_hook(self, fn: Callable[[], None]) -> None:
        try:
            self._reconnect_hooks.remove(fn)
        except ValueError:
            pass

    def _add_close_hook(self, fn: Callable[[], None]) -> None:
        """Run internal ``fn`` once when the client closes (or at once if it has)."""
        if self._closing:
            fn()
        else:
            self._close_hooks.append(fn)

    # --- JetStream ----------------------------------------------------------------------

    def jetstream(
        self,
        prefix: str = "$JS.API",
        domain: Optional[str] = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
        publish_async_stall_wait: float = 5.0,
    ) -> JetStream:
        """A JetStream context on this connection (``$JS.API``, or ``$JS.<domain>.API``)."""
        from .jetstream.context import JetStream

        self._check_open("use JetStream")
        return JetStream(
            self, prefix, domain, timeout, publish_async_max_pending, publish_async_stall_wait
        )

    # --- flush, ping, drain, close --------------------------------------------------------

    def flush(self, timeout: float = 2.0) -> None:
        """Send everything buffered and wait for the server to confirm it (PING/PONG)."""
        t = check_timeout(timeout, "flush timeout")
        deadline = Deadline(t, "flush")
        self._check_open("flush")
        if not self._connected.is_set() and not self._connected.wait(deadline.remaining()):
            raise errors.TimeoutError(f"flush: not reconnected within {timeout} s")
        waiter = Waiter()
        with self._wlock:
            if self._state is not _CONNECTED:
                raise (
                    errors.ConnectionClosedError("flush: the client is closed")
                    if self._closing or self._state is _CLOSED
                    else errors.ConnectionLostError("flush: the connection was lost")
                )
            self._out.append(proto.PING_FRAME)
            self._ctl_frames += 1
            self._pings.append((waiter, self._written_frames + len(self._out)))
            self._pings_in_buf += 1
        self._write_pending()
        if not self._await(waiter, deadline.remaining()):
            raise errors.TimeoutError(f"flush: no PONG from the server within {timeout} s")
        if waiter.error is not None:
            raise waiter.error

    def _ping_tick(self) -> None:
        conn = self._conn
        if self._state is _CONNECTED and conn is not None:
            if self._outstanding_pings >= (self._max_outstanding_pings or 2):
                self._report(
                    errors.StaleConnectionError(
                        f"server {conn.server.url} did not answer {self._outstanding_pings} pings "
                        f"(ping_interval {self._ping_interval} s): connection is stale"
                    )
                )
                self._outstanding_pings = 0
                self._shutdown_socket(conn)
            else:
                self._outstanding_pings += 1
                with self._wlock:
                    if self._state is _CONNECTED:
                        self._out.append(proto.PING_FRAME)
                        self._ctl_frames += 1
                        self._pings.append((None, self._written_frames + len(self._out)))
                        self._pings_in_buf += 1
                        if not self._kicked:
                            self._kicked = True
                            self._kick.set()
        self._call_later(self._ping_interval, self._ping_tick)

    def drain(self, timeout: float = 30.0) -> None:
        """Unsubscribe everything, let callbacks finish, flush publishes, then close."""
        deadline = Deadline(check_timeout(timeout, "drain timeout"), "drain")
        self._check_open("drain")
        subs = [s for s in list(self._subs.values()) if s is not self._resp_sub]
        try:
            for sub in subs:
                self._enqueue(proto.encode_unsub(sub.sid))
            if self._state is _CONNECTED:
                self.flush(deadline.remaining())
            for sub in subs:
                self._forget_sub(sub)
                sub._end(
                    errors.BadSubscriptionError(
                        f"subscription {sub.sid} on {sub.subject!r} is drained"
                    )
                )
            for sub in subs:
                sub._wait_done(deadline.remaining())
            with self._wlock:
                self._draining_pubs = True
                self._pub_fast = False
            if self._state is _CONNECTED:
                self.flush(deadline.remaining())
        finally:
            self.close()

    def close(self) -> None:
        """Send what is buffered (best effort), close the socket, end every subscription.

        Idempotent. Messages still queued in subscriptions stay readable.
        """
        if self._state is _FORKED:
            self._closing = True
            return
        if self._state is _NEW:
            self._state = _CLOSED
            return
        if self._closing:
            if threading.current_thread() not in self._threads:
                self._closed_event.wait(10.0)
            return
        # Best effort, bounded: a peer that stops reading gets _CLOSE_WRITE, no more.
        if self._state is _CONNECTED and self._conn is not None and not self._write_pending():
            self._write_slow(until=time.monotonic() + min(_CLOSE_WRITE, self._write_timeout))
        self._shutdown(None)

    def _shutdown(self, reason: Optional[errors.NATSError]) -> None:
        """Final teardown, from close() or from the network thread giving up."""
        with self._wlock:
            if self._closing:
                return
            self._closing = True
            self._state = _CLOSED
            self._pub_fast = False
            lost = sum(1 for f in self._out if f is not None and f.startswith((b"PUB ", b"HPUB ")))
            self._dropped_frames += len(self._out)
            self._out.clear()
            waiters = [w for w, _ in self._pings]
            self._pings.clear()
        self._stop.set()
        self._connected.set()  # wake flush() calls waiting for a reconnect: they see CLOSED
        conn = self._conn
        if conn is not None:
            self._kill_socket(conn)
        if reason is not None:
            self._last_error = reason
            self._report(reason)
        if lost:
            self._report(
                errors.MessagesLostError(
                    f"closed with {lost} unsent publish(es) in the buffer: they were not sent",
                    count=lost,
                )
            )
        closed = reason or errors.ConnectionClosedError("the client is closed")
        for waiter in waiters:
            if waiter is not None:
                waiter.wake(error=closed)
        self._fail_requests(closed)
        for hook in self._close_hooks:
            try:
                hook()
            except Exception:
                log.exception("jetstream_sync: a close hook failed")
        for sub in list(self._subs.values()):
            sub._end(
                closed
                if isinstance(closed, errors.ConnectionClosedError)
                else errors.ConnectionClosedError(f"the client closed: {closed}")
            )
        self._subs.clear()
        if self._timers is not None:
            self._timers.stop()
        self._kick.set()
        self._callback(self._closed_cb)
        self._cb_queue.put(None)
        me = threading.current_thread()
        for t in self._threads:
            if t is not me and t.is_alive():
                t.join(5.0)
        self._closed_event.set()

    # --- callbacks and errors -----------------------------------------------------------

    def _run_callbacks(self) -> None:
        while True:
            item = self._cb_queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("jetstream_sync: a connection callback raised")

    def _callback(self, fn: Optional[Callable[..., None]], *args: Any) -> None:
        if fn is not None:
            self._cb_queue.put((fn, args))

    def _report(self, err: errors.NATSError) -> None:
        """Hand ``err`` to error_cb on the callback thread (or log it when there is none)."""
        if self._error_cb is not None and self._state is not _NEW:
            self._cb_queue.put((self._error_cb, (err,)))
        else:
            log.warning("jetstream_sync: %s: %s", type(err).__name__, err)

    def _on_internal_error(self, exc: BaseException) -> None:
        log.error("jetstream_sync: internal error in a timer: %r", exc, exc_info=exc)

    # --- checks ---------------------------------------------------------------------------

    def _check_usable_in_process(self) -> None:
        if self._state is _FORKED:
            raise errors.ClientForkedError(
                f"this client was created in process {self._pid} and cannot be used after "
                f"fork in process {os.getpid()}: connect a new client in the child"
            )

    def _check_open(self, what: str) -> None:
        self._check_usable_in_process()
        if self._state is _CLOSED or self._closing:
            raise errors.ConnectionClosedError(f"cannot {what}: the client is closed")
        if self._state is _NEW:
            raise errors.ConnectionClosedError(f"cannot {what}: the client is not connected")

    @staticmethod
    def _check_timeout(value: Any, what: str, allow_none: bool = False) -> Optional[float]:
        return check_timeout(value, what, allow_none=allow_none)

    @staticmethod
    def _deadline(timeout: Any, what: str) -> Deadline:
        return Deadline(check_timeout(timeout, what), what)

    def _mark_forked(self) -> None:
        """In a forked child: disown the parent's socket without touching it or any lock."""
        self._state = _FORKED
        self._pub_fast = False
        conn = self._conn
        if conn is not None:
            try:
                os.close(conn.sock.detach())  # closes only the child's copy of the fd
            except OSError:
                pass

    # --- properties -----------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._state is _CONNECTED

    @property
    def is_reconnecting(self) -> bool:
        return self._state is _RECONNECTING

    @property
    def is_closed(self) -> bool:
        return self._state is _CLOSED or self._closing

    @property
    def connected_url(self) -> Optional[str]:
        conn = self._conn
        return conn.server.url if conn is not None and self._state is _CONNECTED else None

    @property
    def servers(self) -> List[str]:
        """The server pool, discovered servers included (no credentials)."""
        return [s.url for s in self._pool]

    @property
    def server_info(self) -> Dict[str, Any]:
        return dict(getattr(self, "_server_info", {}))

    @property
    def max_payload(self) -> int:
        return self._max_payload

    @property
    def stats(self) -> Dict[str, int]:
        """in_msgs, out_msgs, in_bytes, out_bytes (payloads), reconnects, errors_received."""
        return {
            "in_msgs": self._in_msgs,
            "out_msgs": self._written_frames
            + len(self._out)
            + self._dropped_frames
            - self._ctl_frames,
            "in_bytes": self._in_bytes,
            "out_bytes": self._out_bytes,
            "reconnects": self._reconnects,
            "errors_received": self._errors_received,
        }

    @property
    def last_error(self) -> Optional[errors.NATSError]:
        return self._last_error

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        url = self.connected_url or "-"
        return f"<jetstream_sync.Client {self._state} {url}>"


def connect(servers: Union[str, Sequence[str]] = DEFAULT_URL, **options: Any) -> Client:
    """Connect to NATS and return a :class:`Client`.

    ``servers`` is a URL (``nats://user:pass@host:4222``, ``tls://host``), a comma-separated
    list of them, or a list. Options: name, error_cb, disconnected_cb, reconnected_cb,
    closed_cb, user, password, token, tls (an ``ssl.SSLContext``), tls_hostname,
    tls_handshake_first (TLS before the server's INFO, for ``tls { handshake_first: true }``),
    nkeys_seed (a seed or a seed file), user_credentials (a .creds file), user_jwt_cb with
    signature_cb (see ``jetstream_sync._auth``; seeds need ``jetstream-sync[nkeys]``),
    connect_timeout, allow_reconnect, max_reconnect_attempts (-1: no limit),
    reconnect_time_wait, reconnect_jitter, reconnect_buf_size, ping_interval,
    max_outstanding_pings, write_timeout (a write that makes no progress for this long, 10 s
    by default, marks the connection stale and reconnects), no_randomize, echo, inbox_prefix,
    verbose, pedantic.
    """
    return Client().connect(servers, **options)
