"""The peer: nats-py 2.16 instrumented with ``otel-instrumentation-nats`` (PyPI), in a process
of its own on the same server. A trace started by our publish continues in nats-py's
consumer, and one started by nats-py's publish continues in ours: both sides speak W3C
``traceparent`` in the message headers."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any, Dict, List

import pytest

from jetstream_sync import Client

from .conftest import Telemetry

pytest.importorskip("nats")
pytest.importorskip("otel_instrumentation_nats")

_PEER = r"""
import asyncio, json, sys
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from otel_instrumentation_nats import NatsInstrumentor
import nats

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
NatsInstrumentor().instrument(tracer_provider=provider)


async def main(url, mode, subject):
    nc = await nats.connect(url)
    if mode == "sub":
        got = asyncio.Event()

        async def cb(msg):
            got.set()

        await nc.subscribe(subject, cb=cb)
        await nc.flush()
        print("ready", flush=True)
        await asyncio.wait_for(got.wait(), 60)
    else:
        await nc.publish(subject, b"from nats-py")
        await nc.flush()
    await nc.close()
    print(json.dumps([
        {"name": s.name, "kind": s.kind.name, "trace": s.context.trace_id,
         "span": s.context.span_id, "parent": s.parent.span_id if s.parent else None}
        for s in exporter.get_finished_spans()
    ]), flush=True)


asyncio.run(main(*sys.argv[1:]))
"""


def _peer(url: str, mode: str, subject: str) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen(
        [sys.executable, "-c", _PEER, url, mode, subject],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _spans(proc: subprocess.Popen) -> List[Dict[str, Any]]:  # type: ignore[type-arg]
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    spans: List[Dict[str, Any]] = json.loads(out.strip().splitlines()[-1])
    return spans


def test_our_publish_continues_in_natspy_consumer(otel: Telemetry, nc: Client) -> None:
    proc = _peer(nc.connected_url.geturl(), "sub", "peer.ours")
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        nc.publish("peer.ours", b"from jetstream_sync")
        nc.flush()
        spans = _spans(proc)
    finally:
        proc.kill()
        proc.wait()
    ours = otel.span("publish peer.ours")
    (theirs,) = [s for s in spans if s["kind"] == "CONSUMER"]
    assert theirs["trace"] == ours.context.trace_id
    assert theirs["parent"] == ours.context.span_id


def test_natspy_publish_continues_in_ours(otel: Telemetry, nc: Client) -> None:
    sub = nc.subscribe("peer.theirs")
    nc.flush()
    spans = _spans(_peer(nc.connected_url.geturl(), "pub", "peer.theirs"))
    msg = sub.next_msg(30)
    assert msg.data == b"from nats-py"
    (theirs,) = [s for s in spans if s["kind"] == "PRODUCER"]
    ours = otel.span("receive peer.theirs")
    assert ours.context.trace_id == theirs["trace"]
    assert ours.parent is not None and ours.parent.span_id == theirs["span"]
