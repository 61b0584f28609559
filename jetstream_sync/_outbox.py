"""The write path: every publish, request, ack and control frame becomes a frame here, joins
one buffer, and leaves through one non-blocking socket write at a time.

The buffer is a ``collections.deque`` of frames, one per publish. A publish on a connected
client appends without any lock: ``deque.append`` is atomic, and the flusher takes a batch
atomically too (a ``None`` marker and ``iter(popleft, None)``, all in C). The link's
``wlock`` guards state changes, the ping queue and control frames whose order matters;
``send_lock`` serialises writes to the socket (taken before ``wlock`` whenever both are).

The **flusher** thread writes the buffer with one ``send`` per wake-up, so publishes and
acks from any thread are coalesced. Latency-sensitive calls (request, flush, a pull) write
the buffer themselves instead of waking it.

Writes have deadlines: after the handshake the socket is non-blocking, so no thread holds
``send_lock`` (or any lock) across a write that waits. What the kernel did not take stays on
the connection as its ``tail``, written first by the next writer; waiting for room happens
outside every lock (``write_slow``). A write that makes no progress for ``write_timeout``
marks the connection stale. A caller's timeout therefore holds whatever the peer does.

Pings ride in the same buffer: each PING's place in the queue (``pings``) carries what its
PONG wakes (a flush's waiter, a subscription leaving the table, a move off a lame-duck
server) and the count of frames written before it, which the PONG confirms.
"""

from __future__ import annotations

import collections
import select
import ssl
import threading
import time
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple, Union

from . import _protocol as proto
from . import errors
from ._conn import Conn, Forget, Move, Waiter
from ._link import CLOSED, CONNECTED, FORKED, NEW, RECONNECTING, Link
from ._timers import Timers
from .msg import HeadersLike, encode_headers

__all__ = ["Outbox", "as_bytes"]

# Above this many queued frames (~300 KB of small messages) the publishing thread writes the
# buffer itself instead of waking the flusher: a tight publish loop then never hands the GIL
# to another thread, and memory stays bounded (back-pressure from the socket).
HIGH_WATER = 2048
# The longest a thread waiting for room in the send buffer sleeps before it looks at the
# connection's state again (a shutdown wakes it sooner).
WRITE_SLICE = 0.5
# Acks wait this long for a write that takes them along before the flusher is woken.
_ACK_LINGER = 0.002
# ...unless this many frames are waiting: then at once. Above a fetch's or a consume()
# re-pull's usual batch, so their acks ride with the next pull in one write (the flusher
# woken every 32 acks cost fetch(100) + ack ~1,000 instructions per message and ~5
# futex calls per fetch); far below the server's default max_ack_pending (1,000), so a push
# consumer never waits on acks that sit unsent.
_ACK_BATCH = 256
CRLF = b"\r\n"
# "<size>\r\n" for every payload size seen so far; a PUB frame is prefix + this + payload.
SIZE_LINES: Dict[int, bytes] = {}

PingWaiter = Optional[Union[Waiter, Forget, Move]]


def size_line(n: int) -> bytes:
    """The size line of a PUB frame (the number ``n`` and CRLF), kept in SIZE_LINES (up to 65,536
    sizes)."""
    line = b"%d\r\n" % n
    if len(SIZE_LINES) < 65536:
        SIZE_LINES[n] = line
    return line


def as_bytes(data: Any, what: str = "data") -> bytes:
    """``data`` as bytes (bytearray and memoryview are copied); InvalidArgumentError naming
    ``what`` for any other type."""
    if isinstance(data, bytes):
        return data
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise errors.InvalidArgumentError(
        f"{what} must be bytes, got {type(data).__name__}"
        + ("; encode it first, e.g. data.encode()" if isinstance(data, str) else "")
    )


class Outbox:
    """The write buffer, the frames that go into it and the flusher that empties it."""

    def __init__(self, link: Link, report: Callable[[errors.NATSError], None]) -> None:
        self.link = link
        self._report = report
        self.out: Deque[Optional[bytes]] = collections.deque()
        self.kicked = False  # the flusher has been woken and has not taken the buffer yet
        self.kick = threading.Event()
        self.pub_fast = False  # True only while CONNECTED and publishes are allowed
        self.draining_pubs = False
        self.pub_cache: Dict[str, bytes] = {}
        self.max_payload = 1024 * 1024
        self.write_timeout = 10.0
        self.reconnect_buf_size = 8 * 1024 * 1024
        self.check_subjects = True  # False: connect(skip_subject_validation=True)
        self.timers: Optional[Timers] = None
        self._linger = False  # an ack's deferred flusher wake-up is scheduled
        # Pings in wire order: (what its PONG wakes, frames written or queued before it).
        self.pings: Deque[Tuple[PingWaiter, int]] = collections.deque()
        self.pings_in_buf = 0
        # Frames are counted as the flusher writes them (written_frames); a PING's mark is
        # written + still queued, and its PONG confirms every frame up to that mark. The
        # publish path counts nothing of its own.
        self.written_frames = 0
        self.confirmed_frames = 0
        self.rbuf_bytes = 0  # bytes buffered while disconnected
        self.ctl_frames = 0  # frames that are not publishes (SUB, PING, ...): see out_msgs
        self.dropped_frames = 0  # discarded unsent at close
        self.out_bytes = 0

    # --- frames -------------------------------------------------------------------------

    def cache_prefix(self, subject: Any) -> bytes:
        """The checked ``PUB <subject> `` prefix of ``subject``, kept in the publish cache
        (cleared at 4,096 subjects); raises the subject check's error."""
        prefix = proto.pub_prefix(subject, None, self.check_subjects)
        if len(self.pub_cache) >= 4096:
            self.pub_cache.clear()
        self.pub_cache[subject] = prefix
        return prefix

    def build_pub(
        self, subject: str, data: Any, reply: Optional[str], headers: Optional[HeadersLike]
    ) -> Tuple[bytes, int]:
        """A PUB or HPUB frame with every part checked (the uncached path)."""
        data = as_bytes(data)
        if reply is not None and not isinstance(reply, str):
            raise errors.BadSubjectError(f"reply subject must be a str, got {type(reply).__name__}")
        if headers is None:
            prefix = proto.pub_prefix(subject, reply, self.check_subjects)
            size = len(data)
            self.check_payload(size)
            return proto.PUB_TEMPLATE % (prefix, size, data), size
        block = encode_headers(headers)
        size = len(block) + len(data)
        self.check_payload(size)
        return proto.HPUB_TEMPLATE % (
            proto.hpub_prefix(subject, reply, self.check_subjects),
            len(block),
            size,
            block,
            data,
        ), size

    def check_payload(self, size: int) -> None:
        """Raise MaxPayloadError when a message of ``size`` bytes exceeds the server's
        max_payload."""
        if size > self.max_payload:
            raise errors.MaxPayloadError(
                f"message of {size} bytes (headers included) exceeds the server's "
                f"max_payload of {self.max_payload}"
            )

    def frame_own_reply(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> Tuple[bytes, int]:
        """A PUB frame; ``subject`` goes through the cached checks, ``reply`` (ours, valid by
        construction, or empty) through none."""
        if headers is not None:
            return self.build_pub(subject, data, reply or None, headers)
        prefix = self.pub_cache.get(subject) if subject.__class__ is str else None
        if prefix is None:
            prefix = self.cache_prefix(subject)
        if data.__class__ is not bytes:
            data = as_bytes(data)
        n = len(data)
        self.check_payload(n)
        size = SIZE_LINES.get(n) or size_line(n)
        if reply:
            return b"".join((prefix, reply.encode(), b" ", size, data, CRLF)), n
        return b"".join((prefix, size, data, CRLF)), n

    def fixed_request(self, subject: str, data: bytes) -> Tuple[bytes, bytes, int]:
        """A request that is sent again and again with only its reply changing (fetch(1)'s
        pull): the frame's parts before and after the reply, checked once here. Send with
        ``send_frame(head + reply.encode() + tail, n)``."""
        prefix = self.pub_cache.get(subject) or self.cache_prefix(subject)
        n = len(data)
        self.check_payload(n)
        return prefix, b" " + (SIZE_LINES.get(n) or size_line(n)) + data + CRLF, n

    # --- into the buffer ----------------------------------------------------------------

    def enqueue_frame(self, frame: bytes, n: int) -> None:
        """Queue a publish frame of ``n`` payload bytes; the flusher writes it."""
        # Client.publish inlines this same tail rather than calling it: publish is the
        # hottest path there is, and a call is a tenth of its cost.
        if not self.pub_fast:
            self.enqueue_pub_slow(frame, n)
            return
        out = self.out
        out.append(frame)
        self.out_bytes += n
        if not self.kicked:
            self.kicked = True
            self.kick.set()
        if len(out) > HIGH_WATER:
            self.write_behind()

    def enqueue_pub_slow(self, frame: bytes, n: int) -> None:
        """A publish while not plainly connected: refused, or buffered for the reconnect."""
        link = self.link
        link.check_usable()
        with link.wlock:
            state = link.state
            if state is CLOSED or link.closing:
                raise errors.ConnectionClosedError("cannot publish: the client is closed")
            if self.draining_pubs:
                raise errors.ConnectionDrainingError("cannot publish: the client is draining")
            if state is NEW:
                raise errors.ConnectionClosedError("cannot publish: the client is not connected")
            if state is RECONNECTING:
                if self.rbuf_bytes + len(frame) > self.reconnect_buf_size:
                    raise errors.OutboundBufferLimitError(
                        f"disconnected, and the reconnect buffer ({self.reconnect_buf_size} "
                        "bytes) is full: this message was not published"
                    )
                self.rbuf_bytes += len(frame)
            self.out.append(frame)
            self.out_bytes += n
            if state is CONNECTED and not self.kicked:
                self.kicked = True
                self.kick.set()

    def publish_own_reply(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> None:
        """publish() with a reply subject this client made (an inbox): no need to check it.
        publish_async's path: frame_own_reply and enqueue_frame inlined."""
        if headers is not None or subject.__class__ is not str or data.__class__ is not bytes:
            self.enqueue_frame(*self.frame_own_reply(subject, data, reply, headers))
            return
        prefix = self.pub_cache.get(subject)
        if prefix is None:
            prefix = self.cache_prefix(subject)
        n = len(data)
        if n > self.max_payload:
            self.check_payload(n)
        size = SIZE_LINES.get(n) or size_line(n)
        frame = b"".join((prefix, reply.encode(), b" ", size, data, CRLF))
        if not self.pub_fast:
            self.enqueue_pub_slow(frame, n)
            return
        out = self.out
        out.append(frame)
        self.out_bytes += n
        if not self.kicked:
            self.kicked = True
            self.kick.set()
        if len(out) > HIGH_WATER:
            self.write_behind()

    def queue_own_reply(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> None:
        """publish_own_reply for a caller that writes the buffer itself every so often (a
        fast-ingest batch writes at each window edge, by send_request): the flusher wakes
        only if the frames are still queued _ACK_LINGER later, or once _ACK_BATCH of them
        wait, as for acks. Waking it for every stretch of frames made it contend with the
        publishing thread for the GIL and the send lock at each write (a fifth of a batch's
        throughput)."""
        if headers is not None or subject.__class__ is not str or data.__class__ is not bytes:
            frame, n = self.frame_own_reply(subject, data, reply, headers)
        else:
            prefix = self.pub_cache.get(subject)
            if prefix is None:
                prefix = self.cache_prefix(subject)
            n = len(data)
            if n > self.max_payload:
                self.check_payload(n)
            size = SIZE_LINES.get(n) or size_line(n)
            frame = b"".join((prefix, reply.encode(), b" ", size, data, CRLF))
        self.enqueue_lazily(frame, n)

    def publish_trusted(self, subject: str, data: bytes) -> None:
        """Publish to a subject the server gave us (an ack subject): valid by construction,
        and unique, so neither checked nor cached."""
        n = len(data)
        try:
            size = SIZE_LINES[n]
        except KeyError:
            size = size_line(n)
        frame = b"".join((b"PUB ", subject.encode(), b" ", size, data, CRLF))
        self.enqueue_lazily(frame, n)

    def enqueue_lazily(self, frame: bytes, n: int) -> None:
        """Queue a frame nobody waits on at once (an ack, a fast-ingest message whose
        caller writes the buffer itself): the flusher wakes for a batch of them, or for
        what is still queued _ACK_LINGER later, not for each."""
        if not self.pub_fast:
            self.enqueue_pub_slow(frame, n)
            return
        out = self.out
        out.append(frame)
        self.out_bytes += n
        if len(out) > HIGH_WATER:
            self.write_behind()
        elif self.kicked:
            pass
        elif len(out) >= _ACK_BATCH:
            # A batch (of acks): let the server work through these while we go on.
            self.kicked = True
            self.kick.set()
        elif not self._linger:
            # Not urgent, and the caller's next write (the next fetch, the window's edge)
            # usually takes it along within microseconds: wake the flusher only if that has
            # not happened within _ACK_LINGER, instead of a thread wake-up per frame.
            self._linger = True
            timers = self.timers
            if timers is None or self.link.closing:
                self._linger_done()
            else:
                timers.call_later(_ACK_LINGER, self._linger_done)

    def _linger_done(self) -> None:
        """Timer thread: acks left in the buffer since _ACK_LINGER go to the flusher."""
        self._linger = False
        if self.out and not self.kicked:
            self.kicked = True
            self.kick.set()

    def send_frame(self, frame: bytes, n: int) -> None:
        """Queue a publish frame and write the buffer from this thread at once."""
        if not self.pub_fast:
            self.enqueue_pub_slow(frame, n)
            return
        self.out.append(frame)
        self.out_bytes += n
        self.write_pending()

    def send_request(
        self, subject: str, data: Any, reply: str, headers: Optional[HeadersLike]
    ) -> None:
        """Queue a request and write it from this thread at once: waking the flusher
        would cost a thread hop."""
        self.send_frame(*self.frame_own_reply(subject, data, reply, headers))

    def send_now(self, subject: str, data: Any, headers: Optional[HeadersLike] = None) -> None:
        """Publish and write from this thread at once (a reply: latency over batching)."""
        if headers is None and subject.__class__ is str:
            self.send_request(subject, data, "", None)
        else:
            frame, n = self.build_pub(subject, data, None, headers)
            self.send_frame(frame, n)

    def enqueue(self, frame: bytes) -> None:
        """Queue a control frame (SUB, UNSUB, PONG) if there is a connection to send it on."""
        with self.link.wlock:
            self.enqueue_locked(frame)

    def enqueue_locked(self, frame: bytes) -> None:
        """``enqueue`` for a caller holding wlock: the frame is dropped while not connected (the
        reconnect resubscribes from the table)."""
        # While disconnected, SUB/UNSUB are not buffered: the reconnect handshake
        # re-subscribes from the table, which must change in the same critical section.
        if self.link.state is CONNECTED:
            self.out.append(frame)
            self.ctl_frames += 1
            if not self.kicked:
                self.kicked = True
                self.kick.set()

    # --- pings --------------------------------------------------------------------------

    def ping_locked(self, waiter: PingWaiter, kick: bool = True) -> None:
        """Queue a PING whose PONG wakes ``waiter`` (the caller holds wlock and has checked
        the client is connected)."""
        self.out.append(proto.PING_FRAME)
        self.ctl_frames += 1
        self.pings.append((waiter, self.written_frames + len(self.out)))
        self.pings_in_buf += 1
        if kick and not self.kicked:
            self.kicked = True
            self.kick.set()

    def on_pong(self) -> None:
        """A PONG arrived: the oldest ping's frames are confirmed, and its waiter is woken."""
        try:
            waiter, mark = self.pings.popleft()
        except IndexError:
            return
        if mark > self.confirmed_frames:
            self.confirmed_frames = mark
        if waiter is not None:
            waiter.wake()

    def connection_lost(self) -> Tuple[int, List[PingWaiter]]:
        """The socket died (wlock held): frames written since the last PONG are in doubt,
        and the pings already written died with it. Returns (frames in doubt, the waiters
        of the dead pings); those still buffered go out on the next connection."""
        unconfirmed = max(0, self.written_frames - self.confirmed_frames)
        self.confirmed_frames = self.written_frames
        self.rbuf_bytes = sum(map(len, filter(None, self.out)))
        dead = len(self.pings) - self.pings_in_buf
        return unconfirmed, [self.pings.popleft()[0] for _ in range(max(0, dead))]

    def discard(self) -> Tuple[int, List[PingWaiter]]:
        """At close (wlock held): drop what was never sent. Returns (publishes lost, the
        waiters of every ping)."""
        lost = sum(1 for f in self.out if f is not None and f.startswith((b"PUB ", b"HPUB ")))
        self.dropped_frames += len(self.out)
        self.out.clear()
        waiters = [w for w, _ in self.pings]
        self.pings.clear()
        return lost, waiters

    def pending_data_size(self) -> int:
        """Bytes waiting to be written: the buffer and the connection's unsent tail."""
        # list() of a deque runs in C without releasing the GIL: a consistent copy.
        size = sum(map(len, filter(None, list(self.out))))
        conn = self.link.conn
        tail = conn.tail if conn is not None else None
        return size + (len(tail) if tail is not None else 0)

    @property
    def out_msgs(self) -> int:
        """Messages published so far: frames written, queued or dropped, less the control frames."""
        return self.written_frames + len(self.out) + self.dropped_frames - self.ctl_frames

    # --- out to the socket --------------------------------------------------------------

    def run_flusher(self) -> None:
        """The flusher thread: one write of the whole buffer per wake-up."""
        kick = self.kick
        link = self.link
        while True:
            kick.wait()
            kick.clear()
            if link.state is CLOSED or link.state is FORKED:
                return
            if not self.write_pending():
                self.write_slow()

    def write_pending(self) -> bool:
        """Write the buffer to the socket without waiting, from whichever thread calls.

        True when nothing is left unsent on the connection; False when the kernel's send
        buffer is full and part of it waits as the connection's tail (the flusher is woken
        to wait for room: see write_slow). Never blocks but for the locks, which no thread
        holds across a wait.
        """
        link = self.link
        with link.send_lock:
            conn = link.conn
            if conn is None or conn.broken:
                return True
            tail = conn.tail
            if tail is not None and not self._send(conn, tail):
                return False  # the older bytes first: the new frames stay queued meanwhile
            with link.wlock:
                # Reset before taking: a publish that sees False after this point kicks
                # again, one that saw True before it is in this batch.
                self.kicked = False
                out = self.out
                if not out or link.state is not CONNECTED or conn is not link.conn:
                    return True
                out.append(None)
                frames = list(iter(out.popleft, None))
                self.written_frames += len(frames)
                self.pings_in_buf = 0
            return self._send(conn, b"".join(frames))

    def _send(self, conn: Conn, data: Union[bytes, memoryview]) -> bool:
        """One non-blocking send of ``data`` (the caller holds the send lock); what the
        kernel did not take becomes the connection's tail. True when all of it went (or the
        socket is dead: the network thread reconnects, and nothing waits here)."""
        try:
            n = conn.sock.send(data)
        except (BlockingIOError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
            n = 0  # TLS: retried later with the same bytes, as OpenSSL requires
        except (OSError, ValueError):
            conn.tail = None
            conn.broken = True
            conn.shutdown()  # the reader sees it too and reconnects; wake it now
            return True
        if n == len(data):
            conn.tail = None
            return True
        if n or conn.tail is None:
            conn.progress_at = time.monotonic()
        conn.tail = memoryview(data)[n:]
        self.kick.set()  # the flusher waits for room and writes the rest
        return False

    def write_slow(self, until: Optional[float] = None) -> bool:
        """Wait for room in the send buffer and write, until the connection's tail is out
        (True), or ``until`` (a monotonic time) passes, or the connection is gone (False).
        No lock is held while waiting. A tail that makes no progress for write_timeout
        marks the connection stale: the socket is shut down and the network thread
        reconnects, as for unanswered pings."""
        link = self.link
        conn = link.conn
        if conn is None:
            return True
        while conn.tail is not None:
            if conn.broken or link.conn is not conn or link.state is not CONNECTED:
                return False
            now = time.monotonic()
            left = conn.progress_at + self.write_timeout - now
            if left <= 0:
                self._stale_write(conn)
                return False
            if until is not None:
                if now >= until:
                    return False
                left = min(left, until - now)
            try:
                # select, not poll: a descriptor closed meanwhile is an error, not a wait.
                select.select([], [conn.sock], [], min(left, WRITE_SLICE))
            except (OSError, ValueError):
                return False
            self.write_pending()
        return True

    def _stale_write(self, conn: Conn) -> None:
        """The peer stopped reading: report it once and shut the socket (the network thread
        then sees the connection end and runs the normal reconnect)."""
        if conn.broken:
            return
        conn.broken = True
        self._report(
            errors.StaleConnectionError(
                f"server {conn.server.url}: a write made no progress for "
                f"{self.write_timeout} s (the peer stopped reading): connection is stale"
            )
        )
        conn.shutdown()

    def write_behind(self) -> None:
        """A publisher far ahead of the socket (past HIGH_WATER) writes the buffer itself
        and, when the kernel's send buffer is full, waits for room: back-pressure, and
        bounded memory. The wait ends within write_timeout whatever the peer does."""
        if not self.write_pending():
            self.write_slow()
