"""Stream, consumer, message and account management: the JetStream API, call by call.

A mixin of :class:`~jetstream_sync.jetstream.context.JetStream`; every call goes through
``self._api`` (or, for direct gets, a core request) and returns a model from ``api.py``.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
from typing import (
    TYPE_CHECKING,
    Any,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Tuple,
    TypeVar,
    Union,
)

from .. import errors
from .._protocol import check_publish_subject, check_subscribe_subject
from .._seam import is_pedantic
from . import api
from .api_level import ApiLevels, stream_config_level
from .direct import raw_from_direct
from .priority import check_group_name, check_priority_config

if TYPE_CHECKING:  # pragma: no cover
    from ..client import Client

__all__ = ["JetStreamManager"]

_C = TypeVar("_C")


def _config(cls: type[_C], config: Optional[_C], fields: Mapping[str, Any], what: str) -> _C:
    """A config from an object, keyword fields, or an object with fields replaced."""
    if config is not None and not isinstance(config, cls):
        raise errors.InvalidArgumentError(
            f"{what} must be a {cls.__name__}, got {type(config).__name__}"
        )
    try:
        if config is None:
            return cls(**fields)
        return dataclasses.replace(config, **fields) if fields else config  # type: ignore[type-var]
    except TypeError as exc:
        raise errors.InvalidArgumentError(f"bad {cls.__name__} field: {exc}") from None


class JetStreamManager:
    """Management calls. Needs ``_api``, ``_nc``, ``_prefix`` and ``_timeout`` from its host."""

    _nc: Client
    _prefix: str
    _timeout: float

    _levels: ApiLevels

    def _api(
        self,
        suffix: str,
        body: Optional[Mapping[str, Any]] = None,
        timeout: Optional[float] = None,
        required_level: int = 0,
    ) -> Dict[str, Any]:
        raise NotImplementedError  # pragma: no cover - provided by JetStream

    def _stream_call(self, action: str, cfg: api.StreamConfig) -> api.StreamInfo:
        """Create or update a stream. A config with fields of a newer API level (counters,
        atomic or fast batches, schedules, TTLs) is refused with ApiLevelError, naming the
        fields, when the server's level is lower: a server before 2.12 would make the
        stream without them, silently. The request also carries the level, for the server
        to refuse it itself (ADR-44)."""
        name = api.check_stream_name(cfg.name)
        body = cfg.to_dict()
        level, fields = stream_config_level(body)
        if level:
            self._levels.require((f"stream {name!r} with {fields}", level))
        data = self._api(f"STREAM.{action}.{name}", body, required_level=level)
        return api.StreamInfo.from_dict(data)

    # --- account ------------------------------------------------------------------------

    def account_info(self) -> api.AccountInfo:
        """The account's JetStream usage, limits and API counters (``$JS.API.INFO``)."""
        return api.AccountInfo.from_dict(self._api("INFO"))

    # --- streams ------------------------------------------------------------------------

    def add_stream(
        self, config: Optional[api.StreamConfig] = None, **fields: Any
    ) -> api.StreamInfo:
        """Create a stream from a StreamConfig and/or its fields as keywords."""
        return self._stream_call("CREATE", _config(api.StreamConfig, config, fields, "config"))

    def update_stream(
        self, config: Optional[api.StreamConfig] = None, **fields: Any
    ) -> api.StreamInfo:
        """Update a stream from a StreamConfig and/or its fields as keywords; returns its new
        info. Fields of a newer API level than the server's raise ApiLevelError."""
        return self._stream_call("UPDATE", _config(api.StreamConfig, config, fields, "config"))

    def delete_stream(self, name: str) -> bool:
        """Delete the stream and its messages; True when the server confirms. StreamNotFoundError
        when there is none."""
        name = api.check_stream_name(name)
        return bool(self._api(f"STREAM.DELETE.{name}").get("success"))

    def stream_info(self, name: str, subjects_filter: Optional[str] = None) -> api.StreamInfo:
        """The stream's config and state; ``subjects_filter`` fills ``state.subjects``."""
        name = api.check_stream_name(name)
        body = None if subjects_filter is None else {"subjects_filter": subjects_filter}
        return api.StreamInfo.from_dict(self._api(f"STREAM.INFO.{name}", body))

    def stream_names(self, subject: Optional[str] = None) -> List[str]:
        """Every stream name (all pages); with ``subject``, those that capture it."""
        if subject is not None:
            check_subscribe_subject(subject)
        return list(self._paged("STREAM.NAMES", "streams", subject=subject, item=str))

    def find_stream_name_by_subject(self, subject: str) -> str:
        """The one stream that captures ``subject``."""
        names = self.stream_names(subject)
        if not names:
            raise errors.StreamNotFoundError(404, 10059, f"no stream captures {subject!r}")
        if len(names) > 1:
            raise errors.JetStreamError(f"several streams capture {subject!r}: {names}")
        return names[0]

    def streams_info(self, subject: Optional[str] = None, offset: int = 0) -> List[api.StreamInfo]:
        """Every stream's info (all pages), from the ``offset``-th on; with ``subject``,
        of the streams that capture it. nats-py's ``streams_info(offset)`` works too: an
        int first argument is the offset."""
        if isinstance(subject, int) and not isinstance(subject, bool):
            subject, offset = None, subject
        return list(self.streams_info_iterator(offset, subject=subject))

    def streams_info_iterator(
        self, offset: int = 0, *, subject: Optional[str] = None
    ) -> Iterator[api.StreamInfo]:
        """The streams' info one by one, a page asked for when the one before is used up
        (nats-py's iterator holds one page; this one goes on to the last)."""
        offset = _positive(offset, "offset", allow_zero=True)
        if subject is not None:
            check_subscribe_subject(subject)
        pages = self._paged("STREAM.LIST", "streams", subject=subject, offset=offset)
        return (api.StreamInfo.from_dict(d) for d in pages)

    def purge_stream(
        self,
        name: str,
        subject: Optional[str] = None,
        seq: Optional[int] = None,
        keep: Optional[int] = None,
    ) -> int:
        """Remove messages (all, or of ``subject``, below ``seq``, or all but ``keep``).

        Returns how many were purged (nats-py returns True). nats-py's positional order
        ``purge_stream(name, seq, subject)`` works too: a subject is a str and a sequence
        an int, so an int second argument is taken as ``seq``.
        """
        name = api.check_stream_name(name)
        if isinstance(subject, int) and not isinstance(subject, bool):
            if seq is not None and not isinstance(seq, str):
                raise errors.InvalidArgumentError(
                    f"purge_stream: subject must be a str, got {subject!r} (and seq={seq!r})"
                )
            subject, seq = seq, subject
        if seq is not None and keep is not None:
            raise errors.InvalidArgumentError("purge_stream: give seq or keep, not both")
        body: Dict[str, Any] = {}
        if subject is not None:
            check_subscribe_subject(subject)
            body["filter"] = subject
        if seq is not None:
            body["seq"] = _positive(seq, "seq")
        if keep is not None:
            body["keep"] = _positive(keep, "keep", allow_zero=True)
        purged = self._api(f"STREAM.PURGE.{name}", body or None).get("purged", 0)
        if isinstance(purged, bool) or not isinstance(purged, int):
            raise errors.JetStreamError(f"malformed purge answer for {name}: purged={purged!r:.40}")
        return purged

    # --- messages -----------------------------------------------------------------------

    def get_msg(
        self,
        stream: Optional[str] = None,
        seq: Optional[int] = None,
        last_by_subject: Optional[str] = None,
        next_by_subject: Optional[str] = None,
        direct: bool = False,
        *,
        subject: Optional[str] = None,
        next: bool = False,
        stream_name: Optional[str] = None,
    ) -> api.RawStreamMsg:
        """One stored message: by ``seq``, the last on a subject, or the next on a subject
        from ``seq``. ``direct=True`` asks any replica (the stream needs ``allow_direct``).

        nats-py's keywords work too: ``stream_name`` for ``stream``; ``subject`` is
        ``last_by_subject``, or with ``next=True`` ``next_by_subject`` (the first message on
        it at or after ``seq``). Positionally, only ``stream, seq`` are the same as nats-py's.
        """
        stream = _either(stream, stream_name, "stream", "stream_name", "get_msg")
        if not isinstance(next, bool):
            raise errors.InvalidArgumentError(f"next must be a bool, got {next!r}")
        if subject is not None:
            if last_by_subject is not None or next_by_subject is not None:
                raise errors.InvalidArgumentError(
                    "get_msg: give subject (nats-py's name) or last_by_subject / "
                    "next_by_subject, not both"
                )
            if next:
                next_by_subject = subject
            else:
                last_by_subject = subject
        elif next:
            raise errors.InvalidArgumentError("get_msg: next=True needs a subject")
        stream = api.check_stream_name(stream)
        body: Dict[str, Any] = {}
        if seq is not None:
            body["seq"] = _message_seq(seq, "get_msg")
        if last_by_subject is not None:
            check_publish_subject(last_by_subject, "last_by_subject")
            body["last_by_subj"] = last_by_subject
        if next_by_subject is not None:
            check_subscribe_subject(next_by_subject)
            body["next_by_subj"] = next_by_subject
        if not body or (last_by_subject is not None and (seq is not None or next_by_subject)):
            raise errors.InvalidArgumentError(
                "get_msg needs seq, last_by_subject, or next_by_subject (with an optional seq)"
            )
        if direct:
            return self._direct_get(stream, body)
        data = self._api(f"STREAM.MSG.GET.{stream}", body)
        message = data.get("message", {})
        if not isinstance(message, dict):
            raise errors.JetStreamError(f"malformed message in the answer: {message!r:.40}")
        return api.RawStreamMsg.from_dict({**message, "stream": stream})

    def get_last_msg(
        self, stream_name: str, subject: str, direct: bool = False
    ) -> api.RawStreamMsg:
        """The last message stored on ``subject`` (nats-py's name for
        ``get_msg(stream, last_by_subject=subject)``)."""
        return self.get_msg(stream_name, last_by_subject=subject, direct=direct)

    def _direct_get(self, stream: str, body: Dict[str, Any]) -> api.RawStreamMsg:
        subject = f"{self._prefix}.DIRECT.GET.{stream}"
        payload = json.dumps(body, separators=(",", ":")).encode()
        try:
            msg = self._nc.request(subject, payload, timeout=self._timeout)
        except errors.NoRespondersError:  # kept, as nats-py: the words say what it means
            raise errors.NoRespondersError(
                f"no direct get answered for stream {stream!r}: it may not exist, or not "
                "have allow_direct enabled"
            ) from None
        return raw_from_direct(msg, stream)

    def delete_msg(
        self,
        stream: Optional[str] = None,
        seq: Optional[int] = None,
        erase: bool = False,
        *,
        stream_name: Optional[str] = None,
    ) -> bool:
        """Delete one message; ``erase=True`` also overwrites its storage. ``stream_name``
        is nats-py's name for ``stream``."""
        stream = api.check_stream_name(
            _either(stream, stream_name, "stream", "stream_name", "delete_msg")
        )
        if seq is None:
            raise errors.InvalidArgumentError("delete_msg needs seq")
        body = {"seq": _message_seq(seq, "delete_msg"), "no_erase": not erase}
        return bool(self._api(f"STREAM.MSG.DELETE.{stream}", body).get("success"))

    # --- consumers ----------------------------------------------------------------------

    def add_consumer(
        self,
        stream: str,
        config: Optional[api.ConsumerConfig] = None,
        timeout: Optional[float] = None,
        **fields: Any,
    ) -> api.ConsumerInfo:
        """Create a consumer; the same config again is fine, a different one is
        :class:`ConsumerAlreadyExistsError`. ``ack_policy`` defaults to explicit, as in
        nats-py (the server's own default, none, would make every ack a no-op).
        ``timeout``: of this call (default: the context's)."""
        return self._upsert_consumer(stream, config, fields, "create", timeout)

    def update_consumer(
        self,
        stream: str,
        config: Optional[api.ConsumerConfig] = None,
        timeout: Optional[float] = None,
        **fields: Any,
    ) -> api.ConsumerInfo:
        """Change an existing consumer; a missing one is :class:`ConsumerDoesNotExistError`."""
        return self._upsert_consumer(stream, config, fields, "update", timeout)

    def _upsert_consumer(
        self,
        stream: str,
        config: Optional[api.ConsumerConfig],
        fields: Mapping[str, Any],
        action: str,
        timeout: Optional[float] = None,
    ) -> api.ConsumerInfo:
        stream = api.check_stream_name(stream)
        cfg = _config(api.ConsumerConfig, config, fields, "config")
        check_priority_config(cfg)  # ADR-42's rules, before anything is sent
        if cfg.ack_policy is None:
            # The server's own default is ack none: every ack() a silent no-op, nothing ever
            # redelivered. Explicit, as nats-py's ConsumerConfig and pull_subscribe default.
            cfg = dataclasses.replace(cfg, ack_policy=api.AckPolicy.EXPLICIT)
        if cfg.name and cfg.durable_name and cfg.name != cfg.durable_name:
            raise errors.InvalidArgumentError(
                f"consumer name {cfg.name!r} and durable_name {cfg.durable_name!r} differ"
            )
        name = cfg.name or cfg.durable_name
        if name is None:
            if action == "update":
                raise errors.InvalidArgumentError("update_consumer needs a consumer name")
            name = self._nc.new_inbox().rsplit(".", 1)[1]  # an ephemeral: the client names it
            cfg = dataclasses.replace(cfg, name=name)
        api.check_consumer_name(name)
        _check_filters(cfg)
        body: Dict[str, Any] = {"stream_name": stream, "config": cfg.to_dict()}
        if self._legacy_consumer_api():
            # Servers before 2.9 know only these subjects, and no actions.
            subject = (
                f"CONSUMER.DURABLE.CREATE.{stream}.{name}"
                if cfg.durable_name
                else f"CONSUMER.CREATE.{stream}"
            )
        else:
            if action:
                body["action"] = action
            subject = f"CONSUMER.CREATE.{stream}.{name}"
            if self._filter_in_subject(cfg.filter_subject) and not cfg.filter_subjects:
                subject += f".{cfg.filter_subject}"
        return api.ConsumerInfo.from_dict(self._api(subject, body, timeout))

    def _filter_in_subject(self, filter_subject: Optional[str]) -> bool:
        # The filter rides in the create subject (for permissions on it), as nats.go and
        # nats-py send it, except ">" (all of the stream: nats-py's rule) and, on a pedantic
        # connection, any wildcard filter: the server refuses a wildcard publish subject there.
        if not filter_subject or filter_subject == ">":
            return False
        if is_pedantic(self._nc):
            return not any(t in ("*", ">") for t in filter_subject.split("."))
        return True

    def _legacy_consumer_api(self) -> bool:
        return _version(self._nc.server_info.get("version", "")) < (2, 9, 0)

    def delete_consumer(
        self,
        stream: str,
        name: Optional[str] = None,
        *,
        consumer: Optional[str] = None,
        timeout: Optional[float] = None,
    ) -> bool:
        """Delete a consumer (``consumer`` is nats-py's keyword for ``name``)."""
        name = _either(name, consumer, "name", "consumer", "delete_consumer")
        stream, name = api.check_stream_name(stream), api.check_consumer_name(name)
        return bool(self._api(f"CONSUMER.DELETE.{stream}.{name}", None, timeout).get("success"))

    def _delete_consumer_nowait(self, stream: str, name: str) -> None:
        """Ask for a deletion without waiting for the answer: an ordered consumer dropping an
        old link of its chain. That link may live on a server that just died, whose API
        would keep the caller for the whole timeout; the server's inactive threshold removes
        whatever this request does not reach."""
        try:
            self._nc.publish(
                f"{self._prefix}.CONSUMER.DELETE.{stream}.{name}", reply=self._nc.new_inbox()
            )
        except errors.NATSError:
            pass

    def consumer_info(
        self,
        stream: str,
        name: Optional[str] = None,
        timeout: Optional[float] = None,
        *,
        consumer: Optional[str] = None,
    ) -> api.ConsumerInfo:
        """A consumer's config and state (``consumer`` is nats-py's keyword for ``name``)."""
        name = _either(name, consumer, "name", "consumer", "consumer_info")
        stream, name = api.check_stream_name(stream), api.check_consumer_name(name)
        return api.ConsumerInfo.from_dict(
            self._api(f"CONSUMER.INFO.{stream}.{name}", None, timeout)
        )

    def consumer_names(self, stream: str) -> List[str]:
        """The names of every consumer of ``stream`` (all pages)."""
        stream = api.check_stream_name(stream)
        return list(self._paged(f"CONSUMER.NAMES.{stream}", "consumers", item=str))

    def consumers_info(self, stream: str, offset: int = 0) -> List[api.ConsumerInfo]:
        """Every consumer's info (all pages), from the ``offset``-th on."""
        stream = api.check_stream_name(stream)
        offset = _positive(offset, "offset", allow_zero=True)
        return [
            api.ConsumerInfo.from_dict(d)
            for d in self._paged(f"CONSUMER.LIST.{stream}", "consumers", offset=offset)
        ]

    def pause_consumer(
        self,
        stream: str,
        name: Optional[str] = None,
        pause_until: Union[_dt.datetime, str, None] = None,
        timeout: Optional[float] = None,
        *,
        consumer: Optional[str] = None,
    ) -> api.ConsumerPause:
        """Pause delivery until ``pause_until``: an aware datetime, or an RFC 3339 string
        as nats-py takes. Returns the server's answer, a
        :class:`~jetstream_sync.jetstream.api.ConsumerPause` as nats-py does (``paused``,
        ``pause_until``, ``pause_remaining``; its truth is ``paused``): a time already past
        answers ``paused=False``. ``consumer`` is nats-py's keyword for ``name``."""
        name = _either(name, consumer, "name", "consumer", "pause_consumer")
        stream, name = api.check_stream_name(stream), api.check_consumer_name(name)
        if isinstance(pause_until, str):
            try:
                pause_until = api.parse_time(pause_until)
            except ValueError as exc:
                raise errors.InvalidArgumentError(f"pause_until: {exc}") from None
        if not isinstance(pause_until, _dt.datetime) or pause_until.tzinfo is None:
            raise errors.InvalidArgumentError(
                "pause_until must be a timezone-aware datetime or an RFC 3339 string, got "
                f"{pause_until!r}"
            )
        body = {"pause_until": api.format_time(pause_until)}
        return api.ConsumerPause.from_dict(
            self._api(f"CONSUMER.PAUSE.{stream}.{name}", body, timeout)
        )

    def resume_consumer(
        self,
        stream: str,
        name: Optional[str] = None,
        timeout: Optional[float] = None,
        *,
        consumer: Optional[str] = None,
    ) -> api.ConsumerPause:
        """Resume a paused consumer. Returns the server's answer, a
        :class:`~jetstream_sync.jetstream.api.ConsumerPause` with ``paused`` False (falsy),
        as nats-py does."""
        name = _either(name, consumer, "name", "consumer", "resume_consumer")
        stream, name = api.check_stream_name(stream), api.check_consumer_name(name)
        return api.ConsumerPause.from_dict(
            self._api(f"CONSUMER.PAUSE.{stream}.{name}", {}, timeout)
        )

    def reset_consumer(
        self,
        stream: str,
        consumer: str,
        seq: Optional[int] = None,
        timeout: Optional[float] = None,
    ) -> api.ConsumerReset:
        """Reset a consumer's delivery state (ADR-60, nats-server 2.14+): pending and
        redelivered counts cleared, its delivery sequence starts again at 1. With ``seq``
        (> 0) the next delivery is at stream sequence ``seq`` or after; without, it resumes
        above the ack floor. A ``seq`` the deliver policy forbids (below ``opt_start_seq``,
        say) is :class:`~jetstream_sync.errors.ConsumerInvalidResetError`."""
        stream, consumer = api.check_stream_name(stream), api.check_consumer_name(consumer)
        body = None
        if seq is not None and _positive(seq, "seq", allow_zero=True):
            body = {"seq": seq}
        answer = self._api(f"CONSUMER.RESET.{stream}.{consumer}", body, timeout)
        return api.ConsumerReset.from_answer(answer)

    def unpin_consumer(self, stream: str, consumer: str, group: str) -> None:
        """Unpin the pinned client of a priority group (ADR-42)."""
        stream, consumer = api.check_stream_name(stream), api.check_consumer_name(consumer)
        check_group_name(group)
        self._api(f"CONSUMER.UNPIN.{stream}.{consumer}", {"group": group})

    # --- paging -------------------------------------------------------------------------

    def _paged(
        self,
        suffix: str,
        key: str,
        subject: Optional[str] = None,
        item: type = dict,
        offset: int = 0,
    ) -> Iterator[Any]:
        """Every item of a paged list answer from ``offset`` on, page after page, until
        ``total`` is reached. Each item must be an ``item`` (a JSON object, or a string for
        the NAMES lists)."""
        for _ in range(100_000):  # a server that never ends its list must not loop forever
            body: Dict[str, Any] = {"offset": offset}
            if subject is not None:
                body["subject"] = subject
            page = self._api(suffix, body)
            items = page.get(key) or []
            total = page.get("total", 0)
            if (
                not isinstance(items, list)
                or not isinstance(total, int)
                or not all(isinstance(i, item) for i in items)
            ):
                raise errors.JetStreamError(
                    f"malformed page in the answer on {self._prefix}.{suffix}: "
                    f"{key}={items!r:.60}, total={total!r:.20}"
                )
            yield from items
            offset += len(items)
            if not items or offset >= total:
                return


def _check_filters(cfg: api.ConsumerConfig) -> None:
    """A consumer's filters are subscribe subjects: ``*`` and ``>`` are what they are for.
    Checked here so that a bad one is named as the user wrote it."""
    if cfg.filter_subject is not None:
        check_subscribe_subject(cfg.filter_subject, "filter_subject")
    if cfg.filter_subjects is not None:
        if isinstance(cfg.filter_subjects, str) or not isinstance(cfg.filter_subjects, list):
            raise errors.InvalidArgumentError(
                f"filter_subjects must be a list of subjects, got {cfg.filter_subjects!r}"
            )
        for f in cfg.filter_subjects:
            check_subscribe_subject(f, "filter_subjects entry")


def _either(ours: Optional[str], theirs: Optional[str], name: str, alias: str, call: str) -> str:
    """One argument that has our name and nats-py's: either may be given, or both if equal."""
    if ours is None:
        if theirs is None:
            raise errors.InvalidArgumentError(f"{call} needs {name} (or {alias})")
        return theirs
    if theirs is not None and theirs != ours:
        raise errors.InvalidArgumentError(
            f"{call}: {name} {ours!r} and {alias} {theirs!r} differ ({alias} is nats-py's name)"
        )
    return ours


def _positive(value: Any, what: str, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < (0 if allow_zero else 1):
        raise errors.InvalidArgumentError(
            f"{what} must be an int >= {0 if allow_zero else 1}, got {value!r}"
        )
    return value


class _BadMessageSeqError(errors.InvalidArgumentError, errors.BadRequestError):
    """A message sequence refused before it is sent: an InvalidArgumentError as every bad
    argument here, and a BadRequestError (code 400) as the server's answer to it is in
    nats-py, which sends it (``get_msg(stream, 0)``)."""

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.code, self.err_code, self.description, self.subject = 400, 0, message, ""


def _message_seq(value: Any, call: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _BadMessageSeqError(f"{call}: seq must be an int >= 1, got {value!r}")
    return value


def _version(text: object) -> Tuple[int, ...]:
    """(major, minor, patch) of a server version string; anything else counts as new."""
    if not isinstance(text, str):
        return (99,)
    parts = []
    for piece in text.split("-")[0].split(".")[:3]:
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts) if parts else (99,)
