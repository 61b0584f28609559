"""One live connection (socket, parser, the network thread's epoll interest) and the
one-shot objects a PONG or a reply wakes: a blocked caller's waiter, a subscription leaving
the routing table, a move away from a server in lame duck mode."""

from __future__ import annotations

import select
import socket
import ssl
import threading
from typing import TYPE_CHECKING, Any, Dict, Optional

from . import _protocol as proto
from . import errors
from ._servers import Server
from .msg import Msg

if TYPE_CHECKING:
    from .subscription import Subscription

__all__ = ["Conn", "Forget", "Move", "Waiter"]


class Waiter:
    """A one-shot hand-off from the network thread to a blocked caller.

    A pre-acquired lock is the cheapest wake-up CPython has (``Event`` adds a Condition).
    """

    __slots__ = ("error", "lock", "msg", "subject")

    def __init__(self, subject: str = "") -> None:
        self.lock = threading.Lock()
        self.lock.acquire()
        self.msg: Optional[Msg] = None
        self.error: Optional[errors.NATSError] = None
        self.subject = subject  # a request's subject: a denied publish fails it at once

    def ready(self) -> bool:
        """True once woken."""
        return not self.lock.locked()

    def wake(self, msg: Optional[Msg] = None, error: Optional[errors.NATSError] = None) -> None:
        """Hand over ``msg`` or ``error`` and wake the waiting caller; a second wake is ignored."""
        self.msg = msg
        self.error = error
        try:
            self.lock.release()
        except RuntimeError:
            pass  # woken twice (a race between a reply and a disconnect): first one wins


class Forget:
    """Stands in a ping's waiter place: on its PONG (or the connection's loss) the
    subscription leaves the routing table. See SubscriptionTable.retire."""

    __slots__ = ("sub", "subs")

    def __init__(self, subs: Dict[int, Subscription], sub: Subscription) -> None:
        self.subs = subs
        self.sub = sub

    def wake(self, msg: Optional[Msg] = None, error: Optional[errors.NATSError] = None) -> None:
        """Remove the subscription from the routing table."""
        self.subs.pop(self.sub.sid, None)  # sids are never reused


class Move:
    """Stands in a ping's waiter place after the server announced lame duck mode: at its
    PONG the server has processed everything written before it and everything it sent us
    before it has been read, so the socket is shut then and the network thread reconnects to
    another server while this one still runs (see Network._lame_duck)."""

    __slots__ = ("conn",)

    def __init__(self, conn: Conn) -> None:
        self.conn = conn

    def wake(self, msg: Optional[Msg] = None, error: Optional[errors.NATSError] = None) -> None:
        """Shut the socket down, unless the connection was lost already (``error``)."""
        if error is None:
            self.conn.shutdown()


class Conn:
    """One live socket and the parser reading it.

    The socket is non-blocking once the handshake is done: no thread ever waits inside a
    socket call (reads wait in poll/epoll, writes in Outbox.write_slow), so a peer that
    stops reading can hold no lock and no caller's deadline.

    ``inline``: a plain TCP socket on a platform with poll(), which any thread holding the
    read lock may read (see Reader.wait_for); TLS sockets are read by the network thread only.

    ``ep``: the network thread's epoll (Linux), through which a thread about to wait for an
    answer it will read itself turns the network thread's interest in the socket off for
    the while (``quiet_begin`` / ``quiet_end``): otherwise the answer's arrival wakes the
    network thread too, only to find the bytes taken — a wasted thread switch per request.
    """

    __slots__ = (
        "broken",
        "ep",
        "info",
        "inline",
        "parser",
        "progress_at",
        "quiet",
        "quiet_lock",
        "reader_left",
        "server",
        "sock",
        "tail",
    )

    def __init__(
        self, sock: socket.socket, parser: proto.Parser, server: Server, info: Dict[str, Any]
    ) -> None:
        self.sock = sock
        self.parser = parser
        self.server = server
        self.info = info
        self.inline = hasattr(select, "poll") and not isinstance(sock, ssl.SSLSocket)
        self.ep: Optional[Any] = None  # select.epoll, set by the network thread
        self.quiet = 0  # threads that asked the network thread not to wake for data
        self.quiet_lock = threading.Lock()
        # Set when the network thread has stopped waiting on ``ep``: closing a socket
        # removes it from an epoll set, and can swallow the wake-up its shutdown() sent.
        self.reader_left = threading.Event()
        # Writes never block (the socket is non-blocking after the handshake): what the
        # kernel did not take is ``tail``, written before anything else, by whichever thread
        # writes next (see Outbox.write_pending). Guarded by the client's send lock.
        self.tail: Optional[memoryview] = None
        # When the tail last shrank (or appeared): a tail that stays put for the client's
        # write_timeout means the peer stopped reading, and the connection is stale.
        self.progress_at = 0.0
        # A write failed or stalled: the socket is shut down and the network thread will
        # reconnect; nothing more is written on it.
        self.broken = False

    def shutdown(self) -> None:
        """Shut the socket down both ways: every thread waiting on it wakes (the network
        thread then sees the connection end and runs the reconnect path)."""
        try:
            socket.socket.shutdown(self.sock, socket.SHUT_RDWR)
        except OSError:
            pass

    def watch_mask(self) -> int:
        """What the network thread's epoll waits for (errors and hang-ups always wake it)."""
        return 0 if self.quiet else select.EPOLLIN | select.EPOLLPRI

    def quiet_begin(self) -> None:
        """One more thread reads its own answers: the first turns the epoll's interest in data
        off."""
        with self.quiet_lock:
            self.quiet += 1
            if self.quiet == 1:
                self._watch(0)

    def quiet_end(self) -> None:
        """That thread is done: the last one turns the epoll's interest in data back on."""
        with self.quiet_lock:
            self.quiet -= 1
            if self.quiet == 0:
                self._watch(select.EPOLLIN | select.EPOLLPRI)

    def _watch(self, mask: int) -> None:
        """Set what the network thread's epoll waits for (errors and hang-ups always wake
        it). Called with ``quiet_lock`` held, once per fetch or request: kept lean."""
        ep = self.ep
        if ep is not None:
            try:
                ep.modify(self.sock.fileno(), mask)
            except (OSError, ValueError):
                pass  # closed meanwhile: the network thread has its error already
