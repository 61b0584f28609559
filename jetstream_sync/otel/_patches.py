"""The wrappers the instrumentor puts on the public API's classes, and takes off again.

Each wrapper keeps the wrapped method's signature and docstring (``functools.wraps``) and
calls it unchanged; with the wrappers off, the classes hold their own functions again and
the package runs exactly the code it runs uninstrumented.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from opentelemetry.trace import SpanKind

from .. import client as client_mod
from .. import msg as msg_mod
from .. import subscription as subscription_mod
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
    body_size,
    detached,
    error_type,
    inside,
    quiet_steps,
    server_attributes,
    with_context,
)

__all__ = ["Patches"]

Wrapper = Callable[..., Any]


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
        self._wrap(PushSubscriber, "subscribe", lambda f: _subscribe(t, f, "cb", 2))
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
        "messaging.destination.name": subject,
        "messaging.operation.type": "send",
        "messaging.operation.name": operation,
    }
    if size is not None:
        attrs["messaging.message.body.size"] = size
    attrs.update(server_attributes(client))
    return attrs


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
        with t.operation(f"publish {subject}", SpanKind.PRODUCER, attrs, nested=False):
            try:
                f(self, subject, data, reply, with_context(headers), payload=payload)
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
        with t.operation(f"request {subject}", SpanKind.CLIENT, attrs, nested=False):
            try:
                return f(self, subject, data, timeout, with_context(headers), **kwargs)
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
                ack = f(self, subject, data, with_context(headers), *args, **kwargs)
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
            future = f(self, subject, data, with_context(headers), *args, **kwargs)
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
            if subject is not None:
                headers = with_context(headers)
            result = f(self, subject, data, headers, **kw)
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
            "messaging.destination.name": self.subject,
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
        with t.operation(f"{name} {self.subject}", SpanKind.CLIENT, attrs):
            result = f(self, *args, **kwargs)
        t.acks.add(
            1,
            {
                "messaging.system": SYSTEM,
                "messaging.operation.name": name,
                "messaging.consumer.group.name": attrs.get("messaging.consumer.group.name", ""),
            },
        )
        return result

    return settle
