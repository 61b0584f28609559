"""Msg: one message as a user sees it, plus the header codec's public face (Headers).

Msg is the hottest object in the package: one is made per received message and may sit
in a subscription queue by the hundred thousand. It therefore has ``__slots__``, keeps the
payload as ``bytes`` and the header block raw until somebody asks for ``headers``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from . import _jsack
from .errors import BadHeaderError, InvalidArgumentError, ProtocolError

if TYPE_CHECKING:  # pragma: no cover
    from .client import Client

__all__ = ["HeaderValue", "Headers", "HeadersLike", "Msg"]

HeaderValue = Union[str, Sequence[str]]


class Headers(Mapping[str, str]):
    """Message headers: multi-valued, order and case preserved.

    ``headers["Key"]`` gives the first value (exact key first, then a case-insensitive
    match); ``get_all("Key")`` gives every value.
    """

    __slots__ = ("_map",)

    def __init__(
        self, items: Union[Mapping[str, HeaderValue], Sequence[Tuple[str, str]], None] = None
    ):
        self._map: Dict[str, List[str]] = {}
        if items is None:
            return
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in pairs:
            if isinstance(items, Headers):
                self._map.setdefault(key, []).extend(items.get_all(key))
            elif isinstance(value, str):
                self._map.setdefault(key, []).append(value)
            else:
                self._map.setdefault(key, []).extend(value)

    def add(self, key: str, value: str) -> None:
        """Add ``value`` to the values of ``key``, after those it has."""
        self._map.setdefault(key, []).append(value)

    def _find(self, key: str) -> Optional[List[str]]:
        values = self._map.get(key)
        if values is None:
            folded = key.lower()
            for k, v in self._map.items():
                if k.lower() == folded:
                    return v
        return values

    def __getitem__(self, key: str) -> str:
        values = self._find(key)
        if not values:
            raise KeyError(key)
        return values[0]

    def get_all(self, key: str) -> List[str]:
        """Every value of ``key`` in order (exact key first, then a case-insensitive match); an
        empty list when there is none."""
        return list(self._find(key) or ())

    def multi_items(self) -> Iterator[Tuple[str, str]]:
        """Every (key, value) pair, in order, a key once per value."""
        for key, values in self._map.items():
            for value in values:
                yield key, value

    def __iter__(self) -> Iterator[str]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Headers):
            return self._map == other._map
        if isinstance(other, Mapping):
            return dict(self.items()) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        # Printed as the dict nats-py's headers are; a key with more values shows them all.
        return repr({k: v[0] if len(v) == 1 else v for k, v in self._map.items()})


HeadersLike = Union[Headers, Mapping[str, HeaderValue]]

_HDR_PREFIX = b"NATS/1.0"


def parse_header_block(raw: bytes) -> Tuple[Optional[int], str, Headers]:
    """Parse a header block (``NATS/1.0 [code [description]]\\r\\nK: V\\r\\n...\\r\\n``)."""
    if not raw.startswith(_HDR_PREFIX):
        raise ProtocolError(f"header block does not start with NATS/1.0: {raw[:32]!r}")
    text = raw.decode("utf-8", "surrogateescape")
    lines = text.split("\r\n")
    status_line = lines[0][len("NATS/1.0") :].strip()
    status: Optional[int] = None
    description = ""
    if status_line:
        code, _, description = status_line.partition(" ")
        if len(code) != 3 or not code.isdigit():
            raise ProtocolError(f"bad status in header block: {lines[0]!r}")
        status = int(code)
        description = description.strip()
    headers = Headers()
    for line in lines[1:]:
        if not line:
            continue
        key, sep, value = line.partition(":")
        if not sep or not key or key != key.strip():
            raise ProtocolError(f"malformed header line: {line[:64]!r}")
        if not key.isascii() or any(c.isspace() for c in key):
            # nats-py drops a line whose name is not an ASCII token (it could not be looked
            # up by any str key a user types); so does this client, rather than keep it.
            continue
        headers.add(key, value.strip())
    return status, description, headers


def _with_status(raw: bytes) -> Tuple[Optional[int], str, Headers]:
    # A status message's headers also carry its status line as "Status" and "Description"
    # (nats-py's keys), so code that reads msg.headers["Status"] ports unchanged.
    status, description, headers = parse_header_block(raw)
    if status is None:
        return status, description, headers
    with_status = Headers({"Status": f"{status:03d}"})
    if description:
        with_status.add("Description", description)
    for key, value in headers.multi_items():
        with_status.add(key, value)
    return status, description, with_status


def encode_headers(headers: HeadersLike, status: str = "") -> bytes:
    """Encode headers as a NATS header block. Keys and values are checked here."""
    parts = ["NATS/1.0"]
    if status:
        parts[0] += " " + status
    items = headers.multi_items() if isinstance(headers, Headers) else _flatten(headers)
    for key, value in items:
        if not isinstance(key, str) or not key:
            raise BadHeaderError(f"header key must be a non-empty str, got {key!r}")
        if not isinstance(value, str):
            raise BadHeaderError(
                f"header {key!r} value must be str, got {type(value).__name__}", key=key
            )
        if not _is_header_key(key):
            raise BadHeaderError(
                f"header key {key!r} must be visible ASCII without ':' or whitespace", key=key
            )
        if "\r" in value or "\n" in value:
            raise BadHeaderError(f"header {key!r} value has CR or LF", key=key)
        parts.append(f"{key}: {value}")
    return ("\r\n".join(parts) + "\r\n\r\n").encode("utf-8", "surrogateescape")


def _is_header_key(key: str) -> bool:
    # Visible ASCII (33..126) minus ':': what HTTP calls a token, and what every NATS
    # client can parse back.
    return key.isascii() and key.isprintable() and " " not in key and ":" not in key


def _flatten(headers: Mapping[str, HeaderValue]) -> Iterator[Tuple[str, str]]:
    if not isinstance(headers, Mapping):
        raise InvalidArgumentError(f"headers must be a mapping, got {type(headers).__name__}")
    for key, value in headers.items():
        if isinstance(value, str):
            yield key, value
        elif isinstance(value, (list, tuple)):
            yield from ((key, v) for v in value)
        else:
            raise InvalidArgumentError(
                f"header {key!r} value must be a str or a list of str, got {type(value).__name__}"
            )


class Msg:
    """A received message.

    ``subject`` and ``reply`` are ``str`` (``reply`` is ``""`` when there is none), ``data``
    is ``bytes``. ``headers`` is parsed on first access. ``status`` and ``description`` come
    from the header block's status line (``NATS/1.0 503``), ``None``/``""`` when absent.
    ``Msg(nc)`` (nats-py's form, its client first) is an empty message bound to ``nc``
    whose fields are set afterwards.
    """

    __slots__ = ("_ack", "_client", "_hdr", "_headers", "data", "reply", "sid", "subject")

    Metadata = _jsack.MsgMetadata  # nats-py's Msg.Metadata: what ``metadata`` returns

    class Ack:
        """nats-py's ``Msg.Ack``: the ack payloads, and where each field sits in a v2
        ``$JS.ACK`` reply subject (split on ``.``)."""

        Ack = b"+ACK"
        Nak = b"-NAK"
        Progress = b"+WPI"
        Term = b"+TERM"
        Prefix0 = "$JS"
        Prefix1 = "ACK"
        Domain = 2
        AccHash = 3
        Stream = 4
        Consumer = 5
        NumDelivered = 6
        StreamSeq = 7
        ConsumerSeq = 8
        Timestamp = 9
        NumPending = 10

    def __init__(
        self,
        subject: Union[str, Client] = "",
        reply: str = "",
        data: Optional[bytes] = None,
        sid: int = 0,
        hdr: Optional[bytes] = None,
        client: Optional[Client] = None,
    ) -> None:
        if data is None:  # never the reader's call (it passes all six): one test, no more
            data = b""
            if not isinstance(subject, str):  # nats-py's Msg(nc): bound to nc, fields later
                client, subject = subject, ""
        self.subject: str = subject  # type: ignore[assignment]  # a str by now
        self.reply = reply
        self.data = data
        self.sid = sid
        self._hdr = hdr
        self._headers: Optional[Tuple[Optional[int], str, Headers]] = None
        self._client = client
        self._ack = 0  # JetStream ack state: see _jsack.py

    def _parsed(self) -> Tuple[Optional[int], str, Headers]:
        parsed = self._headers
        if parsed is None:
            hdr = self._hdr
            parsed = (None, "", Headers()) if hdr is None else _with_status(hdr)
            self._headers = parsed
        return parsed

    @property
    def headers(self) -> Optional[Headers]:
        """The headers, or None when the message has none (nats-py's ``msg.headers``); a
        status message's (``NATS/1.0 404 No Messages``) also carry its status line as
        ``Status`` and ``Description``, as nats-py's do."""
        return None if self._hdr is None else self._parsed()[2]

    @property
    def all_headers(self) -> Headers:
        """The headers, an empty Headers when the message has none (never None)."""
        return self._parsed()[2]

    @property
    def header(self) -> Optional[Headers]:
        """nats-py's ``msg.header``: the headers, or None when the message has none
        (``all_headers`` gives an empty Headers then)."""
        return None if self._hdr is None else self._parsed()[2]

    @property
    def status(self) -> Optional[int]:
        """The status code of the header block's first line, or None.

        Read from the raw bytes without parsing the rest: the reader asks this often.
        """
        hdr = self._hdr
        if hdr is None or len(hdr) < 12 or hdr[8:9] != b" ":
            return None
        code = hdr[9:12]
        return int(code) if code.isdigit() else None

    @property
    def description(self) -> str:
        """The description of the header block's status line (as ``No Messages``), ``""`` when
        there is none."""
        return self._parsed()[1]

    @property
    def header_bytes(self) -> Optional[bytes]:
        """The raw header block as received, or None."""
        return self._hdr

    def respond(self, data: bytes = b"", headers: Optional[HeadersLike] = None) -> None:
        """Publish ``data`` to this message's reply subject."""
        if not self.reply:
            raise InvalidArgumentError(f"message on {self.subject!r} has no reply subject")
        if self._client is None:
            raise InvalidArgumentError("message is not bound to a client")
        # A reply is latency-bound: write it from this thread instead of waking the flusher.
        self._client._send_now(self.reply, data, headers)

    # --- JetStream (see _jsack.py) -----------------------------------------------------

    @property
    def metadata(self) -> _jsack.MsgMetadata:
        """Stream, consumer, sequences, delivery count, pending and timestamp, from the
        ``$JS.ACK`` reply subject; NotJSMessageError for a message that is not JetStream's."""
        return _jsack.parse_metadata(self.reply)

    @property
    def is_acked(self) -> bool:
        """Whether a terminal ack (ack, ack_sync, nak, term) was sent for this message."""
        return self._ack == 1  # _jsack.ACK_DONE

    def ack(self) -> None:
        """Acknowledge (+ACK). :class:`MsgAlreadyAckdError` when a terminal ack (ack,
        ack_sync, nak, term) was sent for this message already."""
        # _jsack.send_ack, inlined for the common case: acks are per message.
        if self._ack != 0:  # _jsack.ACK_OPEN
            if self._ack == 1:  # _jsack.ACK_DONE
                raise _jsack.already_acked(self)
            return
        client = self._client
        if client is not None and self.reply.startswith("$JS.ACK."):
            client._publish_trusted(self.reply, b"+ACK")
            self._ack = 1  # _jsack.ACK_DONE
            return
        _jsack.send_ack(self, _jsack.ACK, terminal=True)  # raises the right error

    def ack_sync(self, timeout: float = 5.0) -> Optional[Msg]:
        """Acknowledge and wait until the server confirms it; returns its confirmation
        (as nats-py), None on a consumer with ack policy none (nothing is sent)."""
        return _jsack.ack_sync(self, timeout)

    def nak(self, delay: Optional[float] = None) -> None:
        """Negative ack (-NAK): redeliver, after ``delay`` seconds when given."""
        _jsack.send_ack(self, _jsack.nak_payload(delay), terminal=True)

    def in_progress(self) -> None:
        """Work in progress (+WPI): restart the ack-wait timer. Not terminal."""
        _jsack.send_ack(self, _jsack.WPI, terminal=False)

    def term(self, reason: Optional[str] = None) -> None:
        """Terminate (+TERM): never redeliver this message."""
        _jsack.send_ack(self, _jsack.term_payload(reason), terminal=True)

    def __repr__(self) -> str:
        # nats-py's Msg is a dataclass: ported code that prints a Msg prints the same line,
        # its client's repr aside.
        return (
            f"Msg(_client={self._client!r}, subject={self.subject!r}, reply={self.reply!r}, "
            f"data={self.data!r}, headers={self.header!r}, _metadata=None, "
            f"_ackd={self.is_acked!r}, _sid={self.sid!r})"
        )
