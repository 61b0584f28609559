"""Atomic batch publish (ADR-50, js.batch_publish()) against a real nats-server: what is
stored and how, flow control, abandoning (at once, not after the server's 10 s), and every
refusal the server can be made to give."""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterator, List, Optional

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream import api_level
from jetstream_sync.jetstream.batch import BATCH_COMMIT, BATCH_ID, BATCH_SEQUENCE
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.jetstream.publish import pub_ack
from jetstream_sync.msg import Msg
from jetstream_sync.testing import stream_name


class Boom(Exception):
    pass


def make_stream(js: JetStream, **config: Any) -> str:
    name = stream_name("BATCH")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_direct=True, **config)
    return name


@pytest.fixture
def atomic(js: JetStream) -> Iterator[str]:
    """A stream with allow_atomic, on the subjects ``<name lowercased>.>``."""
    name = make_stream(js, allow_atomic=True)
    try:
        yield name
    finally:
        js.delete_stream(name)


def subj(stream: str, token: str) -> str:
    return f"{stream.lower()}.{token}"


def stored(js: JetStream, stream: str) -> List[Any]:
    info = js.stream_info(stream)
    if not info.state.messages:
        return []
    return list(js.get_msgs(stream, seq=info.state.first_seq, batch=info.state.messages))


class RequestSpy:
    """Which batch sequences went out as requests (waited for) on ``nc``."""

    def __init__(self, nc: nats.Client) -> None:
        self.sequences: List[str] = []
        real = nc.request

        def request(subject: str, data: bytes = b"", timeout: float = 1.0, **kw: Any) -> Msg:
            headers: Optional[Dict[str, str]] = kw.get("headers")
            if headers is not None and BATCH_SEQUENCE in headers:
                self.sequences.append(headers[BATCH_SEQUENCE])
            return real(subject, data, timeout, **kw)

        nc.request = request  # type: ignore[method-assign]


# --- the happy paths -----------------------------------------------------------------------


def test_a_batch_is_stored_in_order_at_consecutive_sequences(js: JetStream, atomic: str) -> None:
    js.publish(subj(atomic, "before"), b"0")
    with js.batch_publish() as batch:
        assert not batch.closed and batch.size == 0 and len(batch.id) <= 64
        for i in range(1, 5):
            batch.add(subj(atomic, f"m{i}"), str(i).encode(), headers={"Kind": "line"})
        ack = batch.commit(subj(atomic, "last"), b"5", headers={"Kind": "end"})
    assert (ack.stream, ack.seq, ack.batch_id, ack.batch_size) == (atomic, 6, batch.id, 5)
    assert batch.closed and batch.size == 5 and batch.ack is ack
    msgs = stored(js, atomic)[1:]
    assert [m.seq for m in msgs] == [2, 3, 4, 5, 6]
    assert [m.subject for m in msgs] == [subj(atomic, t) for t in ("m1", "m2", "m3", "m4", "last")]
    assert [m.data for m in msgs] == [b"1", b"2", b"3", b"4", b"5"]
    for n, m in enumerate(msgs, 1):
        assert m.headers[BATCH_ID] == batch.id and m.headers[BATCH_SEQUENCE] == str(n)
        assert m.headers["Kind"] == ("end" if n == 5 else "line")
        assert (m.headers.get(BATCH_COMMIT) == "1") is (n == 5)  # only on the last


def test_commit_without_a_final_message_commits_what_was_added(js: JetStream, atomic: str) -> None:
    with js.batch_publish() as batch:
        for i in range(3):
            batch.add(subj(atomic, "x"), str(i).encode())
        ack = batch.commit()
    assert (ack.seq, ack.batch_id, ack.batch_size) == (3, batch.id, 3)
    msgs = stored(js, atomic)
    assert [m.data for m in msgs] == [b"0", b"1", b"2"]  # the end-of-batch message is not
    assert msgs[-1].headers[BATCH_COMMIT] == "1"  # set by the server on the last stored one
    assert BATCH_COMMIT not in msgs[0].headers


def test_a_batch_of_one_message(js: JetStream, atomic: str) -> None:
    ack = js.batch_publish().commit(subj(atomic, "only"), b"1", msg_id="one")
    assert (ack.seq, ack.batch_size) == (1, 1)


def test_ack_every_waits_for_every_nth_message(nc: nats.Client, js: JetStream, atomic: str) -> None:
    spy = RequestSpy(nc)
    with js.batch_publish(ack_every=3) as batch:
        for i in range(10):
            batch.add(subj(atomic, "x"), str(i).encode())
        ack = batch.commit()
    assert spy.sequences == ["1", "3", "6", "9", "11"]  # first, every 3rd, the commit
    assert ack.batch_size == 10 and len(stored(js, atomic)) == 10
    spy.sequences.clear()
    with js.batch_publish(ack_first=False) as batch:
        batch.add(subj(atomic, "x"))
        batch.commit(subj(atomic, "x"))
    assert spy.sequences == ["2"]  # only the commit


def test_flow_control_reports_a_refused_message_before_the_commit(js: JetStream) -> None:
    name = make_stream(js, allow_atomic=True, max_msg_size=256)
    try:
        batch = js.batch_publish(ack_every=3)
        batch.add(subj(name, "x"), b"ok")
        batch.add(subj(name, "x"), b"x" * 300)  # refused by the server, unanswered
        with pytest.raises(nats.BatchIncompleteError) as caught:
            batch.add(subj(name, "x"), b"ok")  # the 3rd is answered: the gap is seen here
        assert caught.value.err_code == 10176 and "publish it again" in str(caught.value)
        assert batch.closed and js.stream_info(name).state.messages == 0
    finally:
        js.delete_stream(name)


def test_two_threads_each_with_its_own_batch_on_one_connection(js: JetStream, atomic: str) -> None:
    acks: Dict[str, nats.PubAck] = {}
    failures: List[BaseException] = []
    start = threading.Barrier(2)

    def run(name: str) -> None:
        try:
            start.wait(10)
            with js.batch_publish(ack_every=10) as batch:
                for i in range(49):
                    batch.add(subj(atomic, name), f"{name}{i}".encode())
                acks[name] = batch.commit(subj(atomic, name), f"{name}49".encode())
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures and set(acks) == {"a", "b"}
    by_seq = {m.seq: m for m in stored(js, atomic)}
    assert len(by_seq) == 100
    for name, ack in acks.items():
        assert ack.batch_size == 50
        seqs = range(ack.seq - 49, ack.seq + 1)  # consecutive: a batch is never interleaved
        assert [by_seq[s].data for s in seqs] == [f"{name}{i}".encode() for i in range(50)]


def test_publish_options_are_honoured_in_a_batch(js: JetStream) -> None:
    name = make_stream(js, allow_atomic=True, allow_msg_ttl=True)
    try:
        js.publish(subj(name, "a"), b"a1")  # seq 1
        js.publish(subj(name, "z"), b"z1")  # seq 2
        with js.batch_publish() as batch:
            batch.add(subj(name, "a"), b"a2", expected_last_seq=2, msg_id="id-a2")
            batch.add(subj(name, "b"), b"b1", msg_ttl=60, expected_stream=name)
            ack = batch.commit(
                subj(name, "c"),
                b"c1",
                expected_last_subject_seq=2,
                expected_last_subject_seq_subject=subj(name, "z"),
            )
        assert (ack.seq, ack.batch_size) == (5, 3)
        msgs = stored(js, name)
        assert msgs[2].headers["Nats-Msg-Id"] == "id-a2"
        assert msgs[3].headers["Nats-TTL"] == "60"
        batch = js.batch_publish()
        batch.add(subj(name, "a"), b"a3")
        with pytest.raises(nats.StreamWrongLastSequenceError):
            batch.commit(  # z's last is 2, not 1
                subj(name, "c"),
                expected_last_subject_seq=1,
                expected_last_subject_seq_subject=subj(name, "z"),
            )
        assert js.stream_info(name).state.messages == 5
    finally:
        js.delete_stream(name)


# --- abandoning ----------------------------------------------------------------------------


def test_an_exception_in_the_block_abandons_the_batch(js: JetStream, atomic: str) -> None:
    with pytest.raises(Boom), js.batch_publish(ack_every=2) as batch:
        for i in range(5):
            batch.add(subj(atomic, "x"), str(i).encode())
        raise Boom
    assert batch.closed and js.stream_info(atomic).state.messages == 0
    with pytest.raises(nats.BatchClosedError, match="discarded"):
        batch.commit()


def test_sixty_abandoned_batches_do_not_exhaust_the_inflight_limit(
    js: JetStream, atomic: str
) -> None:
    # The server keeps at most 50 open batches per stream, each for 10 s after its last
    # message: without abandoning at once, the 51st would be refused (10210).
    for i in range(60):
        how = i % 3
        if how == 0:
            with pytest.raises(Boom), js.batch_publish() as batch:
                batch.add(subj(atomic, "x"), b"lost")
                raise Boom
        elif how == 1:
            batch = js.batch_publish()
            batch.add(subj(atomic, "x"), b"lost")
            batch.add(subj(atomic, "x"), b"lost")
            batch.discard()
            batch.discard()  # again: nothing happens
        else:
            never = pytest.raises(nats.BatchNotCommittedError, match="never committed")
            with never, js.batch_publish() as batch:
                batch.add(subj(atomic, "x"), b"lost")
    ack = js.batch_publish().commit(subj(atomic, "x"), b"kept")
    assert ack.seq == 1 and [m.data for m in stored(js, atomic)] == [b"kept"]


def test_the_inflight_limit_is_refused_and_discard_frees_it(js: JetStream, atomic: str) -> None:
    open_batches = []
    for _ in range(50):
        batch = js.batch_publish()
        batch.add(subj(atomic, "x"))  # answered: the server holds the batch open
        open_batches.append(batch)
    one_more = js.batch_publish()
    with pytest.raises(nats.BatchTooManyInflightError) as caught:
        one_more.add(subj(atomic, "x"))
    err = caught.value
    assert (err.code, err.err_code) == (429, 10210) and not isinstance(err, nats.BadRequestError)
    assert f"stream {atomic!r} has as many open atomic batches" in str(err)
    for batch in open_batches:
        batch.discard()
    assert js.batch_publish().commit(subj(atomic, "x")).batch_size == 1


def test_leaving_an_unused_batch_is_no_error(js: JetStream, atomic: str) -> None:
    with js.batch_publish() as batch:
        pass
    assert batch.closed and batch.size == 0


# --- refusals ------------------------------------------------------------------------------


def test_a_stream_without_allow_atomic_refuses_the_first_message(
    js: JetStream, stream: str
) -> None:
    with pytest.raises(nats.BatchNotEnabledError) as caught, js.batch_publish() as batch:
        batch.add(f"{stream.lower()}.x", b"1")
        batch.commit()  # never reached
    err = caught.value
    assert isinstance(err, nats.BadRequestError) and err.err_code == 10174
    assert f"stream {stream!r} does not allow atomic batches: set allow_atomic=True" in str(err)
    assert js.stream_info(stream).state.messages == 0


def test_a_batch_larger_than_the_server_takes(js: JetStream, atomic: str) -> None:
    batch = js.batch_publish()
    for i in range(1000):
        batch.add(subj(atomic, "x"), b"%d" % i)
    with pytest.raises(nats.BatchTooLargeError) as caught:
        batch.commit(subj(atomic, "x"), b"1001")
    assert caught.value.err_code == 10199 and "split it" in str(caught.value)
    assert js.stream_info(atomic).state.messages == 0


def test_duplicate_message_ids(js: JetStream, atomic: str) -> None:
    batch = js.batch_publish()
    batch.add(subj(atomic, "x"), msg_id="same")
    with pytest.raises(nats.BatchDuplicateMsgIdError) as caught:
        batch.commit(subj(atomic, "x"), msg_id="same")  # within the batch
    assert caught.value.err_code == 10201
    js.publish(subj(atomic, "x"), msg_id="stored")
    batch = js.batch_publish()
    batch.add(subj(atomic, "x"), msg_id="new")
    with pytest.raises(nats.BatchDuplicateMsgIdError, match="duplicate window"):
        batch.commit(subj(atomic, "x"), msg_id="stored")  # within the duplicate window
    assert js.stream_info(atomic).state.messages == 1


def test_expected_last_msg_id_is_refused_in_a_batch(js: JetStream, atomic: str) -> None:
    batch = js.batch_publish()
    batch.add(subj(atomic, "x"), headers={"Nats-Expected-Last-Msg-Id": "m"})
    with pytest.raises(nats.BatchUnsupportedHeaderError) as caught:
        batch.commit()
    assert caught.value.err_code == 10177 and "Nats-Expected-Last-Msg-Id" in str(caught.value)
    assert js.stream_info(atomic).state.messages == 0


def test_an_expectation_failing_at_the_commit_stores_nothing(js: JetStream, atomic: str) -> None:
    js.publish(subj(atomic, "x"), b"first")
    refused = pytest.raises(nats.StreamWrongLastSequenceError)
    with refused as caught, js.batch_publish() as batch:
        batch.add(subj(atomic, "x"), b"a", expected_last_seq=7)
        batch.add(subj(atomic, "x"), b"b")
        batch.commit(subj(atomic, "x"), b"c")
    assert caught.value.err_code == 10071 and "nothing of it is stored" in str(caught.value)
    assert batch.closed and js.stream_info(atomic).state.messages == 1


def test_refusals_of_what_this_client_never_sends(nc: nats.Client, atomic: str) -> None:
    """Batch ids over 64 characters, a missing sequence, a commit neither 1 nor eob: sent
    by hand, the server's answers map to their classes."""
    subject = subj(atomic, "x")
    cases = [
        ({BATCH_ID: "i" * 65, BATCH_SEQUENCE: "1"}, nats.BatchIdInvalidError, 10179),
        ({BATCH_ID: "no-seq"}, nats.BatchSequenceMissingError, 10175),
        (
            {BATCH_ID: "bad-commit", BATCH_SEQUENCE: "1", BATCH_COMMIT: "yes"},
            nats.BatchCommitInvalidError,
            10200,
        ),
        ({BATCH_ID: "unknown", BATCH_SEQUENCE: "5"}, nats.BatchIncompleteError, 10176),
    ]
    for headers, cls, err_code in cases:
        reply = nc.request(subject, b"", timeout=5, headers=headers)
        with pytest.raises(cls) as caught:
            pub_ack(reply.data, subject)
        assert caught.value.err_code == err_code
        assert isinstance(caught.value, nats.BatchPublishError)


def test_a_commit_without_answer_says_the_outcome_is_unknown(js: JetStream) -> None:
    name = make_stream(js, allow_atomic=True, no_ack=True)  # the server answers nothing
    try:
        batch = js.batch_publish(timeout=0.3, ack_first=False)
        batch.add(subj(name, "x"))
        with pytest.raises(nats.BatchOutcomeUnknownError, match="which is unknown"):
            batch.commit(subj(name, "x"))
        assert batch.closed
    finally:
        js.delete_stream(name)


def test_a_subject_no_stream_captures(js: JetStream) -> None:
    with pytest.raises(nats.NoStreamResponseError, match="no stream captures"):
        js.batch_publish().add("nobody.captures.this")


# --- the client's own checks ---------------------------------------------------------------


def test_a_closed_batch_refuses_more(js: JetStream, atomic: str) -> None:
    batch = js.batch_publish()
    batch.commit(subj(atomic, "x"))
    for call in (lambda: batch.add(subj(atomic, "x")), batch.commit, batch.discard):
        with pytest.raises(nats.BatchClosedError, match="committed"):
            call()
    discarded = js.batch_publish()
    discarded.discard()
    with pytest.raises(nats.BatchClosedError, match="discarded"):
        discarded.add(subj(atomic, "x"))


def test_bad_arguments_are_refused_before_anything_is_sent(js: JetStream, atomic: str) -> None:
    for kwargs in ({"ack_every": 0}, {"ack_every": True}, {"ack_first": "yes"}, {"timeout": -1}):
        with pytest.raises(nats.InvalidArgumentError):
            js.batch_publish(**kwargs)
    batch = js.batch_publish()
    with pytest.raises(nats.InvalidArgumentError, match="nothing was"):
        batch.commit()
    with pytest.raises(nats.InvalidArgumentError, match="sets Nats-Batch-Id"):
        batch.add(subj(atomic, "x"), headers={"nats-batch-id": "mine"})
    with pytest.raises(nats.BadSubjectError):
        batch.add("bad subject")
    with pytest.raises(nats.InvalidArgumentError, match="give expected_last_subject_seq"):
        batch.add(subj(atomic, "x"), expected_last_subject_seq_subject="a")
    with pytest.raises(nats.InvalidArgumentError, match="msg_ttl"):
        batch.add(subj(atomic, "x"), msg_ttl=0)
    assert batch.size == 0 and not batch.closed  # nothing went out: the batch goes on
    batch.add(subj(atomic, "x"))
    with pytest.raises(nats.InvalidArgumentError, match="stores no message of its own"):
        batch.commit(data=b"lost?")
    assert batch.commit(subj(atomic, "x")).batch_size == 2


def test_the_api_level_is_checked_before_sending(
    nc: nats.Client, js: JetStream, atomic: str
) -> None:
    spy = RequestSpy(nc)
    server = nc.server_info.get("server_id")
    js._levels._known = (server, api_level.ATOMIC_BATCH[1] - 1)
    with pytest.raises(nats.ApiLevelError, match="atomic batch publish"):
        js.batch_publish()
    js._levels._known = (server, api_level.BATCH_COMMIT_EOB[1] - 1)
    batch = js.batch_publish()
    batch.add(subj(atomic, "x"))
    with pytest.raises(nats.ApiLevelError, match="without a final message"):
        batch.commit()
    assert spy.sequences == ["1"] and not batch.closed  # the batch is still open
    assert batch.commit(subj(atomic, "x")).batch_size == 2


# --- a commit whose answer never came (issue 35) ------------------------------------------


@pytest.mark.parametrize("cut", [nats.ConnectionLostError, nats.TimeoutError])
def test_a_commit_cut_before_its_ack_says_the_outcome_is_unknown(
    nc: nats.Client, js: JetStream, atomic: str, cut: type
) -> None:
    """The server stored the batch; the client never saw the ack. A plain failure would
    invite a second send (a double store): the error must say the outcome is unknown, and
    how to check, and still be caught by handlers of the cut itself."""
    real = nc.request

    def request(subject: str, data: bytes = b"", timeout: float = 1.0, **kw: Any) -> Msg:
        reply = real(subject, data, timeout, **kw)
        headers: Optional[Dict[str, str]] = kw.get("headers")
        if headers is not None and BATCH_COMMIT in headers:
            raise cut("cut after the server answered")
        return reply

    nc.request = request  # type: ignore[method-assign]
    batch = js.batch_publish()
    batch.add(subj(atomic, "a"), b"1")
    with pytest.raises(nats.BatchOutcomeUnknownError) as caught:
        batch.commit(subj(atomic, "b"), b"2")
    assert isinstance(caught.value, cut)
    message = str(caught.value)
    assert "unknown" in message and batch.id in message and "Nats-Batch-Id" in message
    # and the check the message describes finds the batch stored whole
    last = js.get_last_msg(atomic, subj(atomic, "b"))
    assert last.headers is not None and last.headers[BATCH_ID] == batch.id
    assert [m.data for m in stored(js, atomic)] == [b"1", b"2"]
