"""Spans and metrics of the instrumented client against a real server: kinds, names,
attributes, parents across threads and processes; errors, timeouts, reconnects, drops."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import jetstream_sync
from jetstream_sync import Client, connect, errors
from jetstream_sync.server import NATSServer

from .conftest import Telemetry


def _wait(cond: object, what: str, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():  # type: ignore[operator]
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def test_publish_is_a_producer_span_and_the_callback_its_child(otel: Telemetry, nc: Client) -> None:
    got: list = []
    done = threading.Event()

    def cb(msg: jetstream_sync.Msg) -> None:
        got.append(msg)
        done.set()

    nc.subscribe("otel.a", cb=cb)
    nc.flush()
    nc.publish("otel.a", b"hello")
    assert done.wait(10)
    _wait(lambda: otel.spans("process otel.a"), "the process span")
    pub = otel.span("publish otel.a")
    proc = otel.span("process otel.a")
    assert pub.kind is SpanKind.PRODUCER and proc.kind is SpanKind.CONSUMER
    assert pub.attributes["messaging.system"] == "nats"
    assert pub.attributes["messaging.destination.name"] == "otel.a"
    assert pub.attributes["messaging.operation.type"] == "send"
    assert pub.attributes["messaging.message.body.size"] == 5
    assert pub.attributes["server.address"] == "127.0.0.1"
    assert isinstance(pub.attributes["server.port"], int)
    assert proc.attributes["messaging.operation.type"] == "process"
    assert proc.parent is not None and proc.parent.span_id == pub.context.span_id
    assert proc.context.trace_id == pub.context.trace_id
    header = got[0].headers["traceparent"]
    assert f"{pub.context.trace_id:032x}" in header
    assert otel.total("messaging.client.sent.messages", messaging__destination__name="otel.a") == 1
    assert (
        otel.total("messaging.client.consumed.messages", messaging__destination__name="otel.a") == 1
    )
    assert otel.total("nats.client.sent.bytes", messaging__destination__name="otel.a") == 5


def test_a_users_traceparent_is_kept_and_headers_appear_only_while_instrumented(
    nats_server: NATSServer,
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    from jetstream_sync.otel import JetStreamSyncInstrumentor

    mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with connect(nats_server.url) as nc:
        sub = nc.subscribe("otel.h")
        nc.flush()
        nc.publish("otel.h", b"plain")
        assert sub.next_msg(5).header is None  # uninstrumented: no headers added
        inst = JetStreamSyncInstrumentor()
        inst.instrument(tracer_provider=TracerProvider())
        try:
            nc.publish("otel.h", b"x", headers={"TraceParent": mine})
            assert sub.next_msg(5).headers["traceparent"] == mine
            nc.publish("otel.h", b"y")
            assert "traceparent" in sub.next_msg(5).headers
        finally:
            inst.uninstrument()
        nc.publish("otel.h", b"plain again")
        assert sub.next_msg(5).header is None


def test_request_and_reply_are_client_and_server_spans(otel: Telemetry, nc: Client) -> None:
    nc.subscribe("otel.svc", cb=lambda m: m.respond(b"pong"))
    nc.flush()
    assert nc.request("otel.svc", b"ping", timeout=5).data == b"pong"
    _wait(lambda: otel.spans("process otel.svc"), "the server span")
    client = otel.span("request otel.svc")
    server = otel.span("process otel.svc")
    assert client.kind is SpanKind.CLIENT and server.kind is SpanKind.SERVER
    assert server.parent is not None and server.parent.span_id == client.context.span_id


def test_a_request_nobody_answers_ends_its_span_with_the_error(otel: Telemetry, nc: Client) -> None:
    with pytest.raises(errors.NoRespondersError):
        nc.request("otel.nobody", b"?", timeout=2)
    span = otel.span("request otel.nobody")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"].endswith("NoRespondersError")
    assert any(e.name == "exception" for e in span.events)
    assert (
        otel.total(
            "messaging.client.sent.messages",
            messaging__destination__name="otel.nobody",
            error__type=span.attributes["error.type"],
        )
        == 1
    )


def test_a_request_timeout_ends_its_span(otel: Telemetry, nc: Client) -> None:
    nc.subscribe("otel.slow", cb=lambda m: None)  # subscribed, never answers
    nc.flush()
    with pytest.raises(errors.TimeoutError):
        nc.request("otel.slow", b"?", timeout=0.2)
    span = otel.span("request otel.slow")
    assert span.attributes["error.type"].endswith("TimeoutError")
    assert span.end_time is not None


def test_jetstream_publish_fetch_and_ack(otel: Telemetry, nc: Client) -> None:
    js = nc.jetstream()
    js.add_stream(name="OTEL", subjects=["otelj.>"])
    try:
        ack = js.publish("otelj.a", b"one", msg_id="m-1")
        psub = js.pull_subscribe("otelj.>", durable="worker")
        (msg,) = psub.fetch(1, timeout=5)
        msg.nak()
        (msg,) = psub.fetch(1, timeout=5)
        msg.ack()
    finally:
        js.delete_stream("OTEL")
    api = otel.span("jetstream STREAM.CREATE")
    assert api.kind is SpanKind.CLIENT
    assert api.attributes["messaging.destination.name"] == "$JS.API.STREAM.CREATE.OTEL"
    pub = otel.span("publish otelj.a")
    assert pub.kind is SpanKind.PRODUCER
    assert pub.attributes["messaging.nats.stream.name"] == "OTEL"
    assert pub.attributes["messaging.nats.stream.sequence"] == ack.seq
    assert pub.attributes["messaging.message.id"] == "m-1"
    assert "request otelj.a" not in otel.names()  # the request inside makes no span
    receives = otel.spans("receive otelj.a")
    assert len(receives) == 2
    for span in receives:
        assert span.kind is SpanKind.CONSUMER
        assert span.parent is not None and span.parent.span_id == pub.context.span_id
        assert span.attributes["messaging.consumer.group.name"] == "worker"
    assert [s.attributes["messaging.nats.message.delivery_count"] for s in receives] == [1, 2]
    nak, ack_span = otel.span("nak otelj.a"), otel.span("ack otelj.a")
    assert nak.attributes["messaging.operation.type"] == "settle"
    assert ack_span.attributes["messaging.nats.message.delivery_count"] == 2
    assert otel.total("nats.client.acks", messaging__operation__name="ack") == 1
    assert otel.total("nats.client.acks", messaging__operation__name="nak") == 1
    assert otel.total("messaging.client.consumed.messages", messaging__operation__name="fetch") == 2


def test_publish_async_span_ends_at_the_ack_or_its_error(otel: Telemetry, nc: Client) -> None:
    js = nc.jetstream()
    js.add_stream(name="OTELA", subjects=["otela.>"])
    try:
        fut = js.publish_async("otela.x", b"1")
        ack = fut.result(10)
        _wait(lambda: otel.spans("publish otela.x"), "the publish_async span")
        span = otel.span("publish otela.x")
        assert span.attributes["messaging.nats.stream.sequence"] == ack.seq
        bad = js.publish_async("otela-none.x", b"1", timeout=0.5)
        with pytest.raises(errors.NATSError):
            bad.result(10)
        _wait(lambda: otel.spans("publish otela-none.x"), "the failed publish_async span")
        failed = otel.span("publish otela-none.x")
        assert failed.status.status_code is StatusCode.ERROR
    finally:
        js.delete_stream("OTELA")


def test_consume_callback_is_a_process_span(otel: Telemetry, nc: Client) -> None:
    js = nc.jetstream()
    js.add_stream(name="OTELC", subjects=["otelc.>"])
    try:
        js.publish("otelc.x", b"1")
        consumer = js.create_or_update_consumer(
            "OTELC", jetstream_sync.jetstream.api.ConsumerConfig(durable_name="c")
        )
        seen = threading.Event()

        def cb(msg: jetstream_sync.Msg) -> None:
            msg.ack()
            seen.set()

        ctx = consumer.consume(cb)
        try:
            assert seen.wait(10)
        finally:
            ctx.stop()
        _wait(lambda: otel.spans("process otelc.x"), "the process span")
        proc = otel.span("process otelc.x")
        pub = otel.span("publish otelc.x")
        assert proc.parent is not None and proc.parent.span_id == pub.context.span_id
        ack = otel.span("ack otelc.x")
        assert ack.parent is not None and ack.parent.span_id == proc.context.span_id
    finally:
        js.delete_stream("OTELC")


def test_a_full_queue_counts_drops_and_one_slow_consumer(
    otel: Telemetry, nats_server: NATSServer
) -> None:
    reported = []
    with connect(nats_server.url, error_cb=reported.append) as nc:
        sub = nc.subscribe("otel.full", pending_msgs_limit=2)
        nc.flush()
        for _ in range(10):
            nc.publish("otel.full", b"x")
        nc.flush()
        # (the reader counts a drop, then tells the observer: wait for the metric)
        _wait(lambda: otel.total("nats.client.dropped.messages") == 8, "the drops")
        assert sub.dropped == 8
        _wait(lambda: reported, "the slow consumer report")
        assert otel.total("nats.client.slow_consumer.events") == 1


def test_reconnects_are_counted(otel: Telemetry, nats_server: NATSServer) -> None:
    back = threading.Event()
    with connect(nats_server.url, reconnected_cb=back.set, reconnect_time_wait=0.05) as nc:
        nc.force_reconnect()
        assert back.wait(10)
        _wait(lambda: nc.stats["reconnects"] >= 1, "the reconnect")
        assert otel.total("nats.client.reconnects") == nc.stats["reconnects"]


_PUBLISHER = r"""
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from jetstream_sync import connect
from jetstream_sync.otel import JetStreamSyncInstrumentor

provider = TracerProvider()
trace.set_tracer_provider(provider)
JetStreamSyncInstrumentor().instrument()
with trace.get_tracer("publisher").start_as_current_span("checkout") as root:
    with connect(sys.argv[1]) as nc:
        nc.publish(sys.argv[2], b"order")
        nc.flush()
ctx = root.get_span_context()
print(json.dumps({"trace_id": ctx.trace_id, "root": ctx.span_id}))
"""


def test_the_trace_continues_across_processes(otel: Telemetry, nc: Client) -> None:
    sub = nc.subscribe("otel.xproc")
    nc.flush()
    out = subprocess.run(
        [sys.executable, "-c", _PUBLISHER, nc.connected_url.geturl(), "otel.xproc"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "OTEL_TRACES_EXPORTER": "none"},
    )
    assert out.returncode == 0, out.stderr
    theirs = json.loads(out.stdout.strip().splitlines()[-1])
    sub.next_msg(10)
    span = otel.span("receive otel.xproc")
    assert span.context.trace_id == theirs["trace_id"]
    assert span.parent is not None and span.parent.is_remote
    assert span.parent.span_id != theirs["root"]  # the publish span, a child of the root


_UNCHANGED_APP = r"""
import sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import jetstream_sync

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
with jetstream_sync.connect(sys.argv[1]) as nc:
    sub = nc.subscribe("otel.auto")
    nc.publish("otel.auto", b"1")
    print("traceparent" in sub.next_msg(5).headers)
print(sorted(s.name for s in exporter.get_finished_spans()))
"""


def test_opentelemetry_instrument_finds_the_instrumentor(nats_server: NATSServer) -> None:
    tool = os.path.join(os.path.dirname(sys.executable), "opentelemetry-instrument")
    if not os.path.exists(tool):
        pytest.skip("opentelemetry-instrument is not installed")
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}
    out = subprocess.run(
        [tool, sys.executable, "-c", _UNCHANGED_APP, nats_server.url],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-2] == "True"
    assert lines[-1] == "['publish otel.auto', 'receive otel.auto']"


def test_a_micro_endpoint_answers_in_a_server_span(otel: Telemetry, nc: Client) -> None:
    from jetstream_sync import micro

    svc = micro.add_service(nc, name="otelsvc", version="1.0.0")
    try:
        svc.add_endpoint(name="echo", handler=lambda req: req.respond(req.data))
        assert nc.request("echo", b"hi", timeout=5).data == b"hi"
        _wait(lambda: otel.spans("process echo"), "the endpoint's span")
        server, client = otel.span("process echo"), otel.span("request echo")
        assert server.kind is SpanKind.SERVER
        assert server.parent is not None and server.parent.span_id == client.context.span_id
    finally:
        svc.stop()


def test_a_request_cut_off_by_close_ends_its_span(otel: Telemetry, nats_server: NATSServer) -> None:
    nc = connect(nats_server.url)
    try:
        nc.subscribe("otel.never", cb=lambda m: None)
        nc.flush()
        subscribed = threading.Event()
        failure: list = []

        def ask() -> None:
            subscribed.set()
            try:
                nc.request("otel.never", b"?", timeout=30)
            except errors.NATSError as exc:
                failure.append(exc)

        asker = threading.Thread(target=ask)
        asker.start()
        assert subscribed.wait(10)
        _wait(lambda: nc.stats["out_msgs"] >= 1, "the request to go out")
    finally:
        nc.close()
    asker.join(30)
    assert failure, "the request did not end with the connection"
    span = otel.span("request otel.never")
    assert span.status.status_code is StatusCode.ERROR
    assert span.attributes["error.type"] == error_name(failure[0])


def error_name(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__qualname__}"


def test_a_publish_async_cut_off_by_close_ends_its_span(
    otel: Telemetry, nats_server: NATSServer
) -> None:
    nc = connect(nats_server.url)
    try:
        nc.subscribe("otel.noack", cb=lambda m: None)  # takes the publish, never acks it
        nc.flush()
        fut = nc.jetstream().publish_async("otel.noack", b"1", timeout=30)
        nc.flush()
    finally:
        nc.close()
    with pytest.raises(errors.NATSError):
        fut.result(30)
    _wait(lambda: otel.spans("publish otel.noack"), "the publish span")
    span = otel.span("publish otel.noack")
    assert span.status.status_code is StatusCode.ERROR
    assert "error.type" in span.attributes


def test_a_queue_group_callback_names_its_group(otel: Telemetry, nc: Client) -> None:
    done = threading.Event()
    nc.subscribe("otel.q", "workers", lambda m: done.set())
    nc.flush()
    nc.publish("otel.q", b"1")
    assert done.wait(10)
    _wait(lambda: otel.spans("process otel.q"), "the process span")
    assert otel.span("process otel.q").attributes["messaging.consumer.group.name"] == "workers"


def test_receive_inside_a_span_is_its_child_linked_to_the_producer(
    otel: Telemetry, nc: Client
) -> None:
    sub = nc.subscribe("otel.link")
    nc.flush()
    nc.publish("otel.link", b"1")
    with otel.provider.get_tracer("app").start_as_current_span("handle") as outer:
        sub.next_msg(10)
    receive, publish = otel.span("receive otel.link"), otel.span("publish otel.link")
    assert receive.parent is not None and receive.parent.span_id == outer.get_span_context().span_id
    assert [link.context.span_id for link in receive.links] == [publish.context.span_id]


def test_kv_and_object_store_calls_are_spans(otel: Telemetry, nc: Client) -> None:
    js = nc.jetstream()
    kv = js.create_key_value(bucket="OTELKV")
    try:
        kv.put("color", b"blue")
        assert kv.get("color").value == b"blue"
    finally:
        js.delete_key_value("OTELKV")
    obs = js.create_object_store("OTELOBJ")
    try:
        obs.put("file", b"x" * 10)
    finally:
        js.delete_object_store("OTELOBJ")
    names = otel.names()
    assert "jetstream STREAM.CREATE" in names and "jetstream STREAM.DELETE" in names
    put = otel.span("publish $KV.OTELKV.color")
    assert put.kind is SpanKind.PRODUCER
    assert put.attributes["messaging.nats.stream.name"] == "KV_OTELKV"
    assert any(n.startswith("publish $O.OTELOBJ.") for n in names)
    for span in otel.spans():
        if span.name.startswith("jetstream "):
            assert span.kind is SpanKind.CLIENT
            assert span.attributes["messaging.system"] == "nats"


def test_batch_messages_are_producer_spans_carrying_the_context(
    otel: Telemetry, nc: Client
) -> None:
    js = nc.jetstream()
    js.add_stream(name="OTELB", subjects=["otelb.>"], allow_atomic=True, allow_batched=True)
    try:
        with js.batch_publish() as batch:
            batch.add("otelb.a", b"1")
            ack = batch.commit("otelb.b", b"2")
        with js.fast_publisher() as pub:
            pub.add("otelb.fast", b"3")
            pub.commit()
        msgs = js.pull_subscribe("otelb.>", durable="b").fetch(3, timeout=10)
    finally:
        js.delete_stream("OTELB")
    assert [m.subject for m in msgs] == ["otelb.a", "otelb.b", "otelb.fast"]
    add, commit = otel.span("publish otelb.a"), otel.span("publish otelb.b")
    fast = otel.span("publish otelb.fast")
    assert {add.kind, commit.kind, fast.kind} == {SpanKind.PRODUCER}
    assert add.attributes["messaging.operation.name"] == "batch.add"
    assert commit.attributes["messaging.operation.name"] == "batch.commit"
    assert commit.attributes["messaging.nats.stream.sequence"] == ack.seq
    assert otel.span("batch.commit").kind is SpanKind.PRODUCER  # the fast commit, no message
    assert "request otelb.b" not in otel.names()  # the request inside makes no span
    for msg, span in zip(msgs, (add, commit, fast)):
        assert f"{span.context.span_id:016x}" in msg.headers["traceparent"]


def test_a_batched_direct_get_is_one_client_span(otel: Telemetry, nc: Client) -> None:
    js = nc.jetstream()
    js.add_stream(name="OTELD", subjects=["oteld.>"], allow_direct=True)
    try:
        for i in range(3):
            js.publish("oteld.x", str(i).encode())
        got = [m.data for m in js.get_batch("OTELD", seq=1, batch=3)]
    finally:
        js.delete_stream("OTELD")
    assert got == [b"0", b"1", b"2"]
    span = otel.span("jetstream DIRECT.GET OTELD")
    assert span.kind is SpanKind.CLIENT
    assert span.attributes["messaging.operation.name"] == "get_batch"
    assert not [n for n in otel.names() if "_INBOX" in n]  # its inbox makes no spans
