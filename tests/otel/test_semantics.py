"""What the instrumentation records where a naive one goes wrong: metric attributes of low
cardinality (subject templates, no made-up consumer names), a settle span in its message's
trace after fetch(), trace headers left out rather than breaking a max_payload publish, and
a durable lookup's expected not-found that is no error span."""

from __future__ import annotations

import time
from typing import Any, Dict, List

import pytest
from opentelemetry.trace import SpanKind, StatusCode

from jetstream_sync import Client, errors
from jetstream_sync.otel._telemetry import destination_template

from .conftest import Telemetry

DEST = "messaging.destination.name"
TEMPLATE = "messaging.destination.template"
GROUP = "messaging.consumer.group.name"


def _wait(cond: Any, what: str, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _points(otel: Telemetry, name: str) -> List[Dict[str, Any]]:
    return [attrs for attrs, _ in otel.metric(name)]


@pytest.mark.parametrize(
    ("subject", "template"),
    [
        ("$KV.cfg.user.42", "$KV.cfg.>"),
        ("$O.files.C.S1lVJ3VMUG44VCKMOoOzLb", "$O.files.C.>"),
        ("$O.files.M.bzA=", "$O.files.M.>"),
        ("_INBOX.ifsG7USWw596Yo8d6oOjO2.17", "_INBOX.>"),
        (
            "$JS.API.CONSUMER.CREATE.ORDERS.ifsG7USWw596Yo8d6oOjO2_1.orders.>",
            "$JS.API.CONSUMER.CREATE.>",
        ),
        ("$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.worker", "$JS.API.CONSUMER.DURABLE.CREATE.>"),
        ("$JS.API.STREAM.NAMES", "$JS.API.STREAM.NAMES"),
        ("$JS.API.INFO", "$JS.API.INFO"),
        ("$JS.hub.API.STREAM.INFO.ORDERS", "$JS.hub.API.STREAM.INFO.>"),
        ("$JS.API.DIRECT.GET.KV_cfg.$KV.cfg.user.42", "$JS.API.DIRECT.GET.>"),
        ("$JS.ACK.ORDERS.worker.1.2.3.4.5", "$JS.ACK.>"),
        ("$SRV.PING.calc.ifsG7USWw596Yo8d6oOjO2", "$SRV.PING.calc.>"),
        ("$SRV.PING.calc", None),
        ("orders.42", None),  # the user's own subjects are kept as they are
        ("_MY.inbox", None),
        ("", None),
    ],
)
def test_destination_templates(subject: str, template: Any) -> None:
    assert destination_template(subject) == template


def test_kv_keys_are_one_series_by_their_template(otel: Telemetry, nc: Client) -> None:
    js = nc.jetstream()
    kv = js.create_key_value(bucket="tmpl")
    try:
        for i in range(5):
            kv.put(f"user.{i}", b"v")
        nc.publish("plain.subject", b"x")
        nc.flush()
    finally:
        js.delete_key_value("tmpl")
    # spans keep the full subject, and carry its template too
    span = otel.span("publish $KV.tmpl.user.3")
    assert span.attributes[DEST] == "$KV.tmpl.user.3"
    assert span.attributes[TEMPLATE] == "$KV.tmpl.>"
    create = otel.span("jetstream STREAM.CREATE")
    assert create.attributes[DEST] == "$JS.API.STREAM.CREATE.KV_tmpl"
    assert create.attributes[TEMPLATE] == "$JS.API.STREAM.CREATE.>"
    # metrics: the template, never a key
    for name in ("messaging.client.sent.messages", "messaging.client.operation.duration"):
        points = _points(otel, name)
        assert not [p for p in points if str(p.get(DEST, "")).startswith("$")], points
    assert otel.total("messaging.client.sent.messages", **{TEMPLATE: "$KV.tmpl.>"}) == 5
    # a subject of the user's own is counted by name
    assert otel.total("messaging.client.sent.messages", **{DEST: "plain.subject"}) == 1
    assert not [
        p for p in _points(otel, "messaging.client.sent.messages") if TEMPLATE in p and DEST in p
    ]


def test_ephemeral_consumers_add_no_series(otel: Telemetry, nc: Client) -> None:
    js = nc.jetstream()
    js.add_stream(name="EPH", subjects=["eph.>"])
    try:
        js.publish("eph.a", b"x")
        names = []
        for _ in range(3):
            oc = js.ordered_consumer("EPH")
            for msg in oc.messages():
                names.append(msg.metadata.consumer)
                break
        (msg,) = js.pull_subscribe("eph.a", durable="keeper").fetch(1, timeout=5)
        msg.ack()
    finally:
        js.delete_stream("EPH")
    assert len(set(names)) == 3
    # the spans name each consumer ...
    creates = otel.spans("jetstream CONSUMER.CREATE")
    assert {s.attributes[DEST].split(".")[5] for s in creates} >= set(names)
    receives = otel.spans("receive eph.a")
    assert {s.attributes.get(GROUP) for s in receives} >= set(names)
    # ... the metrics do not: one series for the three creates, no ordered consumer's name
    points = _points(otel, "messaging.client.operation.duration")
    create_points = [p for p in points if p.get("messaging.operation.name") == "CONSUMER.CREATE"]
    assert create_points == [
        {
            "messaging.system": "nats",
            TEMPLATE: "$JS.API.CONSUMER.CREATE.>",
            "messaging.operation.type": "send",
            "messaging.operation.name": "CONSUMER.CREATE",
        }
    ]
    all_points = points + _points(otel, "nats.client.acks")
    assert not [p for p in all_points if p.get(GROUP) in names]
    # a durable's name is kept: it is chosen, and few
    assert [p for p in points if p.get(GROUP) == "keeper"]
    assert otel.total("nats.client.acks", **{GROUP: "keeper"}) == 1


def test_an_ack_after_fetch_is_in_the_messages_trace(otel: Telemetry, nc: Client) -> None:
    js = nc.jetstream()
    js.add_stream(name="AFT", subjects=["aft.>"])
    tracer = otel.provider.get_tracer("test")
    try:
        with tracer.start_as_current_span("service"):
            js.publish("aft.a", b"1")
            js.publish("aft.a", b"2")
        psub = js.pull_subscribe("aft.a", durable="w")
        first, second = psub.fetch(2, timeout=5)
        first.ack()  # no span current: the receive span is its parent
        with tracer.start_as_current_span("handler") as handler:
            second.ack()  # in the user's own span: a link to the receive span
    finally:
        js.delete_stream("AFT")
    service = otel.span("service")
    r1, r2 = otel.spans("receive aft.a")
    a1, a2 = otel.spans("ack aft.a")
    assert a1.parent is not None and a1.parent.span_id == r1.context.span_id
    assert a1.context.trace_id == service.context.trace_id
    assert not a1.links
    assert a2.parent is not None and a2.parent.span_id == handler.get_span_context().span_id
    assert [link.context.span_id for link in a2.links] == [r2.context.span_id]


def test_trace_headers_that_do_not_fit_are_left_out(otel: Telemetry, nc: Client) -> None:
    limit = nc.max_payload
    sub = nc.subscribe("big.core")
    nc.publish("big.core", b"x" * limit)
    msg = sub.next_msg(timeout=10)
    assert len(msg.data) == limit and msg.headers is None
    span = otel.span("publish big.core")
    assert span.attributes["messaging.nats.trace_context.injected"] is False
    assert [e.name for e in span.events] == ["trace context not injected"]
    assert span.status.status_code is StatusCode.UNSET
    assert otel.total("messaging.client.sent.messages", **{DEST: "big.core"}) == 1
    # a message that fits with them gets them, and says nothing
    nc.publish("big.core", b"x" * (limit - 200))
    assert "traceparent" in sub.next_msg(timeout=10).headers
    assert (
        "messaging.nats.trace_context.injected" not in otel.spans("publish big.core")[1].attributes
    )
    # one too large without them fails as it does untraced
    with pytest.raises(errors.MaxPayloadError):
        nc.publish("big.core", b"x" * (limit + 1))
    failed = otel.spans("publish big.core")[2]
    assert failed.status.status_code is StatusCode.ERROR
    # and a JetStream publish of max_payload bytes (the user's own header kept)
    js = nc.jetstream()
    js.add_stream(name="BIG", subjects=["big.js"])
    try:
        ack = js.publish("big.js", b"y" * (limit - 20), headers={"K": "v"})
        stored = js.get_msg("BIG", ack.seq)
        assert stored.headers is not None and stored.headers.get("K") == "v"
        assert "traceparent" not in stored.headers
    finally:
        js.delete_stream("BIG")
    pub = otel.span("publish big.js")
    assert pub.attributes["messaging.nats.trace_context.injected"] is False
    assert pub.attributes["messaging.nats.stream.sequence"] == ack.seq


def _lookups(otel: Telemetry) -> List[Any]:
    return otel.spans("jetstream CONSUMER.INFO")


def test_a_durable_lookup_that_finds_nothing_on_first_bind_is_no_error(
    otel: Telemetry, nc: Client
) -> None:
    js = nc.jetstream()
    js.add_stream(name="LOOK", subjects=["look.>"])
    try:
        js.pull_subscribe("look.a", durable="fresh")  # looked up, not found, created
        (lookup,) = _lookups(otel)
        assert lookup.status.status_code is StatusCode.UNSET
        assert lookup.attributes["messaging.nats.api.not_found"] is True
        assert "error.type" not in lookup.attributes
        assert [e.name for e in lookup.events] == ["not found (expected)"]
        assert lookup.events[0].attributes["exception.type"].endswith("ConsumerNotFoundError")
        points = _points(otel, "messaging.client.operation.duration")
        info = [p for p in points if p.get("messaging.operation.name") == "CONSUMER.INFO"]
        assert info and not [p for p in info if "error.type" in p]
        # bound again: found
        js.pull_subscribe("look.a", durable="fresh")
        assert _lookups(otel)[1].status.status_code is StatusCode.UNSET
        assert "messaging.nats.api.not_found" not in _lookups(otel)[1].attributes
        # the push form too
        js.subscribe("look.b", durable="pushed")
        assert _lookups(otel)[2].attributes["messaging.nats.api.not_found"] is True
        assert _lookups(otel)[2].status.status_code is StatusCode.UNSET
        # a lookup whose not-found nobody expects stays an error
        with pytest.raises(errors.ConsumerNotFoundError):
            js.consumer_info("LOOK", "missing")
        with pytest.raises(errors.NotFoundError):
            js.pull_subscribe_bind("missing", stream="LOOK")
        with pytest.raises(errors.NotFoundError):
            js.subscribe_bind("LOOK", "missing")
        errors_seen = _lookups(otel)[3:]
        assert len(errors_seen) == 3
        for span in errors_seen:
            assert span.status.status_code is StatusCode.ERROR
            assert span.attributes["error.type"].endswith("ConsumerNotFoundError")
            assert "messaging.nats.api.not_found" not in span.attributes
    finally:
        js.delete_stream("LOOK")
    assert otel.spans("jetstream CONSUMER.CREATE")[0].kind is SpanKind.CLIENT


def test_a_stream_lookup_failure_stays_an_error(otel: Telemetry, nc: Client) -> None:
    """The expectation is the durable's not-found only: pull_subscribe on a stream that
    does not exist is an error, and its lookup's span says so."""
    js = nc.jetstream()
    with pytest.raises(errors.StreamNotFoundError):
        js.pull_subscribe("nowhere.a", durable="d", stream="NOWHERE")
    (lookup,) = _lookups(otel)
    assert lookup.status.status_code is StatusCode.ERROR
    assert lookup.attributes["error.type"].endswith("StreamNotFoundError")
    assert "messaging.nats.api.not_found" not in lookup.attributes
