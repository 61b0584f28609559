"""The benchmarks' raw-socket loops (benchmarks/_raw.py) still do all their work.

Each loop runs with a tiny count against the session's real nats-server; the test checks
what arrived, was acked or was stored. Nothing here measures or asserts a speed.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

import pytest

import jetstream_sync as nats
from jetstream_sync.testing import stream_name, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _raw

PAYLOAD = b"x" * 128


@contextlib.contextmanager
def preloaded(js, prefix, count, consumer=None):
    """A memory stream ``<prefix><n>`` holding ``count`` messages on ``<prefix><n>.a``, with
    an explicit-ack durable ``consumer`` if named; deleted afterwards. Yields (name, subject)."""
    name = stream_name(prefix)
    subject = f"{name.lower()}.a"
    js.add_stream(name=name, subjects=[subject], storage=nats.StorageType.MEMORY)
    try:
        for _ in range(count):
            js.publish_async(subject, PAYLOAD)
        js.publish_async_completed(timeout=10)
        if consumer:
            js.add_consumer(
                name, durable_name=consumer, ack_policy=nats.AckPolicy.EXPLICIT, max_ack_pending=-1
            )
        yield name, subject
    finally:
        js.delete_stream(name)


def all_acked(js, name, consumer, count):
    """Every one of ``count`` messages delivered once and acked (the acks settle server-side)."""
    info = wait_until(
        lambda: (i := js.consumer_info(name, consumer)).num_ack_pending == 0 and i,
        what="every ack",
    )
    assert info.delivered.consumer_seq == count and info.ack_floor.consumer_seq == count
    assert info.num_pending == 0 and info.num_redelivered == 0


@pytest.fixture
def conn(nats_server):
    with _raw.RawConn(nats_server.url) as c:
        yield c


def test_publish_reaches_a_subscriber(nc, conn):
    sub = nc.subscribe("raw.pub", pending_msgs_limit=1_000)
    nc.flush()
    _raw.publish(conn, "raw.pub", PAYLOAD, 300)
    wait_until(lambda: sub.pending_msgs == 300, what="300 messages")
    assert sub.next_msg(timeout=1).data == PAYLOAD


def test_receive_counts_every_message_and_handles_crlf_and_headers(nc, conn):
    conn.sub("raw.recv")
    conn.flush()
    payloads = [b"a\r\nb" * k for k in range(1, 200)]
    for i, p in enumerate(payloads):
        nc.publish("raw.recv", p, headers={"K": "v"} if i % 3 == 0 else None)
    nc.flush()
    got = [conn.read() for _ in payloads]
    assert [m[3] for m in got if m is not None] == payloads
    assert sum(1 for m in got if m is not None and m[2]) == len(range(0, 199, 3))

    for _ in range(500):
        nc.publish("raw.recv", PAYLOAD)
    nc.flush()
    received, first, last = _raw.receive(conn, 500, 5, 5, time.perf_counter() + 10)
    assert received == 500 and last >= first


def test_request_loop_gets_every_reply(nc, conn):
    nc.subscribe("raw.echo", cb=lambda m: m.respond(m.data))
    nc.flush()
    assert len(_raw.request_loop(conn, "raw.echo", b"r" * 16, 50)) == 50


def test_js_publish_both_ways_stores_every_message(js, conn):
    name = stream_name("RAWPUB")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], storage=nats.StorageType.MEMORY)
    try:
        assert _raw.js_publish(conn, f"{name.lower()}.a", PAYLOAD, 50) == (50, 0)
        assert _raw.js_publish_pipelined(conn, f"{name.lower()}.a", PAYLOAD, 500, 64) == (500, 0)
        assert js.stream_info(name).state.messages == 550
        # no stream on the subject: every reply is a failure, none is lost
        assert _raw.js_publish_pipelined(conn, "raw.nostream", PAYLOAD, 20, 8) == (0, 20)
    finally:
        js.delete_stream(name)


def test_js_publish_with_ids_stores_each_row_once_under_the_sinks_id(js, conn):
    from jetstream_sync.spark._publish import RowIds

    name = stream_name("RAWIDS")
    subjects = [f"{name.lower()}.{i % 3}" for i in range(300)]
    datas = [b"row-%d" % i for i in range(300)]
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], storage=nats.StorageType.MEMORY)
    try:
        assert _raw.js_publish_with_ids(conn, subjects, datas, "w-0", 16) == (300, 0)
        assert js.stream_info(name).state.messages == 300
        want = RowIds("w-0").of(subjects, datas)  # the sink's ids: the same work
        got = [js.get_msg(name, seq=s).headers["Nats-Msg-Id"].encode() for s in (1, 150, 300)]
        assert got == [want[0], want[149], want[299]]
        # again: every one is a duplicate (acked, stored once)
        assert _raw.js_publish_with_ids(conn, subjects, datas, "w-0", 16) == (300, 0)
        assert js.stream_info(name).state.messages == 300
    finally:
        js.delete_stream(name)


def test_fast_ingest_stores_the_whole_batch_in_order(js, conn):
    name = stream_name("RAWFI")
    subject = f"{name.lower()}.a"
    js.add_stream(name=name, subjects=[subject], allow_batched=True)
    try:
        final = _raw.fast_ingest(conn, subject, PAYLOAD, 1_000, 10, 2)
        assert (final["stream"], final["count"], final["seq"]) == (name, 1_000, 1_000)
        assert js.stream_info(name).state.messages == 1_000
        # a stream that takes no batches refuses the first message: the loop says so
        js.update_stream(name=name, subjects=[subject], allow_batched=False)
        with pytest.raises(_raw.RawError, match="10205"):
            _raw.fast_ingest(conn, subject, PAYLOAD, 10, 10, 2)
    finally:
        js.delete_stream(name)


@pytest.mark.parametrize("batch", [1, 7, 100])
def test_range_read_reads_every_message_of_an_ack_none_consumer(js, conn, batch):
    with preloaded(js, "RAWRANGE", 250) as (name, _subject):
        info = js.add_consumer(name, ack_policy=nats.AckPolicy.NONE)
        assert _raw.range_read(conn, name, info.name, 250, batch) == 250
        after = js.consumer_info(name, info.name)
        assert after.delivered.stream_seq == 250 and after.num_pending == 0


@pytest.mark.parametrize("batch", [1, 7, 100])
def test_fetch_loop_acks_every_message(js, conn, batch):
    with preloaded(js, "RAWPULL", 200, consumer="C") as (name, _subject):
        received, acked, pulls, short = _raw.fetch_loop(conn, name, "C", batch, 200, 2.0)
        assert (received, acked, short) == (200, 200, 0)
        assert pulls == -(-200 // batch)
        all_acked(js, name, "C", 200)


@pytest.mark.parametrize("max_messages", [10, 64])
def test_consume_loop_acks_every_message_and_pulls_again_at_half(js, conn, max_messages):
    with preloaded(js, "RAWCONSUME", 300, consumer="C") as (name, _subject):
        received, acked, pulls, short = _raw.consume_loop(conn, name, "C", max_messages, 300)
        assert (received, acked, short) == (300, 300, 0)
        # The first pull, then one per half of max_messages taken (none after the last).
        half = max_messages // 2
        assert pulls == 1 + (300 - (max_messages - half) - 1) // half + 1
        all_acked(js, name, "C", 300)


def test_request_keeps_the_frames_that_arrive_before_its_reply(nc, conn):
    # A push consumer's first messages can reach the client before the create reply (the
    # server sends them from different queues): CI once lost all of them this way, and the
    # push loop then waited on heartbeats until the test timed out. Here the early frames
    # are forced: five messages, then a flush, then the request.
    conn.sub("raw.early")
    conn.flush()
    nc.subscribe("raw.api", cb=lambda m: m.respond(b"reply:" + m.data))
    nc.flush()
    for i in range(5):
        nc.publish("raw.early", str(i).encode())
    nc.flush()  # the server has routed the five to conn before the request below exists
    assert conn.request("raw.api", b"q") == b"reply:q"
    assert [conn.read()[3] for _ in range(5)] == [b"0", b"1", b"2", b"3", b"4"]


def test_push_loop_reads_every_message_with_flow_control(js, conn):
    with preloaded(js, "RAWPUSH", 3_000) as (name, subject):
        found, consumer, received, _replies = _raw.push_loop(
            conn, subject, 3_000, 1.0, time.perf_counter() + 60
        )
        assert (found, received) == (name, 3_000)
        info = js.consumer_info(name, consumer)
        assert info.delivered.consumer_seq == 3_000 and info.num_pending == 0
        assert _raw.drain_extra(conn, 0.05) == 0
