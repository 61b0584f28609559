"""The long pull a ``fetch`` leaves while it is live, kept until the server is done with it.

A fetch may return while its pull is still live on the server: it timed out before the
server's 408 came (the server counts the expiry from when it read the pull, later than the
client sent it), or it returned early from a long pull sent after ``408 Requests Pending``.
Removing its inbox then loses messages: the server picks a waiting pull for a message, then
routes the message a moment later on another goroutine, and a server that accepts leafnode
or gateway connections counts a pull under 2 s old as wanted even with nobody subscribed. A
message picked for the pull then goes to nobody: a delivery counted toward ``max_deliver``
(with ``max_deliver=1`` the message is lost) and redelivered only later. So the inbox stays
routed to the subscription's queue, the next fetch takes what the pull delivers and sends no
pull of its own while it is live (pulls would pile up), and the UNSUB goes out once the pull
has ended: its last message, a status, or GRACE after its expiry as the client reckons it.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Optional, Tuple

from .._seam import raw_headers
from ..msg import Msg
from .status import HEARTBEAT, classify

if TYPE_CHECKING:  # pragma: no cover
    from queue import SimpleQueue

    from .._seam import Core
    from ..subscription import Subscription

__all__ = ["GRACE", "WAKE", "LongPull", "LongPulls"]

# How long after a left-early pull's expiry its inbox is still routed (its 408 is due at the
# expiry; this is for a server or route that is late with it) before the UNSUB goes out.
GRACE = 1.0
# Put in the queue to wake a fetch waiting on a left-early pull that has ended: it reads as
# a status for some earlier pull, which every reader of the queue skips.
WAKE = Msg("", "", b"", hdr=b"NATS/1.0 408 Request Timeout\r\n\r\n")


class LongPull:
    """One long pull (no heartbeats, no priority): ``left`` counts down the messages the
    server may still send it (every message for ``sid``, taken or still queued), and
    ``lingering`` says its fetch has returned. ``ends`` is its expiry (monotonic)."""

    __slots__ = ("ends", "left", "lingering", "sid", "sub")

    def __init__(self, sub: Subscription, left: int, ends: float) -> None:
        self.sub = sub
        self.sid = sub.sid
        self.left = left  # under LongPulls._lock, as is ``lingering``
        self.ends = ends
        self.lingering = False


class LongPulls:
    """A pull subscription's running fetch's long pull, or the one its last fetch left
    early: at most one (a fetch waits for a lingering pull before it pulls)."""

    def __init__(self, core: Core, q: SimpleQueue[Msg]) -> None:
        self._core = core
        self._q = q
        self._lock = threading.Lock()
        self.current: Optional[LongPull] = None
        self.waited = False  # a fetch waits on the lingering pull: its end must wake it

    def track(self, sub: Subscription, batch: int, ends: float) -> None:
        """A long pull for ``batch`` is about to go out on ``sub``'s inbox."""
        self.current = LongPull(sub, batch, ends)

    def lingering(self) -> Optional[LongPull]:
        """The current long pull if its fetch has returned and it still runs, else None."""
        pull = self.current
        return pull if pull is not None and pull.lingering else None

    def seen(self, pull: LongPull, msg: Msg) -> bool:
        """Network thread: ``msg`` came for ``pull``. A message counts down what the pull may
        still send and is queued as any other (False). While its fetch reads, a status is
        the fetch's too; once the pull lingers, a status ends it and is consumed here
        (True), and its last message ends it."""
        kind = None if raw_headers(msg) is None else classify(msg)
        with self._lock:
            if kind is None:
                pull.left -= 1
            if not pull.lingering:
                return False
            served = kind is None and pull.left <= 0
        if kind is None:
            if served:  # the server dropped the inbox at its UNSUB count
                self.end(pull, unsub=False)
            return False
        if kind is not HEARTBEAT:
            self.end(pull, unsub=True)
        return True

    def leave(
        self, sub: Subscription, taken: int, batch: int, finished: bool, closed: bool
    ) -> Tuple[bool, bool]:
        """The fetch that pulled on ``sub`` returns with ``taken`` messages: (served: the
        server is done with the inbox by its UNSUB count, lingers: the pull stays, and its
        inbox with it, until it ends)."""
        pull = self.current
        if pull is None or pull.sub is not sub:
            return taken >= batch, False
        with self._lock:
            served = pull.left <= 0  # counted per inbox: late messages of others are not
            # A fetch that timed out lingers too: the server's expiry counts from when it
            # read the pull, later than ours, so the pull may still be live there.
            lingers = not (served or finished or closed)
            pull.lingering = lingers
        if not lingers:
            self.current = None
            return served, False
        self._core.add_reconnect_hook(self._on_reconnect)
        delay = max(0.0, pull.ends - time.monotonic()) + GRACE
        self._core.call_later(delay, lambda: self.end(pull, unsub=True))
        return served, True

    def _on_reconnect(self) -> None:
        """A new connection: the pull may be gone with the old one (a restarted server
        forgets it), and a fetch must not wait for a pull nobody serves."""
        pull = self.current
        if pull is not None and pull.lingering:
            self.end(pull, unsub=True)

    def end(self, pull: LongPull, unsub: bool) -> None:
        """Any thread: ``pull`` is over (or its time is). Its inbox is removed from the timer
        thread, never from the reading one. A second call for it does nothing (its last
        message on the network thread and its expiry timer can meet: hence the lock)."""
        with self._lock:
            if self.current is not pull:
                return
            self.current = None
        if self.waited:
            self._q.put(WAKE)
        core = self._core
        core.remove_reconnect_hook(self._on_reconnect)
        if unsub:
            core.call_later(0.0, lambda: core.retire(pull.sub))
        else:
            core.call_later(0.0, lambda: core.forget(pull.sub))

    def close(self) -> None:
        """The subscription leaves: nobody will fetch what a lingering pull would send."""
        pull = self.lingering()
        if pull is not None:
            self.current = None
            self._core.remove_reconnect_hook(self._on_reconnect)
            self._core.retire(pull.sub)
