"""Fast-ingest batches (ADR-50, ``js.fast_publisher()``) against a real nats-server: what
is stored, the commits, the flow the server sets, gaps and refused messages in both gap
modes, lost acks recovered by pings, and the refusals."""

from __future__ import annotations

import threading
from typing import Any, Iterator, List

import pytest
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.testing import drop_inbound, stream_name, wait_until


@pytest.fixture
def batched(js: JetStream) -> Iterator[str]:
    """A stream taking fast-ingest batches on ``<name>.>`` (lower case), deleted after."""
    name = stream_name("FI")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_batched=True, allow_direct=True)
    try:
        yield name
    finally:
        js.delete_stream(name)


def stored(js: JetStream, stream: str) -> List[bytes]:
    """Every message of ``stream``, in stream order (batched direct get)."""
    out: List[bytes] = []
    total = js.stream_info(stream).state.messages
    while len(out) < total:
        out += [m.data for m in js.get_msgs(stream, seq=len(out) + 1, batch=1000)]
    return out


def test_ten_thousand_messages_are_stored_in_order(js: JetStream, batched: str) -> None:
    subject = f"{batched.lower()}.a"
    with js.fast_publisher() as pub:
        for i in range(10_000):
            fa = pub.add(subject, b"%d" % i)
            assert fa.batch_seq == i + 1
            # Never more than flow x max_outstanding_acks messages unacked.
            assert fa.batch_seq - fa.ack_seq <= pub.flow * 2
        ack = pub.commit()
    assert (ack.stream, ack.batch_id, ack.batch_size) == (batched, pub.batch_id, 10_000)
    assert ack.seq == 10_000  # the last message's stream sequence
    assert stored(js, batched) == [b"%d" % i for i in range(10_000)]
    assert pub.errors == [] and pub.ack is ack


def test_a_commit_with_a_message_stores_it_last(js: JetStream, batched: str) -> None:
    subject = f"{batched.lower()}.a"
    with js.fast_publisher(flow=10) as pub:
        for _ in range(25):
            pub.add(subject, b"m")
        ack = pub.commit(subject, b"the end", headers={"X-Last": "1"})
    assert ack.batch_size == 26 and ack.seq == 26
    last = js.get_msg(batched, seq=26)
    assert last.data == b"the end" and last.headers is not None
    assert last.headers.get("X-Last") == "1"


def test_an_eob_commit_stores_nothing_more(js: JetStream, batched: str) -> None:
    subject = f"{batched.lower()}.a"
    pub = js.fast_publisher()
    for _ in range(5):
        pub.add(subject, b"m")
    ack = pub.commit()
    assert ack.batch_size == 5 and js.stream_info(batched).state.messages == 5
    with pytest.raises(nats.FastIngestClosedError, match="committed"):
        pub.add(subject, b"late")
    with pytest.raises(nats.FastIngestClosedError, match="committed"):
        pub.commit()


def test_leaving_the_block_without_commit_commits(js: JetStream, batched: str) -> None:
    with js.fast_publisher() as pub:
        pub.add(f"{batched.lower()}.a", b"1")
        pub.add(f"{batched.lower()}.b", b"2")
    assert pub.ack is not None and pub.ack.batch_size == 2


def test_a_batch_of_one_committed_at_once(js: JetStream, batched: str) -> None:
    with js.fast_publisher() as pub:
        ack = pub.commit(f"{batched.lower()}.a", b"alone")
    assert ack.batch_size == 1 and js.get_msg(batched, seq=1).data == b"alone"


def test_an_exception_in_the_block_stops_without_commit(js: JetStream, batched: str) -> None:
    subject = f"{batched.lower()}.a"
    with pytest.raises(RuntimeError, match="mid-batch"), js.fast_publisher() as pub:
        for _ in range(30):
            pub.add(subject, b"m")
        raise RuntimeError("mid-batch")
    assert pub.ack is None
    # Not atomic: what reached the server is stored all the same.
    wait_until(lambda: js.stream_info(batched).state.messages == 30, what="30 stored")
    with pytest.raises(nats.FastIngestClosedError, match="closed without a commit") as caught:
        pub.add(subject, b"after")
    assert caught.value.batch_seq == 30


def test_the_flow_the_server_sets_is_honoured(js: JetStream, batched: str) -> None:
    """Alone on the stream a batch gets the flow it asks for; a second batch starts at one
    ack per message and is ramped up, and the first is slowed to the share the server
    allows each (500 / open batches) while both are open."""
    subject = f"{batched.lower()}.a"
    first = js.fast_publisher(flow=500)
    second = js.fast_publisher(flow=500)
    try:
        first.add(subject, b"1")
        assert first.flow == 500
        second.add(subject, b"2")
        # 1 in the answer to its first message; 2 once that message is stored (the ack for
        # it may be here already).
        assert second.flow in (1, 2)
        flows = set()
        for _ in range(3000):
            fa = second.add(subject, b"s")
            assert fa.batch_seq - fa.ack_seq <= second.flow * 2
            flows.add(second.flow)
            first.add(subject, b"f")
        assert max(flows) == 250 and len(flows) > 3  # doubled step by step up to its share
        assert first.flow == 250  # halved: two batches share the stream
        assert first.commit().batch_size == 3001
        assert second.commit().batch_size == 3001
    finally:
        first.close()
        second.close()


def test_a_stream_without_allow_batched_refuses(js: JetStream, stream: str) -> None:
    with pytest.raises(nats.FastIngestNotEnabledError) as caught, js.fast_publisher() as pub:
        pub.add(f"{stream.lower()}.a", b"x")
    err = caught.value
    assert err.err_code == 10205 and "set allow_batched=True" in str(err)
    assert "message 1" in str(err) and err.batch_seq == 1 and err.batch_id
    assert js.stream_info(stream).state.messages == 0


def test_a_subject_no_stream_captures(js: JetStream) -> None:
    pub = js.fast_publisher()
    with pytest.raises(nats.NoStreamResponseError, match="no stream captures"):
        pub.add("fast.ingest.nowhere", b"x")
    pub.close()


def test_a_gap_stops_a_fail_batch(js: JetStream, batched: str) -> None:
    """A message that never reached the server (here: its sequence skipped) is a gap: with
    gap "fail" the server keeps what came before, sends the gap and its final PubAck, and
    the next add raises the gap with that PubAck."""
    subject = f"{batched.lower()}.a"
    errs = Errors()
    with js.fast_publisher(error_cb=errs) as pub:
        for _ in range(5):
            pub.add(subject, b"m")
        # A raw frame with batch sequence 7 on the batch's reply subject: 6 never came.
        js.nc.publish(subject, b"m", reply=f"_INBOX.{pub.batch_id}.100.fail.7.1.$FI")
        with pytest.raises(nats.FastIngestGapError) as caught:
            wait_until(lambda: pub.add(subject, b"more") and False, what="the gap")
    gap = caught.value
    assert (gap.last_seq, gap.batch_seq, gap.batch_id) == (6, 7, pub.batch_id)
    assert "message 6 never reached the server" in str(gap)
    assert gap.pub_ack is not None and gap.pub_ack.batch_size == 5
    assert js.stream_info(batched).state.messages == 5
    assert pub.errors == [gap]
    wait_until(lambda: errs.seen == [gap], what="error_cb")


def test_a_gap_is_reported_and_an_ok_batch_goes_on(
    js: JetStream, batched: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    subject = f"{batched.lower()}.a"
    errs = Errors()
    with js.fast_publisher(gap="ok", error_cb=errs) as pub:
        for _ in range(5):
            pub.add(subject, b"m")
        pub._seq += 2  # messages 6 and 7 lost on the way
        for _ in range(5):
            pub.add(subject, b"m")
        ack = pub.commit()
    wait_until(lambda: len(errs.seen) == 1, what="error_cb")
    (gap,) = errs.seen
    assert isinstance(gap, nats.FastIngestGapError) and (gap.last_seq, gap.batch_seq) == (6, 8)
    assert "messages 6..7 never reached" in str(gap)
    assert pub.errors == [gap]
    assert ack.batch_size == 12  # sequences, gaps included
    assert js.stream_info(batched).state.messages == 10


def test_a_refused_message_stops_a_fail_batch(js: JetStream, batched: str) -> None:
    subject = f"{batched.lower()}.a"
    errs = Errors()
    pub = js.fast_publisher(error_cb=errs)
    for _ in range(3):
        pub.add(subject, b"m")
    pub.add(subject, b"m", expected_last_seq=99)
    with pytest.raises(nats.FastIngestMessageError) as caught:
        wait_until(lambda: pub.add(subject, b"more") and False, what="the refusal")
    err = caught.value
    assert err.batch_seq == 4 and isinstance(err.error, nats.StreamWrongLastSequenceError)
    assert "refused message 4" in str(err) and "wrong last sequence" in str(err)
    assert err.pub_ack is not None and err.pub_ack.batch_size == 3
    with pytest.raises(nats.FastIngestMessageError):
        pub.commit()
    wait_until(lambda: errs.seen == [err], what="error_cb")
    assert js.stream_info(batched).state.messages == 3


def test_a_refused_message_is_reported_and_an_ok_batch_goes_on(js: JetStream, batched: str) -> None:
    subject = f"{batched.lower()}.a"
    errs = Errors()
    with js.fast_publisher(gap="ok", error_cb=errs) as pub:
        pub.add(subject, b"1")
        pub.add(subject, b"2", expected_last_seq=1)
        pub.add(subject, b"3", expected_last_seq=1)  # refused: the last is 2
        pub.add(subject, b"4", msg_id="four")
        ack = pub.commit()
    assert ack.batch_size == 4
    assert stored(js, batched) == [b"1", b"2", b"4"]
    wait_until(lambda: len(errs.seen) == 1, what="error_cb")
    (err,) = pub.errors
    assert errs.seen == [err] and err.batch_seq == 3
    assert isinstance(err, nats.FastIngestMessageError)
    assert isinstance(err.error, nats.StreamWrongLastSequenceError)


def test_lost_acks_are_asked_for_again(js: JetStream, batched: str) -> None:
    """Flow acks that never arrive stall the window; a ping (every third of ack_timeout)
    has the server send its latest again, and the batch goes on."""
    subject = f"{batched.lower()}.a"
    lost = threading.Event()

    def first_acks(msg: nats.Msg) -> bool:
        # Every flow ack but the first and the pings' answers, until lost is set.
        return (
            not lost.is_set()
            and b'"type":"ack"' in msg.data
            and b'"seq":0' not in msg.data
            and not msg.subject.endswith(".4.$FI")
        )

    with js.fast_publisher(flow=10, ack_timeout=1.5) as pub:
        with drop_inbound(js.nc, first_acks) as dropped:
            for _ in range(25):
                pub.add(subject, b"m")  # stalls at 20 until a ping's answer comes
            lost.set()
        ack = pub.commit()
    assert dropped and ack.batch_size == 25


def test_no_answer_at_all_times_out(js: JetStream, batched: str) -> None:
    subject = f"{batched.lower()}.a"
    pub = js.fast_publisher(ack_timeout=0.3)
    unanswered = drop_inbound(js.nc, lambda m: pub.batch_id in m.subject)
    with unanswered, pytest.raises(nats.TimeoutError, match="no answer to its first message"):
        pub.add(subject, b"m")
    with pytest.raises(nats.TimeoutError):
        pub.add(subject, b"m")  # the batch stays stopped


def test_a_commit_never_answered_says_the_outcome_is_unknown(js: JetStream, batched: str) -> None:
    """Every answer after the commit went out is lost (a black hole on a live connection):
    the server stored the batch, the client hears nothing within ack_timeout. That is an
    unknown outcome too, so FastIngestOutcomeUnknownError (still a TimeoutError), not a
    plain timeout a caller would take as "not stored" (issue 35's fault table)."""
    subject = f"{batched.lower()}.a"
    pub = js.fast_publisher(ack_timeout=0.6)
    for _ in range(5):
        pub.add(subject, b"m")
    committed = threading.Event()
    unanswered = drop_inbound(js.nc, lambda m: committed.is_set() and pub.batch_id in m.subject)
    with unanswered as dropped, pytest.raises(nats.FastIngestOutcomeUnknownError) as caught:
        committed.set()
        pub.commit(subject, b"last")
    assert dropped, "the commit's PubAck was never seen"
    assert isinstance(caught.value, nats.TimeoutError)
    assert "unknown" in str(caught.value) and pub.batch_id in str(caught.value)
    assert len(stored(js, batched)) == 6
    with pytest.raises(nats.FastIngestOutcomeUnknownError):
        pub.commit()  # the batch stays stopped, with the same error


def test_bad_arguments_are_refused(js: JetStream, batched: str) -> None:
    for kwargs, what in [
        ({"flow": 0}, "flow"),
        ({"flow": 70000}, "flow"),
        ({"max_outstanding_acks": 4}, "max_outstanding_acks"),
        ({"gap": "maybe"}, "gap"),
        ({"ack_timeout": -1}, "ack_timeout"),
        ({"ack_timeout": 0}, "ack_timeout"),
    ]:
        with pytest.raises(nats.InvalidArgumentError, match=what):
            js.fast_publisher(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidCallbackTypeError):
        js.fast_publisher(error_cb="print")  # type: ignore[arg-type]
    with js.fast_publisher() as pub:
        with pytest.raises(nats.InvalidArgumentError, match="the batch is empty"):
            pub.commit()
        pub.add(f"{batched.lower()}.a", b"1")
        with pytest.raises(nats.InvalidArgumentError, match="EOB"):
            pub.commit(data=b"no subject")
        with pytest.raises(nats.BadSubjectError):
            pub.add("bad subject", b"x")
        with pytest.raises(nats.InvalidArgumentError, match="Nats-Expected-Last-Sequence"):
            pub.add(f"{batched.lower()}.a", b"x", expected_last_seq=-1)
    assert pub.ack is not None and pub.ack.batch_size == 1  # the refusals sent nothing


def test_a_server_below_api_level_4_is_refused_before_sending(js: JetStream) -> None:
    js.api_level()  # known now: pretend this server is a 2.12 (level 2)
    server, _ = js._levels._known  # type: ignore[misc]
    js._levels._known = (server, 2)
    with pytest.raises(nats.ApiLevelError, match="fast-ingest"):
        js.fast_publisher()


def test_without_error_cb_the_clients_hears_what_is_not_raised(
    ejs: JetStream, errs: Errors, batched: str
) -> None:
    """gap "ok": a refused message goes to the client's error_cb; gap "fail": it is raised
    by add/commit instead, not reported twice."""
    subject = f"{batched.lower()}.a"
    with ejs.fast_publisher(gap="ok") as pub:
        pub.add(subject, b"1", expected_last_seq=7)
    wait_until(lambda: errs.kinds() == [nats.FastIngestMessageError], what="error_cb")
    pub = ejs.fast_publisher()
    pub.add(subject, b"1")
    pub.add(subject, b"2", expected_last_seq=7)
    with pytest.raises(nats.FastIngestMessageError):
        pub.commit()
    behind = threading.Event()
    ejs._core.callback(behind.set)  # runs after every callback queued before it
    assert behind.wait(5)
    assert errs.kinds() == [nats.FastIngestMessageError]  # still only the first


def test_a_commit_whose_pubAck_is_lost_says_the_outcome_is_unknown(
    js: JetStream, batched: str
) -> None:
    """The server stored the whole batch and ended it; its final PubAck never reached the
    client (as when the connection drops after the commit went out). Asked again, the server
    no longer knows the batch (10208): that is an unknown outcome, not a failure, since a
    caller who sends again stores everything twice (issue 35)."""
    pub = js.fast_publisher(ack_timeout=1.5)
    for i in range(20):
        pub.add(f"{batched.lower()}.x", str(i).encode())
    real = pub._on_final
    dropped: List[Any] = []

    def lose_the_commit_pub_ack(reply: Any, subject: str) -> None:
        if not dropped and pub._committing and isinstance(reply, nats.PubAck):
            dropped.append(reply)
            return
        real(reply, subject)

    pub._on_final = lose_the_commit_pub_ack  # type: ignore[method-assign]
    with pytest.raises(nats.FastIngestOutcomeUnknownError) as caught:
        pub.commit(f"{batched.lower()}.x", b"last")
    assert dropped, "the commit's PubAck was never seen"
    assert isinstance(caught.value, nats.FastIngestError)
    assert "unknown" in str(caught.value) and pub.batch_id in str(caught.value)
    assert len(stored(js, batched)) == 21
