"""The wrappers the instrumentor puts on the public API's classes, and takes off again.

Each wrapper keeps the wrapped method's signature and docstring (``functools.wraps``) and
calls it unchanged; with the wrappers off, the classes hold their own functions again and
the package runs exactly the code it runs uninstrumented.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import Link, SpanKind

from .. import client as client_mod
from .. import msg as msg_mod
from .. import subscription as subscription_mod
from ..errors import MaxPayloadError
from ..jetstream import batch as batch_mod
from ..jetstream import consumer as consumer_mod
from ..jetstream import direct as direct_mod
from ..jetstream import fast_ingest as fast_ingest_mod
from ..jetstream import ordered as ordered_mod
from ..jetstream import publish as publish_mod
from ..jetstream import pull as pull_mod
from ..jetstream import push as push_mod
from ._telemetry import (
    SYSTEM,
    Telemetry,
    _Operation,
    body_size,
    destination,
    detached,
    error_type,
    expecting_not_found,
    inside,
    quiet_steps,
    server_attributes,
    with_context,
)

__all__ = ["Patches"]

T = TypeVar("T")
Wrapper = Callable[..., Any]
# On a publish's span when its trace context was left out of the message (it did not fit).
NOT_INJECTED = "messaging.nats.trace_context.injected"


class Patches:
    """The wrappers in place: ``install`` puts them on, ``remove`` restores the originals."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._t = telemetry
        self._saved: List[Tuple[type, str, Any]] = []

    def _wrap(self, cls: type, name: str, make: Callable[[Any], Wrapper]) -> None:
        original = cls.__dict__[name]
        wrapper = functools.wraps(original)(make(original))
        self._saved.append((cls, name, original))
        setattr(cls, name, wrapper)

    def remove(self) -> None:
        """Put the original methods back."""
        while self._saved:
            cls, name, original = self._saved.pop()
            setattr(cls, name, original)

    def install(self) -> None:
        """Wrap every instrumented public method."""
        t = self._t
        Client = client_mod.Client
        self._wrap(Client, "publish", lambda f: _publish(t, f))
        self._wrap(Client, "request", lambda f: _request(t, f))
        self._wrap(Client, "subscribe", lambda f: _subscribe(t, f, "cb", 2))
        Subscription = subscription_mod.Subscription
        self._wrap(Subscription, "next_msg", lambda f: _receive_one(t, f))
        self._wrap(Subscription, "__iter__", lambda f: _receive_each(t, f))
        Publisher = publish_mod.Publisher
        self._wrap(Publisher, "publish", lambda f: _js_publish(t, f))
        self._wrap(Publisher, "publish_async", lambda f: _js_publish_async(t, f))
        self._wrap(pull_mod.PullSubscription, "fetch", lambda f: _receive_list(t, f))
        PullConsumer = consumer_mod.PullConsumer
        self._wrap(PullConsumer, "fetch", lambda f: _receive_list(t, f))
        self._wrap(PullConsumer, "next", lambda f: _receive_one(t, f))
        self._wrap(PullConsumer, "consume", lambda f: _subscribe(t, f, "cb", 0))
        self._wrap(ordered_mod.OrderedConsumer, "consume", lambda f: _subscribe(t, f, "cb", 0))
        MessagesContext = consumer_mod.MessagesContext
        self._wrap(MessagesContext, "__next__", lambda f: _receive_one(t, f))
        self._wrap(MessagesContext, "next", lambda f: _receive_one(t, f))
        PushSubscriber = push_mod.PushSubscriber
        self._wrap(
            PushSubscriber, "subscribe", lambda f: _subscribe(t, _durable_lookup(f), "cb", 2)
        )
        self._wrap(pull_mod.PullSubscriber, "pull_subscribe", _durable_lookup)
        self._wrap(PushSubscriber, "subscribe_bind", lambda f: _subscribe(t, f, "cb", 2))
        for cls in (batch_mod.AtomicBatch, fast_ingest_mod.FastPublisher):
            self._wrap(cls, "add", functools.partial(_batch_publish, t, operation="batch.add"))
            self._wrap(
                cls, "commit", functools.partial(_batch_publish, t, operation="batch.commit")
            )
        for name in ("get_batch", "get_last_msgs_for", "get_msgs"):
            self._wrap(direct_mod.DirectGetter, name, functools.partial(_direct_get, t))
        Msg = msg_mod.Msg
        for name in ("ack", "ack_sync", "nak", "in_progress", "term"):
            self._wrap(Msg, name, functools.partial(_settle, t, name=name))


def _publish_attrs(
    client: Any, subject: str, operation: str, size: Optional[int]
) -> Dict[str, Any]:
    attrs: Dict[str, Any] = {
        "messaging.system": SYSTEM,
        **destination(subject),
        "messaging.operation.type": "send",
        "messaging.operation.name": operation,
    }
    if size is not None:
        attrs["messaging.message.body.size"] = size
    attrs.update(server_attributes(client))
    return attrs


def fitting(op: _Operation, headers: Any, send: Callable[[Any], T]) -> T:
    """``send(headers)`` with the current trace context added to ``headers``; when the
    message is then too large for the server (``MaxPayloadError``: the trace headers pushed
    it over max_payload), ``send(headers)`` as the program gave them, so that tracing never
    changes what a publish does. The span records that the context was left out (the
    ``messaging.nats.trace_context.injected`` attribute, false, and an event). A
    MaxPayloadError is raised before anything is sent, so the second try is the only one
    that goes out; a message too large without the headers fails as it would untraced."""
    traced = with_context(headers)
    if traced is headers:
        return send(headers)
    try:
        return send(traced)
    except MaxPayloadError as exc:
        result = send(headers)
        op.span.set_attribute(NOT_INJECTED, False)
        op.span.add_event("trace context not injected", {"reason": f"{type(exc).__name__}: {exc}"})
        return result


def _publish(t: Telemetry, f: Wrapper) -> Wrapper:
    def publish(
        self: Any,
        subject: str,
        data: Any = b"",
        reply: Optional[str] = None,
        headers: Any = None,
        *,
        payload: Any = None,
    ) -> None:
        if inside():
            return f(self, subject, data, reply, headers, payload=payload)  # type: ignore[no-any-return]
        size = body_size(data if payload is None else payload)
        attrs = _publish_attrs(self, subject, "publish", size)
        error = ""
        with t.operation(f"publish {subject}", SpanKind.PRODUCER, attrs, nested=False) as op:
            try:
                fitting(
                    op,
                    headers,
                    lambda h: f(self, subject, data, reply, h, payload=payload),
                )
            except BaseException as exc:
                error = error_type(exc)
                raise
            finally:
                t.sent(subject, "publish", size, error)

    return publish


def _request(t: Telemetry, f: Wrapper) -> Wrapper:
    def request(
        self: Any,
        subject: str,
        data: Any = b"",
        timeout: float = 1.0,
        headers: Any = None,
        **kwargs: Any,
    ) -> Any:
        if inside():
            return f(self, subject, data, timeout, headers, **kwargs)
        size = body_size(data if kwargs.get("payload") is None else kwargs["payload"])
        attrs = _publish_attrs(self, subject, "request", size)
        error = ""
        with t.operation(f"request {subject}", SpanKind.CLIENT, attrs, nested=False) as op:
            try:
                return fitting(op, headers, lambda h: f(self, subject, data, timeout, h, **kwargs))
            except BaseException as exc:
                error = error_type(exc)
                raise
            finally:
                t.sent(subject, "request", size, error)

    return request


def _js_publish(t: Telemetry, f: Wrapper) -> Wrapper:
    def publish(
        self: Any, subject: str, data: Any = b"", headers: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        if inside():
            return f(self, subject, data, headers, *args, **kwargs)
        size = body_size(data if kwargs.get("payload") is None else kwargs["payload"])
        attrs = _publish_attrs(self.nc, subject, "publish", size)
        msg_id = args[0] if args else kwargs.get("msg_id")
        if isinstance(msg_id, str) and msg_id:
            attrs["messaging.message.id"] = msg_id
        error = ""
        with t.operation(f"publish {subject}", SpanKind.PRODUCER, attrs) as op:
            try:
                ack = fitting(op, headers, lambda h: f(self, subject, data, h, *args, **kwargs))
            except BaseException as exc:
                error = error_type(exc)
                raise
            finally:
                t.sent(subject, "publish", size, error)
            _ack_attributes(op.attributes, ack)
            return ack

    return publish


def _ack_attributes(out: Dict[str, Any], ack: Any) -> None:
    out["messaging.nats.stream.name"] = ack.stream
    out["messaging.nats.stream.sequence"] = ack.seq
    if getattr(ack, "duplicate", False):
        out["messaging.nats.message.duplicate"] = True


def _js_publish_async(t: Telemetry, f: Wrapper) -> Wrapper:
    def publish_async(
        self: Any, subject: str, data: Any = b"", headers: Any = None, *args: Any, **kwargs: Any
    ) -> Any:
        if inside():
            return f(self, subject, data, headers, *args, **kwargs)
        size = body_size(data if kwargs.get("payload") is None else kwargs["payload"])
        attrs = _publish_attrs(self.nc, subject, "publish", size)
        op = t.operation(f"publish {subject}", SpanKind.PRODUCER, attrs)
        try:
            future = fitting(op, headers, lambda h: f(self, subject, data, h, *args, **kwargs))
        except BaseException as exc:
            op.finish(exc)
            t.sent(subject, "publish", size, error_type(exc))
            raise
        detached(op)
        t.sent(subject, "publish", size)

        def settled(fut: Any) -> None:
            exc = fut.exception()
            if exc is None:
                _ack_attributes(op.attributes, fut.result())
            op.end(exc)

        future.add_done_callback(settled)
        return future

    return publish_async


def _batch_publish(t: Telemetry, f: Wrapper, *, operation: str) -> Wrapper:
    """A message of an atomic or fast-ingest batch: a PRODUCER span with the context
    injected (a commit without a message of its own: a span all the same)."""

    def publish(
        self: Any, subject: Optional[str] = None, data: Any = b"", headers: Any = None, **kw: Any
    ) -> Any:
        if inside():
            return f(self, subject, data, headers, **kw)
        size = None if subject is None else body_size(data)
        name = operation if subject is None else f"publish {subject}"
        attrs = _publish_attrs(None, subject or "", operation, size)
        with t.operation(name, SpanKind.PRODUCER, attrs) as op:
            if subject is None:
                result = f(self, subject, data, headers, **kw)
            else:
                result = fitting(op, headers, lambda h: f(self, subject, data, h, **kw))
            if subject is not None:
                t.sent(subject, operation, size)
            stream = getattr(result, "stream", None)
            if isinstance(stream, str):
                op.attributes["messaging.nats.stream.name"] = stream
            seq = getattr(result, "seq", None)
            if isinstance(seq, int):
                op.attributes["messaging.nats.stream.sequence"] = seq
            return result

    return publish


def _direct_get(t: Telemetry, f: Wrapper) -> Wrapper:
    """A batched direct get: one CLIENT span for the whole iteration; the inbox it reads
    makes no receive spans."""

    def get(self: Any, stream: str, *args: Any, **kwargs: Any) -> Any:
        if inside():
            return f(self, stream, *args, **kwargs)
        items = iter(f(self, stream, *args, **kwargs))
        attrs = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": stream,
            "messaging.operation.type": "receive",
            "messaging.operation.name": f.__name__,
        }
        span = t.start(f"jetstream DIRECT.GET {stream}", SpanKind.CLIENT, attrs)
        return quiet_steps(items, span)

    return get


def _durable_lookup(f: Wrapper) -> Wrapper:
    """``pull_subscribe`` / ``subscribe``, which look their durable up first and create it
    when the lookup finds nothing: that not-found is their expected path, so the lookup's
    span is no error span (it says not-found in an attribute and an event); any other
    failure of the lookup, or a later lookup that finds nothing, stays an error."""

    def subscribing(self: Any, *args: Any, **kwargs: Any) -> Any:
        token = expecting_not_found("CONSUMER.INFO")
        try:
            return f(self, *args, **kwargs)
        finally:
            otel_context.detach(token)

    return subscribing


def _client_of(obj: Any) -> Any:
    """The client a subscribing method is called on (a Client, a JetStream, a consumer)."""
    nc = getattr(obj, "nc", None)
    return obj if nc is None else nc


def _subscribe(t: Telemetry, f: Wrapper, cb_name: str, position: int) -> Wrapper:
    """Wrap a subscribing method's callback (keyword ``cb_name``, or positional argument
    ``position`` after self; 0: the first) with a process span per message."""

    def subscribe(self: Any, *args: Any, **kwargs: Any) -> Any:
        client = _client_of(self)
        # The queue group (Client.subscribe and js.subscribe: the argument before cb).
        queue = kwargs.get("queue") or (args[1] if position == 2 and len(args) > 1 else None)
        group = queue if isinstance(queue, str) else ""
        if cb_name in kwargs:
            if kwargs[cb_name] is not None:
                kwargs[cb_name] = _processing(t, kwargs[cb_name], client, group)
        elif len(args) > position and args[position] is not None:
            cb = _processing(t, args[position], client, group)
            args = (*args[:position], cb, *args[position + 1 :])
        return f(self, *args, **kwargs)

    return subscribe


def _processing(
    t: Telemetry, cb: Callable[[Any], None], client: Any, group: str
) -> Callable[[Any], None]:
    if not callable(cb):
        return cb  # the wrapped method names the problem

    @functools.wraps(cb)
    def process(msg: Any) -> None:
        with t.processing(msg, client, group):
            cb(msg)

    return process


def _receive_one(t: Telemetry, f: Wrapper) -> Wrapper:
    def receive(self: Any, *args: Any, **kwargs: Any) -> Any:
        if inside():
            return f(self, *args, **kwargs)
        start = time.time_ns()
        msg = f(self, *args, **kwargs)
        t.received(msg, "receive", start)
        return msg

    return receive


def _receive_each(t: Telemetry, f: Wrapper) -> Wrapper:
    def iterate(self: Any) -> Iterator[Any]:
        for msg in f(self):
            t.received(msg, "receive", None)
            yield msg

    return iterate


def _receive_list(t: Telemetry, f: Wrapper) -> Wrapper:
    def fetch(self: Any, *args: Any, **kwargs: Any) -> Any:
        if inside():
            return f(self, *args, **kwargs)
        start = time.time_ns()
        msgs = f(self, *args, **kwargs)
        for msg in msgs:
            t.received(msg, "fetch", start)
        return msgs

    return fetch


def _settle(t: Telemetry, f: Wrapper, *, name: str) -> Wrapper:
    def settle(self: Any, *args: Any, **kwargs: Any) -> Any:
        reply = self.reply
        if inside() or not reply or not reply.startswith("$JS.ACK."):
            return f(self, *args, **kwargs)
        attrs: Dict[str, Any] = {
            "messaging.system": SYSTEM,
            **destination(self.subject),
            "messaging.operation.type": "settle",
            "messaging.operation.name": name,
        }
        try:
            meta = self.metadata
            attrs["messaging.consumer.group.name"] = meta.consumer
            attrs["messaging.nats.stream.name"] = meta.stream
            attrs["messaging.nats.stream.sequence"] = meta.sequence.stream
            attrs["messaging.nats.message.delivery_count"] = meta.num_delivered
        except Exception:  # pragma: no cover - a malformed ack subject: the call says so
            pass
        parent, links = _settle_context(t, reply, name)
        op = t.operation(f"{name} {self.subject}", SpanKind.CLIENT, attrs, parent, links=links)
        with op:
            result = f(self, *args, **kwargs)
        t.acks.add(
            1,
            t.metric_attributes(
                {
                    "messaging.system": SYSTEM,
                    "messaging.operation.name": name,
                    "messaging.consumer.group.name": attrs.get("messaging.consumer.group.name", ""),
                }
            ),
        )
        return result

    return settle


def _settle_context(
    t: Telemetry, reply: str, name: str
) -> Tuple[Optional[otel_context.Context], Optional[List[Link]]]:
    """Where a settle span goes: in the message's trace. Its receive span (when the message
    was handed out by next_msg, iteration, fetch or messages()) is its parent if no span is
    current (an ack after fetch() returned), else a link from the current span, when that
    one is in another trace. A callback's settle is a child of its process span (current,
    in the message's trace) and has no receive span to find. An in_progress keeps the
    receive span for the final ack."""
    receipt = t.receipts.pop(reply) if name != "in_progress" else t.receipts.get(reply)
    if receipt is None:
        return None, None
    current = trace.get_current_span().get_span_context()
    if not current.is_valid:
        return trace.set_span_in_context(trace.NonRecordingSpan(receipt)), None
    if current.trace_id == receipt.trace_id:
        return None, None
    return None, [Link(receipt)]
