"""The NATS client protocol as a pure object: bytes in, typed events out.

No sockets, no threads. :class:`Parser` takes whatever bytes arrived, in chunks of any
size, and yields events: :class:`Info`, :class:`Err`, ``PING``, ``PONG``, ``OK`` and
:class:`~jetstream_sync.msg.Msg` (for both MSG and HMSG). Anything malformed raises
:class:`~jetstream_sync.errors.ProtocolError`, after which the parser stays broken.

The encoders at the bottom build every frame the client sends; the publish frame is split
into a cached, validated prefix (``PUB subject reply ``) and :data:`PUB_TEMPLATE` so the
hot path formats one bytes object per message.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Tuple, Union

from .errors import BadSubjectError, JsonParseError, ProtocolError
from .msg import Msg

__all__ = [
    "HPUB_TEMPLATE",
    "MAX_CONTROL_LINE",
    "NEED_DATA",
    "OK",
    "PING",
    "PING_FRAME",
    "PONG",
    "PONG_FRAME",
    "PUB_TEMPLATE",
    "Err",
    "Event",
    "Info",
    "Parser",
    "check_publish_subject",
    "check_queue",
    "check_subscribe_subject",
    "encode_connect",
    "encode_sub",
    "encode_unsub",
    "hpub_prefix",
    "pub_prefix",
]

MAX_CONTROL_LINE = 4096
# Payloads larger than this are refused even before INFO says otherwise: a hostile or
# broken peer must not make us buffer without bound.
DEFAULT_MAX_INBOUND = 64 * 1024 * 1024


class _Marker:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


NEED_DATA = _Marker("NEED_DATA")
PING = _Marker("PING")
PONG = _Marker("PONG")
OK = _Marker("OK")


class Info:
    """The server's INFO: ``data`` is the decoded JSON object."""

    __slots__ = ("data",)

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data

    def __repr__(self) -> str:
        return f"Info({self.data!r})"


class Err:
    """The server's ``-ERR``: ``message`` without the quotes."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __repr__(self) -> str:
        return f"Err({self.message!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Err) and other.message == self.message

    __hash__ = None  # type: ignore[assignment]


Event = Union[Msg, Info, Err, _Marker]

_CRLF = b"\r\n"
_CACHE_MAX = 4096
_NUMBERS_MAX = 1024  # sids and sizes: the first ones seen stay; others are parsed each time


def _number(field: bytes, numbers: Dict[bytes, int], what: str) -> int:
    """A sid or size field not seen before: parsed, checked, and remembered."""
    n = int(field)
    if n < 0:
        raise ProtocolError(f"{what} {n} out of range")
    if len(numbers) < _NUMBERS_MAX:
        numbers[field] = n
    return n


class Parser:
    """Incremental parser of the server-to-client protocol.

    ``receive_data(b)`` appends bytes; ``next_event()`` returns one event or
    :data:`NEED_DATA`; ``events()`` returns every complete event at once (the reader uses
    this: one call per socket read). ``msg_owner`` is stamped on every :class:`Msg` so that
    ``msg.respond()`` knows its client.
    """

    def __init__(
        self,
        msg_owner: Any = None,
        max_control_line: int = MAX_CONTROL_LINE,
        max_payload: int = DEFAULT_MAX_INBOUND,
        one_off_prefix: bytes = b"\x00",
    ) -> None:
        # Received bytes wait as a list of chunks and are joined only when the frame being
        # awaited can be complete: a large message arriving in many reads is copied once.
        self._chunks: List[bytes] = []
        self._buffered = 0
        self._need = 0
        self._owner = msg_owner
        self._broken: Optional[ProtocolError] = None
        self._pending: List[Event] = []
        # Subjects repeat: decoding each once keeps one str per subject instead of one per
        # message (CPU and, for queued messages, memory). Whole reply-less MSG lines repeat
        # too (same subject, sid and size): those skip parsing entirely.
        self._subjects: Dict[bytes, str] = {}
        self._lines: Dict[bytes, Tuple[str, int, int]] = {}
        # MSG lines with a reply (JetStream deliveries) never repeat whole, but their
        # "MSG <subject> <sid>" head does: a cached head leaves only the reply and the size
        # to read (one rsplit instead of a split into five and three lookups).
        self._heads: Dict[bytes, Tuple[str, int]] = {}
        # Subjects under this prefix (the client's inboxes: replies, acks) are mostly seen
        # once: caching them would only churn the cache. One that comes twice in a row (a
        # push consumer's or a fetch's inbox) is cached after all.
        self._one_off = one_off_prefix
        self._last_one_off = b""
        # The sid and size fields of message lines repeat too: int() of each costs more than
        # a dict lookup.
        self._numbers: Dict[bytes, int] = {}
        self._max_control_line = max_control_line
        self._max_payload = max_payload

    @property
    def max_payload(self) -> int:
        """The largest MSG payload accepted; a larger one is a ProtocolError."""
        return self._max_payload

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        self._max_payload = value
        self._lines.clear()  # cached lines were checked against the old limit

    @property
    def max_control_line(self) -> int:
        """The longest control line accepted; a longer one is a ProtocolError."""
        return self._max_control_line

    @max_control_line.setter
    def max_control_line(self, value: int) -> None:
        self._max_control_line = value
        self._lines.clear()

    def receive_data(self, data: bytes) -> None:
        """Append received bytes; raises the parser's error once it is broken."""
        if self._broken is not None:
            raise self._broken
        if data:
            self._chunks.append(bytes(data))
            self._buffered += len(data)

    def next_event(self) -> Event:
        """The next complete event, or NEED_DATA."""
        if not self._pending:
            self._pending = self.events()
            self._pending.reverse()
        if self._pending:
            return self._pending.pop()
        return NEED_DATA

    @property
    def buffered(self) -> int:
        """Bytes received but not yet turned into events."""
        return self._buffered

    def events(self) -> List[Event]:
        """Every complete event in the bytes received so far. ProtocolError on malformed data,
        and from then on at every call."""
        if self._broken is not None:
            raise self._broken
        if self._pending:
            out = self._pending[::-1]
            self._pending = []
        else:
            out = []
        try:
            self._parse(out)
        except ProtocolError as exc:
            self._broken = exc
            raise
        except (ValueError, IndexError, UnicodeDecodeError) as exc:
            self._broken = ProtocolError(f"malformed protocol data: {exc}")
            raise self._broken from exc
        return out

    def _parse(self, out: List[Event]) -> None:
        # One C-level split of the whole buffer does most of the work: a control line is
        # one piece and a payload is usually the next (rejoined when it contains CRLF).
        # The last piece is not yet terminated and stays buffered.
        if self._buffered < self._need or not self._chunks:
            return
        chunks = self._chunks
        buf = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        pieces = buf.split(_CRLF)
        last = len(pieces) - 1
        i = 0
        need = 0
        append = out.append
        lines = self._lines
        heads = self._heads
        subjects = self._subjects
        one_off = self._one_off
        numbers = self._numbers
        owner = self._owner
        max_line = self._max_control_line
        max_payload = self._max_payload
        try:
            while i < last:
                line = pieces[i]
                hit = lines.get(line)
                if hit is not None:  # a reply-less MSG line seen before: no parsing at all
                    subject, sid, size = hit
                    reply = ""
                    hsize = -1
                elif (tail := line.rsplit(b" ", 2)) and (head := heads.get(tail[0])):
                    # "MSG <subject> <sid>" seen before (a delivery with a reply)
                    if len(line) > max_line:
                        raise ProtocolError(f"control line longer than {max_line} bytes")
                    subject, sid = head
                    reply = tail[1].decode("utf-8", "surrogateescape")
                    size = numbers.get(tail[2], -1)
                    if size < 0:
                        size = _number(tail[2], numbers, "MSG payload size")
                    if size > max_payload:
                        raise ProtocolError(f"MSG payload size {size} out of range")
                    hsize = -1
                else:
                    if len(line) > max_line:
                        raise ProtocolError(f"control line longer than {max_line} bytes")
                    args = line.split()
                    nargs = len(args)
                    op = args[0] if nargs else b""
                    if op == b"MSG":
                        if nargs == 5:  # with a reply: JetStream messages, requests
                            reply = args[3].decode("utf-8", "surrogateescape")
                        elif nargs == 4:
                            reply = ""
                        else:
                            raise ProtocolError(f"bad MSG line: {line[:80]!r}")
                        hsize = -1
                        size = numbers.get(args[-1], -1)
                        if size < 0:
                            size = _number(args[-1], numbers, "MSG payload size")
                        if size > max_payload:
                            raise ProtocolError(f"MSG payload size {size} out of range")
                    elif op == b"HMSG":
                        if nargs == 6:
                            reply = args[3].decode("utf-8", "surrogateescape")
                        elif nargs == 5:
                            reply = ""
                        else:
                            raise ProtocolError(f"bad HMSG line: {line[:80]!r}")
                        hsize = numbers.get(args[-2], -1)
                        if hsize < 0:
                            hsize = _number(args[-2], numbers, "HMSG header size")
                        size = numbers.get(args[-1], -1)
                        if size < 0:
                            size = _number(args[-1], numbers, "HMSG size")
                        if hsize > size or size > max_payload + 65536:
                            raise ProtocolError(f"HMSG sizes {hsize}/{size} out of range")
                    else:
                        self._control(line, append)
                        i += 1
                        continue
                    sid = numbers.get(args[2], -1)
                    if sid < 0:
                        sid = _number(args[2], numbers, "sid")
                    sb = args[1]
                    subject = subjects.get(sb)  # type: ignore[assignment]
                    if subject is None:
                        subject = sb.decode("utf-8", "surrogateescape")
                        if not sb.startswith(one_off) or sb == self._last_one_off:
                            if len(subjects) >= _CACHE_MAX:
                                subjects.clear()
                            subjects[sb] = subject
                        else:
                            self._last_one_off = sb
                    elif op == b"MSG":
                        # Cached on the subject's second sighting: one-off subjects (reply
                        # inboxes, acks) would only churn these caches.
                        if nargs == 4:
                            if len(lines) >= _CACHE_MAX:
                                lines.clear()
                            lines[line] = (subject, sid, size)
                        elif tail[0] == b"MSG " + sb + b" " + args[2] and tail[1] == args[3]:
                            # (only from a line in the canonical form: single spaces)
                            if len(heads) >= _CACHE_MAX:
                                heads.clear()
                            heads[tail[0]] = (subject, sid)
                # The payload: usually the next piece, whole and followed by CRLF.
                j = i + 1
                if j < last and len(pieces[j]) == size:
                    payload = pieces[j]
                else:  # it contains CRLF (several pieces), or it has not all arrived yet
                    have = len(pieces[j]) if j <= last else 0
                    while have < size and j < last:
                        j += 1
                        have += 2 + len(pieces[j])
                    if j >= last:  # the payload, or the CRLF after it, is still to come
                        if have > size + 1:
                            raise ProtocolError("message payload not followed by CRLF")
                        need = len(line) + size + 4
                        break
                    if have != size:
                        raise ProtocolError("message payload not followed by CRLF")
                    payload = _CRLF.join(pieces[i + 1 : j + 1])
                if hsize < 0:
                    append(Msg(subject, reply, payload, sid, None, owner))
                else:
                    hdr = payload[:hsize]
                    if not hdr.startswith(b"NATS/1.0"):
                        raise ProtocolError(f"HMSG header block without NATS/1.0: {hdr[:32]!r}")
                    append(Msg(subject, reply, payload[hsize:], sid, hdr, owner))
                i = j + 1
            else:
                # +1: a line of the maximum length may have its CR here and its LF unread.
                if len(pieces[last]) > max_line + 1:
                    raise ProtocolError(f"control line longer than {max_line} bytes")
        finally:
            rest = pieces[i] if i >= last else _CRLF.join(pieces[i:])
            self._chunks = [rest] if rest else []
            self._buffered = len(rest)
            self._need = need

    @staticmethod
    def _control(line: bytes, append: Any) -> None:
        head, _, rest = line.partition(b" ")
        op = head.upper()
        if op == b"PING" and not rest.strip():
            append(PING)
        elif op == b"PONG" and not rest.strip():
            append(PONG)
        elif op == b"+OK" and not rest.strip():
            append(OK)
        elif op == b"-ERR":
            append(Err(rest.strip().strip(b"'").decode("utf-8", "replace")))
        elif op == b"INFO":
            try:
                data = json.loads(rest)
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deep
                raise JsonParseError(f"INFO is not valid JSON: {exc}") from None
            if not isinstance(data, dict):
                raise JsonParseError("INFO is not a JSON object")
            append(Info(data))
        elif op in (b"MSG", b"HMSG"):
            # Lower-case or oddly spaced message lines are legal but never sent by
            # nats-server; refusing them keeps the hot path to one comparison.
            raise ProtocolError(f"unsupported message line form: {line[:80]!r}")
        else:
            raise ProtocolError(f"unknown protocol operation: {line[:80]!r}")


# --- validation ------------------------------------------------------------------------

_WHITESPACE = frozenset(" \t\r\n\f\v")


def _check_common(subject: Any, what: str) -> str:
    if not isinstance(subject, str):
        raise BadSubjectError(f"{what} must be a str, got {type(subject).__name__}")
    if not subject or subject.isspace():
        raise BadSubjectError(f"{what} is empty")
    if not _WHITESPACE.isdisjoint(subject):
        raise BadSubjectError(f"{what} {subject!r} contains whitespace")
    if len(subject) > MAX_CONTROL_LINE // 2:
        raise BadSubjectError(f"{what} is longer than {MAX_CONTROL_LINE // 2} characters")
    return subject


def check_publish_subject(subject: Any, what: str = "subject") -> str:
    """A publish subject: non-empty, no whitespace, no empty token, no wildcard token."""
    _check_common(subject, what)
    for token in subject.split("."):
        if not token:
            raise BadSubjectError(f"{what} {subject!r} has an empty token")
        if token in ("*", ">"):
            raise BadSubjectError(
                f"{what} {subject!r} has a wildcard; publish needs a literal subject"
            )
    return subject  # type: ignore[no-any-return]


def check_subscribe_subject(subject: Any, what: str = "subject") -> str:
    """A subscribe subject (or a consumer's filter): like publish, but ``*`` tokens and a
    final ``>`` are allowed."""
    _check_common(subject, what)
    tokens = subject.split(".")
    for i, token in enumerate(tokens):
        if not token:
            raise BadSubjectError(f"{what} {subject!r} has an empty token")
        if token == ">" and i != len(tokens) - 1:
            raise BadSubjectError(f"{what} {subject!r}: '>' must be the last token")
    return subject  # type: ignore[no-any-return]


def check_queue(queue: Any) -> str:
    """Return ``queue`` if it can name a queue group (a non-empty str without whitespace);
    BadSubjectError otherwise."""
    _check_common(queue, "queue name")
    return queue  # type: ignore[no-any-return]


# --- encoders --------------------------------------------------------------------------

PING_FRAME = b"PING\r\n"
PONG_FRAME = b"PONG\r\n"
# A PUB frame is pub_prefix(subject, reply) % (len(payload), payload) via this template.
PUB_TEMPLATE = b"%b%d\r\n%b\r\n"
# An HPUB frame: hpub_prefix(...) then "<hdr_len> <total_len>\r\n<hdr><payload>\r\n".
HPUB_TEMPLATE = b"%b%d %d\r\n%b%b\r\n"


def _enc(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


def pub_prefix(subject: str, reply: Optional[str] = None, check: bool = True) -> bytes:
    """``PUB <subject> [reply] `` with both checked. ``check=False``
    (skip_subject_validation) skips the subject grammar (empty tokens, wildcards) but keeps
    what guards the protocol's framing: a str, not empty, no whitespace (CR, LF)."""
    _check_pub(subject, "subject", check)
    if reply:
        _check_pub(reply, "reply subject", check)
        return b"PUB %b %b " % (_enc(subject), _enc(reply))
    return b"PUB %b " % _enc(subject)


def _check_pub(subject: Any, what: str, grammar: bool) -> None:
    if grammar:
        check_publish_subject(subject, what)
    else:
        _check_common(subject, what)


def hpub_prefix(subject: str, reply: Optional[str] = None, check: bool = True) -> bytes:
    """``HPUB <subject> [reply] `` with both checked (``check=False``: as pub_prefix)."""
    _check_pub(subject, "subject", check)
    if reply:
        _check_pub(reply, "reply subject", check)
        return b"HPUB %b %b " % (_enc(subject), _enc(reply))
    return b"HPUB %b " % _enc(subject)


def encode_pub(subject: str, payload: bytes, reply: Optional[str] = None) -> bytes:
    """A whole PUB frame: subject, reply, size and payload."""
    return PUB_TEMPLATE % (pub_prefix(subject, reply), len(payload), payload)


def encode_hpub(
    subject: str, header_block: bytes, payload: bytes, reply: Optional[str] = None
) -> bytes:
    """A whole HPUB frame: subject, reply, sizes, header block and payload."""
    hlen = len(header_block)
    return HPUB_TEMPLATE % (
        hpub_prefix(subject, reply),
        hlen,
        hlen + len(payload),
        header_block,
        payload,
    )


def encode_sub(subject: str, sid: int, queue: Optional[str] = None) -> bytes:
    """A SUB frame for ``subject`` and ``sid``, with the ``queue`` group if any."""
    if queue:
        return b"SUB %b %b %d\r\n" % (_enc(subject), _enc(queue), sid)
    return b"SUB %b %d\r\n" % (_enc(subject), sid)


def encode_unsub(sid: int, max_msgs: Optional[int] = None) -> bytes:
    """An UNSUB frame for ``sid``; with ``max_msgs``, the server ends it after that many
    messages."""
    if max_msgs is not None:
        return b"UNSUB %d %d\r\n" % (sid, max_msgs)
    return b"UNSUB %d\r\n" % sid


def encode_connect(options: Dict[str, Any]) -> bytes:
    """CONNECT with the options as compact JSON; ``None`` values are left out."""
    body = {k: v for k, v in options.items() if v is not None}
    return b"CONNECT " + json.dumps(body, separators=(",", ":")).encode() + b"\r\n"
