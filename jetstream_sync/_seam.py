"""The one seam between the core client and what is built on it (JetStream, Spark).

JetStream needs a few things of a connection that the public API does not offer: a
subscription whose messages a hook sees first, on the reading thread; a request that waits
with a deadline; a publish whose reply subject we made; a timer; word of reconnects and of
the close; a way to report an error. :class:`Core` declares them, each with its contract,
and is everything JetStream and Spark use of the core besides the public API
(``Client.new_inbox``, ``flush``, ``is_closed``, ...) and the public parts of ``Msg`` and
``Subscription``. Nothing under ``jetstream/`` or ``spark/`` touches a private name of the
client: it asks :func:`core_of` for the client's Core once and keeps it.

The helpers at the end (:func:`raw_headers`, :func:`set_ack_state`, and three views of a
``Subscription``) are the seam's view of the ``Msg`` and ``Subscription`` internals that
JetStream's status, ack and push rules need.

Hot paths (fetch, acks, publish_async) call these many times a second, so the object
:func:`core_of` returns holds the implementing rooms' bound methods themselves: going
through the seam costs no extra call.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Tuple

if TYPE_CHECKING:  # pragma: no cover
    from ._conn import Conn
    from .client import Client
    from .errors import NATSError
    from .msg import HeadersLike, Msg
    from .subscription import MessageHook, Subscription

__all__ = ["Core", "core_of"]


class Core(Protocol):
    """What the core offers JetStream. Every method may be called from any thread."""

    # --- subscriptions ------------------------------------------------------------------

    def subscribe(
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
        """Subscribe without argument checks; ``hook`` sees each message first on the
        reading thread (True: consumed), ``on_take`` where the user takes one."""
        ...

    def unsubscribe(self, sub: Subscription) -> None:
        """UNSUB and end ``sub`` (its readers get BadSubscriptionError after what is queued)."""
        ...

    def auto_unsubscribe(self, sub: Subscription, limit: int) -> None:
        """UNSUB ``sub`` after ``limit`` messages in all (the server counts)."""
        ...

    def retire(self, sub: Subscription) -> None:
        """UNSUB now, but route what the server sent before it saw the UNSUB to ``sub``."""
        ...

    def drop_interest(self, sub: Subscription) -> None:
        """UNSUB and stop routing to ``sub``, leaving its queue open for the user."""
        ...

    def forget(self, sub: Subscription) -> None:
        """Stop routing to ``sub`` without an UNSUB (the server already dropped it)."""
        ...

    def deliver(self, sub: Subscription, msg: Msg) -> None:
        """Queue ``msg`` on ``sub`` as if it had come for it (reading thread only)."""
        ...

    # --- requests and publishes ---------------------------------------------------------

    def api_request(self, subject: str, data: bytes, timeout: float) -> Msg:
        """Request on an API subject built from checked parts (wildcards allowed, as in a
        consumer-create subject) and wait up to ``timeout`` s; TimeoutError after that."""
        ...

    def send_request(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> None:
        """Publish with a reply subject we made and write it from this thread at once."""
        ...

    def publish_own_reply(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> None:
        """Publish with a reply subject we made, queued with the rest (publish_async)."""
        ...

    def queue_own_reply(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> None:
        """publish_own_reply for a caller that writes the buffer itself soon (with
        send_request): the flusher wakes only if the frame is still queued a moment later."""
        ...

    def publish_trusted(self, subject: str, data: bytes) -> None:
        """Publish to a subject the server gave us (an ack or flow-control reply)."""
        ...

    def fixed_request(self, subject: str, data: bytes) -> Tuple[bytes, bytes, int]:
        """The parts of a request frame sent again and again with only the reply changing:
        send ``head + reply.encode() + tail`` with :meth:`send_frame` (``n`` bytes)."""
        ...

    def send_frame(self, frame: bytes, n: int) -> None:
        """Queue a frame built by :meth:`fixed_request` and write it at once."""
        ...

    # --- reading in the caller's thread -------------------------------------------------

    def read_here(self, timeout: float, ready: Callable[[], int]) -> Optional[int]:
        """Read and route in this thread for up to ``timeout`` s unless ``ready()`` holds;
        None when another thread reads (it will route what comes), else ``ready()``."""
        ...

    def quiet_begin(self) -> Optional[Conn]:
        """This thread will read its own answers: the network thread need not wake for
        them. Returns a token for :meth:`quiet_end` (None: nothing to undo)."""
        ...

    def quiet_end(self, token: Optional[Conn]) -> None:
        """Undo :meth:`quiet_begin`."""
        ...

    def after_read(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once on the reading thread after the messages of the current read
        have been routed (register from a hook)."""
        ...

    # --- time, lifecycle, errors --------------------------------------------------------

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the timer thread after ``delay`` s (never after close); it must
        not block."""
        ...

    def add_reconnect_hook(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the network thread after each reconnect (it must not block)."""
        ...

    def remove_reconnect_hook(self, fn: Callable[[], None]) -> None:
        """Forget a reconnect hook (no error if absent)."""
        ...

    def add_close_hook(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once when the client closes (at once if it has)."""
        ...

    def remove_close_hook(self, fn: Callable[[], None]) -> None:
        """Forget a close hook (no error if absent)."""
        ...

    def report(self, err: BaseException) -> None:
        """Hand ``err`` to error_cb on the callback thread (logged when there is none)."""
        ...

    def callback(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the callback thread, after earlier callbacks."""
        ...


def core_of(client: Client) -> Core:
    """The Core of ``client`` (made once per client, on first use)."""
    if client._core is None:
        client._core = _ClientCore(client)
    return client._core


class _ClientCore:
    """The Core of one Client: the implementing rooms' methods, bound once."""

    def __init__(self, client: Client) -> None:
        table, outbox, reader = client._table, client._outbox, client._reader
        hooks, callbacks = client._hooks, client._callbacks
        self.subscribe = table.add
        self.unsubscribe = table.unsubscribe
        self.auto_unsubscribe = table.auto_unsubscribe
        self.retire = table.retire
        self.drop_interest = table.drop_interest
        self.forget = table.forget
        self.api_request = client._requests.api_request
        self.send_request = outbox.send_request
        self.publish_own_reply = outbox.publish_own_reply
        self.queue_own_reply = outbox.queue_own_reply
        self.publish_trusted = outbox.publish_trusted
        self.fixed_request = outbox.fixed_request
        self.send_frame = outbox.send_frame
        self.read_here = reader.read_here
        self.quiet_begin = reader.quiet_begin
        self.quiet_end = reader.quiet_end
        self.call_later = client._network.call_later
        self.add_reconnect_hook = hooks.add_reconnect_hook
        self.remove_reconnect_hook = hooks.remove_reconnect_hook
        self.add_close_hook = hooks.add_close_hook
        self.remove_close_hook = hooks.remove_close_hook
        self.report = callbacks.report
        self.callback = callbacks.call
        self._reader = reader

    @staticmethod
    def deliver(sub: Subscription, msg: Msg) -> None:
        sub._deliver(msg)

    def after_read(self, fn: Callable[[], None]) -> None:
        self._reader.after_read.append(fn)


# --- Msg and Subscription internals JetStream's rules need ------------------------------


# The message's raw header block, None when it has none (statuses live there). An
# attrgetter, not a function: it runs for every JetStream message, and a C call costs
# no Python frame.
raw_headers: Callable[[Msg], Optional[bytes]] = operator.attrgetter("_hdr")


# The Msg slot set_ack_state writes: a per-message path may call the builtin
# ``setattr(msg, ACK_STATE, state)`` instead, a C call and no Python frame.
ACK_STATE = "_ack"


def set_ack_state(msg: Msg, state: int) -> None:
    """Set the message's ack state (_jsack.ACK_OPEN / ACK_DONE / ACK_NONE): ACK_NONE on a
    consumer whose ack policy is none, so that ack calls on it do nothing."""
    msg._ack = state


def has_callback(sub: Subscription) -> bool:
    """Whether ``sub`` hands its messages to a callback (on its dispatcher thread)."""
    return sub._cb is not None


def dispatcher(sub: Subscription) -> Optional[Any]:
    """The thread running ``sub``'s callback, None without one."""
    return sub._dispatcher


def end_error(sub: Subscription) -> Optional[NATSError]:
    """Why ``sub`` ended, None while it is live."""
    return sub._end_error


def is_pedantic(client: Client) -> bool:
    """Whether ``client`` connected with ``pedantic=True`` (the server then refuses a
    wildcard publish subject, even an API request's)."""
    return client._network.dial_opts.pedantic
