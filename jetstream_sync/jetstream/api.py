"""The JSON of the JetStream API as dataclasses (nats-server 2.10 to 2.14 and later).

Every model is a plain declaration; one generic base class, :class:`Base`, turns a server
dict into a model (:meth:`Base.from_dict`) and back (:meth:`Base.to_dict`). The wire rules,
all applied by that one converter:

* Durations are ``float`` seconds here and integer nanoseconds on the wire: a field with
  ``metadata={"ns": True}`` (also a list of them, such as ``backoff``) goes through
  :func:`_from_ns` / :func:`_to_ns` and nothing else.
* Datetimes are aware UTC ``datetime`` here and RFC 3339 strings there. Parsed ones are
  :class:`NanoDatetime` and remember the nanoseconds below the microsecond, so a config sent
  back (a consumer's ``opt_start_time``, say) is the same instant to the nanosecond.
* Nested models, lists and dicts of them convert recursively; enums by value. An enum
  value this client does not know becomes a pseudo-member holding the raw string.
* Keys the model does not know are kept in ``extra`` and written back by ``to_dict``, so
  an info's config can be edited and sent as an update without dropping newer fields.
* ``None`` is never sent (nor a falsy value of a ``metadata={"omitempty": True}`` field).
  A field whose JSON key differs from its name says so with ``metadata={"json": "key"}``.
"""

from __future__ import annotations

import base64
import copy
import dataclasses
import re
import types
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import (
    Any,
    Callable,
    ClassVar,
    Dict,
    List,
    Mapping,
    NamedTuple,
    Optional,
    Tuple,
    Type,
    TypeVar,
    Union,
    cast,
    get_args,
    get_origin,
    get_type_hints,
)

# NanoDatetime lives in the core (Msg.metadata makes one); _nano_datetime stays importable
# here for pickles made when both were defined in this module.
from .._nanotime import NanoDatetime, _nano_datetime
from ..errors import InvalidArgumentError, JetStreamError
from ..msg import Headers, encode_headers, parse_header_block

__all__ = [
    "APIErrorInfo",
    "APIStats",
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "Base",
    "ClusterInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerPause",
    "ConsumerReset",
    "DeliverPolicy",
    "DiscardPolicy",
    "ExternalStream",
    "Header",
    "LostStreamData",
    "NanoDatetime",
    "PeerInfo",
    "PersistMode",
    "Placement",
    "PriorityGroupState",
    "PriorityPolicy",
    "PubAck",
    "RawStreamMsg",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StatusCode",
    "StorageType",
    "StoreCompression",
    "StreamAlternate",
    "StreamConfig",
    "StreamConsumerLimits",
    "StreamConsumerSource",
    "StreamInfo",
    "StreamPurgeRequest",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "StreamsListIterator",
    "SubjectTransform",
    "Tier",
    "check_consumer_name",
    "check_stream_name",
    "format_time",
    "parse_time",
]

_NS_PER_SECOND = 1_000_000_000

# --- durations: the one pair of conversions ---------------------------------------------------


def _to_ns(seconds: float) -> int:
    """Seconds (int or float) to the nearest whole nanosecond, computed exactly."""
    if isinstance(seconds, int):
        return seconds * _NS_PER_SECOND
    try:
        num, den = float(seconds).as_integer_ratio()
    except (OverflowError, ValueError):
        raise InvalidArgumentError(f"duration must be a finite number, got {seconds!r}") from None
    return (2 * num * _NS_PER_SECOND + den) // (2 * den)


def _from_ns(ns: int) -> float:
    """Nanoseconds to seconds; int / int division is correctly rounded even past 2**53."""
    return ns / _NS_PER_SECOND


# --- datetimes ---------------------------------------------------------------------------------

_TIME_RE = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d+))?(?:([Zz])|([+-])(\d\d):?(\d\d))?",
    re.ASCII,
)
_UTC = timezone.utc
_ZERO_TIME = datetime(1, 1, 1, tzinfo=_UTC)  # Go's zero time.Time, as the server sends it


def parse_time(text: str) -> NanoDatetime:
    """RFC 3339 with any number of fraction digits and any offset; no offset means UTC."""
    m = _TIME_RE.fullmatch(text) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second, frac, _z, sign, off_h, off_m = m.groups()
    ns = int((frac or "")[:9].ljust(9, "0"))
    try:
        dt = datetime(
            int(year), int(month), int(day), int(hour), int(minute), int(second), ns // 1000,
            _UTC,
        )  # fmt: skip
        if sign:
            offset = timedelta(hours=int(off_h), minutes=int(off_m))
            dt = dt.replace(tzinfo=timezone(offset if sign == "+" else -offset)).astimezone(_UTC)
    except (ValueError, OverflowError) as exc:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r} ({exc})") from None
    return _nano_datetime(dt, ns % 1000)


def format_time(dt: datetime) -> str:
    """RFC 3339 in UTC with 'Z', fraction as Go writes it (nanoseconds, trailing zeros cut).

    A naive datetime is taken to be UTC already.
    """
    ns = dt.microsecond * 1000 + getattr(dt, "nanosecond", 0)
    if dt.tzinfo is not None and dt.utcoffset():
        dt = dt.astimezone(_UTC)
    frac = f".{ns:09d}".rstrip("0") if ns else ""
    return (
        f"{dt.year:04d}-{dt.month:02d}-{dt.day:02d}"
        f"T{dt.hour:02d}:{dt.minute:02d}:{dt.second:02d}{frac}Z"
    )


def _encode_time(value: Union[datetime, str]) -> str:
    """A datetime field for the wire: a datetime (naive taken as UTC), or RFC 3339 text as
    nats-py passes through (checked here, and written in the one form the server gets)."""
    if isinstance(value, str):
        return format_time(parse_time(value))
    if not isinstance(value, datetime):
        raise TypeError(f"needs a datetime or an RFC 3339 string, got {type(value).__name__}")
    return format_time(value)


# --- bytes and header blocks -------------------------------------------------------------------


def _decode_b64(text: str) -> bytes:
    return base64.b64decode(text)


def _encode_b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _decode_headers(text: str) -> Headers:
    return parse_header_block(base64.b64decode(text))[2]


def _encode_headers(headers: Headers) -> str:
    return _encode_b64(encode_headers(headers))


# --- enums -------------------------------------------------------------------------------------


class _ServerEnum(str, Enum):
    """A string enum that accepts values it does not know (sent by a newer server).

    ``AckPolicy("future")`` is a pseudo-member: an ``AckPolicy`` whose ``value`` is the raw
    string, equal to that string, sent back unchanged.
    """

    @classmethod
    def _missing_(cls, value: object) -> Any:
        if not isinstance(value, str):
            return None
        member = str.__new__(cls, value)
        member._name_ = value.upper()
        member._value_ = value
        return member


class AckPolicy(_ServerEnum):
    """How a consumer's messages are acknowledged: none, all (an ack covers every earlier
    message), explicit (each one), or flow_control (ADR-60, nats-server 2.14+: a sourcing or
    mirroring stream acks by answering flow control)."""

    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"
    # ADR-60 (nats-server 2.14+): for the consumer a sourcing or mirroring stream reads a
    # work-queue or interest stream through; that stream acks by answering flow control.
    FLOW_CONTROL = "flow_control"


class DeliverPolicy(_ServerEnum):
    """Where a consumer starts: all, last, new, by_start_sequence (``opt_start_seq``),
    by_start_time (``opt_start_time``) or last_per_subject."""

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class ReplayPolicy(_ServerEnum):
    """How a consumer replays stored messages: instant (as fast as it can), or original (at the
    pace they were stored)."""

    INSTANT = "instant"
    ORIGINAL = "original"


class RetentionPolicy(_ServerEnum):
    """When a stream removes messages: limits (only by its limits), interest (once every consumer
    acked), or workqueue (once one consumer acked)."""

    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class StorageType(_ServerEnum):
    """Where a stream keeps its messages: file or memory."""

    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(_ServerEnum):
    """What a full stream does with a new message: old (remove the oldest to make room) or new
    (refuse the new one)."""

    OLD = "old"
    NEW = "new"


class PriorityPolicy(_ServerEnum):
    """A consumer's priority-group policy: none, overflow, pinned_client or prioritized."""

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


class StoreCompression(_ServerEnum):
    """A stream's storage compression: none or s2."""

    NONE = "none"
    S2 = "s2"


_COMPRESSIONS = frozenset(m.value for m in StoreCompression)


class PersistMode(_ServerEnum):
    """How a stream persists its writes: default or async."""

    DEFAULT = "default"
    ASYNC = "async"


# --- the generic converter ---------------------------------------------------------------------

_Codec = Optional[Callable[[Any], Any]]  # None: the value is passed through as is


class _Field(NamedTuple):
    name: str
    key: str
    decode: _Codec
    encode: _Codec
    optional: bool
    omitempty: bool


class _Plan(NamedTuple):
    fields: Tuple[_Field, ...]
    by_key: Dict[str, _Field]


_PLANS: Dict[type, _Plan] = {}
_NONE_TYPE = type(None)
_UNIONS = (Union, getattr(types, "UnionType", Union))  # Optional[X], and X | None on 3.10+
_SCALARS = (str, int, bool, float)


def _list_codecs(item_dec: _Codec, item_enc: _Codec) -> Tuple[_Codec, _Codec]:
    if item_dec is None and item_enc is None:
        return list, list
    dec, enc = item_dec or _identity, item_enc or _identity
    return (lambda v: [dec(x) for x in v]), (lambda v: [enc(x) for x in v])


def _dict_codecs(item_dec: _Codec, item_enc: _Codec) -> Tuple[_Codec, _Codec]:
    if item_dec is None and item_enc is None:
        return dict, dict
    dec, enc = item_dec or _identity, item_enc or _identity
    return (
        (lambda v: {k: dec(x) for k, x in v.items()}),
        (lambda v: {k: enc(x) for k, x in v.items()}),
    )


def _identity(value: Any) -> Any:
    return value


def _enum_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _to_dict(value: Base) -> Dict[str, Any]:
    return value.to_dict()


def _codecs(tp: Any, ns: bool, where: str) -> Tuple[_Codec, _Codec]:
    """(decode, encode) for one type hint; raises TypeError for a hint it cannot map."""
    origin = get_origin(tp)
    if origin in _UNIONS:
        args = [a for a in get_args(tp) if a is not _NONE_TYPE]
        if len(args) == 1:
            return _codecs(args[0], ns, where)
    elif origin is list:
        return _list_codecs(*_codecs(get_args(tp)[0], ns, where))
    elif origin is dict and get_args(tp)[0] is str:
        return _dict_codecs(*_codecs(get_args(tp)[1], ns, where))
    elif ns:
        if tp is float:
            return _from_ns, _to_ns
    elif isinstance(tp, type):
        if issubclass(tp, Base):
            return tp.from_dict, _to_dict
        if issubclass(tp, Enum):
            return tp, _enum_value
        if issubclass(tp, datetime):
            return parse_time, _encode_time
        if tp is bytes:
            return _decode_b64, _encode_b64
        if tp is Headers:
            return _decode_headers, _encode_headers
        if tp in _SCALARS:
            return None, None
    elif tp is Any:
        return None, None
    raise TypeError(f"{where}: no JSON conversion for {tp!r}" + (" with ns" if ns else ""))


def _is_optional(tp: Any) -> bool:
    return get_origin(tp) in _UNIONS and _NONE_TYPE in get_args(tp)


def _plan(cls: Type[Base]) -> _Plan:
    plan = _PLANS.get(cls)
    if plan is not None:
        return plan
    hints = get_type_hints(cls)
    fields: List[_Field] = []
    for f in dataclasses.fields(cls):
        if f.name == "extra":
            continue
        where = f"{cls.__name__}.{f.name}"
        decode, encode = _codecs(hints[f.name], bool(f.metadata.get("ns")), where)
        key = f.metadata.get("json", f.name)
        opt = _is_optional(hints[f.name])
        fields.append(_Field(f.name, key, decode, encode, opt, bool(f.metadata.get("omitempty"))))
    if "extra" not in cls.__dataclass_fields__:
        raise TypeError(f"{cls.__name__} needs an 'extra' field (see Base)")
    plan = _Plan(tuple(fields), {f.key: f for f in fields})
    _PLANS[cls] = plan
    return plan


_B = TypeVar("_B", bound="Base")


def _check_metadata(metadata: object) -> None:
    """nats-py refuses metadata that is not a dict; the server wants strings in it too."""
    if metadata is None:
        return
    if not isinstance(metadata, dict):
        raise InvalidArgumentError("nats: invalid metadata format")
    for key, value in metadata.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgumentError(
                f"nats: invalid metadata format: {key!r}: {value!r:.40} (keys and values "
                "must be str)"
            )


class Base:
    """Base of every model: JSON in and out, by introspecting the dataclass fields.

    A model is a ``@dataclass(repr=False)`` subclass whose fields all have defaults and
    whose last field is ``extra`` (the unknown keys; not compared, not shown). A class's
    conversion plan (hints resolved, a codec per field) is built on first use and cached.
    """

    __dataclass_fields__: ClassVar[Dict[str, Any]]
    extra: Dict[str, Any]

    @classmethod
    def from_dict(cls: Type[_B], data: Mapping[str, Any]) -> _B:
        """Build from the server's JSON (a dict from ``json.loads``)."""
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}.from_dict needs a mapping, got {type(data).__name__}")
        by_key = _plan(cls).by_key
        kwargs: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        for key, value in data.items():
            f = by_key.get(key)
            if f is None:
                extra[key] = value
            elif value is None:
                if f.optional:
                    kwargs[f.name] = None
            elif f.decode is None:
                kwargs[f.name] = value
            else:
                try:
                    kwargs[f.name] = f.decode(value)
                except (TypeError, ValueError, AttributeError) as exc:  # a malformed answer
                    raise JetStreamError(
                        f"malformed {cls.__name__}.{key} {value!r:.80}: {exc}"
                    ) from exc
        kwargs["extra"] = extra
        return cast(Callable[..., _B], cls)(**kwargs)

    def to_dict(self) -> Dict[str, Any]:
        """The server's JSON: ``None`` fields left out, unknown keys (``extra``) put back.

        A value that cannot be written (a datetime field given text that is not RFC 3339,
        say) is :class:`~jetstream_sync.errors.InvalidArgumentError` naming the field."""
        out: Dict[str, Any] = {}
        for f in _plan(type(self)).fields:
            value = getattr(self, f.name)
            if value is None or (f.omitempty and not value):
                continue
            if f.encode is None:
                out[f.key] = value
                continue
            try:
                out[f.key] = f.encode(value)
            except (TypeError, ValueError, AttributeError) as exc:
                raise InvalidArgumentError(
                    f"{type(self).__name__}.{f.name} {value!r:.80}: {exc}"
                ) from None
        for key, value in self.extra.items():
            if key not in out:
                out[key] = copy.deepcopy(value)
        return out

    # nats-py's names (``nats.js.api.Base``) ---------------------------------------------

    #: Keys nats-py's model of this class uses for a field whose JSON key differs (its
    #: field name where that is not the server's key): accepted by :meth:`from_response`.
    _NATS_PY_KEYS: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def from_response(cls: Type[_B], resp: Mapping[str, Any]) -> _B:
        """nats-py's name for :meth:`from_dict`: build from the server's JSON.

        As nats-py: durations in nanoseconds become float seconds, RFC 3339 times aware UTC
        datetimes (any offset converted; nanoseconds past the microsecond kept aside, see
        :class:`NanoDatetime`, so they compare equal to nats-py's truncated value), nested
        objects models. nats-py's own key for a field is taken too where it differs from
        the server's (``ClusterInfo``'s ``traffic_acc``). Unlike nats-py, ``resp`` is not
        changed, and unknown keys are kept in ``extra`` rather than dropped."""
        aliases = cls._NATS_PY_KEYS
        if aliases and isinstance(resp, Mapping):
            renamed = dict(resp)
            for theirs, key in aliases.items():
                if theirs in renamed:
                    value = renamed.pop(theirs)
                    renamed.setdefault(key, value)
            resp = renamed
        return cls.from_dict(resp)

    def as_dict(self) -> Dict[str, Any]:
        """nats-py's "API-friendly dict": the server's JSON form (:meth:`to_dict`).

        ``None`` fields are left out; durations are integer nanoseconds; datetimes RFC 3339
        text in UTC with ``Z`` (a naive one taken as UTC; nanoseconds kept, no trailing
        zeros); enums their string values; nested models dicts. Where nats-py differs: an
        unset config duration is left out rather than sent as 0 (the same to the server),
        and unknown keys read from the server (``extra``) are put back."""
        return self.to_dict()

    def evolve(self: _B, **params: Any) -> _B:
        """A copy with the given fields replaced (nats-py's ``evolve``); ``self`` is not
        changed. An unknown field name is a TypeError, as in nats-py."""
        names = self.__dataclass_fields__
        for name in params:
            if name not in names:
                raise TypeError(f"{type(self).__name__} has no field {name!r}")
        if "extra" not in params:
            params["extra"] = dict(self.extra)
        return cast(_B, dataclasses.replace(cast(Any, self), **params))

    def __repr__(self) -> str:
        shown = ", ".join(
            f"{f.name}={value!r}"
            for f in _plan(type(self)).fields
            for value in (getattr(self, f.name),)
            if value is not None and (value or not f.omitempty)
        )
        return f"{type(self).__name__}({shown})"


_NS = {"ns": True}


# A bool the server's JSON leaves out when false (Go's omitempty): False here, as nats-py
# reads it back, and not sent when False (the same to the server). The bools the server
# always writes (sealed, deny_delete, ...) read back False as they are; unset, they are None
# and not sent, so a config round-trips as the server and as a client wrote it.
def _false() -> Any:
    return field(default=False, metadata={"omitempty": True})


# --- streams -----------------------------------------------------------------------------------


@dataclass(repr=False)
class SubjectTransform(Base):
    """A subject transform: subjects matching ``src`` are rewritten to ``dest``."""

    src: Optional[str] = None
    dest: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class Placement(Base):
    """Where a stream's replicas are placed: a ``cluster``, servers with ``tags``, and a
    ``preferred`` leader."""

    cluster: Optional[str] = None
    tags: Optional[List[str]] = None
    preferred: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class ExternalStream(Base):
    """Where a source or mirror lives in another account or domain: API and deliver prefixes."""

    api: Optional[str] = None
    deliver: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class StreamConsumerSource(Base):
    """Durable sourcing (ADR-60, nats-server 2.14+): the consumer, made beforehand on the
    origin stream, that a source or mirror reads through, and its ``deliver_subject``. That
    consumer is a push consumer with ``ack_policy=AckPolicy.FLOW_CONTROL`` (the server then
    sets ``flow_control`` and a 1 s heartbeat; no ``ack_wait``, ``backoff`` or
    ``max_deliver``); where to start and what to filter are its own config, so the source
    takes no ``opt_start_seq``, ``opt_start_time`` or ``filter_subject``. The origin's
    messages are acked as the sourcing stream stores them: a work-queue origin empties."""

    name: Optional[str] = None
    deliver_subject: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class StreamSource(Base):
    """One entry of ``sources``, or the ``mirror``."""

    name: Optional[str] = None
    opt_start_seq: Optional[int] = None
    opt_start_time: Optional[datetime] = None
    filter_subject: Optional[str] = None
    subject_transforms: Optional[List[SubjectTransform]] = None
    external: Optional[ExternalStream] = None
    consumer: Optional[StreamConsumerSource] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class RePublish(Base):
    """Republishing of stored messages: those on ``src`` are published again on ``dest`` (only
    their headers when ``headers_only``)."""

    src: Optional[str] = None
    dest: Optional[str] = None
    headers_only: Optional[bool] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class StreamConsumerLimits(Base):
    """Defaults (and ceilings) for the stream's consumers."""

    inactive_threshold: Optional[float] = field(default=None, metadata=_NS)
    max_ack_pending: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class StreamConfig(Base):
    """A stream's configuration. Durations in seconds; unset (None) fields are not sent."""

    name: Optional[str] = None
    description: Optional[str] = None
    subjects: Optional[List[str]] = None
    retention: Optional[RetentionPolicy] = None
    max_consumers: Optional[int] = None
    max_msgs: Optional[int] = None
    max_bytes: Optional[int] = None
    max_age: Optional[float] = field(default=None, metadata=_NS)
    max_msgs_per_subject: Optional[int] = None
    max_msg_size: Optional[int] = None
    discard: Optional[DiscardPolicy] = None
    discard_new_per_subject: bool = _false()
    storage: Optional[StorageType] = None
    num_replicas: Optional[int] = None
    no_ack: bool = _false()
    template_owner: Optional[str] = None
    duplicate_window: Optional[float] = field(default=None, metadata=_NS)
    placement: Optional[Placement] = None
    mirror: Optional[StreamSource] = None
    sources: Optional[List[StreamSource]] = None
    sealed: Optional[bool] = None
    deny_delete: Optional[bool] = None
    deny_purge: Optional[bool] = None
    allow_rollup_hdrs: Optional[bool] = None
    allow_direct: Optional[bool] = None
    mirror_direct: Optional[bool] = None
    republish: Optional[RePublish] = None
    subject_transform: Optional[SubjectTransform] = None
    compression: Optional[StoreCompression] = None
    first_seq: Optional[int] = None
    metadata: Optional[Dict[str, str]] = None
    allow_msg_ttl: Optional[bool] = None
    # 0 is not sent: to the server an absent field is "no markers", a 0 an invalid TTL.
    subject_delete_marker_ttl: Optional[float] = field(
        default=None, metadata={"ns": True, "omitempty": True}
    )
    consumer_limits: Optional[StreamConsumerLimits] = None
    allow_msg_counter: Optional[bool] = None
    allow_atomic: Optional[bool] = None
    allow_msg_schedules: Optional[bool] = None
    persist_mode: Optional[PersistMode] = None
    allow_batched: Optional[bool] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The server's JSON, after nats-py's client-side checks: ``compression`` must be
        ``"none"`` or ``"s2"`` (or empty), ``metadata`` a dict of strings. Both are
        :class:`~jetstream_sync.errors.InvalidArgumentError` (a ValueError) with nats-py's
        messages."""
        compression = self.compression
        if compression and compression not in _COMPRESSIONS:
            value = compression.value if isinstance(compression, Enum) else compression
            raise InvalidArgumentError(f"nats: invalid store compression type: {value}")
        _check_metadata(self.metadata)
        return super().to_dict()


@dataclass(repr=False)
class LostStreamData(Base):
    """Messages a stream lost from its storage: their sequences and size in bytes."""

    msgs: Optional[List[int]] = None
    bytes: int = 0
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class StreamState(Base):
    """A stream's state in StreamInfo: message and byte counts, the first and last sequences and
    their times, the consumer count, deleted sequences, and the per-subject counts when asked
    for."""

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: datetime = _ZERO_TIME
    last_seq: int = 0
    last_ts: datetime = _ZERO_TIME
    consumer_count: int = 0
    deleted: Optional[List[int]] = None
    num_deleted: Optional[int] = None
    num_subjects: Optional[int] = None
    subjects: Optional[Dict[str, int]] = None
    lost: Optional[LostStreamData] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class PeerInfo(Base):
    """One replica of a clustered stream or consumer: whether it is current or offline, seconds
    since it was last active, and its lag."""

    name: str = ""
    current: bool = False
    offline: Optional[bool] = None
    active: float = field(default=0.0, metadata=_NS)
    lag: Optional[int] = None
    peer: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class ClusterInfo(Base):
    """The cluster a stream or consumer lives in: its leader and the other replicas."""

    name: Optional[str] = None
    leader: Optional[str] = None
    leader_since: Optional[datetime] = None
    raft_group: Optional[str] = None
    system_account: Optional[bool] = None
    traffic_account: Optional[str] = None
    replicas: Optional[List[PeerInfo]] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    _NATS_PY_KEYS: ClassVar[Mapping[str, str]] = {"traffic_acc": "traffic_account"}

    @property
    def traffic_acc(self) -> Optional[str]:
        """nats-py's name for ``traffic_account`` (the server's JSON key is the latter)."""
        return self.traffic_account


@dataclass(repr=False)
class APIErrorInfo(Base):
    """An API error object inside a response (e.g. a source that cannot be reached)."""

    code: int = 0
    err_code: Optional[int] = None
    description: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class StreamSourceInfo(Base):
    """Progress of a mirror or source. ``active`` is seconds since last contact, -1e-9 never.
    ``error`` is why it is stuck, e.g. 10217: its durable consumer (``StreamSource.consumer``)
    does not ack by flow control."""

    name: str = ""
    lag: int = 0
    active: float = field(default=0.0, metadata=_NS)
    external: Optional[ExternalStream] = None
    error: Optional[APIErrorInfo] = None
    filter_subject: Optional[str] = None
    subject_transforms: Optional[List[SubjectTransform]] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class StreamAlternate(Base):
    """One entry of StreamInfo.alternates (the stream or a mirror of it that can serve its
    reads): its name, cluster and domain."""

    name: str = ""
    cluster: str = ""
    domain: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class StreamInfo(Base):
    """A stream's config and state, as the server answers ``stream_info`` and ``add_stream``;
    ``mirror`` and ``sources`` report their progress."""

    config: StreamConfig = field(default_factory=StreamConfig)
    created: datetime = _ZERO_TIME
    state: StreamState = field(default_factory=StreamState)
    cluster: Optional[ClusterInfo] = None
    mirror: Optional[StreamSourceInfo] = None
    sources: Optional[List[StreamSourceInfo]] = None
    alternates: Optional[List[StreamAlternate]] = None
    domain: Optional[str] = None
    # When the server answered: not compared, so the info of an unchanged stream or
    # consumer equals the last one (nats-py's models have no ts).
    ts: Optional[datetime] = field(default=None, compare=False)
    did_create: Optional[bool] = None  # in add_stream's answer: False when it existed already
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


class StreamsListIterator:
    """nats-py's page of ``STREAM.LIST``: iterates the StreamInfo of one answer; ``offset``
    and ``total`` are the server's (``js.streams_info_iterator`` goes on to the next pages)."""

    def __init__(self, offset: int, total: int, streams: List[Dict[str, Any]]) -> None:
        self.offset = offset
        self.total = total
        self.streams = streams
        self._index = 0

    def __iter__(self) -> StreamsListIterator:
        return self

    def __next__(self) -> StreamInfo:
        if self._index >= len(self.streams):
            raise StopIteration
        info = StreamInfo.from_dict(self.streams[self._index])
        self._index += 1
        return info


@dataclass(repr=False)
class StreamPurgeRequest(Base):
    """The body of a purge (nats-py's model): below ``seq``, of ``filter``, all but ``keep``."""

    seq: Optional[int] = None
    filter: Optional[str] = None
    keep: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


# --- consumers ---------------------------------------------------------------------------------


@dataclass(repr=False)
class ConsumerConfig(Base):
    """A consumer's configuration. Durations in seconds; unset (None) fields are not sent.

    ``max_bytes`` is the pull request byte limit (Go's ``MaxRequestMaxBytes``).
    ``opt_start_time`` and ``pause_until`` take a datetime (naive: UTC) or RFC 3339 text, as
    nats-py's ``pause_until`` is; read back from the server they are datetimes.
    """

    name: Optional[str] = None
    durable_name: Optional[str] = None
    description: Optional[str] = None
    deliver_policy: Optional[DeliverPolicy] = None
    opt_start_seq: Optional[int] = None
    opt_start_time: Optional[datetime] = None
    ack_policy: Optional[AckPolicy] = None
    ack_wait: Optional[float] = field(default=None, metadata=_NS)
    max_deliver: Optional[int] = None
    backoff: Optional[List[float]] = field(default=None, metadata=_NS)
    filter_subject: Optional[str] = None
    filter_subjects: Optional[List[str]] = None
    replay_policy: Optional[ReplayPolicy] = None
    rate_limit_bps: Optional[int] = None
    sample_freq: Optional[str] = None
    max_waiting: Optional[int] = None
    max_ack_pending: Optional[int] = None
    flow_control: Optional[bool] = None
    idle_heartbeat: Optional[float] = field(default=None, metadata=_NS)
    headers_only: Optional[bool] = None
    max_batch: Optional[int] = None
    max_expires: Optional[float] = field(default=None, metadata=_NS)
    max_bytes: Optional[int] = None
    inactive_threshold: Optional[float] = field(default=None, metadata=_NS)
    num_replicas: Optional[int] = None
    mem_storage: Optional[bool] = None
    deliver_subject: Optional[str] = None
    deliver_group: Optional[str] = None
    metadata: Optional[Dict[str, str]] = None
    pause_until: Optional[datetime] = None
    priority_groups: Optional[List[str]] = None
    priority_policy: Optional[PriorityPolicy] = None
    priority_timeout: Optional[float] = field(default=None, metadata=_NS)
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """The server's JSON; ``metadata`` must be a dict of strings (InvalidArgumentError)."""
        _check_metadata(self.metadata)
        return super().to_dict()


@dataclass(repr=False)
class SequenceInfo(Base):
    """A consumer's position: the consumer and stream sequences, and when it was last active."""

    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: Optional[datetime] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class PriorityGroupState(Base):
    """A priority group's state in ConsumerInfo: who holds its pin (pinned_client), since
    when. The server sends ``pinned_ts`` as the zero time when nothing is pinned."""

    group: str = ""
    pinned_client_id: Optional[str] = None
    pinned_ts: Optional[datetime] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def pinned_id(self) -> Optional[str]:
        """The pin id (ADR-42's name for ``pinned_client_id``); None when nothing is pinned."""
        return self.pinned_client_id or None


@dataclass(repr=False)
class ConsumerInfo(Base):
    """A consumer's config and state: what it has delivered, its ack floor, the counts of
    messages pending, waiting for an ack or redelivered, and its pause and priority groups."""

    stream_name: str = ""
    name: str = ""
    config: ConsumerConfig = field(default_factory=ConsumerConfig)
    created: datetime = _ZERO_TIME
    delivered: SequenceInfo = field(default_factory=SequenceInfo)
    ack_floor: SequenceInfo = field(default_factory=SequenceInfo)
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    cluster: Optional[ClusterInfo] = None
    push_bound: Optional[bool] = None
    paused: Optional[bool] = None
    pause_remaining: Optional[float] = field(default=None, metadata=_NS)
    priority_groups: Optional[List[PriorityGroupState]] = None
    # When the server answered: not compared, so the info of an unchanged stream or
    # consumer equals the last one (nats-py's models have no ts).
    ts: Optional[datetime] = field(default=None, compare=False)
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class ConsumerPause(Base):
    """The answer to ``js.pause_consumer`` / ``js.resume_consumer`` (nats-py's model).

    ``pause_until`` a datetime (the zero time after a resume), ``pause_remaining`` seconds
    (None when not paused). Its truth is ``paused``, so ``if js.pause_consumer(...)`` reads
    as it did when these calls returned a bool."""

    paused: bool = False
    pause_until: Optional[datetime] = None
    pause_remaining: Optional[float] = field(default=None, metadata=_NS)
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __bool__(self) -> bool:
        return bool(self.paused)


@dataclass(repr=False)
class ConsumerReset(Base):
    """The answer to ``js.reset_consumer`` (ADR-60, nats-server 2.14+): the consumer's info
    after the reset, and the stream sequence its next delivery starts at or above."""

    info: ConsumerInfo = field(default_factory=ConsumerInfo)
    reset_seq: int = 0
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_answer(cls, data: Mapping[str, Any]) -> ConsumerReset:
        """The server sends the ConsumerInfo's fields with ``reset_seq`` beside them."""
        rest = {k: v for k, v in data.items() if k not in ("reset_seq", "type")}
        seq = data.get("reset_seq", 0)
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise JetStreamError(f"malformed ConsumerReset.reset_seq {seq!r:.40}")
        return cls(info=ConsumerInfo.from_dict(rest), reset_seq=seq)


# --- publish acks, account info, stored messages ------------------------------------------------


@dataclass(repr=False)
class PubAck(Base):
    """The answer to a JetStream publish. ``val`` is a counter stream's new total (as text)."""

    stream: str = ""
    seq: int = 0
    domain: Optional[str] = None
    duplicate: Optional[bool] = None
    val: Optional[str] = None
    batch_id: Optional[str] = field(default=None, metadata={"json": "batch"})
    batch_size: Optional[int] = field(default=None, metadata={"json": "count"})
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    _NATS_PY_KEYS: ClassVar[Mapping[str, str]] = {"batch_id": "batch", "batch_size": "count"}

    def __repr__(self) -> str:
        # nats-py's dataclass repr, None fields included: ported code prints the same line.
        return (
            f"PubAck(stream={self.stream!r}, seq={self.seq!r}, domain={self.domain!r}, "
            f"duplicate={self.duplicate!r}, batch_id={self.batch_id!r}, "
            f"batch_size={self.batch_size!r}, val={self.val!r})"
        )


@dataclass(repr=False)
class AccountLimits(Base):
    """An account's JetStream limits (-1 is no limit)."""

    max_memory: int = 0
    max_storage: int = 0
    max_streams: int = 0
    max_consumers: int = 0
    max_ack_pending: int = 0
    memory_max_stream_bytes: int = 0
    storage_max_stream_bytes: int = 0
    max_bytes_required: bool = False
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class Tier(Base):
    """An account's usage and limits in one tier."""

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = field(default_factory=AccountLimits)
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class APIStats(Base):
    """The account's JetStream API counters: the API level, total calls, errors and calls in
    flight."""

    level: Optional[int] = None
    total: int = 0
    errors: int = 0
    inflight: Optional[int] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class AccountInfo(Base):
    """``$JS.API.INFO``: the account's usage, limits, API counters and per-tier figures."""

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = field(default_factory=AccountLimits)
    api: APIStats = field(default_factory=APIStats)
    domain: Optional[str] = None
    tiers: Optional[Dict[str, Tier]] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(repr=False)
class RawStreamMsg(Base):
    """A stored message (``message`` of a ``STREAM.MSG.GET`` answer).

    ``data`` is the payload and ``headers`` the parsed header block (JSON ``data`` and
    ``hdrs``, both base64); ``stream`` is filled in by the client, not sent by the server.
    """

    subject: str = ""
    seq: int = 0
    data: bytes = field(default=b"", metadata={"omitempty": True})
    headers: Optional[Headers] = field(default=None, metadata={"json": "hdrs"})
    time: Optional[datetime] = None
    stream: Optional[str] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def hdrs(self) -> Optional[str]:
        """nats-py's ``hdrs``: the header block as the server's JSON has it, base64 text of
        a ``NATS/1.0`` block (``base64.b64decode`` gives the bytes), or None when the message
        has no headers. ``headers`` is the parsed form."""
        if not self.headers:
            return None
        return _encode_headers(self.headers)

    @property
    def sequence(self) -> int:
        """nats-py's name for ``seq``."""
        return self.seq

    @property
    def header(self) -> Optional[Headers]:
        """nats-py's name for ``headers``."""
        return self.headers


# --- header and status names (nats-py's constants) ------------------------------------------


class Header(str, Enum):
    """Header names of JetStream messages (nats-py's ``nats.js.api.Header``)."""

    BATCH_COMMIT = "Nats-Batch-Commit"
    BATCH_ID = "Nats-Batch-Id"
    BATCH_SEQUENCE = "Nats-Batch-Sequence"
    CONSUMER_STALLED = "Nats-Consumer-Stalled"
    DESCRIPTION = "Description"
    EXPECTED_LAST_MSG_ID = "Nats-Expected-Last-Msg-Id"
    EXPECTED_LAST_SEQUENCE = "Nats-Expected-Last-Sequence"
    EXPECTED_LAST_SUBJECT_SEQUENCE = "Nats-Expected-Last-Subject-Sequence"
    EXPECTED_STREAM = "Nats-Expected-Stream"
    INCR = "Nats-Incr"
    LAST_CONSUMER = "Nats-Last-Consumer"
    LAST_STREAM = "Nats-Last-Stream"
    MSG_ID = "Nats-Msg-Id"
    MSG_TTL = "Nats-TTL"
    ROLLUP = "Nats-Rollup"
    SCHEDULE = "Nats-Schedule"
    SCHEDULE_NEXT = "Nats-Schedule-Next"
    SCHEDULE_ROLLUP = "Nats-Schedule-Rollup"
    SCHEDULE_SOURCE = "Nats-Schedule-Source"
    SCHEDULE_TARGET = "Nats-Schedule-Target"
    SCHEDULE_TIME_ZONE = "Nats-Schedule-Time-Zone"
    SCHEDULE_TTL = "Nats-Schedule-TTL"
    SCHEDULER = "Nats-Scheduler"
    STATUS = "Status"


class StatusCode(str, Enum):
    """Status codes of JetStream status messages, as the text of the ``Status`` header."""

    SERVICE_UNAVAILABLE = "503"
    NO_MESSAGES = "404"
    REQUEST_TIMEOUT = "408"
    CONFLICT = "409"
    CONTROL_MESSAGE = "100"


# --- names -------------------------------------------------------------------------------------


def _check_name(kind: str, name: object) -> str:
    if not isinstance(name, str):
        raise InvalidArgumentError(f"{kind} name must be a str, got {type(name).__name__}")
    # nats-py's texts ("nats: invalid stream name: 'a.b'"), so ported code matching them
    # still matches, each followed by what is wrong with the name.
    if not name:
        raise InvalidArgumentError(f"nats: {kind} name is required: it is empty")
    for ch in name:
        if ch in ".*>/\\" or ch.isspace() or not ch.isprintable():
            raise InvalidArgumentError(f"nats: invalid {kind} name: {name!r}: it contains {ch!r}")
    return name


def check_stream_name(name: object) -> str:
    """Return ``name`` if it can name a stream, else raise InvalidArgumentError.

    Refused: empty, ``.``, ``*``, ``>``, whitespace, ``/``, ``\\`` and control characters.
    """
    return _check_name("stream", name)


def check_consumer_name(name: object) -> str:
    """Return ``name`` if it can name a consumer (same rules as streams), else raise."""
    return _check_name("consumer", name)


# --- Key-Value and Object Store models, where nats-py has them ----------------------------------
# They live in kv.py and object_store.py, which import this module: looked up on first use.

_ELSEWHERE = {
    "KeyValueConfig": "kv",
    "ObjectStoreConfig": "object_store",
    "ObjectLink": "object_store",
    "ObjectMetaOptions": "object_store",
    "ObjectMeta": "object_store",
    "ObjectInfo": "object_store",
}


def __getattr__(name: str) -> Any:
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__package__}.{module}"), name)
