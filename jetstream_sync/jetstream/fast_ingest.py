"""Fast-ingest batch publishing (ADR-50, nats-server 2.14+): ``js.fast_publisher()``.

A fast-ingest batch moves messages into a stream (one with ``allow_batched``) without an ack
per message. Each message's reply subject tells the server where it is in the batch
(``<inbox>.<flow>.<gap>.<batch seq>.<operation>.$FI``: ``_fast_wire.py`` builds them and
reads the answers). The server answers on that subject, so one wildcard subscription of the
batch's own (``<inbox>.>``, not the request mux: dropping it stops the server's answers at
once) hears everything: a flow ack every ``flow`` messages at most (cumulative: the ack for
300 covers a lost one for 200), a gap (messages that never arrived), a refused message (an
expectation such as ``expected_last_seq`` failed), and the final PubAck.

The publisher queues messages while fewer than ``flow x max_outstanding_acks`` are unacked
(``queue_own_reply``: no flusher wake-up), writes them from its own thread every 32 KiB and
with the message that fills the window, then waits for the next ack: it reads the socket
itself (``read_here``; the hook runs in its thread), or, while another thread reads, waits on
a Condition that thread's hook notifies. With gap "fail" a gap or a refused message ends the
batch: the server stores nothing after it and sends its final PubAck, and ``add``/``commit``
raise the gap or refusal with that PubAck attached. With gap "ok" both are only reported
(``error_cb`` and ``pub.errors``) and the batch goes on. Fast ingest is not atomic: what the
server stored stays stored, whatever happens to the batch afterwards.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, List, NamedTuple, Optional, TypeVar, Union

from .. import errors
from .._seam import raw_headers
from .._timeouts import SIGNAL_SLICE, Deadline, check_timeout
from ..msg import HeadersLike, Msg
from . import api, api_level
from ._fast_wire import (
    GAP_MODES,
    OP_COMMIT,
    OP_COMMIT_EOB,
    OP_PING,
    FlowAck,
    FlowErr,
    FlowGap,
    Reply,
    check_flow,
    check_max_outstanding,
    parse_reply,
    reply_head,
    reply_subject,
)
from .publish import nats_py_names, publish_headers

if TYPE_CHECKING:  # pragma: no cover
    from types import TracebackType

    from .._seam import Core
    from ..client import Client

__all__ = ["FastIngest", "FastPubAck", "FastPublisher"]

DEFAULT_FLOW = 100
DEFAULT_MAX_OUTSTANDING_ACKS = 2
# How long a waiting publisher leaves the reading to another thread before it looks again.
_HANDOFF = 0.005
# Payload bytes queued before add() writes them itself, window full or not: the server gets
# a long window in pieces as it fills, and the flusher is not woken to do it.
_WRITE_CHUNK = 32 * 1024


class FastPubAck(NamedTuple):
    """What ``FastPublisher.add`` returns."""

    batch_seq: int  # this message's sequence in the batch (1 for the first)
    # The highest batch sequence the server has acked: with gap "fail" every message up to
    # it is stored (their data may be let go); with gap "ok" some may be missing.
    ack_seq: int


# FastPubAck(a, b) without its Python-level __new__: one per message.
_new_ack = tuple.__new__


_E = TypeVar("_E", bound=errors.FastIngestError)


class FastPublisher:
    """One fast-ingest batch into a stream with ``allow_batched`` (``js.fast_publisher()``).

    Not thread-safe: one thread adds and commits. Use it as a context manager::

        with js.fast_publisher() as pub:
            for x in rows:
                pub.add("events.x", x)
            ack = pub.commit()  # EOB; or commit(subject, data) to store a last message

    Leaving the block normally without ``commit()`` commits (EOB) and keeps the PubAck in
    ``pub.ack``. Leaving it by an exception commits nothing and sends nothing more: the
    messages the server stored stay stored (fast ingest is not atomic), and the server
    drops the open batch after 10 s without a message.
    """

    def __init__(
        self,
        nc: Client,
        core: Core,
        flow: int,
        max_outstanding_acks: int,
        gap: str,
        ack_timeout: float,
        error_cb: Optional[Callable[[errors.NATSError], None]],
    ) -> None:
        self._core = core
        self._publish = core.queue_own_reply
        inbox = nc.new_inbox()
        self.batch_id = inbox.rsplit(".", 1)[-1]
        self._head = reply_head(inbox, flow, gap)
        self._gap_ok = gap == "ok"
        self._max_outstanding = max_outstanding_acks
        self._ack_timeout = ack_timeout
        self._error_cb = error_cb
        self._seq = 0  # the highest batch sequence sent (an EOB commit takes none)
        self._acked = 0  # the highest batch sequence acked (cumulative)
        self._limit = 0  # add() waits for an ack once its sequence reaches this
        self._unsent = 0  # payload bytes queued since this thread last wrote
        self._flow = flow  # messages per ack: the server's say once it answered
        self._subject = ""  # the first message's subject: pings and an EOB commit go there
        self._started = False  # the server has answered the first message
        self._committing = False
        # Why no more messages may go (a stop with gap "fail", a refusal, a timeout, the
        # client's close, the with block's exception), and whether more replies matter.
        self._stop: Optional[errors.NATSError] = None
        self._ended = False
        self._final: Optional[Union[api.PubAck, errors.APIError]] = None
        self._released = False
        self.ack: Optional[api.PubAck] = None  # the commit's PubAck
        self.errors: List[errors.FastIngestError] = []  # gaps and refusals, as reported
        self._cond = threading.Condition(threading.Lock())
        self._waiting = False  # the publisher waits on _cond: the hook must notify
        self._sub = core.subscribe(
            inbox + ".>", None, None, None, 1 << 30, 1 << 40, hook=self._on_reply
        )
        core.add_close_hook(self._on_client_closed)

    # --- the public side ----------------------------------------------------------------

    def add(
        self,
        subject: str,
        data: bytes = b"",
        headers: Optional[HeadersLike] = None,
        *,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_msg_id: Optional[str] = None,
        expected_last_subject_seq: Optional[int] = None,
        msg_ttl: Optional[Union[float, str]] = None,
    ) -> FastPubAck:
        """Send one message of the batch. The first waits for the server's answer (the flow
        it grants, or its refusal); later ones return at once unless ``flow x
        max_outstanding_acks`` messages are unacked, then wait up to ``ack_timeout`` for an
        ack. The keywords are ``js.publish``'s expectations (checked by the server per
        message: a failure is a FlowErr, see the class)."""
        if self._stop is not None:
            self._raise_stop()
        if (
            msg_id is not None
            or expected_stream is not None
            or expected_last_seq is not None
            or expected_last_msg_id is not None
            or expected_last_subject_seq is not None
            or msg_ttl is not None
        ):
            headers = _with_expectations(
                headers,
                msg_id,
                expected_stream,
                expected_last_seq,
                expected_last_msg_id,
                expected_last_subject_seq,
                msg_ttl,
            )
        seq = self._seq + 1
        unsent = self._unsent + len(data)
        if seq < self._limit and unsent < _WRITE_CHUNK:
            # Room in the window: queued (written with the next chunk or by the flusher).
            self._publish(subject, data, f"{self._head}{seq}.1.$FI", headers)
            self._seq = seq
            self._unsent = unsent
            return _new_ack(FastPubAck, (seq, self._acked))
        if seq == 1:
            return self._start(subject, data, headers)
        # A chunk's worth is queued, or the window is full with this one: write it and
        # everything queued now, from this thread (no flusher wake-up); then, if full, wait.
        self._core.send_request(subject, data, f"{self._head}{seq}.1.$FI", headers)
        self._seq = seq
        self._unsent = 0
        if seq >= self._limit:
            self._wait_for_room(seq)
        return FastPubAck(seq, self._acked)

    def commit(
        self,
        subject: Optional[str] = None,
        data: bytes = b"",
        headers: Optional[HeadersLike] = None,
        *,
        msg_id: Optional[str] = None,
        expected_stream: Optional[str] = None,
        expected_last_seq: Optional[int] = None,
        expected_last_msg_id: Optional[str] = None,
        expected_last_subject_seq: Optional[int] = None,
        msg_ttl: Optional[Union[float, str]] = None,
    ) -> api.PubAck:
        """End the batch and wait up to ``ack_timeout`` for its PubAck (``batch_id``,
        ``batch_size``: the last batch sequence the server took, gaps included). With a
        ``subject`` the final message is stored; without one (EOB) nothing more is."""
        if self._stop is not None:
            self._raise_stop()
        if self._committing:
            raise errors.InvalidArgumentError(
                f"fast-ingest batch {self.batch_id}: commit() is already under way"
            )
        expectations = (
            msg_id,
            expected_stream,
            expected_last_seq,
            expected_last_msg_id,
            expected_last_subject_seq,
            msg_ttl,
        )
        seq = self._seq + 1
        if subject is None:
            if data or headers is not None or any(x is not None for x in expectations):
                raise errors.InvalidArgumentError(
                    "commit() without a subject ends the batch without a message (EOB): give "
                    "a subject to store data, headers or expectations with the commit"
                )
            if seq == 1:
                raise errors.InvalidArgumentError(
                    "nothing to commit: the batch is empty (add a message first, or commit "
                    "with a subject to store one)"
                )
            subject, op = self._subject, OP_COMMIT_EOB
        else:
            if any(x is not None for x in expectations):
                headers = _with_expectations(headers, *expectations)
            op = OP_COMMIT
        # Committing before the send: the PubAck may come before send_request returns.
        self._committing = True
        if seq == 1:
            self._subject = subject
        try:
            self._core.send_request(subject, data, reply_subject(self._head, seq, op), headers)
        except BaseException:
            self._committing = False
            raise
        if op == OP_COMMIT:
            self._seq = seq
        deadline = Deadline(self._ack_timeout)
        self._wait(lambda: self._ended, deadline, ping=seq > 1)
        final = self._final
        if isinstance(self._stop, errors.FastIngestUnknownBatchError):
            # The commit went out and the server has since ended the batch without our
            # seeing its PubAck (lost with a connection): it may have stored everything, so
            # a plain failure would invite a second, doubled send.
            self._stop = self._error(
                errors.FastIngestOutcomeUnknownError(
                    f"fast-ingest batch {self.batch_id}: its commit (batch sequence {seq}) "
                    f"was sent, but its PubAck was lost and the server no longer knows the "
                    f"batch: what it stored after batch sequence {self._acked} (acked) is "
                    "unknown. Check the stream's last sequence or last message on the "
                    "batch's subjects before sending anything again, and send again only "
                    "messages with a msg_id (the stream drops a copy)"
                )
            )
        if self._stop is not None:
            self._raise_stop(deadline)
        if final is None:
            # The commit went out and nothing answered it: the server may have stored the
            # whole batch (its PubAck lost or late), so this is no plain timeout either.
            self._halt(
                self._error(
                    errors.FastIngestOutcomeUnknownError(
                        f"fast-ingest batch {self.batch_id}: no PubAck for its commit (batch "
                        f"sequence {seq}) within {self._ack_timeout} s; acked up to "
                        f"{self._acked}, what the server stored after that is unknown. Check "
                        "the stream's last sequence or last message on the batch's subjects "
                        "before sending anything again; the commit may still be on its way, "
                        "so send again only messages with a msg_id (the stream drops a copy)"
                    )
                )
            )
            self._raise_stop()
        self._release()
        assert isinstance(final, api.PubAck)  # an APIError is a stop (_on_final)
        self.ack = final
        self._stop = self._error(
            errors.FastIngestClosedError(
                f"fast-ingest batch {self.batch_id} is committed: start another with "
                "js.fast_publisher()"
            )
        )
        return final

    def close(self) -> None:
        """Stop without committing (nothing if committed): no more messages, the inbox
        let go. What the server stored stays stored; it drops the open batch after 10 s."""
        if not self._ended:
            self._halt(
                self._error(
                    errors.FastIngestClosedError(
                        f"fast-ingest batch {self.batch_id} was closed without a commit"
                    )
                )
            )
        self._release()

    @property
    def batch_seq(self) -> int:
        """The highest batch sequence sent."""
        return self._seq

    @property
    def ack_seq(self) -> int:
        """The highest batch sequence the server has acked."""
        return self._acked

    @property
    def flow(self) -> int:
        """Messages per ack as the server asks now (at most the ``flow`` asked for: the
        server lowers it when other fast publishers share the stream, and raises it back)."""
        return self._flow

    def __enter__(self) -> FastPublisher:
        return self

    def __exit__(
        self,
        exc_type: Optional[type],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if exc_type is None and self._seq and self._stop is None and not self._committing:
            self.commit()
        else:
            self.close()

    # --- waiting ------------------------------------------------------------------------

    def _start(self, subject: str, data: bytes, headers: Optional[HeadersLike]) -> FastPubAck:
        """The first message, written at once; then the server's answer is awaited (ADR-50:
        the flow it grants, so that a busy server is not flooded, or its refusal)."""
        self._subject = subject  # (before the send: the hook's errors name it)
        self._core.send_request(subject, data, self._head + "1.0.$FI", headers)
        self._seq = 1
        deadline = Deadline(self._ack_timeout)
        self._wait(lambda: self._started or self._stop is not None, deadline, ping=False)
        if self._stop is not None:
            self._raise_stop(deadline)
        if not self._started:
            self._halt(
                errors.TimeoutError(
                    f"fast-ingest batch {self.batch_id}: no answer to its first message (to "
                    f"{subject!r}) within {self._ack_timeout} s"
                )
            )
            self._raise_stop()
        return FastPubAck(1, self._acked)

    def _wait_for_room(self, seq: int) -> None:
        deadline = Deadline(self._ack_timeout)
        self._wait(lambda: seq < self._limit or self._stop is not None, deadline, ping=True)
        if self._stop is not None:
            self._raise_stop(deadline)
        if seq >= self._limit:
            self._halt(
                errors.TimeoutError(
                    f"fast-ingest batch {self.batch_id}: no ack within {self._ack_timeout} s "
                    f"with {seq - self._acked} messages unacked (batch sequence {seq}, acked "
                    f"up to {self._acked})"
                )
            )
            self._raise_stop()

    def _wait(self, ready: Callable[[], bool], deadline: Deadline, ping: bool) -> None:
        """Wait until ``ready()``, the batch's end or the deadline.

        This thread reads the answers itself while no other thread reads (``read_here``:
        the hook runs here, no thread wakes up on the way), with the network thread kept
        out of it meanwhile (``quiet_begin``). If another thread holds the socket, it routes
        to the hook, which notifies the Condition this thread waits on: for a short slice
        only, because that thread may stop reading before our answer comes. With ``ping``, a
        ping every third of ack_timeout asks the server to send its last flow ack again
        (one may have been lost) and to report any gap."""
        core = self._core
        interval = self._ack_timeout / 3
        next_ping = deadline.remaining() - interval

        def done() -> bool:
            return ready() or self._ended

        quiet = core.quiet_begin()
        try:
            while not done():
                left = deadline.remaining()
                if left <= 0:
                    return
                if ping and left <= next_ping:
                    self._ping()
                    next_ping = left - interval
                until = min(left - next_ping if ping else left, SIGNAL_SLICE)
                if core.read_here(until, done) is None:
                    with self._cond:
                        self._waiting = True
                        try:
                            if not done():
                                self._cond.wait(min(until, _HANDOFF))
                        finally:
                            self._waiting = False
        finally:
            core.quiet_end(quiet)

    def _ping(self) -> None:
        """Batch sequence = the highest sent, so that a lost ping is no gap (ADR-50)."""
        try:
            reply = reply_subject(self._head, self._seq, OP_PING)
            self._core.send_request(self._subject, b"", reply, None)
        except errors.NATSError:
            pass  # disconnected with a full buffer, closing: the wait's deadline decides

    # --- the reading thread -------------------------------------------------------------

    def _on_reply(self, msg: Msg) -> bool:
        """Reading thread: one answer on the batch's inbox. A flow ack (every flow-th
        message) moves the window; never user code (error_cb goes to the callback thread)."""
        if self._ended:
            return True  # after the end: the server's refusals of stragglers, stale pings
        try:
            if raw_headers(msg) is not None and msg.status is not None:
                self._on_status(msg)
                reply: Optional[Reply] = None
            else:
                reply = parse_reply(msg.data)
        except errors.JetStreamError as exc:
            self._report(exc)
            return True
        if isinstance(reply, FlowAck):
            seq, msgs = reply
            if seq > self._acked:
                self._acked = seq
            self._flow = msgs = max(msgs, 1)
            self._limit = self._acked + msgs * self._max_outstanding
            self._started = True
        elif isinstance(reply, FlowGap):
            last_seq, seq = reply
            lost = (
                f"message {last_seq}" if seq == last_seq + 1 else f"messages {last_seq}..{seq - 1}"
            )
            self._on_trouble(
                errors.FastIngestGapError(
                    f"fast-ingest batch {self.batch_id}: {lost} never reached the server (it "
                    f"saw batch sequence {seq} next){self._stopping()}",
                    self.batch_id,
                    last_seq,
                    seq,
                )
            )
        elif isinstance(reply, FlowErr):
            seq, error = reply
            self._on_trouble(
                errors.FastIngestMessageError(
                    f"fast-ingest batch {self.batch_id}: the server refused message {seq}: "
                    f"{error}{self._stopping()}",
                    self.batch_id,
                    seq,
                    error,
                )
            )
        elif reply is not None:
            self._on_final(reply, msg.subject)
        if self._waiting:
            with self._cond:
                self._cond.notify_all()
        return True

    def _stopping(self) -> str:
        return "" if self._gap_ok else '; with gap="fail" the batch stops here'

    def _on_trouble(self, err: errors.FastIngestError) -> None:
        """A gap or a refused message: reported; with gap "fail" it also stops the batch
        (the server sends its final PubAck next, which add/commit wait for)."""
        self._report(err)
        if not self._gap_ok and self._stop is None:
            self._stop = err

    def _on_final(self, reply: Union[api.PubAck, errors.APIError], subject: str) -> None:
        self._final = reply
        stop = self._stop
        if isinstance(reply, errors.APIError):
            if stop is None:
                # The refused message's sequence is in the subject the answer came on.
                seq = subject[len(self._head) :].split(".", 1)[0]
                err = errors.api_error(
                    reply.code,
                    reply.err_code,
                    f"{reply.description} (fast-ingest batch {self.batch_id}, message {seq})",
                )
                if isinstance(err, errors.FastIngestError):
                    err.batch_id, err.batch_seq = self.batch_id, int(seq) if seq.isdigit() else 0
                self._stop = err
        elif isinstance(stop, (errors.FastIngestGapError, errors.FastIngestMessageError)):
            stop.pub_ack = reply  # what the server kept of a batch that stopped
        elif stop is None and not self._committing:
            ended = self._error(
                errors.FastIngestError(
                    f"fast-ingest batch {self.batch_id}: the server ended the batch before "
                    f"the commit, keeping {reply.batch_size} messages"
                )
            )
            ended.pub_ack = reply
            self._stop = ended
        self._ended = True

    def _on_status(self, msg: Msg) -> None:
        if msg.status == 503:
            self._halt(
                errors.NoStreamResponseError(
                    f"fast-ingest batch {self.batch_id}: no stream answered its message to "
                    f"{self._subject!r}: no stream captures this subject"
                ),
                notify=False,
            )
        else:
            raise errors.JetStreamError(
                f"fast-ingest batch {self.batch_id}: an unexpected status {msg.status} on its inbox"
            )

    def _error(self, err: _E) -> _E:
        """``err`` with this batch's id and highest sequence."""
        err.batch_id, err.batch_seq = self.batch_id, self._seq
        return err

    def _report(self, err: errors.NATSError) -> None:
        """To error_cb; without one, to the client's error_cb unless add/commit will raise
        it (a stop with gap "fail")."""
        if isinstance(err, errors.FastIngestError):
            self.errors.append(err)
        if self._error_cb is not None:
            self._core.callback(self._error_cb, err)
        elif self._gap_ok or not isinstance(err, errors.FastIngestError):
            self._core.report(err)

    # --- ending -------------------------------------------------------------------------

    def _halt(self, err: errors.NATSError, notify: bool = True) -> None:
        """Stop on our side: nothing more goes, nothing more that comes matters."""
        if self._stop is None:
            self._stop = err
        self._ended = True
        if notify and self._waiting:
            with self._cond:
                self._cond.notify_all()

    def _raise_stop(self, deadline: Optional[Deadline] = None) -> None:
        """Raise why the batch stopped, once the server's final PubAck has come (it tells
        what was kept) or ``deadline`` (default: one ack_timeout) has passed."""
        stop = self._stop
        assert stop is not None
        if not self._ended:
            self._wait(lambda: False, deadline or Deadline(self._ack_timeout), ping=False)
        self._release()
        raise stop

    def _release(self) -> None:
        if self._released:
            return
        self._released = True
        self._ended = True
        self._core.remove_close_hook(self._on_client_closed)
        try:
            self._core.unsubscribe(self._sub)
        except errors.NATSError:
            pass  # the client closed: the subscription went with it

    def _on_client_closed(self) -> None:
        self._halt(errors.ConnectionClosedError("the client closed during a fast-ingest batch"))


def _with_expectations(
    headers: Optional[HeadersLike],
    msg_id: Optional[str],
    expected_stream: Optional[str],
    expected_last_seq: Optional[int],
    expected_last_msg_id: Optional[str],
    expected_last_subject_seq: Optional[int],
    msg_ttl: Optional[Union[float, str]],
) -> Optional[HeadersLike]:
    if msg_ttl is not None:
        _, _, headers = nats_py_names(b"", None, None, None, headers, msg_ttl)
    return publish_headers(
        headers,
        msg_id,
        expected_stream,
        expected_last_seq,
        expected_last_msg_id,
        expected_last_subject_seq,
    )


class FastIngest:
    """The fast-ingest mixin of JetStream."""

    _nc: Client
    _core: Core
    _timeout: float
    _levels: api_level.ApiLevels

    def fast_publisher(
        self,
        flow: int = DEFAULT_FLOW,
        max_outstanding_acks: int = DEFAULT_MAX_OUTSTANDING_ACKS,
        gap: str = "fail",
        ack_timeout: Optional[float] = None,
        error_cb: Optional[Callable[[errors.NATSError], None]] = None,
    ) -> FastPublisher:
        """A fast-ingest batch (ADR-50; nats-server 2.14+, a stream with
        ``allow_batched=True``): messages go without an ack each, the server acks every
        ``flow`` messages at most (it may ask for acks more often), and the publisher waits
        once ``max_outstanding_acks`` (1-3) acks are due. ``gap="fail"``: a message the
        server missed or refused stops the batch (``FastIngestGapError`` /
        ``FastIngestMessageError``, the messages before it kept); ``gap="ok"``: they are
        reported and the batch goes on. ``ack_timeout`` (default: the context's timeout)
        bounds every wait for the server. ``error_cb(err)`` (default: the client's
        error_cb) hears every gap and refused message, on the client's callback thread.
        Raises ApiLevelError on a server before 2.14. Not thread-safe."""
        check_flow(flow)
        check_max_outstanding(max_outstanding_acks)
        if gap not in GAP_MODES:
            raise errors.InvalidArgumentError(
                f'gap must be "fail" (a lost or refused message stops the batch) or "ok" '
                f"(reported, the batch goes on), got {gap!r}"
            )
        t = self._timeout if ack_timeout is None else check_timeout(ack_timeout, "ack_timeout")
        if t <= 0:
            raise errors.BadTimeoutError(f"ack_timeout must be > 0 seconds, got {ack_timeout!r}")
        if error_cb is not None and not callable(error_cb):
            raise errors.InvalidCallbackTypeError(
                f"error_cb must be callable, got {type(error_cb).__name__}"
            )
        self._levels.require(api_level.FAST_INGEST)
        return FastPublisher(self._nc, self._core, flow, max_outstanding_acks, gap, t, error_cb)
