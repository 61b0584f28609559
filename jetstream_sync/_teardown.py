"""How a client ends: close() and the network thread giving up (one teardown for both), and
a forked child disowning its parent's socket. Kept apart from Client's body, which reads as
the public API; mixed into Client."""

from __future__ import annotations

import os
import threading
import time
import weakref
from typing import TYPE_CHECKING, Optional, cast

from . import errors
from ._link import CLOSED, CONNECTED, FORKED, NEW

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["Teardown", "live_clients"]

# The clients that may hold a socket: a forked child disowns theirs (see _mark_forked).
live_clients: weakref.WeakSet[Client] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for client in list(live_clients):
        client._mark_forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Teardown:
    """Mixed into Client: closing, shutting down, and disowning after a fork."""

    def _close(self, linger: float) -> None:
        """close(), giving what is buffered at most ``linger`` seconds to leave (0: what
        the socket takes at once, no waiting)."""
        nc = cast("Client", self)
        link = nc._link
        if link.state is FORKED:
            link.closing = True
            return
        if link.state is NEW:
            link.state = CLOSED
            return
        if link.closing:
            if threading.current_thread() not in nc._threads:
                nc._closed_event.wait(10.0)
            return
        # Best effort, bounded: a peer that stops reading gets ``linger``, no more.
        outbox = nc._outbox
        if (
            link.state is CONNECTED
            and link.conn is not None
            and not outbox.write_pending()
            and linger > 0
        ):
            outbox.write_slow(until=time.monotonic() + min(linger, outbox.write_timeout))
        self._shutdown(None)

    def _shutdown(self, reason: Optional[errors.NATSError]) -> None:
        """Final teardown, from close() or from the network thread giving up."""
        nc = cast("Client", self)
        link = nc._link
        with link.wlock:
            if link.closing:
                return
            link.closing = True
            was_connected = link.state is CONNECTED
            link.state = CLOSED
            nc._outbox.pub_fast = False
            lost, waiters = nc._outbox.discard()
        network = nc._network
        network.stop.set()
        network.connected.set()  # wake flush() calls waiting for a reconnect: closed
        conn = link.conn
        if conn is not None:
            network.kill_socket(conn)
        if reason is not None:
            network.last_error = reason
            nc._report(reason)
        if lost:
            nc._report(
                errors.MessagesLostError(
                    f"closed with {lost} unsent publish(es) in the buffer: they were not sent",
                    count=lost,
                )
            )
        closed = reason or errors.ConnectionClosedError("the client is closed")
        for waiter in waiters:
            if waiter is not None:
                waiter.wake(error=closed)
        nc._requests.fail_all(closed)
        nc._hooks.run_close_hooks()
        nc._table.end_all(closed)
        if nc._timers is not None:
            nc._timers.stop()
        nc._outbox.kick.set()
        if was_connected:  # nats-py: close() says disconnected (once), then closed
            nc._callbacks.call(network.disconnected_cb)
        nc._callbacks.call(nc._closed_cb)
        nc._callbacks.stop()
        me = threading.current_thread()
        for t in nc._threads:
            if t is not me and t.is_alive():
                t.join(5.0)
        nc._closed_event.set()

    def _mark_forked(self) -> None:
        """In a forked child: disown the parent's socket without touching it or any lock."""
        nc = cast("Client", self)
        nc._link.state = FORKED
        nc._outbox.pub_fast = False
        conn = nc._link.conn
        if conn is not None:
            try:
                os.close(conn.sock.detach())  # closes only the child's copy of the fd
            except OSError:
                pass
