"""The subscription table: sid -> Subscription, the SUB/UNSUB frames that keep the server's
view of it in step, and the ways a subscription leaves it.

The reader routes by this table's dict (it holds the same object). Changes happen under the
link's ``wlock``, in the same critical section as the frame that tells the server, so that
a reconnect (which re-subscribes from the table) never sees a half-made change.
"""

from __future__ import annotations

import itertools
import re
from typing import Callable, Dict, List, Optional

from . import _protocol as proto
from . import errors
from ._conn import Forget
from ._link import CONNECTED, Link
from ._outbox import Outbox
from ._timeouts import Deadline
from .msg import Msg
from .subscription import MessageHook, Subscription

__all__ = ["SubscriptionTable"]

# The server's refusal of a SUB names the subject (and queue group): see end_denied.
_DENIED_SUB_RE = re.compile(
    r'permissions violation for subscription to "([^"]*)"(?: using queue "([^"]*)")?', re.I
)


class SubscriptionTable:
    """Every live subscription of one client, by sid."""

    def __init__(
        self,
        link: Link,
        outbox: Outbox,
        report: Callable[[BaseException], None],
        flush: Callable[[float], None],
    ) -> None:
        self.link = link
        self._outbox = outbox
        self.report = report
        self._flush = flush
        self.subs: Dict[int, Subscription] = {}
        self._sids = itertools.count(1)

    def add(
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
        self.link.check_open("subscribe")
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
        with self.link.wlock:
            self.subs[sid] = sub
            self._outbox.enqueue_locked(frame)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        """UNSUB and end ``sub``: its readers see BadSubscriptionError after the queued."""
        with self.link.wlock:
            if self.subs.pop(sub.sid, None) is not None:
                self._outbox.enqueue_locked(proto.encode_unsub(sub.sid))
        sub._end(
            errors.BadSubscriptionError(
                f"subscription {sub.sid} on {sub.subject!r} is unsubscribed"
            )
        )

    def auto_unsubscribe(self, sub: Subscription, limit: int) -> None:
        """Ask the server to end ``sub`` after ``limit`` messages in total (UNSUB with a count)."""
        self._outbox.enqueue(proto.encode_unsub(sub.sid, limit))

    def retire(self, sub: Subscription) -> None:
        """UNSUB now, but keep routing ``sub``'s messages until the server has seen the
        UNSUB (the PONG of a PING sent right after it): what the server sent meanwhile
        reaches the hook instead of vanishing with an unknown sid."""
        outbox = self._outbox
        with self.link.wlock:
            if self.subs.get(sub.sid) is not sub:
                return
            if self.link.state is not CONNECTED:
                del self.subs[sub.sid]  # nothing in flight; a reconnect will not renew it
                return
            outbox.out.append(proto.encode_unsub(sub.sid))
            outbox.ctl_frames += 1
            outbox.ping_locked(Forget(self.subs, sub))

    def drop_interest(self, sub: Subscription) -> None:
        """UNSUB and stop routing to ``sub``, but leave its queue open (an ordered push
        subscription keeps handing out what came, from its next inboxes)."""
        with self.link.wlock:
            if self.subs.pop(sub.sid, None) is not None:
                self._outbox.enqueue_locked(proto.encode_unsub(sub.sid))

    def forget(self, sub: Subscription) -> None:
        """Stop routing to ``sub`` (the server has dropped it already)."""
        self.subs.pop(sub.sid, None)

    def drain(self, sub: Subscription, deadline: Deadline) -> None:
        """UNSUB, then a round trip so every message sent before it has arrived."""
        self._outbox.enqueue(proto.encode_unsub(sub.sid))
        try:
            if self.link.state is CONNECTED:
                self._flush(deadline.remaining())
        finally:
            self.forget(sub)
            sub._end(
                errors.BadSubscriptionError(f"subscription {sub.sid} on {sub.subject!r} is drained")
            )

    def resubscribe_frames(self) -> List[bytes]:
        """SUB (and UNSUB with what is left of max_msgs) for every subscription, for a new
        connection (the caller holds wlock)."""
        frames = []
        for sub in self.subs.values():
            frames.append(proto.encode_sub(sub.subject, sub.sid, sub.queue or None))
            if sub.max_msgs:
                frames.append(proto.encode_unsub(sub.sid, max(1, sub.max_msgs - sub.delivered)))
        return frames

    def end_denied(self, message: str, err: errors.NATSError) -> None:
        """The server refused a SUB: end the oldest live subscription it names with ``err``,
        so its next_msg / iteration raise that instead of waiting for messages that never
        come (error_cb still gets the error too)."""
        m = _DENIED_SUB_RE.match(message)
        if m is None:
            return
        subject, queue_name = m.group(1), m.group(2) or ""
        for sub in sorted(list(self.subs.values()), key=lambda s: s.sid):
            if sub.subject == subject and sub.queue == queue_name and sub.is_valid:
                self.forget(sub)
                sub._end(err)
                return

    def end_all(self, err: errors.NATSError) -> None:
        """At close: every subscription ends with ``err`` (after what is queued)."""
        closed = (
            err
            if isinstance(err, errors.ConnectionClosedError)
            else errors.ConnectionClosedError(f"the client closed: {err}")
        )
        for sub in list(self.subs.values()):
            sub._end(closed)
        self.subs.clear()
