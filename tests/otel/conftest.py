"""Fixtures of the OpenTelemetry tests: an instrumented package whose spans go to the SDK's
in-memory exporter and whose metrics to its in-memory reader. The tests skip when the SDK
is not installed (it is in the test extra)."""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Tuple

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from jetstream_sync.otel import JetStreamSyncInstrumentor


class Telemetry:
    """What the instrumented package recorded."""

    def __init__(self, exporter: InMemorySpanExporter, reader: InMemoryMetricReader) -> None:
        self.exporter = exporter
        self.reader = reader
        self.provider: TracerProvider

    def spans(self, name: str = "") -> List[ReadableSpan]:
        """The finished spans (named ``name``, when given), oldest first."""
        return [s for s in self.exporter.get_finished_spans() if not name or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        """The one finished span named ``name``."""
        found = self.spans(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {self.names()}"
        return found[0]

    def names(self) -> List[str]:
        return [s.name for s in self.exporter.get_finished_spans()]

    def metric(self, name: str) -> List[Tuple[Dict[str, Any], Any]]:
        """The points of metric ``name``: (attributes, value or histogram count)."""
        data = self.reader.get_metrics_data()
        out: List[Tuple[Dict[str, Any], Any]] = []
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name != name:
                        continue
                    for p in m.data.data_points:
                        value = getattr(p, "value", None)
                        out.append((dict(p.attributes or {}), p.count if value is None else value))
        return out

    def total(self, name: str, **attrs: Any) -> Any:
        """The sum of metric ``name``'s points whose attributes include ``attrs``."""
        keyed = {k.replace("__", "."): v for k, v in attrs.items()}
        return sum(v for a, v in self.metric(name) if all(a.get(k) == w for k, w in keyed.items()))


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    instrumentor = JetStreamSyncInstrumentor()
    instrumentor.instrument(tracer_provider=provider, meter_provider=meters)
    tel = Telemetry(exporter, reader)
    tel.provider = provider
    try:
        yield tel
    finally:
        instrumentor.uninstrument()
        provider.shutdown()
        meters.shutdown()
