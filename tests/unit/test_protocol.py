"""The sans-IO protocol: parsing server frames, encoding client frames, validating names.

Every input here is literal bytes as nats-server puts them on the wire; nothing opens a
socket.
"""

from __future__ import annotations

import json
from typing import Any, List

import pytest

from jetstream_sync import _protocol as proto
from jetstream_sync.errors import (
    BadSubjectError,
    InvalidArgumentError,
    NATSError,
    ProtocolError,
)
from jetstream_sync.msg import Headers, Msg, encode_headers, parse_header_block


def parse(data: bytes, **kwargs: Any) -> List[proto.Event]:
    parser = proto.Parser(**kwargs)
    parser.receive_data(data)
    return parser.events()


def only_msg(data: bytes, **kwargs: Any) -> Msg:
    events = parse(data, **kwargs)
    assert len(events) == 1, events
    (msg,) = events
    assert isinstance(msg, Msg)
    return msg


def hmsg(subject: str, sid: int, header: bytes, payload: bytes, reply: str = "") -> bytes:
    """An HMSG frame with correctly computed sizes."""
    args = f"{subject} {sid} {reply} " if reply else f"{subject} {sid} "
    return b"HMSG %b%d %d\r\n%b%b\r\n" % (
        args.encode(),
        len(header),
        len(header) + len(payload),
        header,
        payload,
    )


# --- events from literal bytes ----------------------------------------------------------


def test_info() -> None:
    (ev,) = parse(b'INFO {"server_id":"x","max_payload":1048576}\r\n')
    assert isinstance(ev, proto.Info)
    assert ev.data == {"server_id": "x", "max_payload": 1048576}
    assert "server_id" in repr(ev)


def test_info_as_nats_server_sends_it() -> None:
    body = {
        "server_id": "NCXYZ",
        "server_name": "n1",
        "version": "2.10.7",
        "proto": 1,
        "headers": True,
        "max_payload": 1048576,
        "jetstream": True,
        "client_id": 5,
        "connect_urls": ["10.0.0.1:4222", "10.0.0.2:4222"],
    }
    (ev,) = parse(b"INFO " + json.dumps(body).encode() + b" \r\n")
    assert isinstance(ev, proto.Info)
    assert ev.data == body


def test_ping_pong_ok() -> None:
    assert parse(b"PING\r\n") == [proto.PING]
    assert parse(b"PONG\r\n") == [proto.PONG]
    assert parse(b"+OK\r\n") == [proto.OK]
    assert parse(b"PING\r\nPONG\r\n+OK\r\n") == [proto.PING, proto.PONG, proto.OK]


def test_control_ops_are_case_insensitive() -> None:
    assert parse(b"ping\r\npong\r\n+ok\r\n") == [proto.PING, proto.PONG, proto.OK]


def test_markers_repr() -> None:
    assert repr(proto.PING) == "PING"
    assert repr(proto.NEED_DATA) == "NEED_DATA"


def test_err_strips_quotes() -> None:
    (ev,) = parse(b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n")
    assert isinstance(ev, proto.Err)
    assert ev.message == 'Permissions Violation for Publish to "x"'
    assert ev == proto.Err('Permissions Violation for Publish to "x"')
    assert ev != proto.Err("other")
    assert ev != 'Permissions Violation for Publish to "x"'


def test_err_other_messages() -> None:
    assert parse(b"-ERR 'Authorization Violation'\r\n") == [proto.Err("Authorization Violation")]
    assert parse(b"-ERR 'Stale Connection'\r\n") == [proto.Err("Stale Connection")]
    assert parse(b"-ERR 'Maximum Payload Violation'\r\n") == [
        proto.Err("Maximum Payload Violation")
    ]


def test_err_is_unhashable() -> None:
    with pytest.raises(TypeError):
        hash(proto.Err("x"))


def test_msg_without_reply() -> None:
    msg = only_msg(b"MSG foo 1 5\r\nhello\r\n")
    assert msg.subject == "foo"
    assert msg.reply == ""
    assert msg.sid == 1
    assert msg.data == b"hello"
    assert isinstance(msg.data, bytes)
    assert msg.header_bytes is None
    assert msg.status is None
    assert msg.description == ""
    assert msg.headers is None and msg.all_headers == Headers()  # None: nats-py's


def test_msg_with_reply_and_empty_payload() -> None:
    msg = only_msg(b"MSG foo 1 _INBOX.x 0\r\n\r\n")
    assert msg.subject == "foo"
    assert msg.reply == "_INBOX.x"
    assert msg.sid == 1
    assert msg.data == b""


def test_msg_zero_length_without_reply() -> None:
    msg = only_msg(b"MSG a.b.c 42 0\r\n\r\n")
    assert (msg.subject, msg.reply, msg.sid, msg.data) == ("a.b.c", "", 42, b"")


def test_msg_payload_containing_crlf() -> None:
    payload = b"\r\nMSG x 1 2\r\n\r\n\r\n"
    msg = only_msg(b"MSG foo 7 %d\r\n%b\r\n" % (len(payload), payload))
    assert msg.data == payload
    assert msg.sid == 7


def test_msg_payload_that_is_only_crlf() -> None:
    msg = only_msg(b"MSG foo 1 2\r\n\r\n\r\n")
    assert msg.data == b"\r\n"


def test_msg_binary_payload() -> None:
    payload = bytes(range(256))
    msg = only_msg(b"MSG bin 3 256\r\n" + payload + b"\r\n")
    assert msg.data == payload


def test_msg_utf8_subject() -> None:
    subject = "caf\u00e9.\u65e5\u672c"
    msg = only_msg(b"MSG %b 1 1\r\nx\r\n" % subject.encode())
    assert msg.subject == subject


def test_msg_owner_is_stamped() -> None:
    owner = object()
    (msg,) = parse(b"MSG foo 1 0\r\n\r\n", msg_owner=owner)
    assert isinstance(msg, Msg)
    assert msg._client is owner


def test_msg_repr() -> None:
    msg = only_msg(b"MSG foo 1 r 3\r\nabc\r\n")
    assert repr(msg) == (  # nats-py's dataclass repr
        "Msg(_client=None, subject='foo', reply='r', data=b'abc', headers=None, "
        "_metadata=None, _ackd=False, _sid=1)"
    )
    long = only_msg(b"MSG foo 1 40\r\n" + b"x" * 40 + b"\r\n")
    assert "data=b'" + "x" * 40 + "'," in repr(long)  # all of it, as nats-py prints it


def test_hmsg_404_no_messages() -> None:
    data = b"HMSG foo 2 28 30\r\nNATS/1.0 404 No Messages\r\n\r\nhi\r\n"
    assert data == hmsg("foo", 2, b"NATS/1.0 404 No Messages\r\n\r\n", b"hi")
    msg = only_msg(data)
    assert msg.subject == "foo"
    assert msg.reply == ""
    assert msg.sid == 2
    assert msg.data == b"hi"
    assert msg.header_bytes == b"NATS/1.0 404 No Messages\r\n\r\n"
    assert msg.status == 404
    assert msg.description == "No Messages"
    assert dict(msg.headers) == {"Status": "404", "Description": "No Messages"}  # nats-py's
    assert "headers={'Status': '404', 'Description': 'No Messages'}" in repr(msg)


def test_hmsg_503_without_description() -> None:
    header = b"NATS/1.0 503\r\n\r\n"
    msg = only_msg(b"HMSG _INBOX.abc 9 16 16\r\n" + header + b"\r\n")
    assert msg.data == b""
    assert msg.status == 503
    assert msg.description == ""
    assert msg.headers == {"Status": "503"}


def test_hmsg_408_request_timeout() -> None:
    header = b"NATS/1.0 408 Request Timeout\r\nNats-Pending-Messages: 1\r\n\r\n"
    msg = only_msg(hmsg("_INBOX.a.b", 3, header, b""))
    assert msg.status == 408
    assert msg.description == "Request Timeout"
    assert msg.headers["Nats-Pending-Messages"] == "1"


def test_hmsg_with_reply() -> None:
    header = b"NATS/1.0\r\nA: 1\r\n\r\n"
    data = hmsg("svc.echo", 11, header, b"payload", reply="_INBOX.r.1")
    assert data.startswith(
        b"HMSG svc.echo 11 _INBOX.r.1 %d %d\r\n" % (len(header), len(header) + 7)
    )
    msg = only_msg(data)
    assert msg.subject == "svc.echo"
    assert msg.reply == "_INBOX.r.1"
    assert msg.sid == 11
    assert msg.data == b"payload"
    assert msg.status is None
    assert msg.description == ""
    assert msg.headers == {"A": "1"}


def test_hmsg_payload_with_crlf_inside() -> None:
    header = b"NATS/1.0\r\nK: v\r\n\r\n"
    payload = b"line1\r\nline2\r\n\r\n"
    msg = only_msg(hmsg("s", 1, header, payload))
    assert msg.data == payload
    assert msg.header_bytes == header


def test_hmsg_headers_multi_valued_and_case() -> None:
    header = (
        b"NATS/1.0\r\n"
        b"X-Trace: a\r\n"
        b"Nats-Msg-Id: 123\r\n"
        b"X-Trace: b\r\n"
        b"x-trace: c\r\n"
        b"Spaced:   padded value  \r\n"
        b"\r\n"
    )
    msg = only_msg(hmsg("h", 1, header, b"x"))
    headers = msg.headers
    assert isinstance(headers, Headers)
    # Case is preserved: "X-Trace" and "x-trace" are distinct keys, in order of arrival.
    assert list(headers) == ["X-Trace", "Nats-Msg-Id", "x-trace", "Spaced"]
    assert headers.get_all("X-Trace") == ["a", "b"]
    assert headers.get_all("x-trace") == ["c"]
    assert headers["X-Trace"] == "a"
    # Exact key first, then a case-insensitive match.
    assert headers["nats-msg-id"] == "123"
    assert headers["NATS-MSG-ID"] == "123"
    assert headers.get_all("NaTs-MsG-iD") == ["123"]
    assert headers["Spaced"] == "padded value"
    assert headers.get_all("missing") == []
    assert headers.get("missing") is None
    with pytest.raises(KeyError):
        headers["missing"]
    assert list(headers.multi_items()) == [
        ("X-Trace", "a"),
        ("X-Trace", "b"),
        ("Nats-Msg-Id", "123"),
        ("x-trace", "c"),
        ("Spaced", "padded value"),
    ]
    # The headers are parsed once and cached.
    assert msg.headers is headers


def test_hmsg_status_with_headers() -> None:
    header = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 5\r\nNats-Last-Stream: 9\r\n\r\n"
    msg = only_msg(hmsg("_INBOX.hb", 4, header, b""))
    assert msg.status == 100
    assert msg.description == "Idle Heartbeat"
    assert dict(msg.headers) == {
        "Status": "100",
        "Description": "Idle Heartbeat",
        "Nats-Last-Consumer": "5",
        "Nats-Last-Stream": "9",
    }


def test_hmsg_header_only_no_payload_and_minimal_block() -> None:
    msg = only_msg(hmsg("a", 1, b"NATS/1.0\r\n\r\n", b""))
    assert msg.data == b""
    assert msg.status is None
    assert msg.description == ""
    assert len(msg.headers) == 0


def test_mixed_stream_in_order() -> None:
    data = b"".join(
        [
            b'INFO {"server_id":"x"}\r\n',
            b"PING\r\n",
            b"MSG a 1 1\r\nA\r\n",
            hmsg("b", 2, b"NATS/1.0 503\r\n\r\n", b""),
            b"+OK\r\n",
            b"-ERR 'Unknown Protocol Operation'\r\n",
            b"PONG\r\n",
        ]
    )
    events = parse(data)
    assert len(events) == 7
    info, ping, m1, m2, ok, err, pong = events
    assert isinstance(info, proto.Info) and info.data == {"server_id": "x"}
    assert ping is proto.PING
    assert isinstance(m1, Msg) and (m1.subject, m1.data) == ("a", b"A")
    assert isinstance(m2, Msg) and m2.status == 503
    assert ok is proto.OK
    assert err == proto.Err("Unknown Protocol Operation")
    assert pong is proto.PONG


# --- incremental input: NEED_DATA and buffered -------------------------------------------


def test_empty_parser_needs_data() -> None:
    parser = proto.Parser()
    assert parser.next_event() is proto.NEED_DATA
    assert parser.events() == []
    assert parser.buffered == 0


def test_partial_control_line() -> None:
    parser = proto.Parser()
    parser.receive_data(b"PIN")
    assert parser.next_event() is proto.NEED_DATA
    assert parser.buffered == 3
    parser.receive_data(b"G\r")
    assert parser.events() == []
    assert parser.buffered == 5
    parser.receive_data(b"\n")
    assert parser.next_event() is proto.PING
    assert parser.next_event() is proto.NEED_DATA
    assert parser.buffered == 0


def test_control_line_complete_payload_partial() -> None:
    parser = proto.Parser()
    parser.receive_data(b"MSG foo 1 5\r\nhel")
    assert parser.next_event() is proto.NEED_DATA
    assert parser.buffered == len(b"MSG foo 1 5\r\nhel")
    parser.receive_data(b"lo\r\n")
    msg = parser.next_event()
    assert isinstance(msg, Msg) and msg.data == b"hello"
    assert parser.buffered == 0


def test_payload_complete_trailing_crlf_missing() -> None:
    parser = proto.Parser()
    parser.receive_data(b"MSG foo 1 5\r\nhello")
    assert parser.events() == []
    parser.receive_data(b"\r")
    assert parser.events() == []
    assert parser.buffered == len(b"MSG foo 1 5\r\nhello\r")
    parser.receive_data(b"\n")
    (msg,) = parser.events()
    assert isinstance(msg, Msg) and msg.data == b"hello"


def test_hmsg_partial_header_block() -> None:
    frame = hmsg("foo", 2, b"NATS/1.0 404 No Messages\r\n\r\n", b"hi")
    parser = proto.Parser()
    parser.receive_data(frame[:25])
    assert parser.next_event() is proto.NEED_DATA
    parser.receive_data(frame[25:-1])
    assert parser.next_event() is proto.NEED_DATA
    parser.receive_data(frame[-1:])
    msg = parser.next_event()
    assert isinstance(msg, Msg) and msg.status == 404 and msg.data == b"hi"


def test_byte_at_a_time() -> None:
    data = b"PING\r\nMSG foo 1 r 2\r\nhi\r\n" + hmsg("h", 2, b"NATS/1.0 503\r\n\r\n", b"")
    parser = proto.Parser()
    events: List[proto.Event] = []
    for i in range(len(data)):
        parser.receive_data(data[i : i + 1])
        events.extend(parser.events())
    assert len(events) == 3
    assert events[0] is proto.PING
    assert isinstance(events[1], Msg) and events[1].reply == "r" and events[1].data == b"hi"
    assert isinstance(events[2], Msg) and events[2].status == 503
    assert parser.buffered == 0


def test_buffered_counts_unparsed_tail() -> None:
    parser = proto.Parser()
    parser.receive_data(b"PING\r\nPONG\r\nMSG a 1 10\r\n01234")
    assert parser.buffered == len(b"PING\r\nPONG\r\nMSG a 1 10\r\n01234")
    assert parser.events() == [proto.PING, proto.PONG]
    assert parser.buffered == len(b"MSG a 1 10\r\n01234")


def test_next_event_and_events_interleave_in_order() -> None:
    parser = proto.Parser()
    parser.receive_data(b"PING\r\nPONG\r\n+OK\r\n")
    assert parser.next_event() is proto.PING
    # The pending events come first, in order.
    parser.receive_data(b"-ERR 'x'\r\n")
    assert parser.events() == [proto.PONG, proto.OK, proto.Err("x")]
    assert parser.next_event() is proto.NEED_DATA


def test_receive_data_accepts_bytearray_and_memoryview() -> None:
    parser = proto.Parser()
    parser.receive_data(bytearray(b"MSG a 1 2\r\n"))
    parser.receive_data(memoryview(b"ok\r\n"))
    (msg,) = parser.events()
    assert isinstance(msg, Msg) and msg.data == b"ok"
    assert type(msg.data) is bytes


def test_msg_size_exactly_max_payload_is_accepted() -> None:
    msg = only_msg(b"MSG a 1 8\r\n12345678\r\n", max_payload=8)
    assert msg.data == b"12345678"


def test_control_line_exactly_max_is_accepted() -> None:
    line = b"-ERR '" + b"e" * 14 + b"'"
    assert len(line) == 21
    assert parse(line + b"\r\n", max_control_line=21) == [proto.Err("e" * 14)]


def test_subject_cache_does_not_mix_subjects() -> None:
    parser = proto.Parser()
    frames = b"".join(b"MSG s.%d 1 0\r\n\r\n" % (i % 5000) for i in range(5000 * 2))
    parser.receive_data(frames)
    events = parser.events()
    assert len(events) == 10000
    assert [m.subject for m in events if isinstance(m, Msg)] == [
        f"s.{i % 5000}" for i in range(10000)
    ]


# --- malformed input --------------------------------------------------------------------


BAD_INPUTS = [
    pytest.param(b"FOO bar\r\n", "unknown protocol operation", id="unknown-op"),
    pytest.param(b"\r\n", "unknown protocol operation", id="empty-line"),
    pytest.param(b"PING extra\r\n", "unknown protocol operation", id="ping-with-args"),
    pytest.param(b"MSG foo\r\n", "bad MSG line", id="msg-1-arg"),
    pytest.param(b"MSG foo 1\r\n", "bad MSG line", id="msg-2-args"),
    pytest.param(b"MSG foo 1 r x 5\r\n", "bad MSG line", id="msg-5-args"),
    pytest.param(b"MSG \r\n", "bad MSG line", id="msg-no-args"),
    pytest.param(b"MSG foo 1 five\r\nhello\r\n", "malformed protocol data", id="msg-size-nan"),
    pytest.param(b"MSG foo x 5\r\nhello\r\n", "malformed protocol data", id="msg-sid-nan"),
    pytest.param(b"MSG foo 1 -1\r\n\r\n", "out of range", id="msg-size-negative"),
    pytest.param(b"MSG foo 1 5\r\nhelloXX", "not followed by CRLF", id="msg-no-crlf"),
    pytest.param(b"MSG foo 1 3\r\nhello\r\n", "not followed by CRLF", id="msg-size-short"),
    pytest.param(b"msg foo 1 0\r\n\r\n", "unsupported message line form", id="msg-lowercase"),
    pytest.param(b"HMSG foo 1 5\r\n", "bad HMSG line", id="hmsg-3-args"),
    pytest.param(b"HMSG foo 1 r x 5 6\r\n", "bad HMSG line", id="hmsg-6-args"),
    pytest.param(b"HMSG foo 1 x 12\r\n", "malformed protocol data", id="hmsg-hsize-nan"),
    pytest.param(b"HMSG foo 1 12 x\r\n", "malformed protocol data", id="hmsg-size-nan"),
    pytest.param(b"HMSG foo 1 -1 12\r\n", "out of range", id="hmsg-hsize-negative"),
    pytest.param(b"HMSG foo 1 0 -1\r\n", "out of range", id="hmsg-size-negative"),
    pytest.param(b"HMSG foo 1 13 12\r\n", "out of range", id="hmsg-header-bigger-than-total"),
    pytest.param(
        b"HMSG foo 1 12 12\r\nNATS/1.0\r\n\r\nXY", "not followed by CRLF", id="hmsg-no-crlf"
    ),
    pytest.param(
        b"HMSG foo 1 12 14\r\nHTTP/1.1\r\n\r\nhi\r\n", "without NATS/1.0", id="hmsg-not-nats"
    ),
    pytest.param(b"HMSG foo 1 2 4\r\nNAhi\r\n", "without NATS/1.0", id="hmsg-header-too-short"),
    pytest.param(b"hmsg foo 1 0 0\r\n\r\n", "unsupported message line form", id="hmsg-lowercase"),
    pytest.param(b"INFO {not json}\r\n", "INFO is not valid JSON", id="info-not-json"),
    pytest.param(b"INFO\r\n", "INFO is not valid JSON", id="info-empty"),
    pytest.param(b"INFO [1, 2]\r\n", "INFO is not a JSON object", id="info-array"),
    pytest.param(b'INFO "x"\r\n', "INFO is not a JSON object", id="info-string"),
    pytest.param(b"INFO null\r\n", "INFO is not a JSON object", id="info-null"),
]


@pytest.mark.parametrize(("data", "needle"), BAD_INPUTS)
def test_malformed_input_raises_protocol_error(data: bytes, needle: str) -> None:
    parser = proto.Parser()
    parser.receive_data(data)
    with pytest.raises(ProtocolError, match=needle) as info:
        parser.events()
    assert isinstance(info.value, NATSError)


@pytest.mark.parametrize(("data", "needle"), BAD_INPUTS)
def test_parser_stays_broken(data: bytes, needle: str) -> None:
    parser = proto.Parser()
    parser.receive_data(data)
    with pytest.raises(ProtocolError, match=needle) as first:
        parser.next_event()
    # Every later call raises the same error again, even with good data offered.
    with pytest.raises(ProtocolError) as again:
        parser.events()
    assert again.value is first.value
    with pytest.raises(ProtocolError) as again:
        parser.next_event()
    assert again.value is first.value
    with pytest.raises(ProtocolError) as again:
        parser.receive_data(b"PING\r\n")
    assert again.value is first.value


def test_error_message_quotes_the_bad_line() -> None:
    with pytest.raises(ProtocolError, match=r"b'FOO bar'"):
        parse(b"FOO bar\r\n")
    with pytest.raises(ProtocolError, match=r"b'MSG foo'"):
        parse(b"MSG foo\r\n")


def test_bad_line_is_reported_truncated() -> None:
    with pytest.raises(ProtocolError) as info:
        parse(b"X" * 1000 + b"\r\n")
    assert len(str(info.value)) < 200


def test_non_numeric_size_chains_the_value_error() -> None:
    with pytest.raises(ProtocolError, match="five") as info:
        parse(b"MSG foo 1 five\r\nhello\r\n")
    assert isinstance(info.value.__cause__, ValueError)


def test_msg_size_over_max_payload_is_refused_before_the_payload_arrives() -> None:
    parser = proto.Parser(max_payload=1024)
    parser.receive_data(b"MSG foo 1 1025\r\n")
    with pytest.raises(ProtocolError, match="MSG payload size 1025 out of range"):
        parser.events()


def test_hmsg_size_over_limit_is_refused_before_the_payload_arrives() -> None:
    parser = proto.Parser(max_payload=1024)
    size = 1024 + 65536 + 1  # the HMSG limit leaves 64 KiB of room for headers
    parser.receive_data(b"HMSG foo 1 12 %d\r\n" % size)
    with pytest.raises(ProtocolError, match=f"HMSG sizes 12/{size} out of range"):
        parser.events()


def test_default_max_payload_bounds_inbound_size() -> None:
    size = proto.DEFAULT_MAX_INBOUND + 1
    with pytest.raises(ProtocolError, match="out of range"):
        parse(b"MSG foo 1 %d\r\n" % size)


def test_control_line_too_long_with_crlf() -> None:
    parser = proto.Parser(max_control_line=16)
    parser.receive_data(b"-ERR '" + b"x" * 20 + b"'\r\n")
    with pytest.raises(ProtocolError, match="control line longer than 16 bytes"):
        parser.events()
    with pytest.raises(ProtocolError, match="control line longer than 16 bytes"):
        parser.events()


def test_control_line_too_long_without_crlf_yet() -> None:
    parser = proto.Parser(max_control_line=16)
    parser.receive_data(b"INFO {")
    assert parser.events() == []
    parser.receive_data(b'"k":"' + b"v" * 20)
    # No CRLF seen, but the line can no longer fit: refused without waiting for more.
    with pytest.raises(ProtocolError, match="control line longer than 16 bytes"):
        parser.events()
    with pytest.raises(ProtocolError, match="control line longer than 16 bytes"):
        parser.receive_data(b'"}\r\n')


def test_default_control_line_limit() -> None:
    assert proto.MAX_CONTROL_LINE == 4096
    parser = proto.Parser()
    parser.receive_data(b"INFO " + b"x" * 5000)
    with pytest.raises(ProtocolError, match="control line longer than 4096 bytes"):
        parser.events()


def test_msg_control_line_too_long() -> None:
    parser = proto.Parser(max_control_line=20)
    parser.receive_data(b"MSG " + b"s" * 30 + b" 1 0\r\n\r\n")
    with pytest.raises(ProtocolError, match="control line longer than 20 bytes"):
        parser.events()


def test_control_line_of_max_length_split_between_cr_and_lf() -> None:
    line = b"-ERR '" + b"e" * 14 + b"'"
    assert len(line) == 21
    parser = proto.Parser(max_control_line=21)
    parser.receive_data(line + b"\r")
    assert parser.events() == []
    parser.receive_data(b"\n")
    assert parser.events() == [proto.Err("e" * 14)]


def test_lowered_limits_apply_to_repeated_msg_lines() -> None:
    parser = proto.Parser(max_payload=10)
    parser.receive_data(b"MSG a 1 8\r\n12345678\r\n")
    assert len(parser.events()) == 1
    parser.max_payload = 4
    parser.receive_data(b"MSG a 1 8\r\n12345678\r\n")
    with pytest.raises(ProtocolError, match="out of range"):
        parser.events()


def test_raised_max_payload_applies() -> None:
    parser = proto.Parser(max_payload=4)
    parser.max_payload = 10
    parser.receive_data(b"MSG a 1 8\r\n12345678\r\n")
    (msg,) = parser.events()
    assert isinstance(msg, Msg) and msg.data == b"12345678"


def test_repeated_msg_lines_carry_their_own_payloads() -> None:
    parser = proto.Parser()
    parser.receive_data(b"MSG a 1 3\r\none\r\nMSG a 1 3\r\ntwo\r\nMSG a 1 3\r\n")
    parser.receive_data(b"six\r\nMSG a 1 r 3\r\nsix\r\n")
    events = parser.events()
    assert [(m.data, m.reply) for m in events if isinstance(m, Msg)] == [
        (b"one", ""),
        (b"two", ""),
        (b"six", ""),
        (b"six", "r"),
    ]


def test_deliveries_with_replies_after_the_head_is_cached() -> None:
    # JetStream deliveries: same subject and sid, a new reply each time. From the second
    # sighting of the subject on, the "MSG <subject> <sid>" head is cached; the events must
    # be exactly what the full parse gives.
    frames = b"".join(
        b"MSG d.in 7 $JS.ACK.S.C.1.%d.%d.0.0 %d\r\n%s\r\n" % (i, i, i % 3, b"x" * (i % 3))
        for i in range(1, 6)
    )
    parser = proto.Parser()
    parser.receive_data(frames)
    events = parser.events()
    assert [(m.subject, m.sid, m.reply, m.data) for m in events if isinstance(m, Msg)] == [
        ("d.in", 7, f"$JS.ACK.S.C.1.{i}.{i}.0.0", b"x" * (i % 3)) for i in range(1, 6)
    ]
    assert parser._heads == {b"MSG d.in 7": ("d.in", 7)}


def test_cached_head_still_checks_size_and_line_length() -> None:
    parser = proto.Parser(max_payload=10, max_control_line=40)
    parser.receive_data(b"MSG a 1 r1 1\r\nx\r\nMSG a 1 r2 1\r\nx\r\n")
    assert len(parser.events()) == 2
    parser.receive_data(b"MSG a 1 r3 11\r\n")
    with pytest.raises(ProtocolError, match="out of range"):
        parser.events()
    parser = proto.Parser(max_control_line=40)
    parser.receive_data(b"MSG a 1 r1 1\r\nx\r\nMSG a 1 r2 1\r\nx\r\n")
    parser.receive_data(b"MSG a 1 %s 1\r\nx\r\n" % (b"r" * 40))
    with pytest.raises(ProtocolError, match="longer than 40"):
        parser.events()


@pytest.mark.parametrize(
    "odd",
    [b"MSG a  1 r2 1", b"MSG a 1 r2  1", b"MSG a 1 r2\t1", b"MSG\ta 1 r2 1"],
    ids=["double-space-head", "double-space-tail", "tab-tail", "tab-head"],
)
def test_only_canonical_lines_fill_the_head_cache(odd: bytes) -> None:
    # A line the server would never send (other whitespace) parses as before and caches
    # nothing, so a later line can never be read differently from the full parse.
    parser = proto.Parser()
    parser.receive_data(b"MSG a 1 r1 1\r\nx\r\n" + odd + b"\r\ny\r\n")
    events = parser.events()
    assert [(m.reply, m.data) for m in events if isinstance(m, Msg)] == [("r1", b"x"), ("r2", b"y")]
    assert parser._heads == {}


def test_error_after_good_frames_in_separate_chunks() -> None:
    parser = proto.Parser()
    parser.receive_data(b"PING\r\n")
    assert parser.events() == [proto.PING]
    parser.receive_data(b"BOGUS\r\n")
    with pytest.raises(ProtocolError, match="BOGUS"):
        parser.events()


# --- Msg and header block details --------------------------------------------------------


@pytest.mark.parametrize(
    ("block", "status", "description"),
    [
        (b"NATS/1.0\r\n\r\n", None, ""),
        (b"NATS/1.0 503\r\n\r\n", 503, ""),
        (b"NATS/1.0 404 No Messages\r\n\r\n", 404, "No Messages"),
        (b"NATS/1.0 408 Request Timeout\r\n\r\n", 408, "Request Timeout"),
        (b"NATS/1.0 409 Consumer Deleted\r\n\r\n", 409, "Consumer Deleted"),
        (b"NATS/1.0 100 Idle Heartbeat\r\nA: b\r\n\r\n", 100, "Idle Heartbeat"),
    ],
)
def test_status_and_description(block: bytes, status: Any, description: str) -> None:
    msg = Msg("s", "", b"", 1, block)
    assert msg.status == status
    assert msg.description == description
    assert parse_header_block(block)[:2] == (status, description)


def test_msg_without_header_block() -> None:
    msg = Msg("s", "r", b"d")
    assert msg.sid == 0
    assert msg.status is None
    assert msg.description == ""
    assert msg.headers is None  # nats-py's: no header block, no headers
    assert msg.header_bytes is None


def test_msg_respond_without_reply_or_client() -> None:
    with pytest.raises(InvalidArgumentError, match="no reply subject"):
        Msg("s", "", b"").respond(b"x")
    with pytest.raises(InvalidArgumentError, match="not bound to a client"):
        Msg("s", "r", b"").respond(b"x")


def test_msg_respond_publishes_to_reply() -> None:
    calls: List[Any] = []

    class FakeClient:  # respond() writes at once through the client's _send_now
        def _send_now(self, subject: str, data: bytes, headers: Any = None) -> None:
            calls.append((subject, data, headers))

    (msg,) = parse(b"MSG s 1 _INBOX.z 0\r\n\r\n", msg_owner=FakeClient())
    assert isinstance(msg, Msg)
    msg.respond(b"pong", headers={"a": "b"})
    assert calls == [("_INBOX.z", b"pong", {"a": "b"})]


@pytest.mark.parametrize(
    "block",
    [
        b"HTTP/1.1 200 OK\r\n\r\n",
        b"NATS/1.0 50\r\n\r\n",
        b"NATS/1.0 abc Nope\r\n\r\n",
        b"NATS/1.0\r\nno-colon-here\r\n\r\n",
        b"NATS/1.0\r\n: empty key\r\n\r\n",
        b"NATS/1.0\r\n key: leading space\r\n\r\n",
    ],
)
def test_parse_header_block_refuses_malformed(block: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_header_block(block)


def test_malformed_header_lines_surface_on_headers_access() -> None:
    # The parser only checks the NATS/1.0 prefix; the rest is parsed lazily.
    msg = only_msg(hmsg("s", 1, b"NATS/1.0\r\nbroken\r\n\r\n", b""))
    with pytest.raises(ProtocolError, match="malformed header line"):
        _ = msg.headers


# --- Headers ------------------------------------------------------------------------------


def test_headers_constructors() -> None:
    from_dict = Headers({"A": "1", "B": ["2", "3"]})
    from_pairs = Headers([("A", "1"), ("B", "2"), ("B", "3")])
    copied = Headers(from_dict)
    assert from_dict == from_pairs == copied
    assert copied.get_all("B") == ["2", "3"]
    assert from_dict == {"A": "1", "B": "2"}  # a plain mapping compares first values
    assert from_dict != Headers({"A": "1"})
    assert (from_dict == 5) is False
    assert repr(from_dict) == "{'A': '1', 'B': ['2', '3']}"  # printed as nats-py's dict


def test_headers_add_and_case_insensitive_lookup() -> None:
    h = Headers()
    h.add("Content-Type", "text/plain")
    h.add("content-type", "x")
    assert h["Content-Type"] == "text/plain"
    assert h["content-type"] == "x"  # exact key wins
    assert h["CONTENT-TYPE"] == "text/plain"  # first case-insensitive match
    assert "CONTENT-TYPE" in h
    assert len(h) == 2


def test_headers_are_unhashable() -> None:
    with pytest.raises(TypeError):
        hash(Headers())


# --- header encoding ----------------------------------------------------------------------


def test_encode_headers_exact_bytes() -> None:
    assert encode_headers({}) == b"NATS/1.0\r\n\r\n"
    assert encode_headers({"A": "1"}) == b"NATS/1.0\r\nA: 1\r\n\r\n"
    assert encode_headers({"A": ["1", "2"]}) == b"NATS/1.0\r\nA: 1\r\nA: 2\r\n\r\n"
    assert encode_headers({}, status="503") == b"NATS/1.0 503\r\n\r\n"
    assert encode_headers({"K": ""}) == b"NATS/1.0\r\nK: \r\n\r\n"


@pytest.mark.parametrize(
    "headers",
    [
        Headers([("X-A", "1"), ("x-a", "2"), ("X-A", "3"), ("Nats-Msg-Id", "abc")]),
        {"Single": "v", "Multi": ["a", "b", "c"], "Unicode": "h\u00e9llo \u65e5\u672c"},
        {"Empty-Value": "", "Colon": "a:b:c", "Spaces": "a  b"},
        {"Tuple": ("x", "y")},
    ],
)
def test_header_round_trip(headers: Any) -> None:
    block = encode_headers(headers)
    status, description, parsed = parse_header_block(block)
    assert (status, description) == (None, "")
    assert parsed == Headers(headers)
    expected = Headers(headers)
    for key in expected:
        assert parsed.get_all(key) == expected.get_all(key)


def test_header_round_trip_with_status() -> None:
    block = encode_headers({"A": "b"}, status="404 No Messages")
    assert parse_header_block(block) == (404, "No Messages", Headers({"A": "b"}))
    msg = Msg("s", "", b"", 1, block)
    assert (msg.status, msg.description, msg.headers["a"]) == (404, "No Messages", "b")


@pytest.mark.parametrize(
    ("headers", "needle"),
    [
        ({"": "v"}, "non-empty str"),
        ({"a:b": "v"}, "':' or whitespace"),
        ({"a b": "v"}, "':' or whitespace"),
        ({"a\tb": "v"}, "':' or whitespace"),
        ({"a\r\nb": "v"}, "':' or whitespace"),
        ({"k": "v\r\nInjected: x"}, "CR or LF"),
        ({"k": "v\rx"}, "CR or LF"),
        ({"k": "v\nx"}, "CR or LF"),
        ({"k": ["ok", "bad\n"]}, "CR or LF"),
        ({"k": [5]}, "must be str, got int"),
        ({"k": [b"bytes"]}, "must be str, got bytes"),
        ({"k": [None]}, "must be str, got NoneType"),
        ({"k": b"ab"}, "value must be a str or a list of str, got bytes"),
        ({1: "v"}, "non-empty str"),
        (Headers([("bad key", "v")]), "':' or whitespace"),
    ],
)
def test_encode_headers_refuses_bad_keys_and_values(headers: Any, needle: str) -> None:
    with pytest.raises(InvalidArgumentError, match=needle):
        encode_headers(headers)


@pytest.mark.parametrize("value", [5, None, 1.5])
def test_encode_headers_refuses_non_iterable_value(value: Any) -> None:
    with pytest.raises(InvalidArgumentError, match="value must be a str or a list of str"):
        encode_headers({"k": value})


def test_encode_headers_refuses_non_mapping() -> None:
    with pytest.raises(InvalidArgumentError, match="must be a mapping, got list"):
        encode_headers([("a", "b")])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "key", ["k\x0b", "k\x0c", "\x1ck", "k\u00a0", "caf\u00e9", "k\x00", "k\x7f", "\u65e5"]
)
def test_header_keys_the_parser_cannot_read_back_are_refused(key: str) -> None:
    # Keys are visible ASCII without ':' (an HTTP token): anything else, including
    # whitespace that str.strip() would eat on the receiving side, is refused up front.
    with pytest.raises(InvalidArgumentError, match="visible ASCII"):
        encode_headers({key: "v"})


@pytest.mark.parametrize("key", ["A", "Nats-Msg-Id", "x_y.z", "!#$%&'*+-.^_`|~", "k=v", '"k"'])
def test_visible_ascii_header_keys_round_trip(key: str) -> None:
    assert parse_header_block(encode_headers({key: "v"}))[2].get_all(key) == ["v"]


def test_header_values_are_trimmed_on_parse() -> None:
    # Documented NATS (and HTTP) behaviour: surrounding whitespace is not part of a value.
    block = encode_headers({"k": "  v v\t"})
    assert block == b"NATS/1.0\r\nk:   v v\t\r\n\r\n"
    assert parse_header_block(block)[2]["k"] == "v v"


# --- encoders -----------------------------------------------------------------------------


def test_frame_constants() -> None:
    assert proto.PING_FRAME == b"PING\r\n"
    assert proto.PONG_FRAME == b"PONG\r\n"


def test_pub_prefix_and_template() -> None:
    assert proto.pub_prefix("foo") == b"PUB foo "
    assert proto.pub_prefix("foo", "bar") == b"PUB foo bar "
    assert proto.pub_prefix("foo", "") == b"PUB foo "
    assert proto.pub_prefix("foo", None) == b"PUB foo "
    assert proto.PUB_TEMPLATE % (proto.pub_prefix("foo"), 5, b"hello") == (
        b"PUB foo 5\r\nhello\r\n"
    )


def test_encode_pub() -> None:
    assert proto.encode_pub("foo", b"hello") == b"PUB foo 5\r\nhello\r\n"
    assert proto.encode_pub("foo", b"", "_INBOX.x") == b"PUB foo _INBOX.x 0\r\n\r\n"
    assert proto.encode_pub("a.b", b"x\r\ny") == b"PUB a.b 4\r\nx\r\ny\r\n"
    assert proto.encode_pub("caf\u00e9", b"") == "PUB caf\u00e9 0\r\n\r\n".encode()


def test_hpub_prefix_and_template() -> None:
    assert proto.hpub_prefix("foo") == b"HPUB foo "
    assert proto.hpub_prefix("foo", "r") == b"HPUB foo r "
    header = b"NATS/1.0\r\n\r\n"
    assert proto.HPUB_TEMPLATE % (proto.hpub_prefix("foo"), 12, 14, header, b"hi") == (
        b"HPUB foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    )


def test_encode_hpub_sizes() -> None:
    header = encode_headers({"Bar": "Baz"})
    assert header == b"NATS/1.0\r\nBar: Baz\r\n\r\n"
    assert len(header) == 22
    assert proto.encode_hpub("foo", header, b"Hello NATS!") == (
        b"HPUB foo 22 33\r\nNATS/1.0\r\nBar: Baz\r\n\r\nHello NATS!\r\n"
    )
    assert proto.encode_hpub("foo", header, b"", "INBOX.1") == (
        b"HPUB foo INBOX.1 22 22\r\nNATS/1.0\r\nBar: Baz\r\n\r\n\r\n"
    )


def test_encode_hpub_frame_parses_back_as_hmsg() -> None:
    header = encode_headers({"A": ["1", "2"]}, status="")
    frame = proto.encode_hpub("x.y", header, b"\r\npayload\r\n", "r.1")
    assert frame.startswith(b"HPUB ")
    msg = only_msg(b"HMSG" + frame[4:].replace(b"x.y r.1", b"x.y 9 r.1", 1))
    assert (msg.subject, msg.reply, msg.sid) == ("x.y", "r.1", 9)
    assert msg.data == b"\r\npayload\r\n"
    assert msg.header_bytes == header
    assert msg.headers.get_all("A") == ["1", "2"]


def test_encoders_validate_subjects() -> None:
    for fn in (proto.pub_prefix, proto.hpub_prefix):
        with pytest.raises(BadSubjectError, match="subject 'a b'"):
            fn("a b")
        with pytest.raises(BadSubjectError, match=r"reply subject 'r\.\*'"):
            fn("a", "r.*")
        with pytest.raises(BadSubjectError, match="reply subject must be a str"):
            fn("a", 5)  # type: ignore[arg-type]
    with pytest.raises(BadSubjectError):
        proto.encode_pub("a.>", b"")
    with pytest.raises(BadSubjectError):
        proto.encode_hpub("", b"NATS/1.0\r\n\r\n", b"")


def test_encode_sub() -> None:
    assert proto.encode_sub("foo", 1) == b"SUB foo 1\r\n"
    assert proto.encode_sub("foo.*", 12, "workers") == b"SUB foo.* workers 12\r\n"
    assert proto.encode_sub("foo.>", 3, None) == b"SUB foo.> 3\r\n"
    assert proto.encode_sub("foo", 3, "") == b"SUB foo 3\r\n"


def test_encode_unsub() -> None:
    assert proto.encode_unsub(1) == b"UNSUB 1\r\n"
    assert proto.encode_unsub(7, 10) == b"UNSUB 7 10\r\n"
    assert proto.encode_unsub(7, 0) == b"UNSUB 7 0\r\n"


def test_encode_connect() -> None:
    frame = proto.encode_connect(
        {
            "verbose": False,
            "pedantic": False,
            "name": "svc",
            "user": None,
            "pass": None,
            "headers": True,
            "protocol": 1,
        }
    )
    assert frame == (
        b'CONNECT {"verbose":false,"pedantic":false,"name":"svc","headers":true,"protocol":1}\r\n'
    )
    assert frame.startswith(b"CONNECT {") and frame.endswith(b"}\r\n")
    assert b" " not in frame[len(b"CONNECT ") :]
    body = json.loads(frame[len(b"CONNECT ") : -2])
    assert "user" not in body and "pass" not in body


def test_encode_connect_empty_and_escaping() -> None:
    assert proto.encode_connect({}) == b"CONNECT {}\r\n"
    assert proto.encode_connect({"a": None}) == b"CONNECT {}\r\n"
    frame = proto.encode_connect({"name": "line\r\nbreak \u00e9"})
    assert b"\r\n" not in frame[:-2]  # JSON escapes CR/LF: the frame stays one line
    assert json.loads(frame[8:-2]) == {"name": "line\r\nbreak \u00e9"}


# --- validators ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subject", "needle"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("\t", "is empty"),
        ("a b", "contains whitespace"),
        ("a\tb", "contains whitespace"),
        ("a\nb", "contains whitespace"),
        ("a\rb", "contains whitespace"),
        ("a\r\nPUB x 1", "contains whitespace"),
        ("a\x0bb", "contains whitespace"),
        ("a\x0cb", "contains whitespace"),
        (" a", "contains whitespace"),
        ("a ", "contains whitespace"),
        ("a..b", "empty token"),
        (".a", "empty token"),
        ("a.", "empty token"),
        (".", "empty token"),
        ("a.*", "wildcard"),
        ("a.>", "wildcard"),
        ("*", "wildcard"),
        (">", "wildcard"),
        ("*.a", "wildcard"),
        ("a.*.b", "wildcard"),
    ],
)
def test_bad_publish_subject(subject: str, needle: str) -> None:
    with pytest.raises(BadSubjectError, match=needle) as info:
        proto.check_publish_subject(subject)
    assert isinstance(info.value, InvalidArgumentError)
    assert isinstance(info.value, ValueError)
    if subject.strip():
        assert repr(subject) in str(info.value)  # the message names the subject


def test_publish_subject_what_is_used_in_message() -> None:
    with pytest.raises(BadSubjectError, match=r"^reply subject 'a b' contains whitespace$"):
        proto.check_publish_subject("a b", "reply subject")


@pytest.mark.parametrize(
    "subject",
    ["a", "a.b.c", "_INBOX.abc123", "a*", "a>", "*a.b>", "foo-bar.baz_1", "caf\u00e9", "A" * 2048],
)
def test_good_publish_subject(subject: str) -> None:
    assert proto.check_publish_subject(subject) is subject


def test_subject_length_limit() -> None:
    with pytest.raises(BadSubjectError, match="longer than 2048"):
        proto.check_publish_subject("a" * 2049)
    with pytest.raises(BadSubjectError, match="longer than 2048"):
        proto.check_subscribe_subject("a" * 2049)


@pytest.mark.parametrize("value", [None, b"foo", 5, 1.5, ["a"], object()])
def test_non_str_subject_refused(value: Any) -> None:
    name = type(value).__name__
    with pytest.raises(BadSubjectError, match=f"subject must be a str, got {name}"):
        proto.check_publish_subject(value)
    with pytest.raises(BadSubjectError, match=f"subject must be a str, got {name}"):
        proto.check_subscribe_subject(value)
    with pytest.raises(BadSubjectError, match=f"queue name must be a str, got {name}"):
        proto.check_queue(value)


@pytest.mark.parametrize("subject", ["a.*", "a.>", "*", ">", "*.*", "a.*.b", "a.*.>", "foo"])
def test_good_subscribe_subject(subject: str) -> None:
    assert proto.check_subscribe_subject(subject) is subject


@pytest.mark.parametrize(
    ("subject", "needle"),
    [
        ("a.>.b", "'>' must be the last token"),
        (">.a", "'>' must be the last token"),
        ("a..b", "empty token"),
        ("a.", "empty token"),
        (".a", "empty token"),
        ("", "is empty"),
        ("a b", "contains whitespace"),
        ("a.*\n", "contains whitespace"),
    ],
)
def test_bad_subscribe_subject(subject: str, needle: str) -> None:
    with pytest.raises(BadSubjectError, match=needle):
        proto.check_subscribe_subject(subject)


@pytest.mark.parametrize("queue", ["workers", "q.1", "a-b_c"])
def test_good_queue(queue: str) -> None:
    assert proto.check_queue(queue) is queue


@pytest.mark.parametrize(
    ("queue", "needle"),
    [
        ("", "queue name is empty"),
        (" ", "queue name is empty"),
        ("my queue", "queue name 'my queue' contains whitespace"),
        ("q\t", "contains whitespace"),
        ("q\r\nUNSUB 1", "contains whitespace"),
    ],
)
def test_bad_queue(queue: str, needle: str) -> None:
    with pytest.raises(BadSubjectError, match=needle):
        proto.check_queue(queue)


def test_a_status_message_shows_its_status_line_in_headers_as_nats_py_does() -> None:
    # nats-py: a raw pull's 404 has headers {'Status': '404', 'Description': 'No Messages'}
    msg = only_msg(hmsg("s", 1, b"NATS/1.0 404 No Messages\r\n\r\n", b""))
    assert dict(msg.headers) == {"Status": "404", "Description": "No Messages"}
    assert (msg.status, msg.description) == (404, "No Messages")
    beat = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 7\r\n\r\n"
    msg = only_msg(hmsg("s", 1, beat, b""))
    assert list(msg.headers.items()) == [
        ("Status", "100"),
        ("Description", "Idle Heartbeat"),
        ("Nats-Last-Consumer", "7"),
    ]
    assert dict(msg.headers) == dict(msg.headers)  # parsed once, the same on every access
    bare = only_msg(hmsg("s", 1, b"NATS/1.0 503\r\n\r\n", b""))
    assert dict(bare.headers) == {"Status": "503"}


def test_a_header_line_whose_name_is_not_ascii_is_dropped_as_nats_py_does() -> None:
    block = "NATS/1.0\r\nA: 1\r\nNäme: x\r\nB: 2\r\n\r\n".encode()
    msg = only_msg(hmsg("s", 1, block, b""))
    assert dict(msg.headers) == {"A": "1", "B": "2"}
