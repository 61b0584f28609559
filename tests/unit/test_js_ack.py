"""$JS.ACK metadata parsing (v1 and v2 forms) and ack payloads."""

from __future__ import annotations

import datetime as dt

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream.ack import nak_payload, parse_metadata, term_payload
from jetstream_sync.msg import Msg

TS = 1_700_000_000_123_456_789  # ns


def test_v1_nine_tokens() -> None:
    md = parse_metadata(f"$JS.ACK.ORDERS.worker.3.120.45.{TS}.7")
    assert (md.stream, md.consumer, md.num_delivered) == ("ORDERS", "worker", 3)
    assert (md.sequence.stream, md.sequence.consumer, md.num_pending) == (120, 45, 7)
    assert md.domain is None
    assert md.timestamp == dt.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=dt.timezone.utc)
    assert md.timestamp.nanosecond == 789  # type: ignore[attr-defined]


def test_v2_eleven_tokens_domain_and_underscore() -> None:
    md = parse_metadata(f"$JS.ACK.hub.ACCHASH.ORDERS.worker.1.2.3.{TS}.0")
    assert (md.domain, md.stream, md.consumer) == ("hub", "ORDERS", "worker")
    assert (md.sequence.stream, md.sequence.consumer) == (2, 3)
    assert parse_metadata(f"$JS.ACK._.ACCHASH.S.C.1.2.3.{TS}.0").domain is None


def test_v2_extra_trailing_tokens_tolerated() -> None:
    md = parse_metadata(f"$JS.ACK._.ACCHASH.S.C.1.2.3.{TS}.0.rand0m.future.more")
    assert (md.stream, md.consumer, md.sequence.stream) == ("S", "C", 2)


@pytest.mark.parametrize(
    "reply",
    [
        "",
        "_INBOX.abc",
        "$JS.ACK.S.C.1.2.3.4",  # 8 tokens
        f"$JS.ACK._.H.S.C.1.2.3.{TS}",  # 10 tokens
        "$JS.ACK.S.C.x.2.3.4.5",  # not a number
        "$JS.ACK.S.C.1.-2.3.4.5",  # negative
        "$JS.NAK.S.C.1.2.3.4.5",
    ],
)
def test_not_a_js_message(reply: str) -> None:
    with pytest.raises(errors.NotJSMessageError, match="not a JetStream message"):
        parse_metadata(reply)


def test_msg_methods_refuse_non_js_messages() -> None:
    msg = Msg("s", "_INBOX.x", b"")
    with pytest.raises(errors.NotJSMessageError):
        msg.metadata  # noqa: B018
    with pytest.raises(errors.NotJSMessageError):
        msg.ack()


def test_payloads() -> None:
    assert nak_payload(None) == b"-NAK"
    assert nak_payload(1.5) == b'-NAK {"delay": 1500000000}'
    assert term_payload(None) == b"+TERM"
    assert term_payload("bad data") == b"+TERM bad data"
    with pytest.raises(errors.BadTimeoutError):
        nak_payload(-1)
    with pytest.raises(errors.InvalidArgumentError):
        term_payload("a\r\nPUB x 1")


def test_ack_state_literals_in_msg_match_ack_module() -> None:
    """Msg.ack inlines send_ack with the state numbers written out: keep them in step."""
    from jetstream_sync.jetstream import ack

    assert (ack.ACK_OPEN, ack.ACK_DONE) == (0, 1) and ack.ACK == b"+ACK"


def test_sequences_agree_with_parse_metadata() -> None:
    from jetstream_sync.jetstream.ack import parse_metadata, sequences

    for reply in (
        "$JS.ACK.S.C.1.22.33.1700000000000000000.0",
        "$JS.ACK.hub.ACCHASH.S.C.2.44.55.1700000000000000000.7.rnd",
        "$JS.ACK._.ACCHASH.S.C.2.44.55.1700000000000000000.7",
    ):
        md = parse_metadata(reply)
        assert sequences(reply) == (md.sequence.consumer, md.sequence.stream)
    for bad in ("", "_INBOX.x", "$JS.ACK.S.C.1.x.3.4.5", "$JS.NOPE.S.C.1.2.3.4.5"):
        assert sequences(bad) is None


def test_natspy_msg_of_a_client_alone() -> None:
    # nats-py's Msg(nc): its client first, the fields set afterwards (test_ack_v2_tokens).
    client = object()
    msg = Msg(client)  # type: ignore[arg-type]
    assert (msg.subject, msg.reply, msg.data, msg._client) == ("", "", b"", client)
    msg.reply = "$JS.ACK.dom.acc.S.C.1.2.3.1662856107340506000.20"
    assert (msg.metadata.domain, msg.metadata.stream, msg.metadata.num_pending) == ("dom", "S", 20)
    assert Msg().data == b"" and Msg("a", data=b"x").data == b"x"


def test_a_second_terminal_ack_is_msg_already_ackd() -> None:
    # nats-py and nats.go raise it; +WPI afterwards is ignored.
    sent = []

    class Client:
        def _publish_trusted(self, subject: str, payload: bytes) -> None:
            sent.append(payload)

    for first in ("ack", "nak", "term"):
        msg = Msg("s", "$JS.ACK.S.C.1.2.3.4.5", b"", client=Client())  # type: ignore[arg-type]
        getattr(msg, first)()
        for again in ("ack", "nak", "term", "ack_sync"):
            with pytest.raises(errors.MsgAlreadyAckdError):
                getattr(msg, again)()
        msg.in_progress()
    assert sent == [b"+ACK", b"-NAK", b"+TERM"]
