"""The Key-Value store (ADR-8): ``js.create_key_value()``, ``js.key_value()``.

A bucket ``B`` is the stream ``KV_B`` on the subjects ``$KV.B.>``; the key ``a.b`` is the
subject ``$KV.B.a.b``, and a key's revisions are its messages' stream sequences. The stream
keeps ``history`` messages per subject, discards new messages when full, refuses message
deletes and allows rollups. Everything below is a JetStream call of the other mixins:

* ``get`` — the last message on the key's subject (a direct get, answered by any replica,
  when the bucket allows it; ``get(key, revision=n)`` is message ``n``);
* ``put`` — a publish; ``create`` / ``update`` the same with
  ``Nats-Expected-Last-Subject-Sequence`` (0 for "no value yet"), so one writer wins a race;
* ``delete`` / ``purge`` — markers: an empty message with ``KV-Operation: DEL``, or
  ``PURGE`` with ``Nats-Rollup: sub`` (the server then drops the key's older messages);
* ``watch`` / ``keys`` / ``history`` — an ordered consumer (``ordered.py``) filtered on the
  keys, delivering the last message per subject (or all of them with history); the watcher
  hands out ``None`` once, when the values there were at the start have all come.

Under an API prefix other than ``$JS.API`` (``nc.jetstream(domain=...)`` or
``prefix=...``) the writes go to ``<prefix>.$KV.<bucket>.<key>``, as nats.go's do: the
server maps ``$JS.<domain>.API.$KV.>`` to ``$KV.>`` for a domain's accounts, and an account
that imports another's JetStream under a prefix imports its ``$KV.>`` there too. Reads are
JetStream API calls and take the prefix anyway.

Markers the server writes itself (``Nats-Marker-Reason``: a key that aged out of a bucket
with ``limit_marker_ttl``, nats-server 2.11+) count as purges (``MaxAge``, ``Purge``) or
deletes (``Remove``).
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import threading
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .. import errors
from .._timeouts import Deadline, check_timeout
from ..errors import (
    BadBucketError,
    BucketNotFoundError,
    InvalidBucketNameError,
    InvalidKeyError,
    KeyDeletedError,
    KeyHistoryTooLargeError,
    KeyNotFoundError,
    KeyValueError,
    KeyWrongLastSequenceError,
    NoKeysError,
)
from ..msg import Headers, Msg
from . import api
from ._binding import covers
from ._bucket_config import BucketConfigForms
from .manager import _config, _positive, _version

if TYPE_CHECKING:  # pragma: no cover
    from typing import TypeAlias

    from .consumer import MessagesContext
    from .context import JetStream
    from .ordered import OrderedConsumer

__all__ = [
    "KV_DEL",
    "KV_OP",
    "KV_PURGE",
    "BadBucketError",
    "BucketNotFoundError",
    "BucketStatus",
    "Entry",
    "InvalidBucketNameError",
    "InvalidKeyError",
    "KeyDeletedError",
    "KeyHistoryTooLargeError",
    "KeyNotFoundError",
    "KeyValue",
    "KeyValueConfig",
    "KeyValueError",
    "KeyValueFactory",
    "KeyWatcher",
    "KeyWrongLastSequenceError",
    "NoKeysError",
    "check_bucket",
    "check_key",
]

KV_OP = "KV-Operation"
KV_DEL = "DEL"
KV_PURGE = "PURGE"
_MARKER_REASON = "Nats-Marker-Reason"  # server-placed markers (nats-server 2.11+)
_REASON_OPS = {"MaxAge": KV_PURGE, "Purge": KV_PURGE, "Remove": KV_DEL}
_ROLLUP = "Nats-Rollup"
_TTL = "Nats-TTL"
_DEFAULT_PREFIX = "$JS.API"  # the JetStream API's own prefix (context.DEFAULT_API_PREFIX)
_MAX_HISTORY = 64
_DUPLICATE_WINDOW = 120.0  # ADR-8: 2 minutes, or the bucket's ttl when that is shorter
_WRONG_LAST = (10071, 10164)  # the err_codes of a failed Nats-Expected-Last-Subject-Sequence
_QUIET = 1.0  # a watcher quiet this long before its initial values are in looks why
_CHUNK = 30.0  # a watcher waiting without a timeout looks at its stopped flag this often
# The idle heartbeat a watch's pulls ask for (nats.go's orderedHeartbeatsInterval): two missed
# and the watch's consumer is made again. Its consumer is an R1 ephemeral on one node: when that
# node dies, the watch notices within ~10 s (with the pull's default, half its 30 s expiry:
# 30 s, in which a pcgroups member would miss its group's changes).
_WATCH_HEARTBEAT = 5.0

_BUCKET_RE = re.compile(r"[a-zA-Z0-9_-]+")
_TOKEN_RE = re.compile(r"[-/_=a-zA-Z0-9]+")


def check_bucket(bucket: object) -> str:
    """Return ``bucket`` if it can name a bucket (``[a-zA-Z0-9_-]+``), else raise
    :class:`InvalidBucketNameError`."""
    if not isinstance(bucket, str):
        raise InvalidBucketNameError(f"bucket name must be a str, got {type(bucket).__name__}")
    if not _BUCKET_RE.fullmatch(bucket):
        raise InvalidBucketNameError(
            f"invalid bucket name {bucket!r}: only letters, digits, '_' and '-' are allowed"
        )
    return bucket


def check_key(key: object, pattern: bool = False) -> str:
    """Return ``key`` if KV can store it, else raise :class:`InvalidKeyError`.

    A key is dot-separated tokens of ``-/_=a-zA-Z0-9``: no empty token, so no leading,
    trailing or double dot. A ``pattern`` (watch, keys, history) may also have ``*`` tokens
    and a last ``>`` token.
    """
    what = "key pattern" if pattern else "key"
    if not isinstance(key, str):
        raise InvalidKeyError(f"{what} must be a str, got {type(key).__name__}")
    if not key:
        raise InvalidKeyError(f"invalid {what} {key!r}: it is empty")
    tokens = key.split(".")
    for i, token in enumerate(tokens):
        if not token:
            raise InvalidKeyError(
                f"invalid {what} {key!r}: a leading, trailing or double '.' (empty token)"
            )
        if pattern and (token == "*" or (token == ">" and i == len(tokens) - 1)):
            continue
        if _TOKEN_RE.fullmatch(token) is None:
            if pattern and token == ">":
                raise InvalidKeyError(f"invalid {what} {key!r}: '>' must be the last token")
            bad = next(ch for ch in token if _TOKEN_RE.fullmatch(ch) is None)
            allowed = "-/_=.a-zA-Z0-9" + (", '*' tokens and a last '>'" if pattern else "")
            raise InvalidKeyError(f"invalid {what} {key!r}: {bad!r} is not allowed ({allowed})")
    return key


def _patterns(keys: object) -> List[str]:
    """One key pattern or a non-empty list of them."""
    if isinstance(keys, str):
        return [check_key(keys, pattern=True)]
    if not isinstance(keys, (list, tuple)) or not keys:
        raise InvalidKeyError(f"keys must be a key pattern or a non-empty list of them: {keys!r}")
    return [check_key(k, pattern=True) for k in keys]


def _value(value: object) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    hint = " (encode it)" if isinstance(value, str) else ""
    raise errors.InvalidArgumentError(f"value must be bytes, got {type(value).__name__}{hint}")


def _revision(value: object, what: str) -> int:
    """An expected revision: None is 0 ("no value yet"), else an int >= 0."""
    if value is None:
        return 0
    return _positive(value, what, allow_zero=True)


def _whole_seconds(value: object, what: str) -> int:
    """A per-message TTL: the server counts whole seconds, at least 1."""
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 1
        or value != int(value)
    ):
        raise errors.InvalidArgumentError(f"{what} must be whole seconds >= 1, got {value!r}")
    return int(value)


def _seconds(value: object, what: str) -> Optional[float]:
    if value is None:
        return None
    return check_timeout(value, what)


def _has_wildcard(pattern: str) -> bool:
    return any(token in ("*", ">") for token in pattern.split("."))


def _operation(headers: Optional[Headers]) -> Optional[str]:
    """``"DEL"`` or ``"PURGE"`` for a marker, None for a value."""
    if not headers:
        return None
    op = headers.get(KV_OP)
    if op in (KV_DEL, KV_PURGE):
        return op
    reason = headers.get(_MARKER_REASON)
    if reason is not None:  # the server's own marker: the value is gone either way
        return _REASON_OPS.get(reason, KV_PURGE)
    return None


# --- the models ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One revision of a key. ``operation`` is None for a value, ``"DEL"`` or ``"PURGE"``
    for a marker, whose ``value`` is None from ``get()`` (the entry of KeyDeletedError) and
    ``b''`` from a watch or history, as in nats-py. ``delta``: how many newer messages the
    watch or history still had to deliver (0 for the latest; None for ``get(revision=)``).
    ``created``: when the server stored it."""

    bucket: str
    key: str
    value: Optional[bytes]
    revision: int
    delta: Optional[int] = None
    created: Optional[_dt.datetime] = None
    operation: Optional[str] = None


@dataclass(frozen=True)
class BucketStatus:
    """``kv.status()``: the bucket's stream info, and ADR-8's figures from it."""

    stream_info: api.StreamInfo
    bucket: str

    @property
    def values(self) -> int:
        """Messages stored: every kept revision and marker of every key."""
        return self.stream_info.state.messages

    @property
    def history(self) -> int:
        """Revisions kept per key."""
        return self.stream_info.config.max_msgs_per_subject or 0

    @property
    def ttl(self) -> Optional[float]:
        """Seconds a value lives (0: for ever)."""
        return self.stream_info.config.max_age

    @property
    def marker_ttl(self) -> Optional[float]:
        """Seconds the server's own markers live (``limit_marker_ttl``), or None."""
        return self.stream_info.config.subject_delete_marker_ttl

    @property
    def bytes(self) -> int:
        """Bytes the bucket's stream holds."""
        return self.stream_info.state.bytes

    @property
    def is_compressed(self) -> bool:
        """True when the bucket's stream is compressed (s2)."""
        return self.stream_info.config.compression == api.StoreCompression.S2

    @property
    def backing_store(self) -> str:
        """Always ``"JetStream"`` (ADR-8)."""
        return "JetStream"


@dataclass
class KeyValueConfig(BucketConfigForms):
    """A bucket's configuration (not the stream's: ``create_key_value`` derives that).

    ``ttl`` and ``limit_marker_ttl`` are seconds; ``max_value_size`` and ``max_bytes``
    bytes (None: no limit). ``direct`` lets any replica answer gets (ADR-8's default);
    ``compression`` stores with s2. ``limit_marker_ttl`` (nats-server 2.11+) makes the
    server write a purge marker, living that long, when a key ages out, and allows
    ``create(..., msg_ttl=)`` and ``purge(..., msg_ttl=)``.
    """

    bucket: str
    description: Optional[str] = None
    max_value_size: Optional[int] = None
    history: int = 1
    ttl: Optional[float] = None
    max_bytes: Optional[int] = None
    storage: Optional[api.StorageType] = None
    replicas: int = 1
    placement: Optional[api.Placement] = None
    republish: Optional[api.RePublish] = None
    direct: bool = True
    compression: bool = False
    limit_marker_ttl: Optional[float] = None
    metadata: Optional[Dict[str, str]] = None


def _limit(value: object, what: str) -> int:
    """A size limit: None or -1 for none, else an int >= 1."""
    if value is None or value == -1:
        return -1
    return _positive(value, what)


def _stream_config(cfg: KeyValueConfig) -> api.StreamConfig:
    """ADR-8's stream for a bucket, every field checked first."""
    bucket = check_bucket(cfg.bucket)
    history = cfg.history
    if isinstance(history, bool) or not isinstance(history, int) or history < 1:
        raise errors.InvalidArgumentError(f"history must be an int from 1 to 64, got {history!r}")
    if history > _MAX_HISTORY:
        raise KeyHistoryTooLargeError(
            f"history {history}: a bucket keeps at most {_MAX_HISTORY} revisions per key"
        )
    ttl = _seconds(cfg.ttl, "ttl") or None  # 0: values live for ever
    marker_ttl = _seconds(cfg.limit_marker_ttl, "limit_marker_ttl") or None
    if marker_ttl is not None and marker_ttl < 1:
        raise errors.InvalidArgumentError(f"limit_marker_ttl must be >= 1 s, got {marker_ttl!r}")
    replicas = _positive(cfg.replicas, "replicas")
    storage = cfg.storage if cfg.storage is not None else api.StorageType.FILE
    if storage not in (api.StorageType.FILE, api.StorageType.MEMORY):
        raise errors.InvalidArgumentError(f"storage must be a StorageType, got {storage!r}")
    for value, cls, what in (
        (cfg.description, str, "description"),
        (cfg.placement, api.Placement, "placement"),
        (cfg.republish, api.RePublish, "republish"),
        (cfg.metadata, dict, "metadata"),
    ):
        if value is not None and not isinstance(value, cls):
            raise errors.InvalidArgumentError(
                f"{what} must be a {cls.__name__}, got {type(value).__name__}"
            )
    for flag, what in ((cfg.direct, "direct"), (cfg.compression, "compression")):
        if not isinstance(flag, bool):
            raise errors.InvalidArgumentError(f"{what} must be a bool, got {flag!r}")
    return api.StreamConfig(
        name=f"KV_{bucket}",
        description=cfg.description,
        subjects=[f"$KV.{bucket}.>"],
        retention=api.RetentionPolicy.LIMITS,
        max_consumers=-1,
        max_msgs=-1,
        max_bytes=_limit(cfg.max_bytes, "max_bytes"),
        max_age=ttl,
        max_msgs_per_subject=history,
        max_msg_size=_limit(cfg.max_value_size, "max_value_size"),
        discard=api.DiscardPolicy.NEW,
        storage=api.StorageType(storage),
        num_replicas=replicas,
        duplicate_window=min(ttl, _DUPLICATE_WINDOW) if ttl else _DUPLICATE_WINDOW,
        placement=cfg.placement,
        deny_delete=True,
        allow_rollup_hdrs=True,
        allow_direct=cfg.direct,
        republish=cfg.republish,
        compression=api.StoreCompression.S2 if cfg.compression else None,
        metadata=cfg.metadata,
        allow_msg_ttl=True if marker_ttl else None,
        subject_delete_marker_ttl=marker_ttl,
    )


# --- the watcher -----------------------------------------------------------------------------


class KeyWatcher:
    """``kv.watch()``: the entries of the watched keys, one ``None`` once those there were
    at the start have all come, then every change.

    ``updates(timeout)`` returns the next (TimeoutError when none came in time), and
    iterating blocks for each until ``stop()`` (from any thread) or leaving the ``with``
    block. Nothing is read ahead beyond one pull: a slow reader leaves the rest on the server.
    One reader at a time.
    """

    def __init__(
        self,
        kv: KeyValue,
        subjects: List[str],
        deliver: api.DeliverPolicy,
        meta_only: bool,
        ignore_deletes: bool,
        inactive_threshold: Optional[float] = None,
    ) -> None:
        self._kv = kv
        self._js = kv._js
        self._subjects = subjects
        self._headers_only = True if meta_only else None
        self._ignore_deletes = ignore_deletes
        self._inactive_threshold = inactive_threshold
        self._lock = threading.Lock()
        self._stopped = False
        self._oc, self._msgs = self._start(deliver, None)
        # The initial entries are in once a message says nothing is pending after it; if
        # nothing was pending at the start, at once: None is the first thing handed out.
        self._init_done = deliver == api.DeliverPolicy.NEW or self._oc.info.num_pending == 0
        self._marker_due = self._init_done
        self._last: Tuple[str, int] = ("", 0)  # (link, consumer sequence) of the last read

    def _start(
        self, deliver: api.DeliverPolicy, start_seq: Optional[int]
    ) -> Tuple[OrderedConsumer, MessagesContext]:
        """An ordered consumer on the watched keys, pulling."""
        oc = self._js.ordered_consumer(
            self._kv._stream,
            filter_subjects=self._subjects,
            deliver_policy=deliver,
            opt_start_seq=start_seq,
            headers_only=self._headers_only,
            inactive_threshold=self._inactive_threshold,
        )
        try:
            return oc, oc.messages(heartbeat=_WATCH_HEARTBEAT)
        except BaseException:
            oc.delete()
            raise

    def __repr__(self) -> str:
        return f"<KeyWatcher of bucket {self._kv.bucket!r}>"

    def updates(self, timeout: Optional[float] = 5.0) -> Optional[Entry]:
        """The next entry, or the one None; waits up to ``timeout`` seconds (None: until
        something comes). BadSubscriptionError once stopped."""
        t = check_timeout(timeout, "timeout", allow_none=True)
        deadline = None if t is None else Deadline(t)
        with self._lock:
            if self._marker_due:
                self._marker_due = False
                return None
            while True:
                if self._stopped:
                    raise errors.BadSubscriptionError(f"{self!r} was stopped")
                left = None if deadline is None else deadline.remaining()
                wait = left if self._init_done else min(_QUIET, _QUIET if left is None else left)
                msg = self._next(wait)
                if msg is None:
                    if deadline is not None and deadline.expired:
                        raise errors.TimeoutError(f"{self!r}: no update within {t} s")
                    if not self._init_done and self._initial_gone():
                        self._init_done = True
                        return None
                    continue
                entry, last_initial = self._read(msg)
                if last_initial:
                    self._init_done = True
                    if entry is None:
                        return None
                    self._marker_due = True
                if entry is not None:
                    return entry

    def _next(self, wait: Optional[float]) -> Optional[Msg]:
        """The next message; None when ``wait`` ran out."""
        try:
            return self._msgs.next(_CHUNK if wait is None else wait)
        except errors.TimeoutError:
            return None
        except StopIteration:
            raise errors.BadSubscriptionError(f"{self!r} was stopped") from None

    def _read(self, msg: Msg) -> Tuple[Optional[Entry], bool]:
        """(the entry, or None when it is left out; whether it ends the initial ones)."""
        md = msg.metadata
        self._last = (md.consumer, md.sequence.consumer)
        last_initial = not self._init_done and md.num_pending == 0
        op = _operation(msg.headers)
        if op is not None and self._ignore_deletes:
            return None, last_initial
        key = msg.subject[len(self._kv._pre) :]
        entry = Entry(
            self._kv.bucket, key, msg.data, md.sequence.stream, md.num_pending, md.timestamp, op
        )
        return entry, last_initial

    def _initial_gone(self) -> bool:
        """Quiet before the initial entries are in: True if nothing is pending and all the
        consumer delivered was read, i.e. what was pending at the start has gone since
        (expired, purged). nats-server (2.15) then delivers nothing more on that
        last-per-subject consumer: the watch goes on with a new one from that point."""
        try:
            info = self._js.consumer_info(self._kv._stream, self._oc.name)
        except errors.NATSError:
            return False  # the chain is being rebuilt, or the server is away: look later
        link, seq = self._last
        if info.num_pending or info.delivered.consumer_seq > (seq if link == info.name else 0):
            return False
        start = info.delivered.stream_seq + 1
        try:
            fresh = self._start(api.DeliverPolicy.BY_START_SEQUENCE, start)
        except errors.NATSError:
            return False
        self._msgs.stop()
        self._oc, self._msgs = fresh
        if self._stopped:  # stop() came meanwhile, and stopped the old one
            self._msgs.stop()
        return True

    def _initial(self) -> List[Entry]:
        """The entries up to the None (each within the JetStream timeout)."""
        out: List[Entry] = []
        while True:
            entry = self.updates(self._js.timeout)
            if entry is None:
                return out
            out.append(entry)

    def stop(self) -> None:
        """End the watch (a blocked ``updates()`` or iteration ends) and delete its consumer."""
        self._stopped = True
        self._msgs.stop()

    def __iter__(self) -> Iterator[Optional[Entry]]:
        return self

    def __next__(self) -> Optional[Entry]:
        try:
            return self.updates(None)
        except (errors.BadSubscriptionError, errors.ConnectionClosedError):
            raise StopIteration from None

    def __enter__(self) -> KeyWatcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- the bucket ------------------------------------------------------------------------------


class KeyValue:
    """One bucket, from ``js.key_value()`` or ``js.create_key_value()``. Thread-safe: every
    call is its own JetStream request (a watcher is for one reader at a time)."""

    # nats-py's names for them (KeyValue.Entry, ...)
    Entry: TypeAlias = Entry
    BucketStatus: TypeAlias = BucketStatus
    KeyWatcher: TypeAlias = KeyWatcher

    def __init__(self, js: JetStream, bucket: str, info: api.StreamInfo) -> None:
        self._js = js
        self._name = bucket
        self._stream = f"KV_{bucket}"
        self._pre = f"$KV.{bucket}."
        # The subjects the writes go to: under a JetStream prefix, as nats.go does.
        api_prefix = js.prefix
        self._put_pre = self._pre if api_prefix == _DEFAULT_PREFIX else f"{api_prefix}.{self._pre}"
        self._direct = bool(info.config.allow_direct)

    def __repr__(self) -> str:
        return f"<KeyValue bucket {self._name!r}>"

    @property
    def bucket(self) -> str:
        """The bucket's name."""
        return self._name

    def _subject(self, key: str, validate_keys: bool) -> str:
        if validate_keys:
            check_key(key)
        elif not isinstance(key, str) or not key:
            raise InvalidKeyError(f"key must be a non-empty str, got {key!r}")
        return self._pre + key

    def _write_subject(self, key: str, validate_keys: bool) -> str:
        """Where a write of ``key`` is published (the stream stores it as ``_subject``)."""
        return self._put_pre + self._subject(key, validate_keys)[len(self._pre) :]

    def _where(self, key: str) -> str:
        return f"key {key!r} of bucket {self._name!r}"

    # --- reading ----------------------------------------------------------------------------

    def get(self, key: str, revision: Optional[int] = None, validate_keys: bool = True) -> Entry:
        """The key's latest value, or its revision ``revision``. KeyNotFoundError if there
        is none; KeyDeletedError (a KeyNotFoundError) if it is a delete or purge marker."""
        subject = self._subject(key, validate_keys)
        seq = None if revision is None else _positive(revision, "revision")
        at = "" if seq is None else f" at revision {seq}"
        try:
            raw = self._get_msg(subject, seq)
        except errors.NoMessageFoundError:
            raise KeyNotFoundError(f"{self._where(key)} not found{at}") from None
        except errors.StreamNotFoundError as exc:
            raise self._gone(exc) from None
        if raw.subject != subject:
            other = raw.subject[len(self._pre) :] if raw.subject.startswith(self._pre) else ""
            raise KeyNotFoundError(f"{self._where(key)} not found{at}: it is key {other!r}")
        op = _operation(raw.headers)
        # A marker read by get() has value None, as in nats-py (whose watch gives b'')
        value = None if op is not None else raw.data
        entry = Entry(self._name, key, value, raw.seq, 0 if seq is None else None, raw.time, op)
        if op is not None:
            verb = "deleted" if op == KV_DEL else "purged"
            raise KeyDeletedError(
                f"{self._where(key)} was {verb} at revision {raw.seq}", entry=entry, op=op
            )
        return entry

    def _get_msg(self, subject: str, seq: Optional[int]) -> api.RawStreamMsg:
        """The message by direct get when the bucket allows it; when nobody answers the direct
        get (a just-created R3 bucket whose replicas have not all subscribed yet, or a stream
        without direct gets) the stream leader's API, as the Object Store does: it says
        whether the stream exists and answers once there is a leader."""
        try:
            return self._js.get_msg(
                self._stream, seq=seq, last_by_subject=None if seq else subject, direct=self._direct
            )
        except errors.APIError:
            raise
        except (errors.JetStreamError, errors.NoRespondersError):
            if not self._direct:
                raise
            return self._js.get_msg(self._stream, seq=seq, last_by_subject=None if seq else subject)

    def status(self) -> BucketStatus:
        """The bucket's status, from its stream's info; BucketNotFoundError once the bucket is
        gone."""
        try:
            return BucketStatus(self._js.stream_info(self._stream), self._name)
        except errors.StreamNotFoundError as exc:
            raise self._gone(exc) from None

    def _gone(self, exc: errors.APIError) -> BucketNotFoundError:
        return BucketNotFoundError(
            exc.code, exc.err_code, f"bucket {self._name!r} does not exist (any more)"
        )

    # --- writing ----------------------------------------------------------------------------

    def put(self, key: str, value: bytes, validate_keys: bool = True) -> int:
        """Store ``value`` as the key's new revision; returns that revision."""
        subject = self._write_subject(key, validate_keys)
        return self._publish(subject, key, _value(value), {}, None)

    def create(
        self,
        key: str,
        value: bytes,
        validate_keys: bool = True,
        msg_ttl: Optional[float] = None,
    ) -> int:
        """Store ``value`` only if the key has none: never written, or deleted / purged.
        KeyWrongLastSequenceError if it has one. ``msg_ttl`` (whole seconds) makes this
        revision expire on its own, in a bucket with ``limit_marker_ttl`` (the server
        raises a shorter ``msg_ttl`` to that)."""
        subject = self._write_subject(key, validate_keys)
        data = _value(value)
        headers = {} if msg_ttl is None else {_TTL: str(_whole_seconds(msg_ttl, "msg_ttl"))}
        try:
            return self._publish(subject, key, data, headers, 0)
        except KeyWrongLastSequenceError as taken:
            # The key has messages; if the latest is a marker, the key is free: expect that
            # marker's revision (ADR-8). Another writer can still be first: then this raises.
            try:
                self.get(key, validate_keys=False)
            except KeyDeletedError as gone:
                return self._publish(subject, key, data, headers, gone.entry.revision)
            except KeyNotFoundError:  # gone meanwhile (aged out): free again
                return self._publish(subject, key, data, headers, 0)
            raise taken from None

    def update(
        self, key: str, value: bytes, last: Optional[int] = None, validate_keys: bool = True
    ) -> int:
        """Store ``value`` only if the key's latest revision is ``last`` (compare-and-set;
        0 or None: only if the key has no message at all). KeyWrongLastSequenceError
        otherwise: another writer was first."""
        subject = self._write_subject(key, validate_keys)
        return self._publish(subject, key, _value(value), {}, _revision(last, "last"))

    def delete(
        self,
        key: str,
        last: Optional[int] = None,
        validate_keys: bool = True,
        msg_ttl: Optional[float] = None,
    ) -> bool:
        """Mark the key deleted, keeping its history; with ``last`` (> 0), only if its latest
        revision is ``last``. Returns True.

        ``msg_ttl`` is accepted for nats-py's signature and, as there (nats-py 2.16), ignored
        with a DeprecationWarning: a delete marker that expired would bring the key's older
        revisions back as its value. For a marker that goes away, use ``purge(key,
        msg_ttl=)``; for a value that does, ``create(key, value, msg_ttl=)``."""
        if msg_ttl is not None:
            warnings.warn(
                "msg_ttl on delete() is deprecated and ignored; use create() or purge() for TTL",
                DeprecationWarning,
                stacklevel=2,
            )
        subject = self._write_subject(key, validate_keys)
        expected = _revision(last, "last") or None
        self._publish(subject, key, b"", {KV_OP: KV_DEL}, expected)
        return True

    def purge(self, key: str, msg_ttl: Optional[float] = None) -> bool:
        """Mark the key purged and drop its history (a rollup). ``msg_ttl`` (whole seconds)
        lets the marker itself expire (a bucket with ``limit_marker_ttl``). Returns True."""
        subject = self._write_subject(key, True)
        headers = {KV_OP: KV_PURGE, _ROLLUP: "sub"}
        if msg_ttl is not None:
            headers[_TTL] = str(_whole_seconds(msg_ttl, "msg_ttl"))
        self._publish(subject, key, b"", headers, None)
        return True

    def _publish(
        self, subject: str, key: str, data: bytes, headers: Dict[str, str], last: Optional[int]
    ) -> int:
        try:
            ack = self._js.publish(
                subject, data, headers=headers or None, expected_last_subject_seq=last
            )
        except errors.APIError as exc:
            if exc.err_code not in _WRONG_LAST:
                raise
            why = "has a value already" if last == 0 else f"is not at revision {last}"
            raise KeyWrongLastSequenceError(
                exc.code, exc.err_code, f"{self._where(key)} {why} ({exc.description})"
            ) from None
        return ack.seq

    def purge_deletes(self, olderthan: float = 30 * 60) -> bool:
        """Remove the keys whose latest entry is a marker, with their history. Markers
        younger than ``olderthan`` seconds stay (their history goes); ``olderthan`` <= 0
        removes all. A value written after a marker is never touched. Returns True."""
        if isinstance(olderthan, bool) or not isinstance(olderthan, (int, float)):
            raise errors.InvalidArgumentError(f"olderthan must be seconds, got {olderthan!r}")
        with self.watchall(meta_only=True) as watcher:
            markers = [e for e in watcher._initial() if e.operation is not None]
        now = _dt.datetime.now(_dt.timezone.utc)
        for entry in markers:
            age = (now - entry.created).total_seconds() if entry.created else olderthan
            keep = olderthan > 0 and age < olderthan
            # Everything before the marker (keep) or up to it; nothing after it.
            end = entry.revision if keep else entry.revision + 1
            self._js.purge_stream(self._stream, subject=self._pre + entry.key, seq=end)
        return True

    # --- watching ---------------------------------------------------------------------------

    def watch(
        self,
        keys: Union[str, Sequence[str]],
        headers_only: bool = False,
        include_history: bool = False,
        ignore_deletes: bool = False,
        meta_only: bool = False,
        inactive_threshold: Optional[float] = None,
        *,
        updates_only: bool = False,
    ) -> KeyWatcher:
        """A :class:`KeyWatcher` on ``keys`` (a key, a pattern with ``*`` / ``>``, or a list
        of them): the latest entry of each (``include_history``: every kept revision), then
        None, then every change as it happens. ``ignore_deletes`` leaves markers out,
        ``meta_only`` the values, ``updates_only`` the current entries (None comes first).

        The positional order is nats-py's. ``headers_only`` is ``meta_only`` by its
        consumer's name (nats-py 2.16 accepts it and ignores it; here it asks for what it
        says). ``inactive_threshold``: seconds after which the server removes the watch's
        consumer if nobody reads from it (None: 5 minutes, as nats-py)."""
        subjects = [self._pre + k for k in _patterns(keys)]
        for flag, what in (
            (headers_only, "headers_only"),
            (include_history, "include_history"),
            (ignore_deletes, "ignore_deletes"),
            (meta_only, "meta_only"),
            (updates_only, "updates_only"),
        ):
            if not isinstance(flag, bool):
                raise errors.InvalidArgumentError(f"{what} must be a bool, got {flag!r}")
        inactive = _seconds(inactive_threshold, "inactive_threshold") or None
        if include_history and updates_only:
            raise errors.InvalidArgumentError("give include_history or updates_only, not both")
        if updates_only:
            deliver = api.DeliverPolicy.NEW
        elif include_history:
            deliver = api.DeliverPolicy.ALL
        else:
            deliver = api.DeliverPolicy.LAST_PER_SUBJECT
        try:
            return KeyWatcher(
                self, subjects, deliver, meta_only or headers_only, ignore_deletes, inactive
            )
        except errors.StreamNotFoundError as exc:
            raise self._gone(exc) from None

    def watchall(self, **options: Any) -> KeyWatcher:
        """``watch(">", ...)``: every key of the bucket."""
        return self.watch(">", **options)

    def keys(self, filters: Union[str, Sequence[str], None] = None) -> List[str]:
        """The keys that have a value now (not a marker), oldest change first. ``filters``
        list only some: a key pattern with ``*`` or ``>`` lists the keys it matches (given
        to the server, as nats.go does); a filter without wildcards lists every key that
        contains it, as nats-py's ``keys(filters=["greet"])`` does (``greeting``,
        ``greetings``). NoKeysError if there are none."""
        given = [] if filters is None else _patterns(filters)  # checked as watch checks them
        contained = [f for f in given if not _has_wildcard(f)]
        latest: Dict[str, Optional[str]] = {}
        # With a contained-in filter every key is read and the filters applied here
        where = ">" if filters is None or contained else filters
        with self.watch(where, meta_only=True) as watcher:
            for entry in watcher._initial():
                latest.pop(entry.key, None)  # a later change moves the key to the end
                latest[entry.key] = entry.operation
        found = [
            k
            for k, op in latest.items()
            if op is None
            and (
                not contained
                or any(f in k for f in contained)
                or any(covers(f, k) for f in given if f not in contained)
            )
        ]
        if not found:
            which = "" if filters is None else f" matching {filters!r}"
            raise NoKeysError(f"bucket {self._name!r} has no keys{which}")
        return found

    def history(self, key: str) -> List[Entry]:
        """Every kept revision of ``key`` (or of the keys a pattern matches), markers
        included, oldest first. NoKeysError if there is none."""
        with self.watch(key, include_history=True) as watcher:
            entries = watcher._initial()
        if not entries:
            raise NoKeysError(f"bucket {self._name!r} has no history for key {key!r}")
        return entries


# --- the JetStream mixin ---------------------------------------------------------------------


class KeyValueFactory:
    """The JetStream mixin for buckets: ``create_key_value``, ``key_value``,
    ``delete_key_value``."""

    def create_key_value(self, config: Optional[KeyValueConfig] = None, **params: Any) -> KeyValue:
        """Create a bucket from a KeyValueConfig and/or its fields as keywords (the same
        configuration again is fine; a different one is StreamNameAlreadyInUseError)."""
        js: JetStream = self  # type: ignore[assignment]
        cfg = _config(KeyValueConfig, config, params, "config")
        scfg = _stream_config(cfg)
        if scfg.subject_delete_marker_ttl and _version(js.nc.server_info.get("version")) < (2, 11):
            raise KeyValueError("limit_marker_ttl needs nats-server 2.11 or later")
        info = js.add_stream(scfg)
        return KeyValue(js, cfg.bucket, info)

    def key_value(self, bucket: str) -> KeyValue:
        """Bind to an existing bucket: BucketNotFoundError if there is none, BadBucketError
        if its stream is not a bucket."""
        js: JetStream = self  # type: ignore[assignment]
        check_bucket(bucket)
        try:
            info = js.stream_info(f"KV_{bucket}")
        except errors.StreamNotFoundError as exc:
            raise BucketNotFoundError(
                exc.code, exc.err_code, f"no bucket {bucket!r} (no stream KV_{bucket})"
            ) from None
        if (info.config.max_msgs_per_subject or 0) < 1:
            raise BadBucketError(
                f"stream KV_{bucket} is not a Key-Value bucket (no max_msgs_per_subject)"
            )
        return KeyValue(js, bucket, info)

    def delete_key_value(self, bucket: str) -> bool:
        """Delete a bucket and everything in it. BucketNotFoundError if there is none."""
        js: JetStream = self  # type: ignore[assignment]
        check_bucket(bucket)
        try:
            return js.delete_stream(f"KV_{bucket}")
        except errors.StreamNotFoundError as exc:
            raise BucketNotFoundError(exc.code, exc.err_code, f"no bucket {bucket!r}") from None
