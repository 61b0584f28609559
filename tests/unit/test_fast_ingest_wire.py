"""Fast ingest (ADR-50) with bytes alone: the reply subjects we build, the server's flow
messages and final PubAcks as we read them, the argument checks, the err_code mapping."""

from __future__ import annotations

from typing import Callable, List

import pytest

import jetstream_sync as nats
from jetstream_sync import errors
from jetstream_sync.jetstream import api
from jetstream_sync.jetstream._fast_wire import (
    OP_APPEND,
    OP_COMMIT,
    OP_COMMIT_EOB,
    OP_PING,
    OP_START,
    FlowAck,
    FlowErr,
    FlowGap,
    check_flow,
    check_max_outstanding,
    parse_reply,
    reply_head,
    reply_subject,
)


def test_reply_subjects_carry_flow_gap_sequence_and_operation() -> None:
    head = reply_head("_INBOX.abc123", 100, "fail")
    assert head == "_INBOX.abc123.100.fail."
    assert reply_subject(head, 1, OP_START) == "_INBOX.abc123.100.fail.1.0.$FI"
    assert reply_subject(head, 2, OP_APPEND) == "_INBOX.abc123.100.fail.2.1.$FI"
    assert reply_subject(head, 9, OP_COMMIT) == "_INBOX.abc123.100.fail.9.2.$FI"
    assert reply_subject(head, 10, OP_COMMIT_EOB) == "_INBOX.abc123.100.fail.10.3.$FI"
    assert reply_subject(head, 9, OP_PING) == "_INBOX.abc123.100.fail.9.4.$FI"
    # The server reads it from the right: a prefix with dots keeps the batch id the last
    # token before the flow (nats-server's getFastBatch).
    subject = reply_subject(reply_head("my.inbox.prefix.ID", 7, "ok"), 3, OP_APPEND)
    tokens = subject.split(".")
    assert tokens[-7:] == ["prefix", "ID", "7", "ok", "3", "1", "$FI"]


def test_a_flow_ack_as_the_server_writes_it() -> None:
    assert parse_reply(b'{"type":"ack","seq":0,"msgs":100}') == FlowAck(0, 100)
    assert parse_reply(b'{"type":"ack","seq":1200,"msgs":25}') == FlowAck(1200, 25)


def test_a_flow_ack_in_another_shape_goes_through_json() -> None:
    assert parse_reply(b'{"msgs": 4, "seq": 8, "type": "ack"}') == FlowAck(8, 4)


def test_a_gap() -> None:
    assert parse_reply(b'{"type":"gap","last_seq":10,"seq":15}') == FlowGap(10, 15)


def test_a_refused_message_carries_the_mapped_api_error() -> None:
    reply = parse_reply(
        b'{"type":"err","seq":10,"error":{"code":400,"err_code":10071,'
        b'"description":"wrong last sequence: 1"}}'
    )
    assert isinstance(reply, FlowErr) and reply.seq == 10
    assert isinstance(reply.error, nats.StreamWrongLastSequenceError)
    assert reply.error.description == "wrong last sequence: 1"


def test_the_final_pub_ack_names_the_batch_and_its_size() -> None:
    ack = parse_reply(b'{"stream":"FI","seq":1001,"batch":"b1","count":1001}')
    assert isinstance(ack, api.PubAck)
    assert (ack.stream, ack.seq, ack.batch_id, ack.batch_size) == ("FI", 1001, "b1", 1001)


def test_a_refusal_of_the_batch_says_what_to_do() -> None:
    refusal = parse_reply(
        b'{"error":{"code":400,"err_code":10205,"description":"batch publish is disabled"},'
        b'"stream":"NOFI","seq":0}'
    )
    assert isinstance(refusal, nats.FastIngestNotEnabledError)
    assert refusal.err_code == 10205 and refusal.code == 400
    assert "allow_batched=True" in str(refusal) and "'NOFI'" in str(refusal)
    unknown = parse_reply(
        b'{"error":{"code":400,"err_code":10208,"description":"batch publish ID unknown"},'
        b'"stream":"FI","seq":0}'
    )
    assert isinstance(unknown, nats.FastIngestUnknownBatchError)
    assert "10 s" in str(unknown)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"type":"ack","seq":-1,"msgs":1}',
        b'{"type":"ack","msgs":1}',
        b'{"type":"gap","last_seq":"3","seq":4}',
        b'{"type":"err","seq":3,"error":"bad"}',
        b'{"type":"nope","seq":1}',
        b'{"seq":1}',
    ],
)
def test_anything_else_is_a_jetstream_error(data: bytes) -> None:
    with pytest.raises(errors.JetStreamError) as caught:
        parse_reply(data)
    assert "fast-ingest batch" in str(caught.value)


@pytest.mark.parametrize(
    ("err_code", "cls"),
    [
        (10205, nats.FastIngestNotEnabledError),
        (10206, nats.FastIngestInvalidPatternError),
        (10207, nats.FastIngestInvalidBatchIdError),
        (10208, nats.FastIngestUnknownBatchError),
        (10211, nats.FastIngestTooManyInflightError),
    ],
)
def test_the_fast_ingest_err_codes_map_to_their_classes(err_code: int, cls: type) -> None:
    code = 429 if err_code == 10211 else 400
    err = errors.api_error(code, err_code, "x")
    assert type(err) is cls
    assert isinstance(err, errors.FastIngestPublishError) and isinstance(err, errors.APIError)
    assert isinstance(err, errors.FastIngestError)
    if code == 400:
        assert isinstance(err, errors.BadRequestError)


@pytest.mark.parametrize("flow", [0, -1, 65536, True, 1.5, "100", None])
def test_flow_must_be_an_int_from_1_to_65535(flow: object) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="flow"):
        check_flow(flow)


def test_flow_bounds_are_allowed() -> None:
    assert check_flow(1) == 1 and check_flow(65535) == 65535


@pytest.mark.parametrize("value", [0, 4, True, 2.0, None])
def test_max_outstanding_acks_is_1_2_or_3(value: object) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="max_outstanding_acks"):
        check_max_outstanding(value)
    assert [check_max_outstanding(v) for v in (1, 2, 3)] == [1, 2, 3]


def test_the_stop_errors_keep_what_they_are_about() -> None:
    gap = errors.FastIngestGapError("lost", "B", 6, 9)
    assert (gap.batch_id, gap.last_seq, gap.batch_seq, gap.pub_ack) == ("B", 6, 9, None)
    refused = errors.FastIngestMessageError(
        "refused", "B", 4, errors.api_error(400, 10071, "wrong last sequence: 3")
    )
    assert isinstance(refused.error, nats.StreamWrongLastSequenceError)
    assert isinstance(gap, nats.FastIngestError) and isinstance(refused, nats.JetStreamError)


class _Timers:
    def __init__(self) -> None:
        self.later: List[Callable[[], None]] = []

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        self.later.append(fn)


def test_queue_own_reply_queues_the_frame_and_wakes_the_flusher_late() -> None:
    """The seam's queue_own_reply (fast ingest's per-message publish): the same frame as
    publish_own_reply, queued; the flusher is woken only by the linger timer (if nobody
    wrote meanwhile) or once 256 frames wait, not per frame."""
    from jetstream_sync._link import Link
    from jetstream_sync._outbox import _ACK_BATCH, Outbox

    outbox = Outbox(Link(), lambda err: None)
    outbox.pub_fast = True
    timers = _Timers()
    outbox.timers = timers  # type: ignore[assignment]
    outbox.queue_own_reply("fi.a", b"data", "_INBOX.x.100.fail.2.1.$FI", None)
    assert list(outbox.out) == [b"PUB fi.a _INBOX.x.100.fail.2.1.$FI 4\r\ndata\r\n"]
    assert not outbox.kicked and len(timers.later) == 1
    outbox.queue_own_reply("fi.a", b"data", "_INBOX.x.100.fail.3.1.$FI", {"K": "v"})
    assert list(outbox.out)[1].startswith(b"HPUB fi.a _INBOX.x.100.fail.3.1.$FI ")
    assert not outbox.kicked and len(timers.later) == 1  # one linger for the lot
    timers.later.pop()()  # nobody wrote them meanwhile: now the flusher
    assert outbox.kicked
    outbox.kicked = False
    for i in range(_ACK_BATCH):
        outbox.queue_own_reply("fi.a", b"d", f"r.{i}", None)
    assert outbox.kicked and len(outbox.out) == _ACK_BATCH + 2
