"""OpenTelemetry traces and metrics for jetstream_sync, switched on by the user.

Install the ``otel`` extra (``pip install 'jetstream-sync[otel]'``) and either call
``JetStreamSyncInstrumentor().instrument(tracer_provider=..., meter_provider=...)`` at start-up
(before connecting), or run the program under ``opentelemetry-instrument``, which finds the
instrumentor through the ``opentelemetry_instrumentor`` entry point. ``uninstrument()`` puts
everything back.

How it hooks in (and why the uninstrumented client pays nothing):

* **The hot paths** (publish, request, subscribe callbacks, ``next_msg``, iteration,
  ``fetch``, ``consume()`` / ``messages()``, ``js.publish`` / ``publish_async``, push
  subscriptions, acks) are reached by wrapping public methods on their classes while
  instrumented (``_patches.py``): ``Client.publish`` / ``request`` / ``subscribe``,
  ``Subscription.next_msg`` / ``__iter__``, ``Publisher.publish`` / ``publish_async``,
  ``PullSubscription.fetch``, ``PullConsumer.fetch`` / ``next`` / ``consume``,
  ``OrderedConsumer.consume``, ``AtomicBatch.add`` / ``commit``, ``FastPublisher.add`` / ``commit``,
  ``MessagesContext.__next__`` / ``next``, ``PushSubscriber.subscribe`` /
  ``subscribe_bind``, ``Msg.ack`` / ``ack_sync`` / ``nak`` / ``in_progress`` / ``term``.
  Uninstrumented, the classes hold their own functions: not one instruction is added to a
  publish or a delivery. A callback is wrapped when it is subscribed, so subscribe after
  instrumenting (``opentelemetry-instrument`` does so before the program runs).
* **The rare events** the public API does not show (an error handed to error_cb, such as a
  slow consumer; a message dropped by a full queue; a reconnect; a JetStream API call) go
  through the core's one hook, ``jetstream_sync._observe.observer``: a module-level slot,
  None unless instrumented, read only on those cold paths. The core imports nothing of
  OpenTelemetry; this package does, and only when it is imported.

What it makes (OpenTelemetry messaging semantic conventions, ``messaging.system=nats``):

* ``publish <subject>`` PRODUCER spans for ``Client.publish``, ``js.publish``,
  ``publish_async`` and each message of an atomic or fast-ingest batch (``batch.add`` /
  ``batch.commit``). A JetStream publish's span ends at the ack, with
  ``messaging.nats.stream.name`` and ``.sequence``, or with the error. The current trace
  context is injected as W3C ``traceparent`` / ``tracestate`` and ``baggage`` headers; a
  message without headers gets them only while instrumented, and a user's own
  ``traceparent`` is never overwritten. A message that fits in max_payload without them
  but not with them is sent without them (``messaging.nats.trace_context.injected`` false
  on its span, and an event): tracing never makes a publish fail.
* ``request <subject>`` CLIENT spans; a callback given a core message with a reply subject
  runs in a ``process <subject>`` SERVER span (micro endpoints too), other callbacks in
  CONSUMER ``process`` spans whose parent is the producer's span (from the headers).
* ``receive <subject>`` CONSUMER spans for each message handed out by ``next_msg``,
  iteration, ``fetch``, ``next`` and ``messages()``: the caller's current span is their
  parent and the producer's a link; with no current span, the producer's is the parent.
* ``ack|nak|term|in_progress|ack_sync <subject>`` CLIENT spans (operation type ``settle``)
  with ``messaging.nats.message.delivery_count``, in the message's trace: in a callback the
  child of its process span; after ``fetch`` / ``next`` / ``next_msg`` returned, the child
  of the message's receive span (no span current) or linked to it (from the caller's span).
* ``jetstream <API words>`` CLIENT spans for every JetStream API call (streams, consumers,
  KV and Object Store management), and ``jetstream DIRECT.GET <stream>`` for a batched
  direct get (``get_batch``, ``get_last_msgs_for``, ``get_msgs``: one span for the whole
  iteration); the requests and inbox reads made inside make no spans of their own. The
  durable lookup of ``pull_subscribe`` / ``subscribe``, whose not-found is their expected
  path (they create the consumer then), is no error span when it finds nothing
  (``messaging.nats.api.not_found`` and an event instead).
* Metrics: ``messaging.client.sent.messages``, ``messaging.client.consumed.messages``,
  ``messaging.client.operation.duration``, ``messaging.process.duration`` (semantic
  conventions), and ``nats.client.sent.bytes``, ``nats.client.consumed.bytes``,
  ``nats.client.acks`` (by ``messaging.operation.name``), ``nats.client.dropped.messages``,
  ``nats.client.slow_consumer.events``, ``nats.client.reconnects``, ``nats.client.errors``.
  Their attributes have a low cardinality: a subject the client makes from unbounded names
  (a KV key's, an Object Store chunk's, an inbox, a JetStream API call's) is counted by its
  ``messaging.destination.template`` (``$KV.<bucket>.>``, ``_INBOX.>``,
  ``$JS.API.CONSUMER.CREATE.>``; see ``_telemetry.destination_template``) instead of its
  name, and an ephemeral consumer's made-up name is left out; spans keep both.

Every span ends however its call ends: a timeout, a dropped connection or an error is
recorded on it (``error.type``, an exception event, status ERROR).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Collection, Dict, Optional, TypeVar

from opentelemetry import metrics, trace
from opentelemetry.instrumentation.instrumentor import (  # type: ignore[attr-defined]
    BaseInstrumentor,
)
from opentelemetry.trace import SpanKind

from .. import _observe
from .._version import __version__
from ..errors import ConsumerNotFoundError, SlowConsumerError
from ._patches import Patches
from ._telemetry import (
    SYSTEM,
    Telemetry,
    api_template,
    api_words,
    error_type,
    metric_destination,
    split_api,
    takes_not_found,
)

__all__ = ["JetStreamSyncInstrumentor"]

T = TypeVar("T")

_SCHEMA = "https://opentelemetry.io/schemas/1.37.0"


class _Observer:
    """The core hook's observer (see ``jetstream_sync/_observe.py``)."""

    def __init__(self, telemetry: Telemetry) -> None:
        self._t = telemetry

    def reported(self, err: BaseException) -> None:
        attrs = {"messaging.system": SYSTEM, "error.type": type(err).__name__}
        self._t.errors.add(1, attrs)
        if isinstance(err, SlowConsumerError):
            self._t.slow_consumers.add(1, {"messaging.system": SYSTEM})

    def dropped(self, subject: str) -> None:
        self._t.dropped.add(1, {"messaging.system": SYSTEM, **metric_destination(subject)})

    def reconnected(self) -> None:
        self._t.reconnects.add(1, {"messaging.system": SYSTEM})

    def api_call(self, subject: str, call: Callable[[], T]) -> T:
        prefix, rest = split_api(subject)
        words, _ = api_words(rest)
        attrs = {
            "messaging.system": SYSTEM,
            "messaging.destination.name": subject,
            # (the metrics' destination: the call without its stream or consumer names)
            "messaging.destination.template": api_template(prefix, rest),
            "messaging.operation.type": "send",
            "messaging.operation.name": words,
        }
        expected = takes_not_found(words)
        op = self._t.operation(f"jetstream {words}", SpanKind.CLIENT, attrs)
        try:
            result = call()
        except BaseException as exc:
            if expected and isinstance(exc, ConsumerNotFoundError):
                op.span.set_attribute("messaging.nats.api.not_found", True)
                op.span.add_event(
                    "not found (expected)",
                    {"exception.type": error_type(exc), "exception.message": str(exc)},
                )
                op.finish(None)
            else:
                op.finish(exc)
            raise
        if words in _CONSUMER_INFOS and isinstance(result, dict):
            self._consumer_info(result)
        op.finish(None)
        return result

    def _consumer_info(self, info: Dict[str, Any]) -> None:
        """A consumer's info (it was created, or looked up): remember an ephemeral one's
        name."""
        name = info.get("name")
        config = info.get("config")
        if isinstance(name, str) and isinstance(config, dict) and not config.get("durable_name"):
            self._t.ephemeral.put(name, True)


# The API calls whose answer is a consumer's info.
_CONSUMER_INFOS = frozenset(("CONSUMER.CREATE", "CONSUMER.DURABLE.CREATE", "CONSUMER.INFO"))


class JetStreamSyncInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """An OpenTelemetry instrumentor for jetstream_sync: ``instrument(tracer_provider=,
    meter_provider=)`` switches traces and metrics on (the global providers when not
    given), ``uninstrument()`` off. A singleton, as every BaseInstrumentor."""

    _lock = threading.Lock()
    _patches: Optional[Patches] = None

    def instrumentation_dependencies(self) -> Collection[str]:
        """The distribution this instruments: ``jetstream-sync``."""
        return ("jetstream-sync",)

    def _instrument(self, **kwargs: Any) -> None:
        tracer = trace.get_tracer(
            __name__, __version__, kwargs.get("tracer_provider"), schema_url=_SCHEMA
        )
        meter = metrics.get_meter(
            __name__, __version__, kwargs.get("meter_provider"), schema_url=_SCHEMA
        )
        telemetry = Telemetry(tracer, meter)
        with self._lock:
            patches = Patches(telemetry)
            patches.install()
            type(self)._patches = patches
            _observe.observer = _Observer(telemetry)

    def _uninstrument(self, **kwargs: Any) -> None:
        with self._lock:
            _observe.observer = None
            patches = type(self)._patches
            type(self)._patches = None
            if patches is not None:
                patches.remove()
