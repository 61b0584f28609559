"""nats-py's JetStream names (issue 20): the keywords, aliases, calls and models that let
nats-py code port by deleting async/await, each against a real server."""

from __future__ import annotations

import base64
import builtins
import datetime as dt
import threading
from typing import List

import pytest
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream import api
from jetstream_sync.jetstream.api import AckPolicy, ConsumerConfig, DeliverPolicy
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.msg import Msg
from jetstream_sync.testing import stream_name, wait_until

STREAM_PREFIX = "N"  # the shared stream fixture names its streams N<n>, subjects n<n>.>


def _subj(stream: str, tail: str = "a") -> str:
    return f"{stream.lower()}.{tail}"


def _wait_pending(js: JetStream, stream: str, consumer: str, n: int) -> None:
    """The server acks a publish a moment before its consumers count the message."""
    wait_until(lambda: js.consumer_info(stream, consumer).num_pending >= n, 20, f"{n} pending")


# --- publish --------------------------------------------------------------------------------


def test_publish_stream_is_expected_stream(js: JetStream, stream: str) -> None:
    assert js.publish(_subj(stream), b"x", stream=stream).stream == stream
    with pytest.raises(nats.StreamNotMatchError):
        js.publish(_subj(stream), b"x", stream="OTHER")
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.publish(_subj(stream), b"x", stream=stream, expected_stream="OTHER")
    assert js.publish(_subj(stream), stream=stream, expected_stream=stream).seq == 2
    fut = js.publish_async(_subj(stream), b"y", stream="OTHER")
    with pytest.raises(nats.StreamNotMatchError):
        fut.result(20)
    assert js.publish_async(_subj(stream), b"y", stream=stream).result(20).stream == stream


def test_payload_is_data(js: JetStream, stream: str) -> None:
    ack = js.publish(_subj(stream), payload=b"by payload")
    assert js.get_msg(stream, ack.seq).data == b"by payload"
    ack = js.publish_async(_subj(stream), payload=b"async payload").result(20)
    assert js.get_msg(stream, ack.seq).data == b"async payload"
    with pytest.raises(nats.InvalidArgumentError, match="not both"):
        js.publish(_subj(stream), b"data", payload=b"payload")
    with pytest.raises(nats.InvalidArgumentError, match="not both"):
        js.publish_async(_subj(stream), b"data", payload=b"payload")


def test_msg_ttl_expires_the_message(js: JetStream) -> None:
    name = stream_name("TTL")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_msg_ttl=True)
    try:
        ack = js.publish(f"{name.lower()}.a", b"short-lived", msg_ttl=1)
        kept = js.publish_async(f"{name.lower()}.a", b"kept", msg_ttl="never").result(20)
        assert js.get_msg(name, ack.seq).headers["Nats-TTL"] == "1"
        assert js.get_msg(name, kept.seq).headers["Nats-TTL"] == "never"
        wait_until(lambda: js.stream_info(name).state.messages == 1, 30, "the TTL expiry")
        with pytest.raises(nats.NoMessageFoundError):
            js.get_msg(name, ack.seq)
        assert js.get_msg(name, kept.seq).data == b"kept"
    finally:
        js.delete_stream(name)


def test_msg_ttl_needs_allow_msg_ttl_and_a_valid_value(js: JetStream, stream: str) -> None:
    with pytest.raises(nats.APIError):  # the stream does not allow per-message TTLs
        js.publish(_subj(stream), b"x", msg_ttl=5)
    for bad in (0, 0.5, -1, float("nan"), float("inf"), True, "soon", [1]):
        with pytest.raises(nats.InvalidArgumentError, match="msg_ttl"):
            js.publish(_subj(stream), b"x", msg_ttl=bad)  # type: ignore[arg-type]


def test_wait_stall_raises_too_many_stalled(nc: nats.Client) -> None:
    subject = nc.new_inbox()
    listener = nc.subscribe(subject)  # takes the publishes and never acks them
    jsx = nc.jetstream(publish_async_max_pending=1, publish_async_stall_wait=60.0)
    first = jsx.publish_async(subject, b"1", timeout=60.0)
    assert jsx.publish_async_pending == 1
    with pytest.raises(nats.TooManyStalledMsgsError, match=r"within 0\.2 s"):
        jsx.publish_async(subject, b"2", wait_stall=0.2)
    assert nats.TooManyStalledMsgsError is nats.PublishStalledError
    with pytest.raises(nats.BadTimeoutError):
        jsx.publish_async(subject, b"3", wait_stall=-1)
    # An answer frees the window; the next publish goes through without a wait.
    listener.next_msg(10).respond(b'{"stream":"X","seq":1}')
    assert first.result(20).seq == 1
    jsx.publish_async(subject, b"4", wait_stall=0.0)


# --- pull -----------------------------------------------------------------------------------


def _watch_pulls(nc: nats.Client, stream: str) -> nats.Subscription:
    """A core subscription that sees every pull request (with the server, not instead)."""
    return nc.subscribe(f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>")


@pytest.mark.parametrize("prefix", ["_MYPULLS", b"_MYPULLS."])
def test_pull_inbox_prefix(nc: nats.Client, js: JetStream, stream: str, prefix: object) -> None:
    watch = _watch_pulls(nc, stream)
    nc.flush()
    psub = js.pull_subscribe(_subj(stream), "pfx", inbox_prefix=prefix)  # type: ignore[arg-type]
    for i in range(3):
        js.publish(_subj(stream), str(i).encode())
    _wait_pending(js, stream, "pfx", 3)
    assert len(psub.fetch(1, timeout=10)) == 1
    assert len(psub.fetch(2, timeout=10)) == 2
    replies = [watch.next_msg(10).reply for _ in range(2)]
    assert all(r.startswith("_MYPULLS.") for r in replies), replies
    with pytest.raises(nats.BadSubjectError):
        js.pull_subscribe(_subj(stream), "pfx", inbox_prefix="bad.*")


def test_pull_counters(js: JetStream, stream: str) -> None:
    psub = js.pull_subscribe(_subj(stream), "cnt")
    for i in range(3):
        js.publish(_subj(stream), b"x" * (i + 1))
    _wait_pending(js, stream, "cnt", 3)
    got: List[Msg] = []
    while len(got) < 3:
        got += psub.fetch(3 - len(got), timeout=10)
    assert psub.delivered == 3
    assert psub.pending_msgs == 0 and psub.pending_bytes == 0


def test_pull_pending_limits(ejs: JetStream, stream: str, errs: Errors) -> None:
    psub = ejs.pull_subscribe(_subj(stream), "lim", pending_msgs_limit=2, pending_bytes_limit=5)
    with pytest.raises(nats.InvalidArgumentError, match="pending_msgs_limit"):
        psub.fetch(3, timeout=1)
    # What a pull's inboxes receive after their fetch returned is queued within the limits.
    psub._on_msg(Msg(_subj(stream), "", b"12"))
    psub._on_msg(Msg(_subj(stream), "", b"345"))
    assert psub.pending_msgs == 2 and psub.pending_bytes == 5
    psub._on_msg(Msg(_subj(stream), "", b"6"))  # past both limits: dropped
    assert psub.pending_msgs == 2
    wait_until(lambda: errs.kinds() == [nats.SlowConsumerError], 20, "the slow consumer report")
    assert [m.data for m in psub.fetch(2, timeout=5)] == [b"12", b"345"]
    assert psub.pending_bytes == 0 and psub.delivered == 2
    for bad in (1.5, True, "3"):
        with pytest.raises(nats.InvalidArgumentError, match="pending_"):
            ejs.pull_subscribe(_subj(stream), "lim", pending_msgs_limit=bad)  # type: ignore[arg-type]
    # nats-py's -1 (and 0, as for core subscriptions): no limit.
    unbounded = ejs.pull_subscribe(
        _subj(stream), "lim", pending_msgs_limit=-1, pending_bytes_limit=0
    )
    unbounded._on_msg(Msg(_subj(stream), "", b"x" * 100))
    unbounded._on_msg(Msg(_subj(stream), "", b"y" * 100))
    unbounded._on_msg(Msg(_subj(stream), "", b"z" * 100))
    assert unbounded.pending_msgs == 3 and unbounded.pending_bytes == 300
    assert len(unbounded.fetch(3, timeout=5)) == 3  # no batch bound either


def test_fetch_timeout_is_fetch_timeout_error(js: JetStream, stream: str) -> None:
    psub = js.pull_subscribe(_subj(stream), "empty")
    for batch in (1, 5):
        with pytest.raises(nats.FetchTimeoutError) as info:
            psub.fetch(batch, timeout=0.3)
        assert isinstance(info.value, nats.TimeoutError)
        assert isinstance(info.value, builtins.TimeoutError)
    # nats-py's is_status_msg, on a pull of one's own: "no messages" is status 404.
    inbox = js.nc.new_inbox()
    own = js.nc.subscribe(inbox)
    js.nc.publish(
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.empty", b'{"batch":1,"no_wait":true}', reply=inbox
    )
    assert js.is_status_msg(own.next_msg(10)) == "404"
    assert js.is_status_msg(Msg("a", "", b"x")) is None and js.is_status_msg(None) is None
    assert js.PullSubscription is nats.PullSubscription
    assert js.PushSubscription is nats.JetStreamSubscription


def test_pull_subscribe_bind(js: JetStream, stream: str) -> None:
    js.add_consumer(stream, durable_name="bound", ack_policy=AckPolicy.EXPLICIT)
    js.publish(_subj(stream), b"1")
    js.publish(_subj(stream), b"2")
    _wait_pending(js, stream, "bound", 2)
    psub = js.pull_subscribe_bind("bound", stream=stream)
    msgs = psub.fetch(2, timeout=10)
    msgs += [] if len(msgs) == 2 else psub.fetch(1, timeout=10)
    assert [m.data for m in msgs] == [b"1", b"2"]
    for m in msgs:
        m.ack_sync(timeout=10)
    psub.unsubscribe()
    assert js.consumer_info(stream, "bound").name == "bound"  # bind never deletes
    again = js.pull_subscribe_bind(durable="bound", stream=stream)
    again.unsubscribe()
    js.pull_subscribe_bind(name="bound", consumer="bound", stream=stream).unsubscribe()
    with pytest.raises(nats.ConsumerNotFoundError):
        js.pull_subscribe_bind("missing", stream=stream)
    with pytest.raises(nats.InvalidArgumentError, match="different consumers"):
        js.pull_subscribe_bind("bound", stream=stream, durable="other")
    with pytest.raises(nats.InvalidArgumentError, match="name"):
        js.pull_subscribe_bind(stream=stream)
    with pytest.raises(nats.InvalidArgumentError, match="stream"):
        js.pull_subscribe_bind("bound")
    js.add_consumer(stream, durable_name="pushy", deliver_subject="somewhere.push")
    with pytest.raises(nats.ConsumerIsPushBasedError):
        js.pull_subscribe_bind("pushy", stream=stream)


# --- push -----------------------------------------------------------------------------------


def test_subscribe_consumer_fields(js: JetStream, stream: str) -> None:
    for i in range(3):
        js.publish(_subj(stream), str(i).encode(), headers={"K": str(i)})
    sub = js.subscribe(
        _subj(stream), deliver_policy="last", headers_only=True, inactive_threshold=30
    )
    cfg = sub.consumer_info().config
    assert cfg.deliver_policy is DeliverPolicy.LAST and cfg.headers_only is True
    assert cfg.inactive_threshold == 30.0
    msg = sub.next_msg(10)
    assert msg.data == b"" and msg.headers["K"] == "2" and msg.headers["Nats-Msg-Size"] == "1"
    sub.unsubscribe()
    same = ConsumerConfig(deliver_policy=DeliverPolicy.LAST)
    sub = js.subscribe(_subj(stream), config=same, deliver_policy=DeliverPolicy.LAST)
    assert sub.next_msg(10).data == b"2"
    sub.unsubscribe()
    with pytest.raises(nats.InvalidArgumentError, match="deliver_policy"):
        js.subscribe(_subj(stream), config=ConsumerConfig(deliver_policy=DeliverPolicy.ALL),
                     deliver_policy="last")  # fmt: skip
    with pytest.raises(nats.InvalidArgumentError, match="deliver_policy"):
        js.subscribe(_subj(stream), deliver_policy="sometimes")
    with pytest.raises(nats.InvalidArgumentError, match="headers_only"):
        js.subscribe(_subj(stream), headers_only="yes")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="inactive_threshold"):
        js.subscribe(_subj(stream), inactive_threshold=0)
    assert js.consumer_names(stream) == []  # nothing was made by the refused calls


def _unbound(js: JetStream, stream: str, name: str) -> None:
    """The server clears push_bound a moment after it has the UNSUB."""
    js.nc.flush()
    wait_until(lambda: not js.consumer_info(stream, name).push_bound, 20, "push_bound cleared")


def test_subscribe_bind_both_forms(js: JetStream, stream: str) -> None:
    deliver = js.nc.new_inbox()
    info = js.add_consumer(stream, durable_name="pb", deliver_subject=deliver)
    js.publish(_subj(stream), b"1")
    # nats-py's form: (stream, config, consumer)
    sub = js.subscribe_bind(stream, info.config, "pb", manual_ack=True)
    assert sub.subject == deliver and sub.queue == ""
    msg = sub.next_msg(10)
    assert msg.data == b"1"
    msg.ack_sync(timeout=10)
    sub.unsubscribe()
    assert js.consumer_info(stream, "pb").name == "pb"
    _unbound(js, stream, "pb")
    # ours: (stream, name, cb) with the callback third
    got: List[bytes] = []
    came = threading.Event()

    def handler(m: Msg) -> None:
        got.append(m.data)
        came.set()

    sub = js.subscribe_bind(stream, "pb", handler)
    js.publish(_subj(stream), b"2")
    assert came.wait(20) and got == [b"2"]
    sub.unsubscribe()
    _unbound(js, stream, "pb")
    js.subscribe_bind(stream, consumer="pb").unsubscribe()
    _unbound(js, stream, "pb")
    with pytest.raises(nats.InvalidArgumentError, match="exists with another configuration"):
        js.subscribe_bind(stream, ConsumerConfig(ack_wait=123.0), "pb")
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.subscribe_bind(stream, ConsumerConfig(durable_name="x"), "pb")
    with pytest.raises(nats.InvalidArgumentError, match="ordered"):
        js.subscribe_bind(stream, info.config, "pb", ordered_consumer=True)
    with pytest.raises(nats.InvalidArgumentError, match="str"):
        js.subscribe_bind(stream, 5)  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="name"):
        js.subscribe_bind(stream, ConsumerConfig())
    with pytest.raises(nats.ConsumerNotFoundError):
        js.subscribe_bind(stream, ConsumerConfig(), "missing")


def test_push_counters_messages_and_unsubscribe_limit(js: JetStream, stream: str) -> None:
    sub = js.subscribe(_subj(stream))
    for i in range(5):
        js.publish(_subj(stream), str(i).encode())
    wait_until(lambda: sub.delivered == 5, 20, "five deliveries")
    assert sub.pending_msgs == 5 and sub.pending_bytes == 5
    sub.unsubscribe(limit=7)  # 5 came: two more, then the subscription ends
    js.publish(_subj(stream), b"5")
    js.publish(_subj(stream), b"6")
    js.publish(_subj(stream), b"7")
    seen = [m.data for m in sub.messages]  # blocks; ends with the subscription
    assert seen == [str(i).encode() for i in range(7)]
    name = sub.consumer
    sub.unsubscribe()  # the consumer it made goes now
    with pytest.raises(nats.ConsumerNotFoundError):
        js.consumer_info(stream, name)
    with pytest.raises(nats.BadSubscriptionError):
        sub.unsubscribe(limit=1)
    ordered = js.subscribe(_subj(stream), ordered_consumer=True)
    with pytest.raises(nats.InvalidArgumentError, match="ordered"):
        ordered.unsubscribe(limit=1)
    ordered.unsubscribe()


# --- management -----------------------------------------------------------------------------


def test_consumer_calls_take_nats_py_keywords(js: JetStream, stream: str) -> None:
    assert js.add_consumer(stream, ConsumerConfig(durable_name="c"), 10.0).name == "c"
    assert js.consumer_info(stream, consumer="c", timeout=10).name == "c"
    assert js.consumer_info(stream, "c", consumer="c").name == "c"
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.consumer_info(stream, "c", consumer="d")
    with pytest.raises(nats.InvalidArgumentError, match="needs"):
        js.consumer_info(stream)
    with pytest.raises(nats.BadTimeoutError):
        js.consumer_info(stream, "c", timeout=-1)
    assert js.pause_consumer(stream, consumer="c", pause_until="2099-01-01T00:00:00Z", timeout=10)
    assert js.consumer_info(stream, "c").paused is True
    assert js.resume_consumer(stream, consumer="c", timeout=10).paused is False
    with pytest.raises(nats.InvalidArgumentError, match="RFC 3339"):
        js.pause_consumer(stream, "c", "tomorrow")
    assert js.delete_consumer(stream, consumer="c", timeout=10) is True
    with pytest.raises(nats.NotFoundError):
        js.consumer_info(stream, "c")


def test_list_offsets_and_the_stream_iterator(js: JetStream, stream: str) -> None:
    for n in ("c1", "c2", "c3"):
        js.add_consumer(stream, durable_name=n)
    assert len(js.consumers_info(stream)) == 3
    assert len(js.consumers_info(stream, offset=1)) == 2
    assert js.consumers_info(stream, offset=3) == []
    with pytest.raises(nats.InvalidArgumentError, match="offset"):
        js.consumers_info(stream, offset=-1)
    every = js.streams_info()
    assert stream in {i.config.name for i in every}
    assert len(js.streams_info(offset=1)) == len(every) - 1
    assert len(js.streams_info(1)) == len(every) - 1  # nats-py's positional offset
    it = js.streams_info_iterator()
    assert iter(it) is it
    assert [i.config.name for i in it] == [i.config.name for i in every]
    assert [i.config.name for i in js.streams_info_iterator(offset=len(every))] == []


def test_get_msg_with_nats_py_names(js: JetStream, stream: str) -> None:
    a, b = _subj(stream, "a"), _subj(stream, "b")
    js.publish(a, b"a1", headers={"H": "v"})  # 1
    js.publish(b, b"b1")  # 2
    js.publish(a, b"a2")  # 3
    assert js.get_msg(stream, subject=a).seq == 3
    assert js.get_msg(stream, 2, subject=a, next=True).seq == 3
    assert js.get_msg(stream_name=stream, seq=1, subject=a, next=True).data == b"a1"
    assert js.get_last_msg(stream, b).seq == 2
    raw = js.get_msg(stream, 1)
    assert raw.sequence == 1 and raw.header is raw.headers
    assert raw.hdrs is not None  # nats-py's form: the JSON's base64 text of the block
    block = base64.b64decode(raw.hdrs)
    assert block.startswith(b"NATS/1.0") and b"H: v" in block
    assert js.get_msg(stream, 2).hdrs is None
    with pytest.raises(nats.InvalidArgumentError, match="next=True needs a subject"):
        js.get_msg(stream, 1, next=True)
    with pytest.raises(nats.InvalidArgumentError, match="not both"):
        js.get_msg(stream, subject=a, last_by_subject=a)
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.get_msg(stream, 1, stream_name="OTHER")
    assert js.delete_msg(stream_name=stream, seq=2) is True
    with pytest.raises(nats.NotFoundError):
        js.get_msg(stream, 2)


def test_purge_stream_in_either_order(js: JetStream, stream: str) -> None:
    a, b = _subj(stream, "a"), _subj(stream, "b")
    for subject in (a, b, a, b, a, b):
        js.publish(subject, b"x")
    assert js.purge_stream_count(stream, 3) == 2  # nats-py's (name, seq): below seq 3
    assert js.purge_stream_count(stream, 6, a) == 2  # nats-py's (name, seq, subject): a 3 and 5
    assert js.purge_stream_count(stream, b, 5) == 1  # ours (name, subject, seq): b 4
    assert js.stream_info(stream).state.messages == 1
    with pytest.raises(nats.InvalidArgumentError, match="subject must be a str"):
        js.purge_stream(stream, 3, 4)


def test_reset_consumer(js: JetStream, stream: str) -> None:
    for i in range(5):
        js.publish(_subj(stream), str(i).encode())
    psub = js.pull_subscribe(_subj(stream), "r")
    _wait_pending(js, stream, "r", 5)
    done = 0
    while done < 5:
        for m in psub.fetch(5 - done, timeout=10):
            m.ack_sync(timeout=10)
            done += 1
    reset = js.reset_consumer(stream, "r", seq=2, timeout=10)
    assert isinstance(reset, api.ConsumerReset) and reset.reset_seq == 2
    assert reset.info.name == "r" and reset.info.stream_name == stream
    wait_until(lambda: js.consumer_info(stream, "r").num_pending == 4, 20, "the reset")
    assert psub.fetch(1, timeout=10)[0].metadata.sequence.stream == 2
    js.add_consumer(
        stream,
        durable_name="bounded",
        deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
        opt_start_seq=3,
    )
    with pytest.raises(nats.ConsumerInvalidResetError) as info:
        js.reset_consumer(stream, "bounded", seq=1)
    assert isinstance(info.value, nats.BadRequestError) and info.value.err_code == 10204
    assert "reset consumer" in str(info.value)
    with pytest.raises(nats.InvalidArgumentError, match="seq"):
        js.reset_consumer(stream, "r", seq=-1)


def test_did_create_and_not_found(js: JetStream) -> None:
    name = stream_name("DC")
    assert js.add_stream(name=name, subjects=[f"{name.lower()}.>"]).did_create is True
    try:
        with pytest.raises(nats.NotFoundError) as info:
            js.stream_info(name + "x")
        assert isinstance(info.value, nats.StreamNotFoundError)
    finally:
        js.delete_stream(name)


def test_pause_until_must_be_aware(js: JetStream, stream: str) -> None:
    js.add_consumer(stream, durable_name="p")
    with pytest.raises(nats.InvalidArgumentError, match="timezone-aware"):
        js.pause_consumer(stream, "p", dt.datetime(2099, 1, 1))
