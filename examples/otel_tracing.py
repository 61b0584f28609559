"""OpenTelemetry: a publisher and a worker pool, and the trace of one order printed as a tree.

The instrumentor is switched on with the SDK (``pip install 'jetstream-sync[otel]'
opentelemetry-sdk``); in a real service, an exporter (OTLP, say) takes the place of the
in-memory one used here to print the tree. Running a program under
``opentelemetry-instrument`` switches it on with no code at all.

The publisher's ``checkout`` span is the root; each ``js.publish`` is a PRODUCER span whose
context travels in the message's ``traceparent`` header; the worker that gets the message
runs its callback in a CONSUMER ``process`` span, a child of the publish, and its ack is a
``settle`` span inside that.

Run: python examples/otel_tracing.py   (uses $NATS_URL, or starts an embedded nats-server)
"""

from __future__ import annotations

import threading
from typing import Dict, List

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import jetstream_sync as nats
from jetstream_sync.jetstream.api import ConsumerConfig
from jetstream_sync.otel import JetStreamSyncInstrumentor
from jetstream_sync.server import url_from_env_or_embedded

ORDERS = 6
WORKERS = 3


def print_tree(spans: List[ReadableSpan], trace_id: int) -> None:
    """One trace's spans, children indented under their parent, in start order."""
    mine = sorted((s for s in spans if s.context.trace_id == trace_id), key=lambda s: s.start_time)
    children: Dict[int, List[ReadableSpan]] = {}
    roots = []
    for span in mine:
        if span.parent is None:
            roots.append(span)
        else:
            children.setdefault(span.parent.span_id, []).append(span)

    def show(span: ReadableSpan, depth: int) -> None:
        print(f"{'  ' * depth}{span.name} [{span.kind.name}]")
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in roots:
        show(root, 0)


def main() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    JetStreamSyncInstrumentor().instrument(tracer_provider=provider)
    tracer = provider.get_tracer("shop")

    with url_from_env_or_embedded() as url, nats.connect(url) as nc:
        js = nc.jetstream()
        js.add_stream(name="ORDERS", subjects=["orders.>"], retention="workqueue")
        consumer = js.create_or_update_consumer("ORDERS", ConsumerConfig(durable_name="packers"))

        handled = threading.Semaphore(0)

        def pack(msg: nats.Msg) -> None:  # runs in a CONSUMER span
            msg.ack()
            handled.release()

        pool = [consumer.consume(pack) for _ in range(WORKERS)]  # a worker pool

        # The publisher: each order in a trace of its own, rooted at "checkout".
        first = 0
        for i in range(ORDERS):
            with tracer.start_as_current_span("checkout") as root:
                js.publish("orders.new", f"order {i}".encode())
            first = first or root.get_span_context().trace_id
        for _ in range(ORDERS):
            if not handled.acquire(timeout=30):
                raise SystemExit("an order was not handled in time")
        for ctx in pool:
            ctx.drain()  # each callback has returned, so its span has ended
        js.delete_stream("ORDERS")

    print(f"handled {ORDERS} orders with {WORKERS} workers; the trace of the first:")
    print_tree(list(exporter.get_finished_spans()), first)


if __name__ == "__main__":
    main()
