"""The spans and metrics of one instrumentation: what each wrapper of ``_patches.py`` calls.

Span names and attributes follow OpenTelemetry's messaging semantic conventions
(``messaging.system`` = ``nats``, ``messaging.destination.name``,
``messaging.operation.type`` / ``.name``, ``messaging.message.body.size``,
``messaging.message.id``, ``messaging.consumer.group.name``, ``server.address`` /
``server.port``, ``error.type``); what they do not name is under ``messaging.nats.*``.
"""

from __future__ import annotations

import functools
import time
import urllib.parse
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace
from opentelemetry.metrics import Meter
from opentelemetry.propagators.textmap import Getter
from opentelemetry.trace import Link, Span, SpanKind, Status, StatusCode, Tracer

from ..msg import Headers, HeadersLike, Msg

__all__ = ["Telemetry"]

SYSTEM = "nats"
T = TypeVar("T")
# Set in the context while one of our spans runs the public API itself (js.publish sends
# with Client.request, a KV put with js.publish): the inner calls make no spans of their own.
_INSIDE = otel_context.create_key("jetstream_sync.otel.inside")
_TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def inside() -> bool:
    """Whether the calling code runs inside one of our own operation spans."""
    return otel_context.get_value(_INSIDE) is True


def quiet_steps(items: Iterator[T], span: Span) -> Iterator[T]:
    """``items``, each step taken in ``span`` with the public API's spans off (the inbox a
    batched direct get reads is no delivery to the user); ``span`` ends with the iteration,
    its error, or when the iteration is dropped."""
    ctx = otel_context.set_value(_INSIDE, True, trace.set_span_in_context(span))
    error: Optional[BaseException] = None
    try:
        while True:
            token = otel_context.attach(ctx)
            try:
                item = next(items)
            except StopIteration:
                return
            except BaseException as exc:
                error = exc
                raise
            finally:
                otel_context.detach(token)
            yield item
    finally:
        if error is not None:
            span.set_attribute("error.type", error_type(error))
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()


@functools.lru_cache(maxsize=64)
def _server(url: str) -> Tuple[Tuple[str, Any], ...]:
    parts = urllib.parse.urlsplit(url)
    out: List[Tuple[str, Any]] = []
    if parts.hostname:
        out.append(("server.address", parts.hostname))
    if parts.port:
        out.append(("server.port", parts.port))
    return tuple(out)


def server_attributes(client: Any) -> Tuple[Tuple[str, Any], ...]:
    """server.address / server.port of the server ``client`` is connected to (none: ())."""
    try:
        url = client.connected_url
    except Exception:  # pragma: no cover - a client half made
        return ()
    return () if url is None else _server(url.geturl())


def body_size(data: Any) -> Optional[int]:
    """The size of a payload as published (None when it has no length)."""
    try:
        return len(data)
    except TypeError:
        return None


def error_type(exc: BaseException) -> str:
    """``error.type``: the exception's class, qualified."""
    cls = type(exc)
    return f"{cls.__module__}.{cls.__qualname__}"


class _Getter(Getter[Headers]):
    """Reads a trace context out of a message's :class:`Headers` (case-insensitive)."""

    def get(self, carrier: Headers, key: str) -> Optional[List[str]]:
        return carrier.get_all(key) or None

    def keys(self, carrier: Headers) -> List[str]:
        return list(carrier)


_GETTER = _Getter()


def has_trace_header(headers: HeadersLike) -> bool:
    """Whether the user's headers already carry a trace context (never overwritten)."""
    return any(key.lower() == "traceparent" for key in headers)


def with_context(headers: Optional[HeadersLike]) -> Optional[HeadersLike]:
    """``headers`` with the current trace context (traceparent, tracestate, baggage) added;
    the same object when it has a traceparent already or there is nothing to add. A new
    dict or Headers: the caller's object is never changed."""
    if headers is not None and has_trace_header(headers):
        return headers
    carrier: Dict[str, str] = {}
    propagate.inject(carrier)
    if not carrier:
        return headers
    if headers is None:
        return carrier
    if isinstance(headers, Headers):
        merged = Headers(list(headers.multi_items()))
        for key, value in carrier.items():
            if key not in merged:
                merged.add(key, value)
        return merged
    out: Dict[str, Any] = dict(headers)
    lower = {key.lower() for key in out}
    for key, value in carrier.items():
        if key not in lower:
            out[key] = value
    return out


def producer_context(msg: Msg) -> Optional[otel_context.Context]:
    """The trace context a message carries in its headers; None without one."""
    headers = msg.header
    if headers is None or not headers.get_all("traceparent"):
        return None
    return propagate.extract(headers, getter=_GETTER)


def message_attributes(msg: Msg, operation_type: str, operation: str) -> Dict[str, Any]:
    """The attributes of a span about one received message."""
    attrs: Dict[str, Any] = {
        "messaging.system": SYSTEM,
        "messaging.destination.name": msg.subject,
        "messaging.operation.type": operation_type,
        "messaging.operation.name": operation,
        "messaging.message.body.size": len(msg.data),
    }
    headers = msg.header
    if headers is not None:
        msg_id = headers.get("Nats-Msg-Id")
        if msg_id:
            attrs["messaging.message.id"] = msg_id
    reply = msg.reply
    if reply and reply.startswith("$JS.ACK."):
        try:
            meta = msg.metadata
        except Exception:  # pragma: no cover - a malformed ack subject
            return attrs
        attrs["messaging.consumer.group.name"] = meta.consumer
        attrs["messaging.nats.stream.name"] = meta.stream
        attrs["messaging.nats.stream.sequence"] = meta.sequence.stream
        attrs["messaging.nats.message.delivery_count"] = meta.num_delivered
    return attrs


class Telemetry:
    """The tracer and the instruments of one instrumentation, and the spans they make."""

    def __init__(self, tracer: Tracer, meter: Meter) -> None:
        self.tracer = tracer
        self.sent_messages = meter.create_counter(
            "messaging.client.sent.messages", unit="{message}", description="Messages sent."
        )
        self.consumed_messages = meter.create_counter(
            "messaging.client.consumed.messages",
            unit="{message}",
            description="Messages handed to the application.",
        )
        self.operation_duration = meter.create_histogram(
            "messaging.client.operation.duration",
            unit="s",
            description="Duration of a publish, request, receive, settle or API call.",
        )
        self.process_duration = meter.create_histogram(
            "messaging.process.duration",
            unit="s",
            description="Duration of a callback processing one message.",
        )
        self.sent_bytes = meter.create_counter(
            "nats.client.sent.bytes", unit="By", description="Payload bytes sent."
        )
        self.consumed_bytes = meter.create_counter(
            "nats.client.consumed.bytes", unit="By", description="Payload bytes consumed."
        )
        self.acks = meter.create_counter(
            "nats.client.acks",
            unit="{ack}",
            description="JetStream acks sent, by kind (messaging.operation.name).",
        )
        self.dropped = meter.create_counter(
            "nats.client.dropped.messages",
            unit="{message}",
            description="Messages dropped because a subscription's queue was full.",
        )
        self.slow_consumers = meter.create_counter(
            "nats.client.slow_consumer.events",
            unit="{event}",
            description="Slow-consumer episodes reported.",
        )
        self.reconnects = meter.create_counter(
            "nats.client.reconnects", unit="{reconnect}", description="Reconnections."
        )
        self.errors = meter.create_counter(
            "nats.client.errors", unit="{error}", description="Errors reported to error_cb."
        )

    # --- spans -----------------------------------------------------------------------------

    def start(
        self,
        name: str,
        kind: SpanKind,
        attributes: Dict[str, Any],
        context: Optional[otel_context.Context] = None,
        links: Optional[Sequence[Link]] = None,
        start_time: Optional[int] = None,
    ) -> Span:
        """Start a span (not made current)."""
        return self.tracer.start_span(
            name,
            context=context,
            kind=kind,
            attributes=attributes,
            links=links,
            start_time=start_time,
        )

    def operation(
        self,
        name: str,
        kind: SpanKind,
        attributes: Dict[str, Any],
        context: Optional[otel_context.Context] = None,
        nested: bool = True,
    ) -> _Operation:
        """A context manager: ``span`` current while it runs, ended on the way out (an
        exception recorded with error.type); with ``nested``, the public API called inside
        makes no spans of its own."""
        return _Operation(self, self.start(name, kind, attributes, context), nested)

    def received(
        self, msg: Msg, operation: str, start_time: Optional[int], client: Any = None
    ) -> None:
        """One receive span for a message handed to the caller (next_msg, iteration, fetch):
        its parent the caller's current span, linked to the producer's; without a current
        span, the producer's span is its parent."""
        attrs = message_attributes(msg, "receive", operation)
        if client is not None:
            attrs.update(server_attributes(client))
        links: Optional[List[Link]] = None
        parent: Optional[otel_context.Context] = None
        producer = producer_context(msg)
        if producer is not None:
            if trace.get_current_span().get_span_context().is_valid:
                links = [Link(trace.get_current_span(producer).get_span_context())]
            else:
                parent = producer
        span = self.start(
            f"receive {msg.subject}", SpanKind.CONSUMER, attrs, parent, links, start_time
        )
        span.end()
        if start_time is not None:
            self.operation_duration.record(
                (time.time_ns() - start_time) / 1e9, _metric_attrs(attrs)
            )
        self.consumed(msg.subject, operation, len(msg.data))

    def processing(self, msg: Msg, client: Any = None, group: str = "") -> _Operation:
        """The span of a callback processing ``msg``: a child of the producer's span, kind
        SERVER for a request (a core message with a reply subject), else CONSUMER.
        ``group``: the subscription's queue group (a JetStream consumer's name wins)."""
        reply = msg.reply
        request = bool(reply) and not reply.startswith("$JS.")
        attrs = message_attributes(msg, "process", "process")
        if group:
            attrs.setdefault("messaging.consumer.group.name", group)
        if client is not None:
            attrs.update(server_attributes(client))
        kind = SpanKind.SERVER if request else SpanKind.CONSUMER
        op = _Operation(
            self,
            self.start(f"process {msg.subject}", kind, attrs, producer_context(msg)),
            nested=False,
            process=True,
        )
        self.consumed(msg.subject, "process", len(msg.data))
        return op

    # --- metrics ---------------------------------------------------------------------------

    def sent(self, subject: str, operation: str, size: Optional[int], error: str = "") -> None:
        """Count one message sent."""
        attrs = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": subject,
            "messaging.operation.name": operation,
        }
        if error:
            attrs["error.type"] = error
        self.sent_messages.add(1, attrs)
        if size:
            self.sent_bytes.add(size, attrs)

    def consumed(self, subject: str, operation: str, size: int) -> None:
        """Count one message handed to the application."""
        attrs = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": subject,
            "messaging.operation.name": operation,
        }
        self.consumed_messages.add(1, attrs)
        self.consumed_bytes.add(size, attrs)


_METRIC_KEYS = (
    "messaging.system",
    "messaging.destination.name",
    "messaging.operation.type",
    "messaging.operation.name",
    "messaging.consumer.group.name",
    "server.address",
    "server.port",
    "error.type",
)


def _metric_attrs(attrs: Mapping[str, Any]) -> Dict[str, Any]:
    """The low-cardinality attributes a metric carries (no ids, sizes or sequences)."""
    return {key: attrs[key] for key in _METRIC_KEYS if key in attrs}


class _Operation:
    """A span made current for the length of a ``with`` block; records the duration."""

    __slots__ = ("_process", "_start", "_telemetry", "_token", "attributes", "span")

    def __init__(self, telemetry: Telemetry, span: Span, nested: bool, process: bool = False):
        self._telemetry = telemetry
        self.span = span
        self.attributes: Dict[str, Any] = {}
        self._process = process
        ctx = trace.set_span_in_context(span)
        if nested:
            ctx = otel_context.set_value(_INSIDE, True, ctx)
        self._token = otel_context.attach(ctx)
        self._start = time.perf_counter()

    def __enter__(self) -> _Operation:
        return self

    def __exit__(self, exc_type: Any, exc: Optional[BaseException], tb: Any) -> None:
        self.finish(exc)

    def finish(self, exc: Optional[BaseException]) -> None:
        """Detach and end the span, with ``exc`` (if any) recorded as its error."""
        try:
            otel_context.detach(self._token)
        finally:
            self.end(exc)

    def end(self, exc: Optional[BaseException]) -> None:
        """End the span (without detaching: for a span ended on another thread)."""
        span = self.span
        attrs = dict(getattr(span, "attributes", None) or {})
        attrs.update(self.attributes)
        if exc is not None:
            kind = error_type(exc)
            span.set_attribute("error.type", kind)
            attrs["error.type"] = kind
            span.record_exception(exc)
            span.set_status(Status(StatusCode.ERROR, f"{type(exc).__name__}: {exc}"))
        for key, value in self.attributes.items():
            span.set_attribute(key, value)
        span.end()
        duration = time.perf_counter() - self._start
        hist = (
            self._telemetry.process_duration
            if self._process
            else self._telemetry.operation_duration
        )
        hist.record(duration, _metric_attrs(attrs))


def detached(op: _Operation) -> _Operation:
    """Give up ``op``'s place in this thread's context now (its span still open): for an
    operation that ends later, on another thread (publish_async)."""
    otel_context.detach(op._token)
    return op
