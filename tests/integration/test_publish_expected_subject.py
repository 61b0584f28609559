"""``expected_last_subject_seq_subject`` (Nats-Expected-Last-Subject-Sequence-Subject): the
server checks ``expected_last_subject_seq`` against the last message on that subject (or
wildcard) instead of the published subject's."""

from __future__ import annotations

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream


def test_publish_checks_the_named_subject(js: JetStream, stream: str) -> None:
    s = stream.lower()
    js.publish(f"{s}.a", b"1")  # seq 1
    js.publish(f"{s}.b", b"2")  # seq 2
    # c has no message; the check is against a's last (1), then b's via a wildcard.
    ack = js.publish(
        f"{s}.c", b"3", expected_last_subject_seq=1, expected_last_subject_seq_subject=f"{s}.a"
    )
    assert ack.seq == 3
    with pytest.raises(nats.StreamWrongLastSequenceError) as caught:
        js.publish(
            f"{s}.c", expected_last_subject_seq=2, expected_last_subject_seq_subject=f"{s}.a"
        )
    assert "wrong last sequence: 1" in str(caught.value)
    fut = js.publish_async(
        f"{s}.c", b"4", expected_last_subject_seq=3, expected_last_subject_seq_subject=f"{s}.*"
    )
    assert fut.result(5).seq == 4
    fut = js.publish_async(
        f"{s}.c", expected_last_subject_seq=1, expected_last_subject_seq_subject=f"{s}.a.>"
    )
    with pytest.raises(nats.StreamWrongLastSequenceError):  # nothing under a.>: 0, not 1
        fut.result(5)
    assert js.stream_info(stream).state.messages == 4


def test_the_subject_alone_is_refused_before_sending(js: JetStream, stream: str) -> None:
    s = stream.lower()
    for call in (js.publish, js.publish_async):
        with pytest.raises(nats.InvalidArgumentError, match="give expected_last_subject_seq"):
            call(f"{s}.c", expected_last_subject_seq_subject=f"{s}.a")
        with pytest.raises(nats.BadSubjectError):
            call(f"{s}.c", expected_last_subject_seq=0, expected_last_subject_seq_subject="a..b")
    assert js.stream_info(stream).state.messages == 0
