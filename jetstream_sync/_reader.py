"""The read path: the network thread's read loop, and the same reading done by a caller
that waits for its own answer, so that the answer needs no thread wake-up to reach it.

Whoever reads, under the link's ``read_lock``, feeds the parser and routes: each message
to its subscription (its hook first: JetStream's statuses, replies, pulls), everything else
(PING, PONG, INFO, -ERR) to the client's ``on_control``. The network thread waits for data
with poll/epoll *outside* the read lock, so a thread blocked in request(), flush() or a
fetch may take the lock and read the next bytes itself. Disconnects are always handled by
the network thread: a caller that meets a dead socket shuts it down and steps back.
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from . import _protocol as proto
from . import errors
from ._conn import Conn, Waiter
from ._link import CONNECTED, Link
from ._timeouts import SIGNAL_SLICE
from .msg import Msg

if TYPE_CHECKING:  # pragma: no cover
    from .subscription import Subscription

__all__ = ["Reader"]

log = logging.getLogger("jetstream_sync")

_READ_SIZE = 256 * 1024
_WRITE_SLICE = 0.5  # a TLS read that must write first waits at most this long at a time


class Reader:
    """Reads the live socket and routes what comes; see the module docstring."""

    def __init__(
        self,
        link: Link,
        subs: Dict[int, Subscription],
        report: Callable[[errors.NATSError], None],
    ) -> None:
        self.link = link
        self._subs = subs  # the subscription table's dict (the same object, never replaced)
        # PING, PONG, INFO and -ERR go here (set by the client: Network.on_control).
        self.on_control: Callable[[proto.Event], None] = lambda ev: None
        self._report = report
        self.in_msgs = 0
        self.in_bytes = 0
        # Run once after the messages of one read were routed (by the reading thread, under
        # the read lock): hooks that check a whole read at once register here.
        self.after_read: List[Callable[[], None]] = []
        # Fault injection for tests: messages for which this returns True are dropped as if
        # the network had lost them. See jetstream_sync.testing.drop_inbound.
        self.inbound_filter: Optional[Callable[[Msg], bool]] = None

    def read_until_error(self, conn: Conn) -> errors.NATSError:
        """The network thread: read ``conn`` until the socket fails; returns why.

        A plain TCP socket is waited on with poll() *without* the read lock and read
        (non-blocking) under it, so a thread blocked in request() or flush() can take the
        lock and read its own reply itself: no thread wake-up on the reply's path. TLS
        sockets, whose decrypted bytes poll() cannot see, are read here only.
        """
        read_lock = self.link.read_lock
        with read_lock:
            err = self.dispatch(conn.parser.events())  # what came with the handshake
        if err is not None:
            conn.reader_left.set()  # (it never waited on the socket)
            return err
        if not conn.inline:
            return self._read_tls(conn)
        poller: Any
        try:  # fileno() is -1 once close() got there first: register refuses it
            if hasattr(select, "epoll"):
                poller = select.epoll()
                with conn.quiet_lock:
                    # kill_socket marks the conn broken, then looks at conn.ep under this
                    # lock: registered first, it waits for us to leave before it closes the
                    # descriptor; closed first, we must not register it (by then the number
                    # may belong to another socket, whose poll would never see our end).
                    if conn.broken:
                        poller.close()
                        conn.reader_left.set()
                        return errors.ConnectionLostError(
                            f"connection to {conn.server.url} was closed"
                        )
                    poller.register(conn.sock.fileno(), conn.watch_mask())
                    conn.ep = poller
            else:
                poller = select.poll()
                poller.register(conn.sock.fileno(), select.POLLIN | select.POLLPRI)
        except (OSError, ValueError) as exc:
            return errors.map_os_error(exc, where=f"connection to {conn.server.url}")
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

    def _read_tls(self, conn: Conn) -> errors.NATSError:
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
                with self.link.read_lock:
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
            return errors.UnexpectedEOF(f"server {conn.server.url} closed the connection")
        try:
            conn.parser.receive_data(data)
            return self.dispatch(conn.parser.events())
        except errors.ProtocolError as exc:
            self._report(exc)
            return exc

    def dispatch(self, events: List[proto.Event]) -> Optional[errors.NATSError]:
        """Route events: messages to their subscription, the rest to on_control. Hot."""
        subs = self._subs
        msg_cls = Msg
        nmsgs = nbytes = 0
        drop = self.inbound_filter
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
                    self.on_control(ev)
            if self.after_read:
                after, self.after_read = self.after_read, []
                for fn in after:
                    fn()
        except Exception as exc:  # a bug in internal code: surface it, drop the connection
            log.exception("jetstream_sync: internal error routing a message")
            return errors.ProtocolError(f"internal error routing a message: {exc!r}")
        finally:
            if nmsgs:
                self.in_msgs += nmsgs
                self.in_bytes += nbytes
        return None

    # --- reading in the caller's thread ---------------------------------------------------

    def wait_for(self, waiter: Waiter, timeout: float) -> bool:
        """Wait for ``waiter`` up to ``timeout``; read the socket in this thread when no
        other thread is reading it, so the answer needs no thread hop to reach us."""
        lock = waiter.lock
        if lock.acquire(False):
            return True
        deadline = time.monotonic() + timeout
        link = self.link
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return lock.acquire(False)
            read = self.read_here(left, waiter.ready)
            if read is None:
                # Another thread is reading (it will wake us) or there is no connection.
                wait = min(left, SIGNAL_SLICE) if link.conn is None else min(left, 0.005)
                if lock.acquire(timeout=wait):
                    return True
            elif read and lock.acquire(False):
                return True

    def read_here(self, timeout: float, ready: Callable[[], int]) -> Optional[int]:
        """Read and route what the socket has in this thread, waiting up to ``timeout`` for
        it (at most SIGNAL_SLICE: callers loop to their deadline), unless ``ready()``
        already holds. This is how a thread waiting for an answer (request, flush, a fetch)
        gets it without a thread wake-up.

        None when this thread cannot read: another thread holds the read lock (it will
        route what comes), or there is no connection this thread may read; otherwise
        ``ready()`` afterwards (truthy when it holds: a bool, or a queue's size).
        """
        link = self.link
        conn = link.conn
        read_lock = link.read_lock
        if conn is None or not conn.inline or not read_lock.acquire(False):
            return None
        try:
            if ready():  # routed by another thread before we got the lock
                return True
            if link.state is not CONNECTED or link.conn is not conn:
                return None
            # One poll object per call: a poll object is not for two threads.
            poller = select.poll()
            try:
                poller.register(conn.sock.fileno(), select.POLLIN | select.POLLPRI)
                waited = min(timeout, SIGNAL_SLICE) * 1000.0
                err = self._read_once(conn) if poller.poll(waited) else None
            except (OSError, ValueError) as exc:
                err = errors.map_os_error(exc, where=f"connection to {conn.server.url}")
            if err is not None:
                # The network thread owns disconnects: make sure it sees this.
                conn.shutdown()
                return None
        finally:
            read_lock.release()
        return ready()

    def quiet_begin(self) -> Optional[Conn]:
        """This thread reads its own answers: the network thread's epoll need not wake for
        them (see Conn.quiet_begin). Returns the connection to pass to quiet_end."""
        conn = self.link.conn
        if conn is not None and conn.inline:
            conn.quiet_begin()
            return conn
        return None

    @staticmethod
    def quiet_end(conn: Optional[Conn]) -> None:
        """End what ``quiet_begin`` started on ``conn`` (nothing for None)."""
        if conn is not None:
            conn.quiet_end()
