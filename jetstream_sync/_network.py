"""The network thread and the life of the connection: the first connect, installing a
new connection (re-subscribing before anything buffered goes out), the read loop's end, the
reconnect loop, and what the reader hands back besides messages (PING, PONG, INFO with lame
duck mode, -ERR). Pings and stale-connection detection run on the timer thread from here.

The network thread runs no user code but reconnect_to_server_handler (it picks the server to
dial, so it must not block). What the user hears of (disconnected, reconnected,
errors) goes through the callback thread.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Optional

from . import _observe, errors
from . import _protocol as proto
from ._callbacks import Callbacks, Hooks
from ._conn import Conn, Move
from ._dial import DialOptions, dial
from ._link import CONNECTED, FORKED, RECONNECTING, Link
from ._outbox import Outbox
from ._reader import Reader
from ._requests import RequestMux
from ._servers import ServerPool
from ._subs import SubscriptionTable
from ._timers import Timers

__all__ = ["Network"]

# -ERR messages after which the server keeps the connection open.
_NON_FATAL_ERRS = ("permissions violation", "invalid subject", "invalid publish subject")


class Network:
    """Connects, reconnects and watches the connection of one client."""

    def __init__(
        self,
        link: Link,
        outbox: Outbox,
        reader: Reader,
        table: SubscriptionTable,
        requests: RequestMux,
        callbacks: Callbacks,
        hooks: Hooks,
        msg_owner: Any,
        shutdown: Callable[[Optional[errors.NATSError]], None],
    ) -> None:
        self._link = link
        self._outbox = outbox
        self._reader = reader
        self._table = table
        self._requests = requests
        self._callbacks = callbacks
        self._report = callbacks.report
        self._hooks = hooks
        self._msg_owner = msg_owner  # stamped on every message read (see dial)
        self._shutdown = shutdown
        self.pool = ServerPool([], False, 60, 2.0, 0.1)
        self.dial_opts = DialOptions()
        self.allow_reconnect = True
        self.ping_interval = 120.0
        self.max_outstanding_pings = 2
        self.disconnected_cb: Optional[Callable[[], None]] = None
        self.reconnected_cb: Optional[Callable[[], None]] = None
        self.discovered_server_cb: Optional[Callable[[], None]] = None
        self.lame_duck_mode_cb: Optional[Callable[[], None]] = None
        self.connecting = False  # connect() is dialling its first server
        self._forced: Optional[Conn] = None  # the connection force_reconnect() dropped
        self.timers: Optional[Timers] = None
        self.connected = threading.Event()  # set while connected (and once closed)
        self.stop = threading.Event()  # set at close: ends a reconnect wait
        self.server_info: Dict[str, Any] = {}
        self.last_error: Optional[errors.NATSError] = None  # nats-py's last_error
        self.reconnects = 0
        self.ever_connected = False  # a connection was installed once (reconnects counts after)
        self.errors_received = 0
        self._outstanding_pings = 0

    def first_connect(self) -> Conn:
        """The first reachable server of the pool, in order; NoServersError if none is.
        Each failed attempt goes to error_cb (in the caller's thread, as nats-py) and to
        ``last_error``; the INFO of a server that refused us stays in ``server_info``."""
        last: Optional[errors.NATSError] = None
        self.connecting = True
        try:
            for server in list(self.pool.servers):
                server.last_attempt = time.monotonic()
                try:
                    return dial(server, self.dial_opts, self._msg_owner, self._keep_info)
                except errors.NATSError as exc:
                    last = self.last_error = exc
                    self._callbacks.report_now(exc)
                    if isinstance(exc, errors.AuthorizationError):
                        raise
        finally:
            self.connecting = False
        assert last is not None
        if isinstance(last, errors.SecureConnectionRequiredError):
            raise last
        raise errors.NoServersError(
            "could not connect to any server ("
            + ", ".join(s.url for s in self.pool.servers)
            + f"): {last}"
        ) from last

    def _keep_info(self, info: Dict[str, Any]) -> None:
        """The INFO of the server connect() dials, kept even if it then refuses us."""
        self.server_info = info

    def start_reconnecting(self, unreachable: errors.NATSError) -> None:
        """retry_on_failed_connect, and no server answered the first connect: the client
        starts in the reconnecting state (publishes go to the reconnect buffer, subscriptions
        wait in the table for the SUBs install sends), and ``run`` dials with the reconnect
        policy. ``unreachable`` (why the first connect failed) goes to error_cb."""
        with self._link.wlock:
            self._link.state = RECONNECTING
            self._outbox.pub_fast = False
        self._report(unreachable)

    def start_pings(self, timers: Timers) -> None:
        """Start the keep-alive pings on ``timers``, the first one ``ping_interval`` from now."""
        self.timers = timers
        timers.call_later(self.ping_interval, self._ping_tick)

    def install(self, conn: Conn, reconnect: bool) -> bool:
        """Make ``conn`` the live connection: resubscribe first, then buffered publishes."""
        link, outbox = self._link, self._outbox
        with link.send_lock, link.wlock:
            if link.closing:
                conn.sock.close()
                return False
            link.conn = conn
            self._update_info(conn.info, conn)
            resubs = self._table.resubscribe_frames()
            outbox.out.extendleft(reversed(resubs))
            outbox.ctl_frames += len(resubs)
            link.state = CONNECTED
            outbox.pub_fast = not outbox.draining_pubs
            self._outstanding_pings = 0
            conn.server.reconnects = 0
            outbox.kicked = True
            outbox.kick.set()
        self.connected.set()
        first, self.ever_connected = not self.ever_connected, True
        if reconnect:
            # The first connection made by retry_on_failed_connect is announced like a
            # reconnect (there is no connected_cb), but is not counted as one.
            if not first:
                self.reconnects += 1
                if _observe.observer is not None:
                    _observe.notify_reconnected()
            self._hooks.run_reconnect_hooks()
            self._callbacks.call(self.reconnected_cb)
        return True

    def _update_info(self, info: Dict[str, Any], conn: Conn) -> None:
        self.server_info = info
        max_payload = info.get("max_payload")
        if isinstance(max_payload, int) and max_payload > 0:
            self._outbox.max_payload = max_payload
        if self.pool.learn(info, conn.server) and self.ever_connected:
            # nats-py: servers announced after the first connection are "discovered".
            self._callbacks.call(self.discovered_server_cb)

    # --- the network thread: read, and reconnect when the socket dies -------------------

    def run(self) -> None:
        """The network thread: read the connection until it fails, then reconnect (or shut the
        client down when reconnecting is off or gives up), until the client closes."""
        link = self._link
        conn = link.conn
        if conn is None and link.state is RECONNECTING:  # retry_on_failed_connect
            conn = self._reconnect_loop()
            if conn is None and not link.closing:
                self._shutdown(
                    errors.NoServersError(
                        "retry_on_failed_connect gave up: no server reachable within "
                        "max_reconnect_attempts"
                    )
                )
                return
        while conn is not None:
            err = self._reader.read_until_error(conn)
            if link.closing or link.state is FORKED:
                return
            self._on_disconnect(conn, err)
            if not self.allow_reconnect:
                self._shutdown(
                    errors.ConnectionClosedError(
                        f"connection to {conn.server.url} lost and allow_reconnect is False"
                    )
                )
                return
            conn = self._reconnect_loop()
        if not link.closing:
            self._shutdown(
                errors.NoServersError(
                    "reconnect gave up: no server reachable within max_reconnect_attempts"
                )
            )

    def _on_disconnect(self, conn: Conn, err: errors.NATSError) -> None:
        link = self._link
        with link.wlock:
            if link.state is CONNECTED:
                link.state = RECONNECTING
            self._outbox.pub_fast = False
            self.connected.clear()
            unconfirmed, failed = self._outbox.connection_lost()
        self.kill_socket(conn)
        self.pool.to_back(conn.server)  # the other servers first, as nats.go and nats-py
        if self._forced is conn:
            err = errors.ConnectionLostError("force_reconnect() dropped the connection")
        lost = errors.ConnectionLostError(f"connection to {conn.server.url} lost: {err}")
        for waiter in failed:
            if waiter is not None:
                waiter.wake(error=lost)
        self._requests.fail_all(lost)
        # The server's end-of-file keeps its class (nats-py's UnexpectedEOF) in the report.
        kind = type(err) if isinstance(err, errors.UnexpectedEOF) else errors.ConnectionLostError
        report = kind(
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
        self._callbacks.call(self.disconnected_cb)

    def _reconnect_loop(self) -> Optional[Conn]:
        pool = self.pool
        while not self._link.closing:
            if pool.chooser is not None:  # nats-py's reconnect_to_server_handler
                picked = pool.choose(self.server_info, self._report)
                if picked is None or (picked[1] > 0 and self.stop.wait(picked[1])):
                    return None
                server = picked[0]
                pool.count_attempt(server)
            else:
                found = pool.next_server()
                if found is None or not pool.wait_turn(found, self.stop):
                    return None
                server = found
            try:
                conn = dial(server, self.dial_opts, self._msg_owner)
            except errors.NATSError as exc:
                # A refusal stays one (the builtin nats-py reports); the rest: lost.
                what = f"reconnect to {server.url} failed: {exc}"
                failed: errors.ConnectionLostError
                if isinstance(exc, errors.ConnectionRefusedError):
                    failed = errors.ConnectionRefusedError(what)
                    failed.errno = exc.errno
                else:
                    failed = errors.ConnectionLostError(what)
                failed.__cause__ = exc
                self.last_error = failed
                self._report(failed)
                continue
            return conn if self.install(conn, reconnect=True) else None
        return None

    def kill_socket(self, conn: Conn) -> None:
        """Wake every thread blocked on ``conn``'s socket, then close it."""
        conn.broken = True
        conn.shutdown()
        with conn.quiet_lock:  # ordered with the reader's check-then-register (_reader.py)
            registered = conn.ep is not None
        if registered or not conn.inline:
            # The network thread waits in (e)poll on this socket: let it see the shutdown
            # before the descriptor goes (and its number may be reused).
            conn.reader_left.wait(1.0)
        # Writers hold the send lock for one non-blocking send, never longer: the bound is
        # a safeguard only.
        send_lock = self._link.send_lock
        locked = send_lock.acquire(timeout=2.0)
        try:
            conn.tail = None
            conn.sock.close()
        except OSError:
            pass
        finally:
            if locked:
                send_lock.release()

    def on_control(self, ev: proto.Event) -> None:
        """What the reader found besides messages (on the reading thread)."""
        if ev is proto.PING:
            self._outbox.enqueue(proto.PONG_FRAME)
        elif ev is proto.PONG:
            self._outstanding_pings = 0
            self._outbox.on_pong()
        elif isinstance(ev, proto.Info):
            conn = self._link.conn
            if conn is not None:
                self._update_info(ev.data, conn)
                if ev.data.get("ldm"):
                    self._lame_duck(conn)
                    self._callbacks.call(self.lame_duck_mode_cb)
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
        others = self.pool.others_than(server)
        with self._link.wlock:
            if others and self._link.state is CONNECTED:
                self._outbox.ping_locked(Move(conn))
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

    def force_reconnect(self) -> None:
        """Drop the live connection as a failure would: the network thread reports it,
        calls disconnected_cb and reconnects (the pool's next server first). Nothing when
        not connected or allow_reconnect is False (as nats-py)."""
        link = self._link
        with link.wlock:
            conn = link.conn
            if link.state is not CONNECTED or conn is None or not self.allow_reconnect:
                return
            self._forced = conn
        conn.shutdown()

    def _on_err(self, message: str) -> None:
        self.errors_received += 1
        low = message.lower()
        err: errors.NATSError
        if low.startswith("permissions violation"):
            err = errors.PermissionsError(f"server: {message}")
            self._table.end_denied(message, err)
            self._requests.fail_denied(message, err)
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
            conn = self._link.conn
            if conn is not None:
                conn.shutdown()

    def _ping_tick(self) -> None:
        """The timer thread, every ping_interval: a PING, or a stale connection after
        max_outstanding_pings without a PONG."""
        link = self._link
        conn = link.conn
        if link.state is CONNECTED and conn is not None:
            if self._outstanding_pings >= self.max_outstanding_pings:
                self._report(
                    errors.StaleConnectionError(
                        f"server {conn.server.url} did not answer {self._outstanding_pings} pings "
                        f"(ping_interval {self.ping_interval} s): connection is stale"
                    )
                )
                self._outstanding_pings = 0
                conn.shutdown()
            else:
                self._outstanding_pings += 1
                with link.wlock:
                    if link.state is CONNECTED:
                        self._outbox.ping_locked(None)
        self.call_later(self.ping_interval, self._ping_tick)

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run internal ``fn`` on the timer thread after ``delay`` (not after close)."""
        if self.timers is not None and not self._link.closing:
            self.timers.call_later(delay, fn)

    # --- publishing ---------------------------------------------------------------------
