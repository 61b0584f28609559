"""Publishing a partition through a window of JetStream acks, a batch of rows at a time.

``js.publish_async`` is general: per message it checks the subject and the reply, encodes
headers, makes a future and parses a PubAck. A Spark partition needs less: its subjects
repeat (each is checked once), every message carries one header (``Nats-Msg-Id``), and all
it needs back is "stored", "duplicate" or the first error. So :class:`AckWindow` builds the
``HPUB`` frames of a whole batch with one template, writes them in a few large writes, and a
hook on the reading thread only collects the acks, which the caller counts between batches.

What keeps it exactly-once: every message has its id (``_publish.row_ids``) and stays in
the window, its frame kept, until its ack came. After a reconnect, or when acks stop coming
for a while, every frame still in the window is sent again: the stream drops the copies
that it had stored already (within its duplicate window) and acks them as duplicates.
"""

from __future__ import annotations

import operator
import re
import threading
import time
from itertools import repeat
from typing import Dict, List, Mapping, Optional, Sequence, cast

from .. import errors
from .._protocol import check_publish_subject
from .._seam import raw_headers
from ..jetstream.context import JetStream
from ..jetstream.publish import pub_ack
from ..msg import HeadersLike, Msg, encode_headers, parse_header_block

__all__ = ["AckWindow", "PublishResult"]

_subject_of = operator.attrgetter("subject")
_data_of = operator.attrgetter("data")

WINDOW = 16_384  # messages awaiting their ack
WINDOW_BYTES = 32 * 1024 * 1024  # and their frames' bytes
WRITE_CHUNK = 256 * 1024  # frames go to the connection in writes of about this size
_RESEND_AFTER = 5.0  # seconds without an ack while some are missing: send them again
# A 503 (no stream answered) right after a server restart is JetStream not ready yet: sent
# again every _NO_STREAM_RETRY, it fails the write only once 503s alone came this long.
_NO_STREAM_WAIT = 2.0
_NO_STREAM_RETRY = 0.25
_BIG = 1 << 40
_ID_HEADER = b"NATS/1.0\r\nNats-Msg-Id: "
_FRAME = b"%b%d %d %d\r\n%b%b%b\r\n"  # prefix, token, hlen, total, id header, id end, data
_ID_END = b"\r\n\r\n"
_NO_ID = b"NATS/1.0\r\n\r\n"  # a message without an id still goes as HPUB: one template
_ERROR = b'"error"'
_DUPLICATE = b'"duplicate"'  # in a PubAck only when true (or as a stream's name)
# The key, not a stream or domain named "duplicate"; nats-server 2.15 writes a space there.
_DUPLICATE_TRUE = re.compile(rb'"duplicate"\s*:\s*true')


class PublishResult:
    """What one partition's publish did: ``published`` messages stored by it, and ``duplicates``,
    the acks saying a message was already stored (by an earlier attempt)."""

    __slots__ = ("duplicates", "published")

    def __init__(self, published: int = 0, duplicates: int = 0) -> None:
        self.published = published  # messages stored by this call
        self.duplicates = duplicates  # acks saying "already stored" (an earlier attempt's)

    def __repr__(self) -> str:
        return f"PublishResult(published={self.published}, duplicates={self.duplicates})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PublishResult) and (self.published, self.duplicates) == (
            other.published,
            other.duplicates,
        )

    __hash__ = None  # type: ignore[assignment]


class AckWindow:
    """One partition's publishes; use as a context manager, :meth:`add` batches, then
    :meth:`finish` to wait for every ack."""

    def __init__(
        self,
        js: JetStream,
        ack_timeout: float = 60.0,
        window: int = WINDOW,
        window_bytes: int = WINDOW_BYTES,
    ) -> None:
        self._js = js
        self._core = js._core
        self._ack_timeout = ack_timeout
        self._window = max(1, window)
        self._window_bytes = window_bytes
        inbox = js.nc.new_inbox()
        self._reply = inbox.encode() + b"."
        self._reply_len = len(inbox) + 1
        self._prefixes: Dict[str, bytes] = {}  # subject -> b"HPUB <subject> <inbox>."
        self._frames: Dict[int, bytes] = {}  # token -> frame, until its ack
        self._frame_bytes = 0
        self._token = 0
        self._acks: List[Msg] = []  # appended by the hook, taken by the caller
        self._wake = threading.Event()
        self._resend = False  # a reconnect: frames in flight may be lost
        self._no_stream_since: Optional[float] = None  # 503s and nothing stored since then
        self._retry_at: Optional[float] = None  # when to send again what a 503 refused
        self.result = PublishResult()
        self._max_payload = js.nc.max_payload
        self._sub = self._core.subscribe(
            inbox + ".*", None, None, None, _BIG, _BIG, hook=self._on_ack
        )
        self._core.add_reconnect_hook(self._on_reconnect)

    def __enter__(self) -> AckWindow:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop listening for acks: unsubscribe the ack inbox (nothing if the client is closed)."""
        self._core.remove_reconnect_hook(self._on_reconnect)
        try:
            self._core.unsubscribe(self._sub)
        except errors.NATSError:
            pass  # closed: nothing more comes anyway

    # --- the reading thread ---------------------------------------------------------------

    def _on_ack(self, msg: Msg) -> bool:
        self._acks.append(msg)
        self._wake.set()
        return True

    def _on_reconnect(self) -> None:
        self._resend = True
        self._wake.set()

    # --- the caller -----------------------------------------------------------------------

    def add(
        self,
        subjects: Sequence[str],
        datas: Sequence[bytes],
        ids: Sequence[Optional[bytes]],
        headers: Optional[Sequence[Optional[Mapping[str, List[str]]]]] = None,
    ) -> None:
        """Publish one batch of messages (columns of equal length); waits while the window
        is full. ``ids``: each message's ``Nats-Msg-Id`` (None: none)."""
        prefixes = self._prefixes
        frames = self._frames
        token = self._token
        out: List[bytes] = []
        size = 0
        limit = self._max_payload
        for i, subject in enumerate(subjects):
            prefix = prefixes.get(subject)
            if prefix is None:
                prefix = self._prefix(subject)
            data = datas[i]
            msg_id = ids[i]
            extra = headers[i] if headers is not None else None
            if extra:
                block = encode_headers(_with_id(extra, msg_id))
                hlen, head, tail = len(block), block, b""
            elif msg_id is None:
                hlen, head, tail = 12, _NO_ID, b""
            else:
                hlen, head, tail = 27 + len(msg_id), _ID_HEADER + msg_id, _ID_END
            total = hlen + len(data)
            if total > limit:
                # Refused here, as publish() does: sent, the server would drop the
                # connection (and the frame would be sent again after each reconnect).
                raise errors.MaxPayloadError(
                    f"a message to {subject!r} of {total} bytes (headers included) exceeds "
                    f"the server's max_payload of {limit}"
                )
            frame = _FRAME % (prefix, token, hlen, total, head, tail, data)
            frames[token] = frame
            token += 1
            out.append(frame)
            size += len(frame)
            if size >= WRITE_CHUNK:
                self._write(out, size)
                out = []
                size = 0
                self._token = token
                self._room()
        self._token = token
        if out:
            self._write(out, size)
        self._room()

    def finish(self) -> PublishResult:
        """Wait for every ack (sending again what a reconnect or a long silence may have
        lost); raise the first failed publish's error, TimeoutError after ``ack_timeout``
        without any ack."""
        self._wait_until(0)
        return self.result

    def _prefix(self, subject: str) -> bytes:
        check_publish_subject(subject)
        prefix = b"HPUB %b %b" % (subject.encode(), self._reply)
        self._prefixes[subject] = prefix
        return prefix

    def _write(self, frames: List[bytes], size: int) -> None:
        blob = b"".join(frames)
        self._frame_bytes += size
        self._core.send_frame(blob, size)

    def _room(self) -> None:
        """Count the acks that came; wait while the window is full (in messages or bytes),
        until it is half empty."""
        self._count()
        if len(self._frames) > self._window or self._frame_bytes > self._window_bytes:
            self._wait_until(self._window // 2, self._window_bytes // 2)

    def _wait_until(self, left: int, left_bytes: Optional[int] = None) -> None:
        last_ack = time.monotonic()
        resent = False
        while True:
            self._wake.clear()  # before counting: an ack after this sets it again
            if self._count():
                last_ack = time.monotonic()
                resent = False  # a new silence may send again
            if len(self._frames) <= left and (
                left_bytes is None or self._frame_bytes <= left_bytes
            ):
                return
            now = time.monotonic()
            silent = now - last_ack
            if silent > self._ack_timeout:
                raise errors.TimeoutError(
                    f"no JetStream ack within {self._ack_timeout:g} s; {len(self._frames)} "
                    "message(s) unacknowledged"
                )
            if self._resend or (silent > _RESEND_AFTER and not resent):
                self._resend = False
                resent = True  # once per silence: the copies are dropped as duplicates
                self._send_again()
            elif self._retry_at is not None and now >= self._retry_at:
                self._retry_at = None  # what 503s refused (and copies: dropped)
                self._send_again()
            self._wake.wait(min(0.25, self._ack_timeout - silent))

    def _send_again(self) -> None:
        frames = list(self._frames.values())
        for lo in range(0, len(frames), 1024):
            chunk = frames[lo : lo + 1024]
            self._core.send_frame(b"".join(chunk), sum(map(len, chunk)))

    def _count(self) -> int:
        """Take the acks that came: count stored and duplicates, free their frames; raise
        the first error. Returns how many were taken.

        The usual read (no status, no error, every ack the first for its message) is counted
        a whole read at a time by C-level passes; anything else goes one by one."""
        acks = self._acks
        n = len(acks)
        if not n:
            return 0
        taken = acks[:n]
        del acks[:n]  # atomic: the hook may append meanwhile, at the end
        if not any(map(raw_headers, taken)):
            data = b"\n".join(map(_data_of, taken))
            if _ERROR not in data:
                cut = self._reply_len
                try:
                    tokens = [int(subject[cut:]) for subject in map(_subject_of, taken)]
                except ValueError:
                    tokens = []
                frames = self._frames
                popped = list(map(frames.pop, tokens, repeat(None)))
                if tokens and None not in popped:
                    self._no_stream_since = None
                    dups = len(_DUPLICATE_TRUE.findall(data)) if _DUPLICATE in data else 0
                    self.result.duplicates += dups
                    self.result.published += n - dups
                    self._frame_bytes -= sum(map(len, cast(List[bytes], popped)))
                    return n
                for token, frame in zip(tokens, popped):  # back, for the one-by-one count
                    if frame is not None:
                        frames[token] = frame
        self._count_each(taken)
        return n

    def _count_each(self, taken: List[Msg]) -> None:
        frames = self._frames
        cut = self._reply_len
        result = self.result
        freed = 0
        for msg in taken:
            try:
                token = int(msg.subject[cut:])
            except ValueError:
                continue
            frame = frames.get(token)
            if frame is None:
                continue  # the ack of a copy sent again: counted once already
            if raw_headers(msg) is not None:  # a status: 503 when no stream has the subject
                self._refused(msg)
                continue  # the frame stays, to be sent again
            del frames[token]
            freed += len(frame)
            self._no_stream_since = None
            data = msg.data
            if _ERROR in data:
                pub_ack(data, "a Spark partition's publish")  # raises the API error
            if _DUPLICATE in data and _DUPLICATE_TRUE.search(data) is not None:
                result.duplicates += 1
            else:
                result.published += 1
        self._frame_bytes -= freed

    def _refused(self, msg: Msg) -> None:
        """A status instead of an ack (503: no stream answered). Right after a server
        restart JetStream may not be ready: send again soon; after _NO_STREAM_WAIT of
        nothing but refusals, fail."""
        now = time.monotonic()
        if self._no_stream_since is None:
            self._no_stream_since = now
        elif now - self._no_stream_since > _NO_STREAM_WAIT:
            raise errors.NoStreamResponseError(
                f"no stream answered a publish to {_refusal(msg)} for {_NO_STREAM_WAIT:g} "
                "s: does a stream capture the subject?"
            )
        if self._retry_at is None:
            self._retry_at = now + _NO_STREAM_RETRY
            self._wake.set()


def _refusal(msg: Msg) -> str:
    """What a status reply says: the subject published to (nats-server names it in
    Nats-Subject) and the status line."""
    status, description, headers = parse_header_block(raw_headers(msg) or b"NATS/1.0")
    subject = headers.get("Nats-Subject", "a subject")
    return f"{subject!r} (status {status} {description})".replace(" )", ")")


def _with_id(headers: Mapping[str, List[str]], msg_id: Optional[bytes]) -> HeadersLike:
    if msg_id is None:
        return headers
    merged = {key: list(values) for key, values in headers.items()}
    merged["Nats-Msg-Id"] = [msg_id.decode()]
    return merged
