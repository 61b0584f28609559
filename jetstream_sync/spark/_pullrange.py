"""Reading one range of a stream at the server's speed: an ephemeral pull consumer, its
deliveries taken raw by a hook and turned into Arrow columns a batch at a time.

Why a consumer and not batched direct get: on nats-server 2.15 a raw socket loop reads an
ack-none pull consumer at 450-600k msgs/s, several times what batched direct get serves
(benchmarks/README.md, the Spark section), and it works on every stream, ``allow_direct`` or
not.

Per message, the only Python that runs is the parser's and one ``list.append`` in
:meth:`RangePull._on_msg`; everything else is per batch: subjects, payloads and reply subjects
go to Arrow as lists, and the reply subjects (``$JS.ACK...``) are split into stream
sequence, consumer sequence and timestamp by Arrow compute.

What keeps it correct:

- **Bounded memory.** At most two pulls of ``batch_rows`` are out at once, and the next goes
  out only when the first is used up: a task holds at most about three batches, however
  slowly Spark takes them.
- **No gap, no duplicate.** Consumer sequences must run on without a hole (as an ordered
  consumer checks); on a hole, a reconnect or the consumer's loss, what came before is kept
  and a new consumer starts after the last stream sequence handed out.
- **An end.** The range ends at its last sequence, at the first delivery that says nothing more
  is pending, or once as many messages came as the consumer had pending when it was made
  (messages stored later are past the range: the driver fixed it before).
- **No wait without a deadline.** ``timeout`` without a single message is a TimeoutError that
  names the stream and the range.
"""

from __future__ import annotations

import operator
import time
from typing import Any, Iterator, List, Optional, Sequence, Tuple

from .. import errors
from .._seam import raw_headers
from ..jetstream import api
from ..jetstream.context import JetStream
from ..msg import Msg, parse_header_block
from ._columns import AckColumns, ColumnBuilder, ack_columns

__all__ = ["DEFAULT_BATCH_ROWS", "RangePull", "pull_batches", "range_batches"]

DEFAULT_BATCH_ROWS = 10_000
PULL_MAX_BYTES = 8 * 1024 * 1024  # per pull: a range of large messages stays bounded too
_PULL_EXPIRES = 5.0  # seconds a pull waits on the server; an unfilled one is asked again
_BIG = 1 << 40  # the hook takes every message: no subscription limits apply
_STATUS = b"NATS/1.0 "  # a status header block; a message's own headers start "NATS/1.0\r\n"
_reply = operator.attrgetter("reply")


class _Feed:
    """What one consumer's deliveries left for the caller. Each consumer gets a feed of its
    own: deliveries of a consumer given up (still in the read buffer after its UNSUB) land
    in its old feed, which nobody reads, never in the new one."""

    __slots__ = ("msgs", "restart", "status_error", "unfilled")

    def __init__(self) -> None:
        self.msgs: List[Msg] = []
        self.unfilled = 0  # messages asked for that ended pulls will never bring
        self.restart = False  # the consumer is gone, or the connection was lost
        self.status_error: Optional[str] = None

    def on_msg(self, msg: Msg) -> bool:
        """The subscription's hook: every delivery, on the reading thread."""
        hdr = raw_headers(msg)
        if hdr is None or not hdr.startswith(_STATUS):
            self.msgs.append(msg)
            return True
        status, description, headers = parse_header_block(hdr)
        if status in (408, 409):
            # A pull ended: expired, or cut at max_bytes / max_waiting / a leader change.
            # What it had left to bring will not come.
            try:
                self.unfilled += int(headers.get("Nats-Pending-Messages", "0"))
            except ValueError:
                self.restart = True
            text = description.lower()
            if status == 409 and ("deleted" in text or "leadership" in text):
                self.restart = True
        elif status == 503:
            self.restart = True  # no consumer answered the pull: it is gone (inactive, deleted)
        elif status == 404:
            pass  # only no_wait pulls get it; ours wait
        elif status != 100:
            self.status_error = f"status {status} {description}"
        return True


class RangePull:
    """Stream sequences ``start..end`` of ``stream`` (on ``filters``), as lists of raw
    deliveries (``Msg``) in stream order, each list checked for gaps and cut at ``end``.

    Use :func:`pull_batches` for Arrow record batches. One instance reads once.
    """

    def __init__(
        self,
        js: JetStream,
        stream: str,
        start: int,
        end: int,
        filters: Optional[Sequence[str]] = None,
        batch_rows: int = DEFAULT_BATCH_ROWS,
        timeout: float = 30.0,
    ) -> None:
        self._js = js
        self._core = js._core
        self._stream = stream
        self._end = end
        self._filters = list(filters) if filters else None
        self._batch = max(1, batch_rows)
        self._timeout = timeout
        self._next_seq = start  # the first stream sequence not yet handed out
        self._last_cseq = 0  # consumer sequence of the last message handed out
        # The live consumer: its name, the inbox subscription, the pull subject.
        self._consumer: Optional[str] = None
        self._sub: Any = None
        self._inbox = ""
        self._pull_subject = ""
        # Written by the live consumer's hook (the reading thread).
        self._feed = _Feed()
        # Kept by the caller: how many were asked for, taken, and may still be asked.
        self._asked = 0
        self._taken = 0
        self._cap = 0  # messages the consumer had pending when made (at most the range)
        self._done = start > end

    # --- the consumer ---------------------------------------------------------------------

    def _start(self) -> None:
        """A new consumer from ``_next_seq`` with its own inbox; no pull yet."""
        self._stop_consumer()
        js = self._js
        core = self._core
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=self._next_seq,
            ack_policy=api.AckPolicy.NONE,
            replay_policy=api.ReplayPolicy.INSTANT,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=max(60.0, 4 * self._timeout),
            max_waiting=8,
        )
        if self._filters and len(self._filters) == 1:
            config.filter_subject = self._filters[0]
        elif self._filters:
            config.filter_subjects = self._filters
        try:
            info = js.add_consumer(self._stream, config=config, timeout=self._timeout)
        except (errors.NoStreamResponseError, errors.StreamNotFoundError):
            raise
        except errors.NATSError as exc:
            # Kept as it is (its class, its code), with what a reader may do about it.
            exc.args = (
                f"{exc} (reading stream {self._stream!r} makes an ephemeral pull consumer; a "
                "reader that may not make consumers can read with the option direct=true, "
                "batched direct get, on a stream with allow_direct)",
            )
            raise
        self._consumer = info.name
        self._pull_subject = f"{js.prefix}.CONSUMER.MSG.NEXT.{self._stream}.{info.name}"
        self._inbox = js.nc.new_inbox()
        self._feed = feed = _Feed()
        self._sub = core.subscribe(self._inbox, None, None, None, _BIG, _BIG, hook=feed.on_msg)
        self._asked = self._taken = 0
        self._last_cseq = 0
        self._cap = min(int(info.num_pending), self._end - self._next_seq + 1)
        if self._cap <= 0:
            self._done = True

    def _stop_consumer(self) -> None:
        if self._sub is not None:
            try:
                self._core.unsubscribe(self._sub)
            except errors.NATSError:
                pass  # closed or reconnecting: the server drops the interest anyway
            self._sub = None
        if self._consumer is not None:
            name, self._consumer = self._consumer, None
            try:
                self._js.delete_consumer(self._stream, name, timeout=min(self._timeout, 5.0))
            except errors.NATSError:
                pass  # an ephemeral with an inactive threshold: the server removes it anyway

    def _on_reconnect(self) -> None:
        self._feed.restart = True  # pulls in flight may be lost with the old connection

    # --- the caller -------------------------------------------------------------------------

    def chunks(self) -> Iterator[Tuple[List[Msg], AckColumns]]:
        """Deliveries in stream order, up to ``batch_rows`` at a time, until the range ends."""
        core = self._core
        core.add_reconnect_hook(self._on_reconnect)
        try:
            if not self._done:
                self._start()
            # Once the range is read, what the feed still holds is handed out a batch at a
            # time too (a read may bring both pulls' messages at once).
            while not self._done or self._feed.msgs:
                if self._feed.restart and not self._done:
                    self._start()
                    continue
                chunk = self._collect()
                if not chunk:
                    continue
                good, acks = self._checked(chunk)
                if good:
                    yield good, acks
                if len(good) < len(chunk):
                    if self._done:  # past the range's end: the rest is not ours either
                        del self._feed.msgs[:]
                    else:
                        self._feed.restart = True  # a gap: go on after the last one kept
        finally:
            core.remove_reconnect_hook(self._on_reconnect)
            self._stop_consumer()

    def _collect(self) -> List[Msg]:
        """Read until a batch is here, the range ends, or a restart is due; then take up to
        a batch."""
        if self._done:
            return self._take(self._batch)
        core = self._core
        batch = self._batch
        quiet = core.quiet_begin()
        try:
            last_progress = pulls_checked = time.monotonic()
            seen = -1
            while True:
                msgs = self._feed.msgs
                have = len(msgs)
                if have != seen:
                    seen = have
                    last_progress = pulls_checked = time.monotonic()
                    if have and self._ended(msgs[-1], self._taken + have):
                        self._done = True
                        break
                if have >= batch or self._feed.restart:
                    break
                if self._feed.status_error is not None:
                    raise errors.JetStreamError(
                        f"reading stream {self._stream!r}: the pull consumer answered "
                        f"{self._feed.status_error}"
                    )
                now = time.monotonic()
                waited = now - last_progress
                if now - pulls_checked > _PULL_EXPIRES + 1.0:
                    # Every pull sent before then has expired on the server, whatever its
                    # status said (or if it was lost): count them all as ended and ask
                    # again. A pull too many only reads past the range, which is cut.
                    pulls_checked = now
                    self._feed.unfilled = max(self._feed.unfilled, self._asked - self._taken - have)
                self._pull_more(have)
                if waited > self._timeout:
                    raise errors.TimeoutError(
                        f"no message of stream {self._stream!r} for {self._timeout:g} s while "
                        f"reading sequences {self._next_seq}..{self._end}"
                    )
                read = core.read_here(min(self._timeout - waited, 0.5), self._ready)
                if read is None:  # the network thread reads: it routes to the hook
                    time.sleep(0.001)
        finally:
            core.quiet_end(quiet)
        return self._take(batch)

    def _take(self, most: int) -> List[Msg]:
        msgs = self._feed.msgs
        n = min(len(msgs), most)
        chunk = msgs[:n]
        del msgs[:n]  # atomic: the hook may append meanwhile, at the end
        self._taken += n
        return chunk

    def _ready(self) -> int:
        return len(self._feed.msgs) >= self._batch or self._feed.restart

    def _ended(self, newest: Msg, delivered: int) -> bool:
        """Whether the range is read, from the newest delivery's metadata (once a read)."""
        if delivered >= self._cap:
            return True
        try:
            md = newest.metadata
        except errors.NotJSMessageError:
            return False  # the batch's check refuses it, naming the reply
        return md.sequence.stream >= self._end or md.num_pending == 0

    def _pull_more(self, buffered: int) -> None:
        """Keep up to two pulls out, the second only once the first is used up, and never
        ask for more than the consumer can bring."""
        outstanding = self._asked - self._feed.unfilled - self._taken - buffered
        if outstanding > self._batch:
            return
        want = min(self._batch, self._cap - (self._asked - self._feed.unfilled))
        if want <= 0 or buffered + outstanding >= 2 * self._batch:
            return
        body = b'{"batch":%d,"max_bytes":%d,"expires":%d}' % (
            want,
            PULL_MAX_BYTES,
            int(_PULL_EXPIRES * 1e9),
        )
        self._core.send_request(self._pull_subject, body, self._inbox, None)
        self._asked += want

    def _checked(self, chunk: List[Msg]) -> Tuple[List[Msg], AckColumns]:
        """``chunk`` up to its first gap in consumer sequences and up to the range's end,
        with its sequences and times; moves ``_next_seq`` and ``_last_cseq`` past it."""
        import pyarrow.compute as pc

        acks = ack_columns(list(map(_reply, chunk)))
        n = len(chunk)
        cseq = acks.cseq
        keep = n
        if cseq[0].as_py() != self._last_cseq + 1 or (
            n > 1 and not pc.all(pc.equal(pc.pairwise_diff(cseq), 1)).as_py()
        ):
            expected = self._last_cseq + 1  # a gap (rare): find where it starts
            for i, c in enumerate(cseq.to_pylist()):
                if c != expected:
                    keep = i
                    break
                expected += 1
        past = pc.sum(pc.greater(acks.sseq.slice(0, keep), self._end)).as_py() or 0
        if past:  # sequences only grow: the last ``past`` are beyond the range
            keep -= past
            self._done = True
        if keep < n:
            chunk, acks = chunk[:keep], acks.slice(keep)
        if keep:
            self._next_seq = acks.sseq[keep - 1].as_py() + 1
            self._last_cseq = acks.cseq[keep - 1].as_py()
            if self._next_seq > self._end:
                self._done = True
        elif not self._done:
            self._feed.restart = True  # the very first message is after a gap
        return chunk, acks


def pull_batches(
    js: JetStream,
    stream: str,
    start: int,
    end: int,
    filters: Optional[Sequence[str]],
    columns: Sequence[str],
    include_headers: bool = True,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    timeout: float = 30.0,
) -> Iterator[Any]:
    """Arrow RecordBatches of ``columns`` for stream sequences ``start..end``."""
    builder = ColumnBuilder(stream, columns, include_headers)
    pull = RangePull(js, stream, start, end, filters, batch_rows, timeout)
    for msgs, acks in pull.chunks():
        yield builder.build(msgs, acks)


def range_batches(
    js: JetStream,
    stream: str,
    start: int,
    end: int,
    filters: Optional[Sequence[str]],
    columns: Sequence[str],
    include_headers: bool,
    direct: bool,
    timeout: float,
) -> Iterator[Any]:
    """A read partition's record batches: by pull consumer (the default, the fastest), or by
    batched direct get (``direct``: no consumer is made; the stream needs ``allow_direct``)."""
    if not direct:
        return pull_batches(
            js, stream, start, end, filters, columns, include_headers, timeout=timeout
        )
    from ._ranges import SeqRange, read_range
    from ._rows import batches

    msgs = read_range(js, stream, SeqRange(start, end), filters, timeout=timeout)
    return batches(msgs, columns, include_headers)
