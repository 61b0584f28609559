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
* ``_teardown.py``: how a client ends (close, the network giving up, a fork's child).
* ``_link.py``: what all of them share: the state, the live socket, the locks and their
  order. ``_seam.py``: the one interface JetStream and Spark use of all this.

Subscription callbacks run on their own per-subscription dispatcher thread (see
subscription.py).
"""

from __future__ import annotations

import logging
import ssl
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Union

from . import _options, errors
from . import _protocol as proto
from ._auth import JWTCallback, PathOrSeed, SignatureCallback
from ._callbacks import Callbacks, Hooks
from ._conn import Conn, Waiter
from ._link import CLOSED, CONNECTED, NEW, RECONNECTING, Link
from ._natspy_names import NatsPyPrivateNames
from ._network import Network
from ._nuid import NUID
from ._options import check_callable, check_pending_limit, check_positive_int
from ._outbox import CRLF, HIGH_WATER, SIZE_LINES, Outbox, as_bytes, size_line
from ._reader import Reader
from ._requests import DEFAULT_PENDING_BYTES, DEFAULT_PENDING_MSGS, RequestMux
from ._servers import PoolServer, ReconnectHandler, ServerURL, ServerVersion, parse_url
from ._subs import SubscriptionTable
from ._teardown import Teardown, live_clients
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
# not hold close() up). Leaving a ``with`` block by an exception (Ctrl-C) gives it no time.
_CLOSE_WRITE = 2.0
# -ERR messages after which the server keeps the connection open.
_NON_FATAL_ERRS = ("permissions violation", "invalid subject", "invalid publish subject")

ErrorCallback = Callable[[Exception], None]
Callback = Callable[[], None]


# nats-py's name (nats.aio.client.Server) for a pool entry: what reconnect_to_server_handler
# is given, and may return (Server(uri=Client._parse_server_uri(url))).
Server = PoolServer


def _payload(data: Any, payload: Any) -> Any:
    """nats-py's ``payload=`` for our ``data``."""
    if data:
        raise errors.InvalidArgumentError(
            "give data or payload, not both: payload is nats-py's name for data"
        )
    return payload


class Client(Teardown, NatsPyPrivateNames):
    """A connection to NATS. Use :func:`connect` to make one."""

    # nats-py's status numbers (its ``Client.CONNECTED`` ...), for code that names them.
    DISCONNECTED = 0
    CONNECTED = 1
    CLOSED = 2
    RECONNECTING = 3
    CONNECTING = 4
    DRAINING_SUBS = 5
    DRAINING_PUBS = 6

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
        self._closed_cb: Optional[Callback] = None
        self._flush_timeout = 2.0  # flush()'s default (connect(flush_timeout=))
        self._drain_timeout = 30.0  # drain()'s default (connect(drain_timeout=))
        self._draining = 0  # DRAINING_SUBS, then DRAINING_PUBS, while drain() runs
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
        token: Optional[Union[str, Callable[[], str]]] = None,
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
        reconnect_buf_size: Optional[int] = None,
        ping_interval: float = 120.0,
        max_outstanding_pings: int = 2,
        write_timeout: float = 10.0,
        no_randomize: Optional[bool] = None,
        echo: Optional[bool] = None,
        inbox_prefix: str = "_INBOX",
        verbose: bool = False,
        pedantic: bool = False,
        retry_on_failed_connect: bool = False,
        # nats-py's names and options (see _options.py for how each maps onto ours)
        discovered_server_cb: Optional[Callback] = None,
        lame_duck_mode_cb: Optional[Callback] = None,
        dont_randomize: Optional[bool] = None,
        no_echo: Optional[bool] = None,
        drain_timeout: Optional[float] = None,
        flush_timeout: Optional[float] = None,
        pending_size: Optional[int] = None,
        nkeys_seed_str: Optional[str] = None,
        flusher_queue_size: int = 1024,
        skip_subject_validation: bool = False,
        reconnect_to_server_handler: Optional[ReconnectHandler] = None,
        ws_connection_headers: Optional[Dict[str, List[str]]] = None,
    ) -> Client:
        """Connect to the first reachable server of ``servers``; see :func:`connect`.
        A closed client may connect again, as nats-py: it starts afresh (new subscriptions,
        statistics and options; what the old connection had stays closed)."""
        state = self._link.state
        if state is CLOSED and (self._closed_event.is_set() or not self._threads):
            self.__init__()  # type: ignore[misc]
        elif state is not NEW:
            raise errors.InvalidArgumentError(
                "this Client is connected (or closing): close() it before connect()"
            )
        options = dict(locals())
        del options["self"]
        _options.configure(self, options)
        net = self._network
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
        live_clients.add(self)
        return self

    # --- publishing ---------------------------------------------------------------------

    def publish(
        self,
        subject: str,
        data: bytes = b"",
        reply: Optional[str] = None,
        headers: Optional[HeadersLike] = None,
        *,
        payload: Optional[bytes] = None,
    ) -> None:
        """Publish ``data`` to ``subject``. Returns once queued; ``flush()`` confirms.
        ``payload=`` is nats-py's name for ``data``."""
        if payload is not None:
            data = _payload(data, payload)
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
        *,
        max_msgs: Optional[int] = None,
        pending_msgs_limit: int = DEFAULT_PENDING_MSGS,
        pending_bytes_limit: int = DEFAULT_PENDING_BYTES,
        future: Any = None,
    ) -> Subscription:
        """Subscribe to ``subject``; read with ``next_msg``, iteration, or ``cb``.
        Past ``cb`` every parameter is keyword-only: nats-py's 4th positional is ``future=``
        (an asyncio future), which has no place here and is refused."""
        if future is not None:
            raise errors.InvalidArgumentError(
                "future= is nats-py's asyncio way to get one message; there are no asyncio "
                "futures here: use sub.next_msg(timeout=...) or cb= (with max_msgs=1)"
            )
        proto.check_subscribe_subject(subject)
        if queue == "":
            queue = None  # nats-py's default: an empty queue name is no queue group
        if queue is not None:
            proto.check_queue(queue)
        check_callable(cb, "cb")
        check_positive_int(max_msgs, "max_msgs", allow_none=True)
        check_pending_limit(pending_msgs_limit, "pending_msgs_limit")
        check_pending_limit(pending_bytes_limit, "pending_bytes_limit")
        if self._draining:
            raise errors.ConnectionDrainingError("cannot subscribe: the client is draining")
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
        *,
        payload: Optional[bytes] = None,
        old_style: bool = False,
    ) -> Msg:
        """Publish a request and wait for the first reply.

        Raises :class:`NoRespondersError` when nobody is subscribed (status 503) and
        :class:`~jetstream_sync.TimeoutError` when no reply came in time. ``payload=`` is
        nats-py's name for ``data``. ``old_style`` (nats-py: one inbox subscription per
        request) is accepted and changes nothing the caller sees: the shared inbox used
        here gives the same reply, errors and timeout."""
        if payload is not None:
            data = _payload(data, payload)
        if isinstance(headers, bool):
            raise errors.InvalidArgumentError(
                f"headers must be a mapping, got {headers!r}: nats-py's 4th positional is "
                "old_style, here it is headers; pass old_style= by keyword"
            )
        if not isinstance(old_style, bool):
            raise errors.InvalidArgumentError(
                f"old_style must be a bool, got {type(old_style).__name__}"
            )
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
        *,
        publish_retry_attempts: Optional[int] = None,
        publish_retry_wait: Optional[float] = None,
    ) -> JetStream:
        """A JetStream context on this connection (``$JS.API``, or ``$JS.<domain>.API``);
        ``publish_retry_*``: publish's defaults after a 503 (None: 2 times, 0.25 s apart)."""
        from .jetstream.context import JetStream

        self._link.check_open("use JetStream")
        given: Dict[str, Any] = {"publish_retry_attempts": publish_retry_attempts}
        given["publish_retry_wait"] = publish_retry_wait
        retry = {k: v for k, v in given.items() if v is not None}
        args = (prefix, domain, timeout, publish_async_max_pending, publish_async_stall_wait)
        return JetStream(self, *args, **retry)

    # nats-py's JetStream manager: the management calls (add_stream, consumer_info ...) are
    # methods of the JetStream context here, so nc.jsm() is nc.jetstream().
    jsm = jetstream

    # --- flush, drain, close --------------------------------------------------------------

    def flush(self, timeout: Optional[float] = None) -> None:
        """Send everything buffered and wait for the server to confirm it (PING/PONG).
        Default timeout: connect's ``flush_timeout`` (2 s). FlushTimeoutError (a
        TimeoutError) when no PONG came in time."""
        if timeout is None:
            timeout = self._flush_timeout
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
            raise errors.FlushTimeoutError(
                f"nats: flush timeout: no PONG from the server within {timeout} s"
            )
        if waiter.error is not None:
            raise waiter.error

    def rtt(self, timeout: Optional[float] = None) -> float:
        """The round trip to the server in seconds: a PING after what is buffered, until
        its PONG (a timed :meth:`flush`, with its default timeout and errors)."""
        start = time.monotonic()
        self.flush(timeout)
        return time.monotonic() - start

    def drain(self, timeout: Optional[float] = None) -> None:
        """Unsubscribe everything, let callbacks finish, flush publishes, then close.
        Default timeout: connect's ``drain_timeout`` (30 s). When it did not finish in time,
        a DrainTimeoutError (a TimeoutError) goes to error_cb, as nats-py, and the client
        closes all the same; drain() returns. While it runs, subscribe() raises
        ConnectionDrainingError."""
        if timeout is None:
            timeout = self._drain_timeout
        deadline = Deadline(check_timeout(timeout, "drain timeout"), "drain")
        link = self._link
        link.check_open("drain")
        subs = [s for s in list(self._table.subs.values()) if s is not self._requests.sub]
        self._draining = self.DRAINING_SUBS
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
            self._draining = self.DRAINING_PUBS
            if link.state is CONNECTED:
                self.flush(deadline.remaining())
        except errors.TimeoutError as exc:
            err = errors.DrainTimeoutError(f"drain: not done within {timeout} s: {exc}")
            err.__cause__ = exc
            self._report(err)
        finally:
            self._draining = 0
            self.close()

    def close(self) -> None:
        """Send what is buffered (best effort, at most 2 s), close the socket, end every
        subscription; disconnected_cb (when connected) then closed_cb, as nats-py.

        Idempotent. Messages still queued in subscriptions stay readable with ``next_msg``;
        a subscription's callback runs for none of them (as nats.go and nats-py): ``drain()``
        has every queued message handled first."""
        self._close(_CLOSE_WRITE)

    def _on_internal_error(self, exc: BaseException) -> None:
        log.error("jetstream_sync: internal error in a timer or hook: %r", exc, exc_info=exc)

    # --- properties -----------------------------------------------------------------------

    @property
    def is_connected(self) -> bool:
        """True while connected to a server."""
        return self._link.state is CONNECTED

    @property
    def is_reconnecting(self) -> bool:
        """True while the connection is lost and the client tries to reconnect."""
        return self._link.state is RECONNECTING

    @property
    def is_closed(self) -> bool:
        """True once the client is closed or closing."""
        return self._link.state is CLOSED or self._link.closing

    @property
    def connected_url(self) -> Optional[ServerURL]:
        """The URL of the server connected to (a ``str`` with ``.hostname``, ``.port`` ...
        as nats-py's ParseResult), None when not connected."""
        conn = self._link.conn
        if conn is None or self._link.state is not CONNECTED:
            return None
        return ServerURL(conn.server.url)

    @property
    def servers(self) -> List[ServerURL]:
        """The server pool, discovered servers included (no credentials)."""
        return [ServerURL(s.url) for s in self._network.pool.servers]

    @property
    def server_info(self) -> Dict[str, Any]:
        """A copy of the INFO the server last sent (empty before the first connection)."""
        return dict(self._network.server_info)

    @property
    def max_payload(self) -> int:
        """The largest payload the server accepts, in bytes (from its INFO; 1 MiB until then)."""
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
        """The last connection error: a failed connect or reconnect attempt, or why the
        client closed (as nats-py)."""
        return self._network.last_error

    @property
    def is_connecting(self) -> bool:
        """connect() is dialling its first server."""
        return self._network.connecting

    @property
    def is_draining(self) -> bool:
        """drain() is running (its subscriptions, then its publishes)."""
        return self._draining != 0

    @property
    def is_draining_pubs(self) -> bool:
        """drain() is past the subscriptions: new publishes are refused."""
        return self._draining == self.DRAINING_PUBS

    @property
    def client_id(self) -> Optional[int]:
        """The id the server gave this connection (its INFO's ``client_id``); None before
        connecting and once closed, as nats-py."""
        if self._link.state is NEW or self.is_closed:
            return None
        value = self._network.server_info.get("client_id")
        return value if isinstance(value, int) else None

    @property
    def client_ip(self) -> Optional[str]:
        """This client's address as the server sees it (its INFO's ``client_ip``); None
        before connecting and once closed, as nats-py."""
        if self._link.state is NEW or self.is_closed:
            return None
        value = self._network.server_info.get("client_ip")
        return value if isinstance(value, str) else None

    @property
    def connected_server_version(self) -> ServerVersion:
        """The connected server's version (``0.0.0-unknown`` when not connected)."""
        version = self._network.server_info.get("version")
        if self.is_connected and isinstance(version, str):
            try:
                return ServerVersion(version)
            except errors.InvalidArgumentError:
                pass
        return ServerVersion("0.0.0-unknown")

    @property
    def server_pool(self) -> List[PoolServer]:
        """A copy of the server pool as nats-py shows it: ``uri`` (no credentials) and
        ``reconnects`` (failed attempts in a row) per server."""
        return self._network.pool.snapshot()

    def set_server_pool(self, servers: List[str]) -> None:
        """Replace the server pool (nats-py's name): the next reconnect picks from these
        URLs. The current connection stays; servers kept keep their state; discovery goes on."""
        if self.is_closed:
            raise errors.ConnectionClosedError("set_server_pool: the client is closed")
        if isinstance(servers, str) or not isinstance(servers, (list, tuple)) or not servers:
            raise errors.InvalidArgumentError(
                f"set_server_pool needs a non-empty list of server URLs, got {servers!r}"
            )
        self._network.pool.replace([parse_url(u) for u in servers])

    @property
    def discovered_servers(self) -> List[ServerURL]:
        """The servers the cluster announced (in INFO), not given to connect."""
        return [ServerURL(url) for url in self._network.pool.discovered()]

    @property
    def pending_data_size(self) -> int:
        """Bytes buffered and not yet written to the socket."""
        return self._outbox.pending_data_size()

    @property
    def ssl_context(self) -> ssl.SSLContext:
        """connect's ``tls`` context, or a default (verifying) one, as nats-py."""
        return self._network.dial_opts.tls or ssl.create_default_context()

    def force_reconnect(self) -> None:
        """Drop the connection and reconnect as after a failure (disconnected_cb,
        reconnected_cb, subscriptions kept). Nothing when not connected or when
        allow_reconnect is False, as nats-py."""
        self._network.force_reconnect()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        # Leaving by an exception (Ctrl-C above all) must not wait on a peer that stopped
        # reading: what the socket takes at once is sent, the rest is reported lost.
        self._close(0.0 if exc_type is not None else _CLOSE_WRITE)

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

    nats-py's options, with nats-py's meaning (details in ``jetstream_sync._options``):
    dont_randomize (= no_randomize), no_echo (= not echo; both spellings only when they
    agree), discovered_server_cb (servers announced after the first connection),
    lame_duck_mode_cb, drain_timeout and flush_timeout (the defaults of drain() and
    flush()), pending_size (= reconnect_buf_size: bytes a disconnected client buffers; 0
    refuses publishes while disconnected), token as a callable (called at every CONNECT),
    nkeys_seed_str (a seed as text), flusher_queue_size (checked, no effect: our flusher has
    no queue), skip_subject_validation (publish skips the subject grammar, keeps the
    framing checks: a str without whitespace), reconnect_to_server_handler(servers, info) ->
    (server or None, delay) (picks each reconnect's server; runs on the network thread and
    must not block), ws_connection_headers (refused: TCP only). Callbacks are plain
    functions, run on the callback thread; ``async def`` ones are refused.
    """
    return Client().connect(servers, **options)
