"""Client: one connection to a NATS server, its public API, and the life of the connection
(connect, reconnect, close). The work is done by rooms with one job each:

* ``_dial.py``: opening a connection (socket, TLS, CONNECT, the first PING/PONG).
* ``_servers.py``: the server pool and the reconnect policy (which server next, when).
* ``_network.py``: the **network thread**: it reads until the socket dies, then runs the
  reconnect loop; PING, PONG, INFO and -ERR are handled there (``Network.on_control``). It
  never runs user code.
* ``_reader.py``: the read loop and routing, and the same reading done by a caller waiting
  for its own answer (request, flush, fetch), so that the answer needs no thread wake-up.
* ``_outbox.py``: the write buffer, every frame that goes into it, and the **flusher**
  thread that writes it; every write is non-blocking and has a deadline (write_timeout).
* ``_subs.py``: the subscription table; ``_requests.py``: the request mux.
* ``_callbacks.py``: the **callback thread** (error_cb, disconnected_cb, reconnected_cb,
  closed_cb, in order) and the internal reconnect and close hooks.
* ``_timers.py``: the **timer thread** (pings, and JetStream's watchdogs and expiries).
* ``_link.py``: what all of them share: the state, the live socket, the locks and their
  order. ``_seam.py``: the one interface JetStream and Spark use of all this.

Subscription callbacks run on their own per-subscription dispatcher thread (see
subscription.py).
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Union

from . import _protocol as proto
from . import errors
from ._auth import JWTCallback, PathOrSeed, SignatureCallback, UserAuth
from ._callbacks import Callbacks, Hooks
from ._conn import Conn, Waiter
from ._dial import DialOptions
from ._link import CLOSED, CONNECTED, FORKED, NEW, RECONNECTING, Link
from ._network import Network
from ._nuid import NUID
from ._outbox import CRLF, HIGH_WATER, SIZE_LINES, Outbox, as_bytes, size_line
from ._reader import Reader
from ._requests import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS, RequestMux
from ._servers import ServerPool, parse_url
from ._subs import SubscriptionTable
from ._timeouts import Deadline, check_timeout
from ._timers import Timers
from .msg import HeadersLike, Msg
from .subscription import Subscription

if TYPE_CHECKING:  # pragma: no cover
    from ._seam import Core
    from .jetstream.context import JetStream

__all__ = ["DEFAULT_URL", "Client", "connect"]

log = logging.getLogger("jetstream_sync")

DEFAULT_URL = "nats://127.0.0.1:4222"
# close() gives what is buffered at most this long to leave (a peer that stops reading must
# not hold close() up).
_CLOSE_WRITE = 2.0
# -ERR messages after which the server keeps the connection open.
_NON_FATAL_ERRS = ("permissions violation", "invalid subject", "invalid publish subject")

ErrorCallback = Callable[[Exception], None]
Callback = Callable[[], None]


# --- fork safety ---------------------------------------------------------------------

_live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(_live_clients):
        client._mark_forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


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
        link = self._link = Link()
        self._callbacks = Callbacks(link)
        self._report = self._callbacks.report
        self._outbox = Outbox(link, self._report)
        self._table = SubscriptionTable(link, self._outbox, self._report, self.flush)
        self._reader = Reader(link, self._table.subs, self._report)
        self._nuid = NUID()
        self._requests = RequestMux(self._outbox, self._reader, self._table, self._nuid)
        self._hooks = Hooks(link, self._on_internal_error)
        self._network = Network(
            link,
            self._outbox,
            self._reader,
            self._table,
            self._requests,
            self._callbacks,
            self._hooks,
            self,
            self._shutdown,
        )
        self._reader.on_control = self._network.on_control
        # What messages call back into (Msg.respond, Msg.ack): the outbox's own methods.
        self._send_now = self._outbox.send_now
        self._publish_trusted = self._outbox.publish_trusted
        self._inbox_prefix = "_INBOX"
        self._closed_event = threading.Event()
        self._threads: List[threading.Thread] = []
        self._timers: Optional[Timers] = None
        self._last_error: Optional[errors.NATSError] = None
        self._closed_cb: Optional[Callback] = None
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
        retry_on_failed_connect: bool = False,
    ) -> Client:
        """Connect to the first reachable server of ``servers``; see :func:`connect`."""
        if self._link.state is not NEW:
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
        parsed = [parse_url(u) for u in urls]
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
        if not isinstance(retry_on_failed_connect, bool):
            raise errors.InvalidArgumentError(
                "retry_on_failed_connect must be a bool, "
                f"got {type(retry_on_failed_connect).__name__}"
            )
        if (user is None) != (password is None):
            raise errors.InvalidArgumentError("user and password go together: give both or neither")
        if not isinstance(max_reconnect_attempts, int) or isinstance(max_reconnect_attempts, bool):
            raise errors.InvalidArgumentError(
                "max_reconnect_attempts must be an int (-1 for no limit), "
                f"got {max_reconnect_attempts!r}"
            )
        proto.check_publish_subject(inbox_prefix, "inbox_prefix")
        ping = check_timeout(ping_interval, "ping_interval")
        if not ping:
            raise errors.BadTimeoutError("ping_interval must be > 0 seconds")
        write_t = check_timeout(write_timeout, "write_timeout")
        if not write_t:
            raise errors.BadTimeoutError("write_timeout must be > 0 seconds")
        net = self._network
        net.pool = ServerPool(
            parsed,
            not no_randomize,
            max_reconnect_attempts,
            check_timeout(reconnect_time_wait, "reconnect_time_wait"),
            check_timeout(reconnect_jitter, "reconnect_jitter"),
        )
        net.dial_opts = DialOptions(
            connect_timeout=check_timeout(connect_timeout, "connect_timeout"),
            name=name,
            user=user,
            password=password,
            token=token,
            auth=UserAuth.from_options(nkeys_seed, user_credentials, signature_cb, user_jwt_cb),
            tls=tls,
            tls_hostname=tls_hostname,
            tls_first=tls_handshake_first,
            echo=bool(echo),
            verbose=bool(verbose),
            pedantic=bool(pedantic),
            inbox_prefix=inbox_prefix,
        )
        net.ping_interval = ping
        net.max_outstanding_pings = (
            _check_positive_int(max_outstanding_pings, "max_outstanding_pings") or 2
        )
        net.allow_reconnect = bool(allow_reconnect)
        net.disconnected_cb = disconnected_cb
        net.reconnected_cb = reconnected_cb
        # A write that makes no progress for this long: the peer stopped reading, and the
        # connection is stale (then the reconnect path, as for unanswered pings).
        self._outbox.write_timeout = write_t
        self._outbox.reconnect_buf_size = (
            _check_positive_int(reconnect_buf_size, "reconnect_buf_size") or 0
        )
        self._callbacks.error_cb = error_cb
        self._closed_cb = closed_cb
        self._inbox_prefix = self._requests.inbox_prefix = inbox_prefix

        try:
            conn: Optional[Conn] = net.first_connect()
        except errors.NoServersError as exc:
            if not retry_on_failed_connect:
                raise
            conn = None  # no server yet: the network thread keeps trying (Network.run)
            unreachable = exc
        self._timers = self._outbox.timers = Timers("nats-timers", self._on_internal_error)
        for target, thread_name in (
            (net.run, "nats-network"),
            (self._outbox.run_flusher, "nats-flusher"),
            (self._callbacks.run, "nats-callbacks"),
        ):
            self._threads.append(threading.Thread(target=target, name=thread_name, daemon=True))
        net.start_pings(self._timers)
        if conn is not None:
            net.install(conn, reconnect=False)
        else:
            net.start_reconnecting(unreachable)
        for t in self._threads:
            t.start()
        _live_clients.add(self)
        return self

    # --- publishing ---------------------------------------------------------------------

    def publish(
        self,
        subject: str,
        data: bytes = b"",
        reply: Optional[str] = None,
        headers: Optional[HeadersLike] = None,
    ) -> None:
        """Publish ``data`` to ``subject``. Returns once queued; ``flush()`` confirms."""
        # The hottest path there is: the frame is built and queued here, with the outbox's
        # own fields, rather than through two calls (a call is a tenth of its cost).
        ob = self._outbox
        if reply is None and headers is None:
            try:  # (try costs nothing until it catches; a subscript beats .get())
                prefix = ob.pub_cache[subject]
            except (KeyError, TypeError):
                prefix = ob.cache_prefix(subject)
            if data.__class__ is not bytes:
                data = as_bytes(data)
            n = len(data)
            if n > ob.max_payload:
                raise errors.MaxPayloadError(
                    f"payload of {n} bytes exceeds the server's max_payload of {ob.max_payload}"
                )
            try:
                size = SIZE_LINES[n]
            except KeyError:
                size = size_line(n)
            frame = b"".join((prefix, size, data, CRLF))
        else:
            frame, n = ob.build_pub(subject, data, reply, headers)
        if not ob.pub_fast:
            ob.enqueue_pub_slow(frame, n)
            return
        # No lock: deque.append is atomic, and the counter is only a statistic (an
        # interleaved += can at worst miss a count, never a message). out_msgs is derived.
        out = ob.out
        out.append(frame)
        ob.out_bytes += n
        if not ob.kicked:
            ob.kicked = True
            ob.kick.set()
        if len(out) > HIGH_WATER:
            ob.write_behind()

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
        return self._table.add(
            subject, queue, cb, max_msgs, pending_msgs_limit, pending_bytes_limit
        )

    # --- request / reply ----------------------------------------------------------------

    def new_inbox(self) -> str:
        """A unique subject under this client's inbox prefix."""
        return f"{self._inbox_prefix}.{self._nuid.next()}"

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
        return self._requests.request(subject, data, t, headers)

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

        self._link.check_open("use JetStream")
        return JetStream(
            self, prefix, domain, timeout, publish_async_max_pending, publish_async_stall_wait
        )

    # --- flush, drain, close --------------------------------------------------------------

    def flush(self, timeout: float = 2.0) -> None:
        """Send everything buffered and wait for the server to confirm it (PING/PONG)."""
        t = check_timeout(timeout, "flush timeout")
        deadline = Deadline(t, "flush")
        link = self._link
        link.check_open("flush")
        connected = self._network.connected
        if not connected.is_set() and not connected.wait(deadline.remaining()):
            raise errors.TimeoutError(f"flush: not reconnected within {timeout} s")
        waiter = Waiter()
        with link.wlock:
            if link.state is not CONNECTED:
                raise (
                    errors.ConnectionClosedError("flush: the client is closed")
                    if link.closing or link.state is CLOSED
                    else errors.ConnectionLostError("flush: the connection was lost")
                )
            self._outbox.ping_locked(waiter, kick=False)
        self._outbox.write_pending()
        if not self._reader.wait_for(waiter, deadline.remaining()):
            raise errors.TimeoutError(f"flush: no PONG from the server within {timeout} s")
        if waiter.error is not None:
            raise waiter.error

    def drain(self, timeout: float = 30.0) -> None:
        """Unsubscribe everything, let callbacks finish, flush publishes, then close."""
        deadline = Deadline(check_timeout(timeout, "drain timeout"), "drain")
        link = self._link
        link.check_open("drain")
        subs = [s for s in list(self._table.subs.values()) if s is not self._requests.sub]
        try:
            for sub in subs:
                self._outbox.enqueue(proto.encode_unsub(sub.sid))
            if link.state is CONNECTED:
                self.flush(deadline.remaining())
            for sub in subs:
                self._table.forget(sub)
                sub._end(
                    errors.BadSubscriptionError(
                        f"subscription {sub.sid} on {sub.subject!r} is drained"
                    )
                )
            for sub in subs:
                sub._wait_done(deadline.remaining())
            with link.wlock:
                self._outbox.draining_pubs = True
                self._outbox.pub_fast = False
            if link.state is CONNECTED:
                self.flush(deadline.remaining())
        finally:
            self.close()

    def close(self) -> None:
        """Send what is buffered (best effort), close the socket, end every subscription.

        Idempotent. Messages still queued in subscriptions stay readable.
        """
        link = self._link
        if link.state is FORKED:
            link.closing = True
            return
        if link.state is NEW:
            link.state = CLOSED
            return
        if link.closing:
            if threading.current_thread() not in self._threads:
                self._closed_event.wait(10.0)
            return
        # Best effort, bounded: a peer that stops reading gets _CLOSE_WRITE, no more.
        outbox = self._outbox
        if link.state is CONNECTED and link.conn is not None and not outbox.write_pending():
            outbox.write_slow(until=time.monotonic() + min(_CLOSE_WRITE, outbox.write_timeout))
        self._shutdown(None)

    def _shutdown(self, reason: Optional[errors.NATSError]) -> None:
        """Final teardown, from close() or from the network thread giving up."""
        link = self._link
        with link.wlock:
            if link.closing:
                return
            link.closing = True
            link.state = CLOSED
            self._outbox.pub_fast = False
            lost, waiters = self._outbox.discard()
        self._network.stop.set()
        self._network.connected.set()  # wake flush() calls waiting for a reconnect: closed
        conn = link.conn
        if conn is not None:
            self._network.kill_socket(conn)
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
        self._requests.fail_all(closed)
        self._hooks.run_close_hooks()
        self._table.end_all(closed)
        if self._timers is not None:
            self._timers.stop()
        self._outbox.kick.set()
        self._callbacks.call(self._closed_cb)
        self._callbacks.stop()
        me = threading.current_thread()
        for t in self._threads:
            if t is not me and t.is_alive():
                t.join(5.0)
        self._closed_event.set()

    def _on_internal_error(self, exc: BaseException) -> None:
        log.error("jetstream_sync: internal error in a timer or hook: %r", exc, exc_info=exc)

    def _mark_forked(self) -> None:
        """In a forked child: disown the parent's socket without touching it or any lock."""
        self._link.state = FORKED
        self._outbox.pub_fast = False
        conn = self._link.conn
        if conn is not None:
            try:
                os.close(conn.sock.detach())  # closes only the child's copy of the fd
            except OSError:
                pass

    # --- properties -----------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        return self._link.state is CONNECTED

    @property
    def is_reconnecting(self) -> bool:
        return self._link.state is RECONNECTING

    @property
    def is_closed(self) -> bool:
        return self._link.state is CLOSED or self._link.closing

    @property
    def connected_url(self) -> Optional[str]:
        conn = self._link.conn
        return conn.server.url if conn is not None and self._link.state is CONNECTED else None

    @property
    def servers(self) -> List[str]:
        """The server pool, discovered servers included (no credentials)."""
        return [s.url for s in self._network.pool.servers]

    @property
    def server_info(self) -> Dict[str, Any]:
        return dict(self._network.server_info)

    @property
    def max_payload(self) -> int:
        return self._outbox.max_payload

    @property
    def stats(self) -> Dict[str, int]:
        """in_msgs, out_msgs, in_bytes, out_bytes (payloads), reconnects, errors_received."""
        return {
            "in_msgs": self._reader.in_msgs,
            "out_msgs": self._outbox.out_msgs,
            "in_bytes": self._reader.in_bytes,
            "out_bytes": self._outbox.out_bytes,
            "reconnects": self._network.reconnects,
            "errors_received": self._network.errors_received,
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
        return f"<jetstream_sync.Client {self._link.state} {url}>"


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
    verbose, pedantic, retry_on_failed_connect.

    ``retry_on_failed_connect=True``: when no server of ``servers`` can be reached, return at
    once a client in the reconnecting state instead of raising NoServersError. The network
    thread keeps trying with the reconnect policy (reconnect_time_wait, reconnect_jitter,
    max_reconnect_attempts per server); meanwhile publishes go to the reconnect buffer
    (reconnect_buf_size) and subscriptions are sent once connected. That first connection
    calls reconnected_cb; when the attempts run out the client closes (closed_cb, error_cb
    with NoServersError). Wrong credentials and a server that demands TLS still raise at
    once. Default False: connect raises NoServersError when no server answers.
    """
    return Client().connect(servers, **options)
