"""The atomic batch's wire format and its refusals, with bytes alone: a recording stand-in
for the client, no server."""

from __future__ import annotations

import json
from typing import Any, List, Optional, Tuple

import pytest

import jetstream_sync as nats
from jetstream_sync import errors
from jetstream_sync.jetstream.batch import BATCH_COMMIT, BATCH_ID, BATCH_SEQUENCE, AtomicBatch
from jetstream_sync.jetstream.publish import (
    EXPECTED_LAST_SUBJECT_SEQ,
    EXPECTED_LAST_SUBJECT_SEQ_SUBJECT,
    publish_headers,
)
from jetstream_sync.msg import Msg

Sent = Tuple[str, str, bytes, Any]  # ("pub" or "req", subject, data, headers)


class Wire:
    """Records what a batch sends; requests are answered from ``answers`` (b"" by default)."""

    def __init__(self, *answers: Any) -> None:
        self.sent: List[Sent] = []
        self.answers = list(answers)

    def publish(self, subject: str, data: bytes = b"", headers: Any = None) -> None:
        self.sent.append(("pub", subject, data, headers))

    def request(self, subject: str, data: bytes = b"", timeout: float = 1.0, headers: Any = None):
        self.sent.append(("req", subject, data, headers))
        answer = self.answers.pop(0) if self.answers else b""
        if isinstance(answer, BaseException):
            raise answer
        return Msg(subject="_INBOX.x", data=answer)

    def batch_headers(self) -> List[Tuple[str, str, Optional[str]]]:
        return [(kind, h[BATCH_SEQUENCE], h.get(BATCH_COMMIT)) for kind, _, _, h in self.sent if h]


class Levels:
    def __init__(self, level: int = 4) -> None:
        self._level = level

    def require(self, feature: Tuple[str, int]) -> None:
        if self._level < feature[1]:
            raise errors.ApiLevelError(412, 10185, f"{feature[0]} needs level {feature[1]}")


def new_batch(wire: Wire, ack_every: Optional[int] = None, ack_first: bool = True) -> AtomicBatch:
    return AtomicBatch(wire, Levels(), 1.0, ack_every, ack_first)  # type: ignore[arg-type]


def ack(batch: AtomicBatch, count: int, seq: int = 9) -> bytes:
    return json.dumps({"stream": "S", "seq": seq, "batch": batch.id, "count": count}).encode()


def refusal(code: int, err_code: int, description: str = "no") -> bytes:
    error = {"code": code, "err_code": err_code, "description": description}
    return json.dumps({"error": error, "stream": "ORDERS", "seq": 0}).encode()


def test_the_headers_of_a_batch() -> None:
    wire = Wire()
    batch = new_batch(wire, ack_every=2)
    for _ in range(4):
        batch.add("a.b", b"x", headers={"K": "v"})
    wire.answers.append(ack(batch, 5))
    assert batch.commit("a.c").batch_size == 5
    assert wire.batch_headers() == [
        ("req", "1", None),  # ack_first
        ("req", "2", None),  # every 2nd
        ("pub", "3", None),
        ("req", "4", None),
        ("req", "5", "1"),  # the commit
    ]
    assert {h[BATCH_ID] for _, _, _, h in wire.sent} == {batch.id}
    assert wire.sent[0][3]["K"] == "v"


def test_the_end_of_batch_commit_goes_to_the_first_subject() -> None:
    wire = Wire()
    batch = new_batch(wire, ack_first=False)
    batch.add("first.one", b"1")
    batch.add("second.one", b"2")
    wire.answers.append(ack(batch, 2))
    assert batch.commit().batch_size == 2  # the eob message is not counted
    assert batch.size == 2
    kind, subject, data, headers = wire.sent[-1]
    assert (kind, subject, data) == ("req", "first.one", b"")
    assert (headers[BATCH_SEQUENCE], headers[BATCH_COMMIT]) == ("3", "eob")


def test_abandoning_sends_a_gap_to_the_first_subject() -> None:
    wire = Wire()
    batch = new_batch(wire)
    batch.add("first.one")
    batch.add("second.one")
    batch.discard()
    kind, subject, data, headers = wire.sent[-1]
    assert (kind, subject, data) == ("pub", "first.one", b"")
    assert dict(headers) == {BATCH_ID: batch.id, BATCH_SEQUENCE: "4"}  # 3 skipped
    sent = len(wire.sent)
    batch.discard()
    assert len(wire.sent) == sent  # once


def test_a_request_that_may_have_gone_out_is_counted_in_the_gap() -> None:
    wire = Wire(b"", errors.TimeoutError("late"))
    batch = new_batch(wire, ack_every=2)
    batch.add("a.b")
    with pytest.raises(errors.TimeoutError, match=r"message 2 of atomic batch .* abandoned"):
        batch.add("a.b")  # it went out: the server may have staged it
    assert wire.sent[-1][3][BATCH_SEQUENCE] == "4"


def test_nothing_sent_nothing_abandoned() -> None:
    wire = Wire()
    with new_batch(wire) as batch:
        pass
    batch.discard()
    assert wire.sent == []


def test_a_refusal_is_raised_as_its_class_with_advice() -> None:
    wire = Wire(refusal(400, 10174, "atomic publish is disabled"))
    batch = new_batch(wire)
    with pytest.raises(nats.BatchNotEnabledError) as caught:
        batch.add("a.b")
    err = caught.value
    assert isinstance(err, nats.BadRequestError) and isinstance(err, nats.BatchError)
    assert err.description == "atomic publish is disabled"  # the server's words, kept
    assert str(err).startswith(f"atomic batch {batch.id} (message 1's answer)")
    assert "stream 'ORDERS' does not allow atomic batches: set allow_atomic=True" in str(err)
    assert "(the server: atomic publish is disabled) [code=400 err_code=10174] (a.b)" in str(err)
    assert batch.closed and wire.sent[-1][3][BATCH_SEQUENCE] == "3"  # abandoned anyway


@pytest.mark.parametrize(
    "err_code, cls, words",
    [
        (10176, nats.BatchIncompleteError, "a message of it is missing"),
        (10175, nats.BatchSequenceMissingError, "no Nats-Batch-Sequence"),
        (10177, nats.BatchUnsupportedHeaderError, "Nats-Expected-Last-Msg-Id cannot"),
        (10179, nats.BatchIdInvalidError, "64 characters"),
        (10199, nats.BatchTooLargeError, "split it"),
        (10200, nats.BatchCommitInvalidError, "1 or eob"),
        (10201, nats.BatchDuplicateMsgIdError, "stream 'ORDERS' has within its duplicate"),
        (10071, nats.StreamWrongLastSequenceError, "nothing of it is stored (the server: no)"),
    ],
)
def test_commit_refusals(err_code: int, cls: type, words: str) -> None:
    wire = Wire()
    batch = new_batch(wire)
    batch.add("a.b")
    wire.answers.append(refusal(400, err_code))
    with pytest.raises(cls, match="message 2's answer") as caught:
        batch.commit("a.b")
    assert words in str(caught.value) and caught.value.err_code == err_code
    assert batch.closed and batch.ack is None


def test_the_inflight_limit_is_a_429_not_a_bad_request() -> None:
    err = errors.api_error(429, 10210, "atomic publish too many inflight")
    assert isinstance(err, nats.BatchTooManyInflightError)
    assert isinstance(err, nats.BatchPublishError) and not isinstance(err, nats.BadRequestError)


def test_an_ack_of_another_batch_is_an_error() -> None:
    wire = Wire(b"", json.dumps({"stream": "S", "seq": 1, "batch": "other", "count": 1}).encode())
    batch = new_batch(wire)
    batch.add("a.b")
    with pytest.raises(nats.JetStreamError, match="as batch 'other' of 1 messages"):
        batch.commit("a.b")


def test_an_answer_that_is_no_ack() -> None:
    wire = Wire(b"?")
    with pytest.raises(nats.JetStreamError, match="no ack the server sends"):
        new_batch(wire).add("a.b")


def test_eob_needs_api_level_4() -> None:
    wire = Wire()
    batch = AtomicBatch(wire, Levels(3), 1.0, None, True)  # type: ignore[arg-type]
    batch.add("a.b")
    with pytest.raises(nats.ApiLevelError):
        batch.commit()
    assert not batch.closed and len(wire.sent) == 1


def test_publish_headers_with_the_subject_of_the_expected_sequence() -> None:
    hdrs = publish_headers(
        {"A": "1"}, expected_last_subject_seq=0, expected_last_subject_seq_subject="x.*"
    )
    assert hdrs is not None
    assert (
        hdrs["A"],
        hdrs[EXPECTED_LAST_SUBJECT_SEQ],
        hdrs[EXPECTED_LAST_SUBJECT_SEQ_SUBJECT],
    ) == (
        "1",
        "0",
        "x.*",
    )
    with pytest.raises(errors.InvalidArgumentError, match="give expected_last_subject_seq"):
        publish_headers(None, expected_last_subject_seq_subject="x")
    with pytest.raises(errors.BadSubjectError):
        publish_headers(None, expected_last_subject_seq=1, expected_last_subject_seq_subject="")
