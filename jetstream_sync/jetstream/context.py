"""JetStream: the handle returned by ``nc.jetstream()``.

It knows the API prefix (``$JS.API``, or ``$JS.<domain>.API``), turns every API call into a
core request, and maps every answer: JSON errors to :func:`~jetstream_sync.errors.api_error`
subclasses, no responders to :class:`JetStreamNotEnabledError`. Management calls live in
``manager.py`` and publishing in ``publish.py``; both reach the server only through
:meth:`JetStream._api`.
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional

from .. import _observe, errors
from .._protocol import check_publish_subject
from .._seam import core_of
from .._timeouts import check_timeout
from ..errors import api_call_words
from ..msg import Msg
from ._response import parse_api_response
from .advisories import AdvisoryWatching
from .api_level import ApiLevels, required_level_header
from .batch import AtomicBatchPublisher
from .consumer import ConsumerFactory
from .counter import CounterFactory
from .deadletter import DeadLetterHelper
from .direct import DirectGetter
from .fast_ingest import FastIngest
from .kv import KeyValueFactory
from .manager import JetStreamManager
from .object_store import ObjectStoreFactory
from .ordered import OrderedConsumerFactory
from .publish import (
    DEFAULT_RETRY_ATTEMPTS,
    DEFAULT_RETRY_WAIT,
    AsyncPublisher,
    Publisher,
    check_retry_attempts,
)
from .pull import PullSubscriber, PullSubscription
from .push import JetStreamSubscription, PushSubscriber
from .schedule import MessageScheduling

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client

__all__ = ["DEFAULT_API_PREFIX", "JetStream"]

DEFAULT_API_PREFIX = "$JS.API"


class JetStream(
    JetStreamManager,
    DirectGetter,
    Publisher,
    AtomicBatchPublisher,
    FastIngest,
    PullSubscriber,
    PushSubscriber,
    ConsumerFactory,
    OrderedConsumerFactory,
    AdvisoryWatching,
    DeadLetterHelper,
    KeyValueFactory,
    ObjectStoreFactory,
    MessageScheduling,
    CounterFactory,
):
    """JetStream over one client. Thread-safe; make one and share it."""

    # nats-py's nested names for the subscription classes.
    PullSubscription = PullSubscription
    PushSubscription = JetStreamSubscription

    def __init__(
        self,
        nc: Client,
        prefix: str = DEFAULT_API_PREFIX,
        domain: Optional[str] = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
        publish_async_stall_wait: float = 5.0,
        *,
        publish_retry_attempts: int = DEFAULT_RETRY_ATTEMPTS,
        publish_retry_wait: float = DEFAULT_RETRY_WAIT,
    ) -> None:
        """``publish_retry_attempts`` / ``publish_retry_wait``: the defaults of publish's and
        publish_async's ``retry_attempts`` (2; -1: until the timeout) and ``retry_wait``
        (0.25 s), how often and how far apart a publish that no stream answered (503) is
        sent again before NoStreamResponseError."""
        if domain is not None:
            if prefix != DEFAULT_API_PREFIX:
                raise errors.InvalidArgumentError("give either prefix or domain, not both")
            check_publish_subject(domain, "domain")
            if "." in domain:
                raise errors.InvalidArgumentError(f"domain {domain!r} must be one token")
            prefix = f"$JS.{domain}.API"
        check_publish_subject(prefix, "API prefix")
        self._nc = nc
        self._core = core_of(nc)  # everything of the core besides its public API
        self._prefix = prefix.rstrip(".")
        self._domain = domain
        self._timeout = check_timeout(timeout, "JetStream timeout")
        if (
            isinstance(publish_async_max_pending, bool)
            or not isinstance(publish_async_max_pending, int)
            or publish_async_max_pending <= 0
        ):
            raise errors.InvalidArgumentError(
                f"publish_async_max_pending must be an int > 0, got {publish_async_max_pending!r}"
            )
        self._async_max_pending = publish_async_max_pending
        self._async_stall_wait = check_timeout(publish_async_stall_wait, "publish_async_stall_wait")
        self._retry_attempts = check_retry_attempts(
            publish_retry_attempts, "publish_retry_attempts"
        )
        self._retry_wait = check_timeout(publish_retry_wait, "publish_retry_wait")
        self._async_lock = threading.Lock()
        self._async: Optional[AsyncPublisher] = None
        self._levels = ApiLevels(nc, self._api)

    def api_level(self) -> int:
        """The JetStream API level of the server this client is connected to (ADR-44: 0
        before nats-server 2.11, 1 for 2.11, 2 for 2.12, 4 for 2.14, ...), asked once per
        server. Features that need a level check it and raise :class:`ApiLevelError`."""
        return self._levels.level()

    @staticmethod
    def is_status_msg(msg: Optional[Msg]) -> Optional[str]:
        """nats-py's check: the status code of a status message (as text, "404"), else
        None. The subscriptions never hand status messages to the user; this is for
        messages of one's own core subscriptions."""
        if msg is None:
            return None
        status = msg.status
        return None if status is None else str(status)

    @property
    def nc(self) -> Client:
        """The client this context works through."""
        return self._nc

    @property
    def prefix(self) -> str:
        """The API subject prefix: ``$JS.API``, the one given, or ``$JS.<domain>.API`` for a
        domain."""
        return self._prefix

    @property
    def timeout(self) -> float:
        """The default timeout of API calls, in seconds."""
        return self._timeout

    def _api(
        self,
        suffix: str,
        body: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        required_level: int = 0,
    ) -> Dict[str, Any]:
        """One JetStream API call: ``<prefix>.<suffix>`` with a JSON body, JSON answer.
        ``required_level``: the server must refuse the call below that API level (the
        ``Nats-Required-Api-Level`` header, ADR-44)."""
        subject = f"{self._prefix}.{suffix}"
        payload = b"" if body is None else json.dumps(body, separators=(",", ":")).encode()
        t = self._timeout if timeout is None else check_timeout(timeout, "timeout")
        observer = _observe.observer
        if observer is None:
            return self._call_api(subject, payload, t, required_level)
        return observer.api_call(
            subject, lambda: self._call_api(subject, payload, t, required_level)
        )

    def _call_api(
        self, subject: str, payload: bytes, t: float, required_level: int
    ) -> Dict[str, Any]:
        """The request of :meth:`_api` and its parsed answer."""
        try:
            if required_level:
                headers = required_level_header(required_level)
                reply = self._nc.request(subject, payload, timeout=t, headers=headers)
            else:
                reply = self._core.api_request(subject, payload, t)
        except errors.TimeoutError:
            raise errors.TimeoutError(
                f"JetStream API: no answer to {api_call_words(subject)} within {t} s"
            ) from None
        except errors.NoRespondersError:
            domain = f", or domain {self._domain!r} does not exist" if self._domain else ""
            raise errors.JetStreamNotEnabledError(
                f"nobody answered {api_call_words(subject)}: JetStream is not enabled on "
                f"this server or account{domain}"
            ) from None
        return parse_api_response(reply.data, subject)
