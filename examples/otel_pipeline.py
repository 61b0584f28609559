"""OpenTelemetry across a pipeline: a publisher, a worker pool and a Spark job, one trace.

An order is published in a ``checkout`` span; a worker of a three-worker ``consume()`` pool
packs it, in a CONSUMER ``process`` span, and publishes the packed order from inside that span;
a Spark job reads the packed orders with the ``jetstream`` source and writes them on with the
sink, carrying each row's ``headers`` column (so its ``traceparent``) from one to the other;
a downstream consumer fetches the shipped order. Every span lands in one trace, printed as a
tree. The Spark tasks make no spans of their own: the trace passes through the job in the
rows' headers.

Needs the otel and spark extras (``pip install 'jetstream-sync[otel,spark]' opentelemetry-sdk``)
and Java 17+. In a real service an exporter (OTLP, say) takes the in-memory one's place.

Run: python examples/otel_pipeline.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import os
import sys
import threading

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

# The tree printer of the simpler example beside this one (a publisher and a worker pool).
from otel_tracing import print_tree

import jetstream_sync as nats
import jetstream_sync.spark
from jetstream_sync.jetstream.api import ConsumerConfig
from jetstream_sync.otel import JetStreamSyncInstrumentor
from jetstream_sync.server import url_from_env_or_embedded

WORKERS = 3


def main() -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need pyarrow too
    from pyspark.sql import SparkSession

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = JetStreamSyncInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    tracer = provider.get_tracer("shop")

    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        for name in ("ORDERS", "PACKED", "SHIPPED"):
            js.add_stream(name=name, subjects=[f"{name.lower()}.>"], storage="memory")
        try:
            # The worker pool: each packs an order and publishes it on, inside its span.
            consumer = js.create_or_update_consumer(
                "ORDERS", ConsumerConfig(durable_name="packers")
            )
            packed = threading.Event()

            def pack(msg: nats.Msg) -> None:
                js.publish("packed.order", msg.data.upper())
                msg.ack()
                packed.set()

            pool = [consumer.consume(pack) for _ in range(WORKERS)]

            # The publisher.
            with tracer.start_as_current_span("checkout") as root:
                js.publish("orders.order", b"order 1")
            trace_id = root.get_span_context().trace_id
            if not packed.wait(30):
                raise SystemExit("the order was not packed in time")
            for ctx in pool:
                ctx.drain()  # each callback has returned, so its span has ended

            # The Spark job: packed orders in, shipped orders out, headers carried along.
            spark = (
                SparkSession.builder.master("local[2]")
                .config("spark.ui.enabled", "false")
                .config("spark.sql.shuffle.partitions", "2")
                .getOrCreate()
            )
            spark.sparkContext.setLogLevel("ERROR")
            jetstream_sync.spark.register(spark)
            packed_rows = (
                spark.read.format("jetstream")
                .option("servers", url)
                .option("stream", "PACKED")
                .load()
            )
            packed_rows.selectExpr(
                "replace(subject, 'packed.', 'shipped.') as subject", "data", "headers"
            ).write.format("jetstream").option("servers", url).option("stream", "SHIPPED").mode(
                "append"
            ).save()
            spark.stop()

            # Downstream.
            (shipped,) = js.pull_subscribe("shipped.>", durable="downstream").fetch(1, timeout=10)
            shipped.ack_sync()
            print(f"shipped: {shipped.data.decode()}")
        finally:
            for name in ("ORDERS", "PACKED", "SHIPPED"):
                js.delete_stream(name)
    instrumentor.uninstrument()

    print("the order's trace, from the publisher through the workers and Spark:")
    print_tree(list(exporter.get_finished_spans()), trace_id)


if __name__ == "__main__":
    main()
