"""A pipeline's trace through Spark: the source reads a message's ``traceparent`` in the
``headers`` column, the sink writes it back as a header, and the consumer downstream
continues the publisher's trace (the Spark tasks themselves make no spans)."""

from __future__ import annotations

from typing import Any, Iterator

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSServer

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import SpanKind

from jetstream_sync.otel import JetStreamSyncInstrumentor


@pytest.fixture
def spans() -> Iterator[Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    inst = JetStreamSyncInstrumentor()
    inst.instrument(tracer_provider=provider)
    try:
        yield exporter, provider.get_tracer("shop")
    finally:
        inst.uninstrument()


def test_the_trace_goes_through_a_spark_job(spark: Any, spark_nats: NATSServer, spans: Any) -> None:
    exporter, tracer = spans
    url = spark_nats.url
    with nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="PIPEIN", subjects=["pipein.>"], storage="memory")
        js.add_stream(name="PIPEOUT", subjects=["pipeout.>"], storage="memory")
        try:
            with tracer.start_as_current_span("checkout"):
                js.publish("pipein.order", b"order 1")
            (publish,) = [
                s for s in exporter.get_finished_spans() if s.name == "publish pipein.order"
            ]

            rows = spark.read.format("jetstream").option("servers", url).option("stream", "PIPEIN")
            rows.load().selectExpr(
                "concat('pipeout.', subject) as subject",
                "upper(cast(data as string)) as data",
                "headers",
            ).selectExpr("subject", "cast(data as binary) as data", "headers").write.format(
                "jetstream"
            ).option("servers", url).option("stream", "PIPEOUT").mode("append").save()

            (msg,) = js.pull_subscribe("pipeout.>", durable="downstream").fetch(1, timeout=10)
            assert msg.data == b"ORDER 1"
            (receive,) = [
                s for s in exporter.get_finished_spans() if s.name == "receive pipeout.pipein.order"
            ]
        finally:
            js.delete_stream("PIPEIN")
            js.delete_stream("PIPEOUT")
    assert receive.kind is SpanKind.CONSUMER
    assert receive.context.trace_id == publish.context.trace_id
    assert receive.parent is not None and receive.parent.span_id == publish.context.span_id
