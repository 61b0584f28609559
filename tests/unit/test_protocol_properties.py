"""Property tests for the sans-IO parser, the header codec and subject validation.

(a) Valid server frames cut at arbitrary chunk boundaries parse to the same events as the
    whole stream fed at once, and to the events they were built from.
(b) Arbitrary bytes (optionally after a valid frame) either parse or raise ProtocolError:
    never another exception, never unbounded buffering.
(c) Subjects with whitespace are always refused.
"""

from __future__ import annotations

import json
import string
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from jetstream_sync import _protocol as proto
from jetstream_sync.errors import BadSubjectError, InvalidArgumentError, ProtocolError
from jetstream_sync.msg import Headers, Msg, encode_headers, parse_header_block

# No example database: the suite writes nothing outside its temp dirs.
SETTINGS = settings(max_examples=200, deadline=None, database=None)

# Bytes that bytes.split() treats as separators, plus the subject token separator.
_SEPARATORS = " \t\n\r\x0b\x0c"

Expected = Tuple[Any, ...]
Frame = Tuple[bytes, Expected]

# --- strategies ----------------------------------------------------------------------------

token = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters=_SEPARATORS + "."),
    min_size=1,
    max_size=10,
)
subjects = st.lists(token, min_size=1, max_size=4).map(".".join)
sids = st.integers(min_value=0, max_value=2**63)
replies = st.one_of(st.just(""), subjects)
payloads = st.one_of(
    st.binary(max_size=300),
    st.lists(
        st.sampled_from([b"\r\n", b"\r", b"\n", b"MSG a 1 1\r\n", b"PING\r\n", b"x", b"\x00"]),
        max_size=20,
    ).map(b"".join),
)

header_keys = st.text(
    alphabet=st.sampled_from(sorted(set(string.printable[:94]) - {":"})),
    min_size=1,
    max_size=12,
)
# Values keep no leading/trailing whitespace: the header codec trims it (as NATS does).
header_values = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
    max_size=30,
).map(str.strip)
header_pairs = st.lists(st.tuples(header_keys, header_values), max_size=6)
statuses = st.sampled_from(
    ["", "503", "404 No Messages", "408 Request Timeout", "100 Idle Heartbeat", "409"]
)

json_values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**53), max_value=2**53),
    st.text(max_size=20),
    st.lists(st.integers(min_value=0, max_value=1000), max_size=3),
)
info_bodies = st.dictionaries(st.text(max_size=10), json_values, max_size=6)
err_messages = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n'"),
    max_size=60,
)


def _enc(s: str) -> bytes:
    return s.encode("utf-8", "surrogateescape")


@st.composite
def msg_frames(draw: Callable[..., Any]) -> Frame:
    subject, sid, reply, data = draw(subjects), draw(sids), draw(replies), draw(payloads)
    reply_part = _enc(reply) + b" " if reply else b""
    frame = b"MSG %b %d %b%d\r\n%b\r\n" % (_enc(subject), sid, reply_part, len(data), data)
    return frame, ("msg", subject, reply, sid, data, None)


@st.composite
def hmsg_frames(draw: Callable[..., Any]) -> Frame:
    subject, sid, reply, data = draw(subjects), draw(sids), draw(replies), draw(payloads)
    header = encode_headers(Headers(draw(header_pairs)), status=draw(statuses))
    reply_part = _enc(reply) + b" " if reply else b""
    frame = b"HMSG %b %d %b%d %d\r\n%b%b\r\n" % (
        _enc(subject),
        sid,
        reply_part,
        len(header),
        len(header) + len(data),
        header,
        data,
    )
    return frame, ("msg", subject, reply, sid, data, header)


@st.composite
def info_frames(draw: Callable[..., Any]) -> Frame:
    body = draw(info_bodies)
    return b"INFO " + json.dumps(body).encode() + b"\r\n", ("info", body)


@st.composite
def err_frames(draw: Callable[..., Any]) -> Frame:
    message = draw(err_messages)
    return b"-ERR '" + message.encode() + b"'\r\n", ("err", message)


frames = st.one_of(
    msg_frames(),
    hmsg_frames(),
    info_frames(),
    err_frames(),
    st.just((b"PING\r\n", ("PING",))),
    st.just((b"PONG\r\n", ("PONG",))),
    st.just((b"+OK\r\n", ("OK",))),
)


def describe(ev: proto.Event) -> Expected:
    if isinstance(ev, Msg):
        return ("msg", ev.subject, ev.reply, ev.sid, ev.data, ev.header_bytes)
    if isinstance(ev, proto.Info):
        return ("info", ev.data)
    if isinstance(ev, proto.Err):
        return ("err", ev.message)
    for marker in (proto.PING, proto.PONG, proto.OK):
        if ev is marker:
            return (repr(marker),)
    raise AssertionError(f"unexpected event {ev!r}")


def split(data: bytes, cuts: List[int]) -> List[bytes]:
    points = [0, *sorted(set(cuts)), len(data)]
    return [data[a:b] for a, b in zip(points, points[1:])]


def cut_points(data: bytes) -> st.SearchStrategy[List[int]]:
    return st.lists(st.integers(min_value=0, max_value=len(data)), max_size=40)


# --- (a) chunking does not change the events ------------------------------------------------


@SETTINGS
@given(frame_list=st.lists(frames, max_size=12), data=st.data())
def test_chunked_feed_matches_whole_feed_and_expected(
    frame_list: List[Frame], data: st.DataObject
) -> None:
    blob = b"".join(f for f, _ in frame_list)
    expected = [e for _, e in frame_list]
    largest = max((len(f) for f, _ in frame_list), default=0)

    whole = proto.Parser()
    whole.receive_data(blob)
    whole_events = [describe(ev) for ev in whole.events()]
    assert whole.buffered == 0

    chunked = proto.Parser()
    chunked_events: List[Expected] = []
    for chunk in split(blob, data.draw(cut_points(blob), label="cuts")):
        chunked.receive_data(chunk)
        chunked_events.extend(describe(ev) for ev in chunked.events())
        # Only an incomplete frame is ever held back.
        assert chunked.buffered < max(largest, 1)
    assert chunked.buffered == 0
    assert chunked.next_event() is proto.NEED_DATA

    assert whole_events == expected
    assert chunked_events == expected


@SETTINGS
@given(frame_list=st.lists(frames, min_size=1, max_size=8), data=st.data())
def test_next_event_loop_matches_expected(frame_list: List[Frame], data: st.DataObject) -> None:
    blob = b"".join(f for f, _ in frame_list)
    parser = proto.Parser()
    got: List[Expected] = []
    for chunk in split(blob, data.draw(cut_points(blob), label="cuts")):
        parser.receive_data(chunk)
        for _ in range(len(frame_list) + 1):  # bounded: at most every frame, then NEED_DATA
            ev = parser.next_event()
            if ev is proto.NEED_DATA:
                break
            got.append(describe(ev))
        else:
            raise AssertionError("next_event never returned NEED_DATA")
    assert got == [e for _, e in frame_list]


@SETTINGS
@given(frame=hmsg_frames(), pairs=header_pairs)
@example(  # found by hypothesis in CI: a header of its own named Status, in a status message
    frame=(
        b"HMSG 0 0 31 31\r\nNATS/1.0 503\r\n0: \r\nStatus: \r\n\r\n\r\n",
        ("msg", "0", "", 0, b"", b"NATS/1.0 503\r\n0: \r\nStatus: \r\n\r\n"),
    ),
    pairs=[],
)
def test_hmsg_headers_parse_back(frame: Frame, pairs: List[Tuple[str, str]]) -> None:
    raw, expected = frame
    parser = proto.Parser()
    parser.receive_data(raw)
    (msg,) = parser.events()
    assert isinstance(msg, Msg)
    header = expected[5]
    status, description, headers = parse_header_block(header)
    assert msg.status == status
    assert msg.description == description
    pairs_in = list(headers.multi_items())  # a status line shows as Status/Description too
    if status is not None:
        pairs_in[:0] = [("Status", f"{status:03d}")] + (
            [("Description", description)] * bool(description)
        )
    # Headers keeps a key's values together, keys in the order first seen: a block that also
    # has a "Status" line of its own (hypothesis found ``Status: `` after ``0: `` in a 503)
    # shows it right after the status line's Status, not after the keys in between.
    by_key: Dict[str, List[str]] = {}
    for key, value in pairs_in:
        by_key.setdefault(key, []).append(value)
    shown = [(key, value) for key, values in by_key.items() for value in values]
    assert list(msg.headers.multi_items()) == shown


# --- (b) arbitrary bytes: events or ProtocolError, bounded memory ---------------------------

junk = st.one_of(
    st.binary(max_size=2000),
    # Protocol-shaped junk reaches deeper into the parser than uniform random bytes.
    st.lists(
        st.one_of(
            st.binary(max_size=8),
            st.sampled_from(
                [
                    b"MSG ",
                    b"HMSG ",
                    b"\r\n",
                    b"\r",
                    b"PING",
                    b"PONG",
                    b"+OK",
                    b"-ERR ",
                    b"INFO ",
                    b" ",
                    b"\t",
                    b"0",
                    b"1",
                    b"12",
                    b"-1",
                    b"999",
                    b"99999999999",
                    b"foo",
                    b"NATS/1.0",
                    b"{}",
                    b"[",
                    b'"',
                ]
            ),
        ),
        max_size=200,
    ).map(b"".join),
)


@SETTINGS
@given(
    prefix=st.one_of(st.just(b""), frames.map(lambda f: f[0])),
    noise=junk,
    max_control_line=st.sampled_from([32, 256, proto.MAX_CONTROL_LINE]),
    data=st.data(),
)
def test_arbitrary_bytes_parse_or_raise_protocol_error(
    prefix: bytes, noise: bytes, max_control_line: int, data: st.DataObject
) -> None:
    max_payload = 1024
    blob = prefix + noise
    # MSG can hold one control line plus a payload plus CRLFs; HMSG's total size may exceed
    # max_payload by a fixed 64 KiB allowance for headers (see Parser._parse).
    bound = max_control_line + max_payload + 8
    if b"HMSG" in blob:
        bound += 65536
    parser = proto.Parser(max_control_line=max_control_line, max_payload=max_payload)
    error: Optional[ProtocolError] = None
    for chunk in split(blob, data.draw(cut_points(blob), label="cuts")):
        try:
            parser.receive_data(chunk)
            events = parser.events()
        except ProtocolError as exc:
            error = exc
            break
        assert isinstance(events, list)
        for ev in events:
            describe(ev)  # every event is one of the known kinds
        assert parser.buffered <= bound
    if error is None:
        # Everything fed: the parser has nothing more to give.
        assert parser.next_event() is proto.NEED_DATA
    else:
        assert str(error)
        for call in (parser.events, parser.next_event, lambda: parser.receive_data(b"PING\r\n")):
            with pytest.raises(ProtocolError):
                call()


@SETTINGS
@given(noise=st.binary(max_size=2000).map(lambda b: b.replace(b"\n", b"")), data=st.data())
def test_no_newline_input_is_bounded_by_max_control_line(noise: bytes, data: st.DataObject) -> None:
    parser = proto.Parser(max_control_line=64, max_payload=1024)
    for chunk in split(noise, data.draw(cut_points(noise), label="cuts")):
        try:
            parser.receive_data(chunk)
            assert parser.events() == []
        except ProtocolError as exc:
            assert "control line longer than 64 bytes" in str(exc)
            break
        assert parser.buffered <= 64
    else:
        assert len(noise) <= 64


@SETTINGS
@given(frame=frames, noise=junk, data=st.data())
def test_valid_frame_before_junk_is_delivered_when_fed_separately(
    frame: Frame, noise: bytes, data: st.DataObject
) -> None:
    raw, expected = frame
    parser = proto.Parser()
    parser.receive_data(raw)
    assert [describe(ev) for ev in parser.events()] == [expected]
    for chunk in split(noise, data.draw(cut_points(noise), label="cuts")):
        try:
            parser.receive_data(chunk)
            for ev in parser.events():
                describe(ev)
        except ProtocolError:
            break


# --- header codec ---------------------------------------------------------------------------


@SETTINGS
@given(pairs=header_pairs, status=statuses)
def test_header_codec_round_trip(pairs: List[Tuple[str, str]], status: str) -> None:
    headers = Headers(pairs)
    block = encode_headers(headers, status=status)
    code, description, parsed = parse_header_block(block)
    assert parsed == headers
    for key in headers:
        assert parsed.get_all(key) == headers.get_all(key)
    expected_code = int(status[:3]) if status else None
    assert code == expected_code
    assert description == status[4:]
    assert Msg("s", "", b"", 1, block).status == expected_code


@SETTINGS
@given(mapping=st.dictionaries(header_keys, st.lists(header_values, min_size=1, max_size=3)))
def test_header_codec_round_trip_plain_dict(mapping: dict) -> None:
    _, _, parsed = parse_header_block(encode_headers(mapping))
    assert {k: parsed.get_all(k) for k in parsed} == mapping


@SETTINGS
@given(
    key=st.text(max_size=12),
    values=st.lists(st.text(max_size=20), min_size=1, max_size=3),
)
def test_header_codec_any_key_refused_or_round_trips(key: str, values: List[str]) -> None:
    # Whatever the input, encode_headers either refuses it with InvalidArgumentError or
    # produces a block that parses back (values modulo surrounding whitespace).
    try:
        block = encode_headers({key: values})
    except InvalidArgumentError:
        return
    assert key and all("\r" not in v and "\n" not in v for v in values)
    _, _, parsed = parse_header_block(block)
    assert list(parsed) == [key]
    assert parsed.get_all(key) == [v.strip() for v in values]


# --- (c) subject validation -----------------------------------------------------------------


@SETTINGS
@given(
    before=st.text(max_size=20),
    space=st.sampled_from(list(" \t\r\n\f\v")),
    after=st.text(max_size=20),
)
def test_subject_with_whitespace_is_refused(before: str, space: str, after: str) -> None:
    # "Whitespace" is what splits a NATS protocol line (as in nats-server's subject checks):
    # ASCII space, tab, CR, LF, FF and VT.
    subject = before + space + after
    for check in (proto.check_publish_subject, proto.check_subscribe_subject, proto.check_queue):
        with pytest.raises(BadSubjectError):
            check(subject)
    with pytest.raises(BadSubjectError):
        proto.encode_pub(subject, b"")


literal_token = st.text(
    alphabet=st.sampled_from(sorted(set(string.printable[:94]) - {"."})), min_size=1, max_size=8
).filter(lambda t: t not in ("*", ">"))


@SETTINGS
@given(tokens=st.lists(literal_token, min_size=1, max_size=6))
def test_literal_subjects_are_accepted_and_round_trip(tokens: List[str]) -> None:
    subject = ".".join(tokens)
    assert proto.check_publish_subject(subject) == subject
    assert proto.check_subscribe_subject(subject) == subject
    frame = proto.encode_pub(subject, b"x")
    parser = proto.Parser()
    parser.receive_data(b"MSG" + frame[3:].replace(b" 1\r\n", b" 5 1\r\n", 1))
    (msg,) = parser.events()
    assert isinstance(msg, Msg)
    assert (msg.subject, msg.sid, msg.data) == (subject, 5, b"x")


@SETTINGS
@given(tokens=st.lists(literal_token, min_size=1, max_size=4), data=st.data())
def test_wildcard_token_refused_for_publish_allowed_for_subscribe(
    tokens: List[str], data: st.DataObject
) -> None:
    i = data.draw(st.integers(min_value=0, max_value=len(tokens)), label="position")
    with_star = ".".join([*tokens[:i], "*", *tokens[i:]])
    with pytest.raises(BadSubjectError, match="wildcard"):
        proto.check_publish_subject(with_star)
    assert proto.check_subscribe_subject(with_star) == with_star
    with_gt = ".".join([*tokens, ">"])
    assert proto.check_subscribe_subject(with_gt) == with_gt
    with pytest.raises(BadSubjectError, match="wildcard"):
        proto.check_publish_subject(with_gt)
