"""Services (ADR-32): endpoints that answer requests, and discovery on ``$SRV.*``.

nats-py's ``nats.micro.service`` minus ``await``. A service is a set of queue subscriptions
(the endpoints, queue group "q" unless configured) plus nine plain subscriptions answering
``$SRV.PING|INFO|STATS``, ``$SRV.<verb>.<name>`` and ``$SRV.<verb>.<name>.<id>`` with the
JSON bodies ADR-32 defines. It uses the client only through its public API: each endpoint's
handler runs on that subscription's own thread, one request at a time.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from enum import Enum
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from .. import errors
from .._nuid import NUID
from ..msg import Msg
from ..subscription import Subscription
from .request import Handler, Request, ServiceError

if TYPE_CHECKING:
    from types import TracebackType

    from ..client import Client

DEFAULT_QUEUE_GROUP = "q"
"""The queue group of every endpoint unless configured otherwise."""

DEFAULT_PREFIX = "$SRV"
"""The root of all control subjects."""

INFO_RESPONSE_TYPE = "io.nats.micro.v1.info_response"
PING_RESPONSE_TYPE = "io.nats.micro.v1.ping_response"
STATS_RESPONSE_TYPE = "io.nats.micro.v1.stats_response"

SEMVER_REGEX = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)
NAME_REGEX = re.compile(r"^[A-Za-z0-9\-_]+$")
SUBJECT_REGEX = re.compile(r"^[^ >]*[>]?$")


class ServiceVerb(str, Enum):
    """The discovery requests every service answers on ``$SRV.<verb>``: PING, STATS and INFO."""

    PING = "PING"
    STATS = "STATS"
    INFO = "INFO"


def control_subject(
    verb: ServiceVerb,
    name: Optional[str] = None,
    id: Optional[str] = None,
    prefix: str = DEFAULT_PREFIX,
) -> str:
    """``$SRV.<verb>``, ``$SRV.<verb>.<name>`` or ``$SRV.<verb>.<name>.<id>``."""
    verb_s = verb.value if isinstance(verb, ServiceVerb) else str(verb)
    if name is None and id is None:
        return f"{prefix}.{verb_s}"
    if id is None:
        return f"{prefix}.{verb_s}.{name}"
    if name is None:
        raise ValueError("control_subject: an id needs a name")
    return f"{prefix}.{verb_s}.{name}.{id}"


# --- validation ----------------------------------------------------------------------------


def _check_subject(value: str, what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    bad = any(c in value for c in "\t\r\n") or ".." in value or value.startswith(".")
    if bad or not SUBJECT_REGEX.match(value) or value.endswith("."):
        if what == "subject" and not SUBJECT_REGEX.match(value):  # nats-py's words
            raise ValueError(
                "Invalid subject. Subject must not contain spaces, and can only have '>' "
                "at the end."
            )
        raise ValueError(
            f"Invalid {what} {value!r}: it must be a subject without whitespace, "
            "empty tokens, or '>' but at the end."
        )


def _check_queue_group(value: Optional[str]) -> None:
    if value is None or value == "":
        return
    if not isinstance(value, str):
        raise TypeError(f"queue_group must be a str, not {type(value).__name__}")
    if not SUBJECT_REGEX.match(value) or any(c in value for c in " \t\r\n>*"):
        raise ValueError(
            f"Invalid queue group {value!r}. Queue group must not contain spaces or wildcards."
        )


def _check_metadata(value: Optional[Mapping[str, str]], what: str) -> None:
    if value is None:
        return
    if not isinstance(value, Mapping):
        raise TypeError(f"{what} metadata must be a dict of str to str, not {type(value).__name__}")
    for k, v in value.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"{what} metadata must map str to str: {k!r}: {v!r}")


def _check_name(value: str, what: str) -> None:
    if not isinstance(value, str):
        raise TypeError(f"{what} name must be a str, not {type(value).__name__}")
    if not value:
        raise ValueError("Name cannot be empty.")
    if not NAME_REGEX.match(value):
        raise ValueError(
            f"Invalid name {value!r}. It must contain only alphanumeric characters, dashes, "
            "and underscores."
        )


# --- configuration -------------------------------------------------------------------------


@dataclass
class EndpointConfig:
    """One endpoint: its name, its handler, and optionally its subject (default: the name),
    queue group (default: the group's or service's, else "q") and metadata.

    ``queue_group_disabled=True`` (ADR-32, as nats.go; nats-py has no such option)
    subscribes without a queue group: every instance gets every request.
    """

    name: str
    handler: Handler
    queue_group: Optional[str] = None
    subject: Optional[str] = None
    metadata: Optional[Dict[str, str]] = None
    queue_group_disabled: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name, "endpoint")
        if not callable(self.handler):
            raise TypeError(f"endpoint {self.name!r}: handler must be callable")
        if self.subject:
            _check_subject(self.subject, "subject")
        _check_queue_group(self.queue_group)
        _check_metadata(self.metadata, f"endpoint {self.name!r}")


@dataclass
class GroupConfig:
    """A group: a subject prefix for its endpoints, and their default queue group."""

    name: str
    queue_group: Optional[str] = None
    queue_group_disabled: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"group name must be a str, not {type(self.name).__name__}")
        if self.name:
            if ">" in self.name:
                raise ValueError(f"Invalid group name {self.name!r}: it cannot contain '>'")
            _check_subject(self.name, "group name")
        _check_queue_group(self.queue_group)


StatsHandler = Callable[["EndpointStats"], Any]
"""Called for each endpoint's stats; what it returns is that endpoint's ``data``."""


@dataclass
class ServiceConfig:
    """A service: name (A-Z, a-z, 0-9, dash, underscore), semantic version, and optionally
    description, metadata, default queue group and stats handler."""

    name: str
    version: str
    description: Optional[str] = None
    metadata: Optional[Dict[str, str]] = None
    queue_group: Optional[str] = None
    stats_handler: Optional[StatsHandler] = None
    queue_group_disabled: bool = False

    def __post_init__(self) -> None:
        _check_name(self.name, "service")
        if not isinstance(self.version, str):
            raise TypeError(f"version must be a str, not {type(self.version).__name__}")
        if not self.version:
            raise ValueError("Version cannot be empty.")
        if not SEMVER_REGEX.match(self.version):
            raise ValueError(
                f"Invalid version {self.version!r}. It must follow semantic versioning "
                "(e.g., 1.0.0, 2.1.3-alpha.1)."
            )
        if self.description is not None and not isinstance(self.description, str):
            raise TypeError("description must be a str")
        _check_queue_group(self.queue_group)
        _check_metadata(self.metadata, "service")
        if self.stats_handler is not None and not callable(self.stats_handler):
            raise TypeError("stats_handler must be callable")


# --- the JSON bodies -----------------------------------------------------------------------


def _format_time(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _parse_time(s: str) -> datetime:
    """RFC 3339 in UTC, with any number of fraction digits (nats.go sends nanoseconds)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]00:00)?$", s)
    if not m:
        raise ValueError(f"started: not an RFC 3339 UTC time: {s!r}")
    base = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%S")
    return base.replace(microsecond=int((m.group(2) or "0")[:6].ljust(6, "0")))


@dataclass
class EndpointStats:
    """One endpoint's statistics; times in nanoseconds."""

    name: str
    subject: str
    queue_group: str
    num_requests: int
    num_errors: int
    processing_time: int
    average_processing_time: int
    last_error: Optional[str] = None
    data: Optional[Any] = None

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> EndpointStats:
        """The statistics a STATS answer's endpoint entry (JSON, as a dict) holds; KeyError when
        a required key is missing."""
        return cls(
            name=data["name"],
            subject=data["subject"],
            queue_group=data.get("queue_group", ""),
            num_requests=data["num_requests"],
            num_errors=data["num_errors"],
            last_error=data.get("last_error"),
            processing_time=data["processing_time"],
            average_processing_time=data["average_processing_time"],
            data=data.get("data"),
        )

    def to_dict(self) -> Dict[str, Any]:
        """The statistics as ADR-32's JSON object (a dict); ``last_error`` None is written as
        ``""``."""
        return {
            "name": self.name,
            "subject": self.subject,
            "queue_group": self.queue_group,
            "num_requests": self.num_requests,
            "num_errors": self.num_errors,
            "last_error": self.last_error or "",
            "processing_time": self.processing_time,
            "average_processing_time": self.average_processing_time,
            "data": self.data,
        }


@dataclass
class EndpointInfo:
    """One endpoint as INFO describes it."""

    name: str
    subject: str
    queue_group: str
    metadata: Dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> EndpointInfo:
        """The endpoint an INFO answer's endpoint entry (JSON, as a dict) describes; KeyError
        when a required key is missing."""
        return cls(
            name=data["name"],
            subject=data["subject"],
            queue_group=data.get("queue_group", ""),
            metadata=data.get("metadata") or {},
        )

    def to_dict(self) -> Dict[str, Any]:
        """The endpoint as ADR-32's JSON object (a dict)."""
        return {
            "name": self.name,
            "subject": self.subject,
            "queue_group": self.queue_group,
            "metadata": self.metadata,
        }


@dataclass
class ServicePing:
    """The answer to PING."""

    id: str
    name: str
    version: str
    metadata: Dict[str, str] = field(default_factory=dict)
    type: str = PING_RESPONSE_TYPE

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> ServicePing:
        """The PING answer a dict (its JSON) holds; KeyError when a required key is missing."""
        return cls(
            id=data["id"],
            name=data["name"],
            version=data["version"],
            metadata=data.get("metadata") or {},
            type=data.get("type", PING_RESPONSE_TYPE),
        )

    def to_dict(self) -> Dict[str, Any]:
        """The PING answer as ADR-32's JSON object (a dict)."""
        return {
            "type": self.type,
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "metadata": self.metadata,
        }


@dataclass
class ServiceStats:
    """The answer to STATS."""

    id: str
    name: str
    version: str
    started: datetime
    endpoints: List[EndpointStats] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)
    type: str = STATS_RESPONSE_TYPE

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> ServiceStats:
        """The STATS answer a dict (its JSON) holds; KeyError when a required key is missing."""
        return cls(
            id=data["id"],
            name=data["name"],
            version=data["version"],
            started=_parse_time(data["started"]),
            endpoints=[EndpointStats.from_dict(e) for e in data.get("endpoints") or []],
            metadata=data.get("metadata") or {},
            type=data.get("type", STATS_RESPONSE_TYPE),
        )

    def to_dict(self) -> Dict[str, Any]:
        """The STATS answer as ADR-32's JSON object (a dict)."""
        return {
            "type": self.type,
            "name": self.name,
            "id": self.id,
            "version": self.version,
            "started": _format_time(self.started),
            "endpoints": [e.to_dict() for e in self.endpoints],
            "metadata": self.metadata,
        }


@dataclass
class ServiceInfo:
    """The answer to INFO."""

    name: str
    id: str
    version: str
    description: Optional[str] = None
    endpoints: List[EndpointInfo] = field(default_factory=list)
    metadata: Dict[str, str] = field(default_factory=dict)
    type: str = INFO_RESPONSE_TYPE

    @classmethod
    def from_dict(cls, data: Dict[str, Any]) -> ServiceInfo:
        """Unknown fields are ignored."""
        return cls(
            id=data["id"],
            name=data["name"],
            version=data["version"],
            description=data.get("description"),
            endpoints=[EndpointInfo.from_dict(e) for e in data.get("endpoints") or []],
            metadata=data.get("metadata") or {},
            type=data.get("type", INFO_RESPONSE_TYPE),
        )

    def to_dict(self) -> Dict[str, Any]:
        """The INFO answer as ADR-32's JSON object (a dict)."""
        return {
            "type": self.type,
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "description": self.description,
            "endpoints": [e.to_dict() for e in self.endpoints],
            "metadata": self.metadata,
        }


# --- endpoints, groups, the service --------------------------------------------------------


def _resolve_queue_group(
    own: Optional[str], own_disabled: bool, parent: Optional[str], parent_disabled: bool
) -> Tuple[Optional[str], bool]:
    """ADR-32's rule: the endpoint's own setting, else its parent's, else "q".
    Returns (queue group or None, disabled)."""
    if own_disabled:
        return None, True
    if own:
        return own, False
    if parent_disabled:
        return None, True
    return parent or None, False


def _utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(tzinfo=None)


class Endpoint:
    """One endpoint: its subscription and its statistics."""

    def __init__(self, service: Service, config: EndpointConfig) -> None:
        self._service = service
        self._name = config.name
        self._subject = config.subject or config.name
        self._disabled = config.queue_group_disabled
        self._queue_group = "" if self._disabled else (config.queue_group or DEFAULT_QUEUE_GROUP)
        self._handler = config.handler
        self._metadata: Dict[str, str] = dict(config.metadata or {})
        self._lock = threading.Lock()
        self._num_requests = 0
        self._num_errors = 0
        self._processing_time = 0
        self._average_processing_time = 0
        self._last_error: Optional[str] = None
        self._subscription: Optional[Subscription] = None

    def _start(self) -> None:
        assert self._subscription is None
        self._subscription = self._service._client.subscribe(
            self._subject, queue=self._queue_group or None, cb=self._handle_request
        )
        try:  # once add_endpoint returns, the server knows the endpoint
            self._service._client.flush()
        except errors.TimeoutError:
            pass  # not connected now: the subscription is sent again on reconnect

    def _reset(self) -> None:
        with self._lock:
            self._num_requests = 0
            self._num_errors = 0
            self._processing_time = 0
            self._average_processing_time = 0
            self._last_error = None

    def _stats(self) -> EndpointStats:
        with self._lock:
            return EndpointStats(
                name=self._name,
                subject=self._subject,
                queue_group=self._queue_group,
                num_requests=self._num_requests,
                num_errors=self._num_errors,
                last_error=self._last_error,
                processing_time=self._processing_time,
                average_processing_time=self._average_processing_time,
            )

    def _info(self) -> EndpointInfo:
        return EndpointInfo(
            name=self._name,
            subject=self._subject,
            queue_group=self._queue_group,
            metadata=dict(self._metadata),
        )

    def _handle_request(self, msg: Msg) -> None:
        """Run the handler. An exception it raises counts as an error and is answered with
        an error response (ServiceError: its code; anything else: 500); anything but a
        ServiceError is then raised again, so that it reaches the client's error_cb."""
        start = time.perf_counter_ns()
        with self._lock:
            self._num_requests += 1
        request = Request(msg)
        failure: Optional[BaseException] = None
        try:
            self._handler(request)
        except Exception as exc:
            failure = exc
            code, text = (
                (exc.code, exc.description) if isinstance(exc, ServiceError) else ("500", repr(exc))
            )
            with self._lock:
                self._num_errors += 1
                self._last_error = repr(exc)
            if msg.reply and request._error is None:
                try:
                    request.respond_error(code, text)
                except Exception as answer_exc:  # the connection went: report the handler's
                    failure.__context__ = answer_exc
        else:
            if request._error is not None:  # the handler answered with respond_error
                with self._lock:
                    self._num_errors += 1
                    self._last_error = request._error
        finally:
            elapsed = time.perf_counter_ns() - start
            with self._lock:
                self._processing_time += elapsed
                self._average_processing_time = self._processing_time // max(1, self._num_requests)
        if failure is not None and not isinstance(failure, ServiceError):
            raise failure

    def __repr__(self) -> str:
        return f"<Endpoint {self._name!r} subject={self._subject!r} queue={self._queue_group!r}>"


class Group:
    """A subject prefix (and a default queue group) for the endpoints added through it."""

    def __init__(
        self,
        service: Service,
        tokens: List[str],
        queue_group: Optional[str],
        queue_group_disabled: bool,
    ) -> None:
        self._service = service
        self._tokens = tokens
        self._queue_group = queue_group
        self._queue_group_disabled = queue_group_disabled

    @property
    def prefix(self) -> str:
        """The group's subject prefix: its tokens joined with dots."""
        return ".".join(self._tokens)

    def add_endpoint(self, config: Optional[EndpointConfig] = None, **kwargs: Any) -> Endpoint:
        """Add an endpoint whose subject is this group's prefix, a dot, and its subject."""
        config = _make(EndpointConfig, config, kwargs)
        subject = ".".join([*self._tokens, config.subject or config.name])
        return self._service._add(
            replace(config, subject=subject), self._queue_group, self._queue_group_disabled
        )

    def add_group(self, config: Optional[GroupConfig] = None, **kwargs: Any) -> Group:
        """A group inside this one: its prefix follows this group's."""
        config = _make(GroupConfig, config, kwargs)
        qg, disabled = _resolve_queue_group(
            config.queue_group,
            config.queue_group_disabled,
            self._queue_group,
            self._queue_group_disabled,
        )
        tokens = [*self._tokens, *([config.name] if config.name else [])]
        return Group(self._service, tokens, qg, disabled)

    def __repr__(self) -> str:
        return f"<Group {self.prefix!r}>"


def _make(cls: Any, config: Any, kwargs: Dict[str, Any]) -> Any:
    if config is None:
        return cls(**kwargs)
    if not isinstance(config, cls):
        raise TypeError(f"config must be a {cls.__name__}, not {type(config).__name__}")
    return replace(config, **kwargs) if kwargs else config


class Service:
    """A running service. Made by :func:`add_service` (or ``Service(nc, config)`` and
    :meth:`start`); a context manager that stops it on exit."""

    def __init__(self, client: Client, config: ServiceConfig) -> None:
        if not isinstance(config, ServiceConfig):
            raise TypeError(f"config must be a ServiceConfig, not {type(config).__name__}")
        self._id = NUID().next()
        self._name = config.name
        self._version = config.version
        self._description = config.description
        self._metadata: Dict[str, str] = dict(config.metadata or {})
        self._queue_group = config.queue_group
        self._queue_group_disabled = config.queue_group_disabled
        self._stats_handler = config.stats_handler
        self._client = client
        self._lock = threading.Lock()
        self._subscriptions: Dict[str, Subscription] = {}
        self._endpoints: List[Endpoint] = []
        self._started = _utcnow()
        self._stopped = threading.Event()
        self._prefix = DEFAULT_PREFIX

    @property
    def id(self) -> str:
        """This instance's unique id."""
        return self._id

    @property
    def name(self) -> str:
        """The service's name."""
        return self._name

    @property
    def stopped(self) -> threading.Event:
        """Set once :meth:`stop` has run (``svc.stopped.is_set()``, ``.wait()``)."""
        return self._stopped

    def start(self) -> None:
        """Subscribe to the discovery subjects (add_service calls it)."""
        if self._subscriptions or self._stopped.is_set():
            return
        handlers = {
            ServiceVerb.PING: self._handle_ping_request,
            ServiceVerb.INFO: self._handle_info_request,
            ServiceVerb.STATS: self._handle_stats_request,
        }
        for verb, handler in handlers.items():
            for key, name, sid in (
                (f"{verb.value}-all", None, None),
                (f"{verb.value}-kind", self._name, None),
                (verb.value, self._name, self._id),
            ):
                subject = control_subject(verb, name=name, id=sid, prefix=self._prefix)
                self._subscriptions[key] = self._client.subscribe(subject, cb=handler)
        self._started = _utcnow()
        self._client.flush()

    def add_endpoint(self, config: Optional[EndpointConfig] = None, **kwargs: Any) -> Endpoint:
        """Add an endpoint (an EndpointConfig, or its fields as keywords) and subscribe it."""
        config = _make(EndpointConfig, config, kwargs)
        return self._add(config, self._queue_group, self._queue_group_disabled)

    def _add(
        self, config: EndpointConfig, parent_qg: Optional[str], parent_disabled: bool
    ) -> Endpoint:
        if self._stopped.is_set():
            raise errors.InvalidArgumentError(f"service {self._name!r} is stopped")
        qg, disabled = _resolve_queue_group(
            config.queue_group, config.queue_group_disabled, parent_qg, parent_disabled
        )
        endpoint = Endpoint(self, replace(config, queue_group=qg, queue_group_disabled=disabled))
        endpoint._start()
        with self._lock:
            self._endpoints.append(endpoint)
        return endpoint

    def add_group(self, config: Optional[GroupConfig] = None, **kwargs: Any) -> Group:
        """A group of endpoints sharing a subject prefix (a GroupConfig, or its fields)."""
        config = _make(GroupConfig, config, kwargs)
        qg, disabled = _resolve_queue_group(
            config.queue_group,
            config.queue_group_disabled,
            self._queue_group,
            self._queue_group_disabled,
        )
        return Group(self, [config.name] if config.name else [], qg, disabled)

    def stats(self) -> ServiceStats:
        """The statistics, as STATS answers them (with the stats_handler's data)."""
        with self._lock:
            endpoints = list(self._endpoints)
        stats = ServiceStats(
            id=self._id,
            name=self._name,
            version=self._version,
            metadata=dict(self._metadata),
            endpoints=[e._stats() for e in endpoints],
            started=self._started,
        )
        if self._stats_handler is not None:
            for endpoint_stats in stats.endpoints:
                endpoint_stats.data = self._stats_handler(endpoint_stats)
        return stats

    def info(self) -> ServiceInfo:
        """The description, as INFO answers it."""
        with self._lock:
            endpoints = list(self._endpoints)
        return ServiceInfo(
            id=self._id,
            name=self._name,
            version=self._version,
            metadata=dict(self._metadata),
            description=self._description,
            endpoints=[e._info() for e in endpoints],
        )

    def reset(self) -> None:
        """Zero every endpoint's statistics and restart the ``started`` clock."""
        with self._lock:
            endpoints = list(self._endpoints)
        for endpoint in endpoints:
            endpoint._reset()
        self._started = _utcnow()

    def stop(self, timeout: float = 30.0) -> None:
        """Drain every subscription: no new requests, and those already received are
        answered before it returns (at most ``timeout`` each). Idempotent. On a closed
        connection it just marks the service stopped."""
        if self._stopped.is_set():
            return
        with self._lock:
            subs = [e._subscription for e in self._endpoints]
            subs += list(self._subscriptions.values())
            for e in self._endpoints:
                e._subscription = None
            self._subscriptions = {}
        self._stopped.set()
        late: Optional[BaseException] = None
        for sub in subs:
            if sub is None:
                continue
            try:
                sub.drain(timeout)
            except errors.DrainTimeoutError as exc:
                late = late or exc
            except (errors.ConnectionClosedError, errors.BadSubscriptionError):
                pass
        if late is not None:
            raise late

    def __enter__(self) -> Service:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: Optional[type],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "stopped" if self._stopped.is_set() else "running"
        return f"<Service {self._name!r} {self._version} id={self._id} {state}>"

    # --- discovery ----------------------------------------------------------------------

    def _answer(self, msg: Msg, body: Dict[str, Any]) -> None:
        if msg.reply:
            msg.respond(json.dumps(body).encode())

    def _handle_ping_request(self, msg: Msg) -> None:
        ping = ServicePing(
            id=self._id, name=self._name, version=self._version, metadata=dict(self._metadata)
        )
        self._answer(msg, ping.to_dict())

    def _handle_info_request(self, msg: Msg) -> None:
        self._answer(msg, self.info().to_dict())

    def _handle_stats_request(self, msg: Msg) -> None:
        self._answer(msg, self.stats().to_dict())
