"""Hostile input to the sans-IO parser (issue 8, point 4).

test_protocol.py has one literal example per malformed form and test_protocol_properties.py
fuzzes random junk at small limits. This module covers what those leave open:

* any bytes in any chunking (1-byte chunks included) give events or ProtocolError, nothing
  else, within a bounded time, with the buffer bounded by the limits;
* an overlong control line is refused as soon as the limit is passed, at the default limit
  too, even when it trickles in one byte at a time with no newline;
* a MSG/HMSG announcing more than the limit is refused before the payload arrives, whatever
  the digits;
* valid streams mutated by one byte (flip, insert, delete) give events or ProtocolError, and
  the frames before the mutation are delivered unchanged;
* HMSG header blocks without the ``NATS/1.0`` line, header sizes above the total size,
  negative or non-numeric sizes and sids: a ProtocolError that says what is wrong;
* an INFO whose JSON nests deeper than Python's recursion limit: ProtocolError, not
  RecursionError.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, List, Optional, Tuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jetstream_sync import _protocol as proto
from jetstream_sync.errors import ProtocolError
from jetstream_sync.msg import Headers, Msg, encode_headers

SETTINGS = settings(max_examples=150, deadline=None, database=None)

# One events() call on at most a few KiB must never take long; generous for a noisy machine.
CALL_BUDGET = 2.0

Frame = Tuple[bytes, Tuple[Any, ...]]

# --- helpers ----------------------------------------------------------------------------------


def describe(ev: proto.Event) -> Tuple[Any, ...]:
    if isinstance(ev, Msg):
        return ("msg", ev.subject, ev.reply, ev.sid, ev.data, ev.header_bytes)
    if isinstance(ev, proto.Info):
        return ("info", ev.data)
    if isinstance(ev, proto.Err):
        return ("err", ev.message)
    assert ev in (proto.PING, proto.PONG, proto.OK), ev
    return (repr(ev),)


def split(data: bytes, cuts: List[int]) -> List[bytes]:
    points = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in zip(points, points[1:]) if b > a]


def chunkings(data: bytes) -> st.SearchStrategy[List[bytes]]:
    """The whole blob, 1-byte chunks, fixed-size chunks, or random cuts."""
    n = len(data)
    return st.one_of(
        st.just([data]),
        st.just([data[i : i + 1] for i in range(n)]),
        st.integers(min_value=2, max_value=64).map(
            lambda k: [data[i : i + k] for i in range(0, n, k)]
        ),
        st.lists(st.integers(min_value=0, max_value=n), max_size=30).map(
            lambda cuts: split(data, cuts)
        ),
    )


class Outcome:
    def __init__(self) -> None:
        self.events: List[Tuple[Any, ...]] = []
        self.error: Optional[ProtocolError] = None
        self.max_buffered = 0


def run(parser: proto.Parser, chunks: List[bytes]) -> Outcome:
    """Feed ``chunks``: only ProtocolError may escape, every call is quick, and a broken
    parser stays broken."""
    out = Outcome()
    for chunk in chunks:
        start = time.monotonic()
        try:
            parser.receive_data(chunk)
            events = parser.events()
        except ProtocolError as exc:
            out.error = exc
            break
        finally:
            assert time.monotonic() - start < CALL_BUDGET, "one events() call took too long"
        # An event needs at least 4 bytes ("+OK\r\n" is 5): no call can invent events.
        assert len(events) <= len(chunk) + parser.buffered + 1
        out.events.extend(describe(ev) for ev in events)
        out.max_buffered = max(out.max_buffered, parser.buffered)
    if out.error is None:
        assert parser.next_event() is proto.NEED_DATA
    else:
        assert str(out.error)
        for call in (parser.events, parser.next_event, lambda: parser.receive_data(b"PING\r\n")):
            with pytest.raises(ProtocolError) as again:
                call()
            assert again.value is out.error
    return out


def bound(max_control_line: int, max_payload: int) -> int:
    """The most a parser may hold: one control line, its payload (HMSG: plus the 64 KiB
    header allowance) and the CRLFs."""
    return max_control_line + max_payload + 65536 + 8


# --- strategies -------------------------------------------------------------------------------

_SEP = " \t\n\r\x0b\x0c"
token = st.text(
    alphabet=st.characters(
        min_codepoint=33,
        max_codepoint=0x2FF,
        blacklist_characters=_SEP + ".",
        blacklist_categories=("Cs",),
    ),
    min_size=1,
    max_size=8,
)
subjects = st.lists(token, min_size=1, max_size=3).map(".".join)
replies = st.one_of(st.just(""), subjects)
payloads = st.one_of(
    st.binary(max_size=80),
    st.lists(st.sampled_from([b"\r\n", b"\r", b"\n", b"MSG a 1 1\r\n", b"x"]), max_size=8).map(
        b"".join
    ),
)
header_pairs = st.lists(
    st.tuples(
        st.text(alphabet="abcXYZ-_019", min_size=1, max_size=6),
        st.text(alphabet="abc xyz:019", max_size=10).map(str.strip),
    ),
    max_size=3,
)


def _enc(s: str) -> bytes:
    return s.encode()


@st.composite
def msg_frames(draw: Callable[..., Any]) -> Frame:
    subject, reply, data = draw(subjects), draw(replies), draw(payloads)
    sid = draw(st.integers(min_value=0, max_value=10**6))
    rp = _enc(reply) + b" " if reply else b""
    raw = b"MSG %b %d %b%d\r\n%b\r\n" % (_enc(subject), sid, rp, len(data), data)
    return raw, ("msg", subject, reply, sid, data, None)


@st.composite
def hmsg_frames(draw: Callable[..., Any]) -> Frame:
    subject, reply, data = draw(subjects), draw(replies), draw(payloads)
    sid = draw(st.integers(min_value=0, max_value=10**6))
    hdr = encode_headers(Headers(draw(header_pairs)), status=draw(st.sampled_from(["", "404"])))
    rp = _enc(reply) + b" " if reply else b""
    raw = b"HMSG %b %d %b%d %d\r\n%b%b\r\n" % (
        _enc(subject), sid, rp, len(hdr), len(hdr) + len(data), hdr, data
    )  # fmt: skip
    return raw, ("msg", subject, reply, sid, data, hdr)


@st.composite
def info_frames(draw: Callable[..., Any]) -> Frame:
    body = draw(
        st.dictionaries(
            st.text(max_size=6), st.one_of(st.integers(), st.text(max_size=6)), max_size=4
        )
    )
    return b"INFO " + json.dumps(body).encode() + b"\r\n", ("info", body)


frames = st.one_of(
    msg_frames(),
    hmsg_frames(),
    info_frames(),
    st.just((b"-ERR 'Stale Connection'\r\n", ("err", "Stale Connection"))),
    st.just((b"PING\r\n", ("PING",))),
    st.just((b"PONG\r\n", ("PONG",))),
    st.just((b"+OK\r\n", ("OK",))),
)

protocol_atoms = st.sampled_from(
    [
        b"MSG ", b"HMSG ", b"INFO ", b"-ERR ", b"+OK", b"PING", b"PONG", b"\r\n", b"\r", b"\n",
        b" ", b"0", b"1", b"-1", b"4294967296", b"99999999999999999999", b"NATS/1.0", b"{",
        b"[", b"}", b'"', b"\x00", b"\xff", b"a.b", b"$JS.ACK.", b"_INBOX.x",
    ]
)  # fmt: skip
hostile_bytes = st.one_of(
    st.binary(max_size=600),
    st.lists(st.one_of(protocol_atoms, st.binary(max_size=6)), max_size=120).map(b"".join),
)


# --- arbitrary bytes, arbitrary chunking --------------------------------------------------------


@SETTINGS
@given(
    prefix=st.lists(frames, max_size=3),
    noise=hostile_bytes,
    limits=st.sampled_from([(32, 64), (256, 1024), (proto.MAX_CONTROL_LINE, 4096)]),
    data=st.data(),
)
def test_any_bytes_any_chunking_events_or_protocol_error(
    prefix: List[Frame], noise: bytes, limits: Tuple[int, int], data: st.DataObject
) -> None:
    max_line, max_payload = limits
    blob = b"".join(f for f, _ in prefix) + noise
    parser = proto.Parser(max_control_line=max_line, max_payload=max_payload)
    out = run(parser, data.draw(chunkings(blob), label="chunks"))
    assert out.max_buffered <= bound(max_line, max_payload)


# --- overlong control lines -------------------------------------------------------------------


@pytest.mark.parametrize(
    "start", [b"", b"INFO {", b"MSG foo 1 ", b"HMSG foo 1 12 ", b"PING", b"-ERR '", b"\r"]
)
def test_overlong_line_at_default_limit_refused_promptly_in_one_byte_chunks(start: bytes) -> None:
    limit = proto.MAX_CONTROL_LINE
    line = start + b"x" * (limit + 100)  # no LF anywhere: never a complete line
    parser = proto.Parser()
    began = time.monotonic()
    fed = 0
    for byte in line:
        fed += 1
        try:
            parser.receive_data(bytes([byte]))
            assert parser.events() == []
        except ProtocolError as exc:
            assert f"control line longer than {limit} bytes" in str(exc)
            break
        assert parser.buffered <= limit + 1
    else:
        raise AssertionError("an overlong control line was never refused")
    # Refused at the first byte past the limit (+1: a line of exactly the limit may have its
    # CR buffered while its LF is still on the way).
    assert fed == limit + 2
    assert time.monotonic() - began < 30


@SETTINGS
@given(
    body=st.binary(min_size=1, max_size=3000).map(lambda b: b.replace(b"\n", b"")),
    max_line=st.sampled_from([16, 100, 1000]),
    data=st.data(),
)
def test_line_without_lf_never_buffers_past_the_limit(
    body: bytes, max_line: int, data: st.DataObject
) -> None:
    parser = proto.Parser(max_control_line=max_line)
    out = run(parser, data.draw(chunkings(body), label="chunks"))
    assert out.events == []
    assert out.max_buffered <= max_line + 1
    if len(body) > max_line + 1:
        assert out.error is not None and "control line longer" in str(out.error)
    else:
        assert out.error is None


@SETTINGS
@given(body=st.binary(max_size=200), extra=st.integers(min_value=1, max_value=5000))
def test_overlong_line_with_crlf_is_refused_not_parsed(body: bytes, extra: int) -> None:
    line = (b"INFO " + body).replace(b"\n", b"").ljust(64 + extra, b" ")
    parser = proto.Parser(max_control_line=64)
    parser.receive_data(line + b"\r\nPING\r\n")
    with pytest.raises(ProtocolError, match="control line longer than 64 bytes"):
        parser.events()


# --- announced sizes --------------------------------------------------------------------------


@SETTINGS
@given(
    subject=subjects,
    reply=replies,
    over=st.one_of(st.integers(min_value=1, max_value=2**70), st.integers(1, 10)),
    hmsg=st.booleans(),
)
def test_announced_size_above_the_max_is_refused_before_the_payload(
    subject: str, reply: str, over: int, hmsg: bool
) -> None:
    max_payload = 1000
    rp = _enc(reply) + b" " if reply else b""
    if hmsg:
        size = max_payload + 65536 + over
        line = b"HMSG %b 1 %b12 %d\r\n" % (_enc(subject), rp, size)
        needle = "out of range"
    else:
        size = max_payload + over
        line = b"MSG %b 1 %b%d\r\n" % (_enc(subject), rp, size)
        needle = f"MSG payload size {size} out of range"
    parser = proto.Parser(max_payload=max_payload)
    parser.receive_data(line)  # the control line only: the payload never comes
    with pytest.raises(ProtocolError, match=needle):
        parser.events()


@SETTINGS
@given(subject=subjects, hsize=st.integers(min_value=1, max_value=2**40), data=st.data())
def test_header_size_larger_than_total_size(subject: str, hsize: int, data: st.DataObject) -> None:
    total = data.draw(st.integers(min_value=0, max_value=hsize - 1), label="total")
    parser = proto.Parser()
    parser.receive_data(b"HMSG %b 7 %d %d\r\n" % (_enc(subject), hsize, total))
    with pytest.raises(ProtocolError, match=f"HMSG sizes {hsize}/{total} out of range"):
        parser.events()


def _rejected_by_int(token: bytes) -> bool:
    try:
        return int(token) < 0
    except ValueError:
        return True


size_tokens = st.one_of(
    st.integers(max_value=-1).map(lambda n: b"%d" % n),
    st.text(
        alphabet=st.characters(min_codepoint=33, max_codepoint=0x7FF, blacklist_categories=("Cs",)),
        min_size=1,
        max_size=8,
    ).map(lambda s: s.encode("utf-8")),
    st.sampled_from(
        [b"-0x1", b"0x10", b"1e3", b"NaN", b"inf", b"1.5", b"--1", b"\xff", b"\xd9\xa1"]
    ),
).filter(_rejected_by_int)


@SETTINGS
@given(
    bad=size_tokens,
    where=st.sampled_from(["msg-size", "msg-sid", "hmsg-hsize", "hmsg-size", "hmsg-sid"]),
    data=st.data(),
)
def test_negative_or_non_numeric_sizes_and_sids(
    bad: bytes, where: str, data: st.DataObject
) -> None:
    line = {
        "msg-size": b"MSG a.b 1 %b\r\n",
        "msg-sid": b"MSG a.b %b 5\r\n",
        "hmsg-hsize": b"HMSG a.b 1 %b 20\r\n",
        "hmsg-size": b"HMSG a.b 1 12 %b\r\n",
        "hmsg-sid": b"HMSG a.b %b 12 20\r\n",
    }[where] % bad
    blob = line + b"NATS/1.0\r\n\r\nhello\r\n"
    out = run(proto.Parser(), data.draw(chunkings(blob), label="chunks"))
    assert out.events == []
    assert out.error is not None
    assert "out of range" in str(out.error) or "malformed protocol data" in str(out.error)


def test_size_with_thousands_of_digits_is_a_protocol_error() -> None:
    # Python refuses int() of over 4300 digits (ValueError); within the control line limit.
    parser = proto.Parser(max_control_line=8000)
    parser.receive_data(b"MSG a 1 " + b"9" * 5000 + b"\r\n")
    with pytest.raises(ProtocolError):
        parser.events()


# --- HMSG header blocks -----------------------------------------------------------------------


@SETTINGS
@given(
    header=st.binary(max_size=60).filter(lambda h: not h.startswith(b"NATS/1.0")),
    payload=st.binary(max_size=40),
    data=st.data(),
)
def test_hmsg_header_block_without_nats_line_is_named(
    header: bytes, payload: bytes, data: st.DataObject
) -> None:
    blob = b"HMSG a.b 3 %d %d\r\n%b%b\r\n" % (
        len(header), len(header) + len(payload), header, payload
    )  # fmt: skip
    out = run(proto.Parser(), data.draw(chunkings(blob), label="chunks"))
    assert out.events == []
    assert out.error is not None
    # The payload may contain CRLF, and its length is what counts: the only error is NATS/1.0.
    assert "HMSG header block without NATS/1.0" in str(out.error)


@pytest.mark.parametrize(
    "header",
    [b"", b"NATS/1.", b"nats/1.0\r\n\r\n", b" NATS/1.0\r\n\r\n", b"\r\nNATS/1.0\r\n\r\n",
     b"HTTP/1.1 200 OK\r\n\r\n", b"Foo: bar\r\n\r\n"],
)  # fmt: skip
def test_hmsg_header_forms_without_nats_line(header: bytes) -> None:
    parser = proto.Parser()
    parser.receive_data(b"HMSG s 1 %d %d\r\n%bpay\r\n" % (len(header), len(header) + 3, header))
    with pytest.raises(ProtocolError, match=r"without NATS/1\.0"):
        parser.events()


# --- one-byte mutations of valid streams ------------------------------------------------------


@st.composite
def mutated_streams(draw: Callable[..., Any]) -> Tuple[List[Frame], bytes, int]:
    frame_list = draw(st.lists(frames, min_size=1, max_size=6))
    blob = b"".join(f for f, _ in frame_list)
    kind = draw(st.sampled_from(["flip", "set", "insert", "delete"]))
    pos = draw(st.integers(min_value=0, max_value=len(blob) - 1))
    if kind == "flip":
        bit = draw(st.integers(min_value=0, max_value=7))
        mutated = blob[:pos] + bytes([blob[pos] ^ (1 << bit)]) + blob[pos + 1 :]
    elif kind == "set":
        byte = draw(st.sampled_from(b"\r\n \t0-9\x00\xffMH"))
        mutated = blob[:pos] + bytes([byte]) + blob[pos + 1 :]
    elif kind == "insert":
        byte = draw(st.integers(min_value=0, max_value=255))
        mutated = blob[:pos] + bytes([byte]) + blob[pos:]
    else:
        mutated = blob[:pos] + blob[pos + 1 :]
    return frame_list, mutated, pos


@SETTINGS
@given(stream=mutated_streams(), data=st.data())
def test_one_byte_mutation_gives_events_or_protocol_error(
    stream: Tuple[List[Frame], bytes, int], data: st.DataObject
) -> None:
    frame_list, mutated, pos = stream
    # The frames wholly before the mutation are fed first: they must come out unchanged.
    intact: List[Tuple[Any, ...]] = []
    offset = 0
    for raw, expected in frame_list:
        if offset + len(raw) > pos:
            break
        offset += len(raw)
        intact.append(expected)
    parser = proto.Parser()
    head = run(parser, [mutated[:offset]] if offset else [])
    assert head.error is None and head.events == intact
    tail = run(parser, data.draw(chunkings(mutated[offset:]), label="chunks"))
    assert tail.max_buffered <= len(mutated)
    # A mutation can at most turn the rest into frames that are there, never invent bytes.
    for ev in tail.events:
        if ev[0] == "msg":
            assert len(ev[4]) <= len(mutated)


# --- INFO ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("opener", [b"[", b'{"a":', b'{"a":['])
def test_info_nested_beyond_the_recursion_limit_is_a_protocol_error(opener: bytes) -> None:
    depth = (proto.MAX_CONTROL_LINE - 8) // len(opener)
    parser = proto.Parser()
    parser.receive_data(b"INFO " + opener * depth + b"\r\n")
    with pytest.raises(ProtocolError, match="INFO"):
        parser.events()
    with pytest.raises(ProtocolError):  # and the parser stays broken, like for any error
        parser.receive_data(b"PING\r\n")


@SETTINGS
@given(
    body=st.one_of(
        st.binary(max_size=300),
        st.recursive(
            st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=5)),
            lambda inner: st.one_of(
                st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
            ),
            max_leaves=20,
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_info_body_is_a_dict_or_a_protocol_error(body: bytes) -> None:
    parser = proto.Parser()
    parser.receive_data(b"INFO " + body.replace(b"\n", b"") + b"\r\n")
    try:
        events = parser.events()
    except ProtocolError as exc:
        assert "INFO" in str(exc) or "control line" in str(exc) or "unknown" in str(exc)
        return
    for ev in events:
        if isinstance(ev, proto.Info):
            assert isinstance(ev.data, dict)


# --- bounded time -----------------------------------------------------------------------------


def test_large_payload_in_one_byte_chunks_is_linear() -> None:
    # Each call while the payload is incomplete must be O(1): the buffer is not re-joined.
    size = 200_000
    frame = b"MSG a 1 %d\r\n" % size + b"\r\n" * (size // 2) + b"\r\n"
    parser = proto.Parser()
    began = time.monotonic()
    got: List[proto.Event] = []
    for i in range(len(frame)):
        parser.receive_data(frame[i : i + 1])
        got.extend(parser.events())
    assert time.monotonic() - began < 30
    assert len(got) == 1 and isinstance(got[0], Msg) and len(got[0].data) == size


def test_many_tiny_frames_in_one_read() -> None:
    parser = proto.Parser()
    parser.receive_data(b"PING\r\n" * 200_000 + b"+OK\r\n" * 1000)
    began = time.monotonic()
    events = parser.events()
    assert time.monotonic() - began < 30
    assert len(events) == 201_000 and parser.buffered == 0
