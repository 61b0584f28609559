"""The spans and metrics of one instrumentation: what each wrapper of ``_patches.py`` calls.

Span names and attributes follow OpenTelemetry's messaging semantic conventions
(``messaging.system`` = ``nats``, ``messaging.destination.name``,
``messaging.operation.type`` / ``.name``, ``messaging.message.body.size``,
``messaging.message.id``, ``messaging.consumer.group.name``, ``server.address`` /
``server.port``, ``error.type``); what they do not name is under ``messaging.nats.*``.
"""

from __future__ import annotations

import contextvars
import functools
import threading
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
DEST = "messaging.destination.name"
TEMPLATE = "messaging.destination.template"
GROUP = "messaging.consumer.group.name"
T = TypeVar("T")
# Set in the context while one of our spans runs the public API itself (js.publish sends
# with Client.request, a KV put with js.publish): the inner calls make no spans of their own.
_INSIDE = otel_context.create_key("jetstream_sync.otel.inside")
_TRACE_KEYS = ("traceparent", "tracestate", "baggage")


# Set in the context while a public call runs whose first lookup of a JetStream API object
# may well find nothing, and then goes on (pull_subscribe, subscribe: a durable not made
# yet): that not-found is the expected path, not an error of the API call's span.
_EXPECT = otel_context.create_key("jetstream_sync.otel.expect_not_found")


class _Expectation:
    """One API call (by its words) whose not-found answer is expected, once."""

    __slots__ = ("pending", "words")

    def __init__(self, words: str) -> None:
        self.words = words
        self.pending = True


def expecting_not_found(words: str) -> contextvars.Token[otel_context.Context]:
    """Attach a context in which the next API call ``words`` (``CONSUMER.INFO``) may be
    answered not-found as a matter of course; returns the token for ``otel_context.detach``."""
    return otel_context.attach(otel_context.set_value(_EXPECT, _Expectation(words)))


def takes_not_found(words: str) -> bool:
    """Whether this API call (``words``) is the one whose not-found answer its caller expects
    (see :func:`expecting_not_found`). Only the caller's first such call is: a later lookup
    that finds nothing is an error."""
    expectation = otel_context.get_value(_EXPECT)
    if not isinstance(expectation, _Expectation) or not expectation.pending:
        return False
    if expectation.words != words:
        return False
    expectation.pending = False
    return True


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


# The JetStream API's first words (after ``<prefix>.API.``): a subject holding one of them
# after ".API." is an API call, whichever the prefix (a domain's, an account's import).
_API_ROOTS = frozenset(("STREAM", "CONSUMER", "DIRECT", "INFO", "ACCOUNT", "META", "SERVER"))


def api_words(rest: str) -> Tuple[str, bool]:
    """The API call named by ``rest``, what follows ``.API.`` in a JetStream API subject
    (``STREAM.INFO`` of ``STREAM.INFO.orders``), and whether names follow it (the stream's,
    the consumer's, a filter's: the variable part)."""
    tokens = rest.split(".")
    n = 1
    if tokens[0] in ("STREAM", "CONSUMER", "DIRECT") and len(tokens) > 1:
        n = 3 if tokens[1] in ("MSG", "DURABLE", "LEADER", "PEER") and len(tokens) > 2 else 2
    return ".".join(tokens[:n]), len(tokens) > n


def split_api(subject: str) -> Tuple[str, str]:
    """A JetStream API subject's prefix (``$JS.API``, a domain's ``$JS.hub.API``, an
    account's own) and the rest, from the first API word on; ("", subject) without one."""
    head, sep, rest = subject.partition(".API.")
    if sep:
        return head + ".API", rest
    tokens = subject.split(".")
    for i, token in enumerate(tokens):
        if token in _API_ROOTS:
            return ".".join(tokens[:i]), ".".join(tokens[i:])
    return "", subject


def api_template(prefix: str, rest: str) -> str:
    """The template of an API subject ``<prefix>.<rest>``: the call, then ``.>`` for the
    names that follow it (``$JS.API.CONSUMER.CREATE.>``)."""
    words, more = api_words(rest)
    template = f"{prefix}.{words}" if prefix else words
    return f"{template}.>" if more else template


def destination_template(subject: str) -> Optional[str]:
    """The low-cardinality form of a subject the client makes from names that vary without
    bound (``messaging.destination.template``), None for any other subject (the user's own,
    whose cardinality is the user's to choose: kept as it is).

    Each template is a NATS wildcard subject that matches the subjects it stands for: the
    fixed part, then ``.>`` where the variable part begins:

    * ``$KV.<bucket>.<key>`` -> ``$KV.<bucket>.>`` (a Key-Value key);
    * ``$O.<bucket>.C.<nuid>`` / ``$O.<bucket>.M.<name>`` -> ``$O.<bucket>.C.>`` /
      ``$O.<bucket>.M.>`` (an Object Store's chunks and infos);
    * ``_INBOX.<nuid>...`` -> ``_INBOX.>`` (inboxes: replies, deliveries);
    * ``<prefix>.API.<call>.<names>`` -> ``<prefix>.API.<call>.>`` (a JetStream API call,
      without its stream, consumer or filter: ``$JS.API.CONSUMER.CREATE.>``);
    * ``$JS.<kind>.<...>`` -> ``$JS.<kind>.>`` (acks, flow control);
    * ``$SRV.<verb>.<service>.<id>`` -> ``$SRV.<verb>.<service>.>`` (a micro instance).
    """
    if not subject:
        return None
    first = subject[0]
    if first == "_":
        return "_INBOX.>" if subject.startswith("_INBOX.") else None
    head, sep, rest = subject.partition(".API.")
    if sep and rest.partition(".")[0] in _API_ROOTS:
        return api_template(head + ".API", rest)
    if first != "$":
        return None
    tokens = subject.split(".", 3)
    root = tokens[0]
    if root == "$KV" and len(tokens) > 2:
        return f"$KV.{tokens[1]}.>"
    if root == "$O" and len(tokens) > 3:
        return f"$O.{tokens[1]}.{tokens[2]}.>"
    if root == "$JS" and len(tokens) > 2:
        return f"$JS.{tokens[1]}.>"
    if root == "$SRV" and len(tokens) > 3:
        return f"$SRV.{tokens[1]}.{tokens[2]}.>"
    return None


def destination(subject: str) -> Dict[str, Any]:
    """A span's destination attributes: the subject, and its template when it has one."""
    template = destination_template(subject)
    if template is None:
        return {DEST: subject}
    return {DEST: subject, TEMPLATE: template}


def metric_destination(subject: str) -> Dict[str, Any]:
    """A metric's destination attribute: the template when the subject has one, else the
    subject (the semantic conventions put the name on a metric only when its cardinality
    is low, the template otherwise)."""
    template = destination_template(subject)
    return {DEST: subject} if template is None else {TEMPLATE: template}


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
        **destination(msg.subject),
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


# How many names of ephemeral consumers (and receive spans of messages not yet settled) one
# instrumentation remembers: beyond that the oldest are forgotten (a bound on memory, not a
# limit on use: a name forgotten is at worst counted by name, a settle span then parented
# to the producer's span instead of the receive span).
_REMEMBERED = 4096


class _Recent:
    """A bounded map, oldest entries forgotten first; thread-safe."""

    __slots__ = ("_items", "_lock", "_size")

    def __init__(self, size: int) -> None:
        self._items: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self._size = size

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            items = self._items
            items[key] = value
            if len(items) > self._size:
                del items[next(iter(items))]

    def pop(self, key: str) -> Any:
        with self._lock:
            return self._items.pop(key, None)

    def get(self, key: str) -> Any:
        return self._items.get(key)

    def __contains__(self, key: object) -> bool:
        return key in self._items


class Telemetry:
    """The tracer and the instruments of one instrumentation, and the spans they make."""

    def __init__(self, tracer: Tracer, meter: Meter) -> None:
        self.tracer = tracer
        # Consumers seen created without a durable name (ordered consumers, KV watchers,
        # Object Store reads, unnamed subscriptions): their names are made up per consumer,
        # so metrics count their messages without them.
        self.ephemeral = _Recent(_REMEMBERED)
        # The receive span of each JetStream message handed out (by its ack subject, unique
        # per delivery) until it is settled: an ack after fetch() returned joins its trace.
        self.receipts = _Recent(_REMEMBERED)
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
        links: Optional[Sequence[Link]] = None,
    ) -> _Operation:
        """A context manager: ``span`` current while it runs, ended on the way out (an
        exception recorded with error.type); with ``nested``, the public API called inside
        makes no spans of its own."""
        return _Operation(self, self.start(name, kind, attributes, context, links), nested)

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
        reply = msg.reply
        if reply and reply.startswith("$JS.ACK."):
            self.receipts.put(reply, span.get_span_context())
        if start_time is not None:
            self.operation_duration.record(
                (time.time_ns() - start_time) / 1e9, self.metric_attributes(attrs)
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

    def metric_attributes(self, attrs: Mapping[str, Any]) -> Dict[str, Any]:
        """The low-cardinality attributes a metric takes of a span's: no ids, sizes or
        sequences; a subject's template instead of the subject when it has one; no consumer
        name made up per consumer (an ephemeral consumer's)."""
        out = {key: attrs[key] for key in _METRIC_KEYS if key in attrs}
        if TEMPLATE in out:
            out.pop(DEST, None)
        group = out.get(GROUP)
        if group and group in self.ephemeral:
            del out[GROUP]
        return out

    def sent(self, subject: str, operation: str, size: Optional[int], error: str = "") -> None:
        """Count one message sent."""
        attrs = {
            "messaging.system": SYSTEM,
            **metric_destination(subject),
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
            **metric_destination(subject),
            "messaging.operation.name": operation,
        }
        self.consumed_messages.add(1, attrs)
        self.consumed_bytes.add(size, attrs)


_METRIC_KEYS = (
    "messaging.system",
    DEST,
    TEMPLATE,
    "messaging.operation.type",
    "messaging.operation.name",
    GROUP,
    "server.address",
    "server.port",
    "error.type",
)


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
        hist.record(duration, self._telemetry.metric_attributes(attrs))


def detached(op: _Operation) -> _Operation:
    """Give up ``op``'s place in this thread's context now (its span still open): for an
    operation that ends later, on another thread (publish_async)."""
    otel_context.detach(op._token)
    return op
