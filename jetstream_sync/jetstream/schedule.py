"""Message schedules (ADR-51): a message a stream keeps and publishes later, or again and again.

A schedule is a message published to a subject of its own (one schedule per subject) with
``Nats-Schedule`` headers; the stream holds it and, when it is due, stores a copy of its
body and headers on the *target* subject, in the same stream. ``js.publish(subject, data,
schedule=..., schedule_target=...)`` builds those headers here:

=========================================  ================================================
``schedule=``                              ``Nats-Schedule``
=========================================  ================================================
an aware ``datetime``                      ``@at 2026-01-02T03:04:05Z``: once, then removed
a ``timedelta`` (1 s or more)              ``@every 90s``: again and again
``"@at <RFC 3339>"``                       as given (checked here first)
``"@every <Go duration>"``                 as given (checked here first)
``"@hourly"``, ``"@daily"``...             a predefined cron
``"*/5 * * * * *"``                        a cron of six fields, seconds first
=========================================  ================================================

``schedule_ttl`` gives each produced message a ``Nats-TTL``, ``schedule_source`` publishes
the last message of another subject instead of the schedule's own body (sampling),
``schedule_time_zone`` runs a cron in that zone (UTC otherwise), ``schedule_rollup`` makes
each produced message replace the earlier ones on the target (``Nats-Rollup: sub``).

What can be checked without the stream is checked here, with a message that names the
problem: a naive datetime, an interval under a second, a cron of five fields or with a field
out of range, a wildcard target, a time zone on anything but a cron. What only the stream
knows (does it allow schedules and TTLs, does it capture the target) is the server's to
refuse: :class:`~jetstream_sync.errors.MessageScheduleError` and its subclasses.

Stopping a schedule: ``js.cancel_schedule(stream, subject)`` removes the schedule message
(ADR-51: a schedule stops when its message is removed), or ``js.publish(other, data,
cancel_schedule=subject)`` stores ``other`` and removes the schedule in one atomic step.

The produced messages are stored by the stream itself: core subscribers of the target
subject do not see them; read them with a consumer (or the stream's ``republish``).
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone, tzinfo
from typing import TYPE_CHECKING, List, Optional, Tuple, Union

from .. import errors
from .._protocol import check_publish_subject
from ..msg import Headers, HeadersLike
from . import api, api_level

if TYPE_CHECKING:  # pragma: no cover
    from .context import JetStream

__all__ = [
    "SCHEDULE",
    "SCHEDULER",
    "SCHEDULE_NEXT",
    "SCHEDULE_ROLLUP",
    "SCHEDULE_SOURCE",
    "SCHEDULE_TARGET",
    "SCHEDULE_TIME_ZONE",
    "SCHEDULE_TTL",
    "MessageScheduling",
    "ScheduleLike",
    "cancel_headers",
    "schedule_headers",
    "schedule_pattern",
]

SCHEDULE = api.Header.SCHEDULE.value
SCHEDULE_TARGET = api.Header.SCHEDULE_TARGET.value
SCHEDULE_SOURCE = api.Header.SCHEDULE_SOURCE.value
SCHEDULE_TTL = api.Header.SCHEDULE_TTL.value
SCHEDULE_TIME_ZONE = api.Header.SCHEDULE_TIME_ZONE.value
SCHEDULE_ROLLUP = api.Header.SCHEDULE_ROLLUP.value
# On the produced messages; a client sends the pair to cancel a schedule atomically.
SCHEDULER = api.Header.SCHEDULER.value
SCHEDULE_NEXT = api.Header.SCHEDULE_NEXT.value
PURGE = "purge"

ScheduleLike = Union[datetime, timedelta, str]

# The server's predefined crons (server/scheduler.go), exact and lower case as it matches them.
PREDEFINED = frozenset(
    ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
)

_HOW = (
    "a schedule is an aware datetime, a timedelta of 1 s or more, '@at <RFC 3339 time>', "
    "'@every <interval>', one of " + ", ".join(sorted(PREDEFINED)) + ", or a cron of six "
    "fields, seconds first ('*/5 * * * * *')"
)

# Go's time.ParseDuration units, in seconds (µ as U+00B5 and U+03BC, as Go accepts both).
_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "\u00b5s": 1e-6,
    "\u03bcs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|\u00b5s|\u03bcs|ms|s|m|h)", re.ASCII)
# What Go's time.Parse(time.RFC3339, ...) reads: fractional seconds allowed, "Z" or an offset.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d+)?(?:Z|([+-])(\d{2}):(\d{2}))\Z",
    re.ASCII,
)


class _Field:
    """One cron field: its range and the names it takes (server/cron.go's bounds)."""

    def __init__(self, name: str, low: int, high: int, names: Tuple[str, ...] = ()) -> None:
        self.name, self.low, self.high = name, low, high
        self.names = {n: i + low for i, n in enumerate(names)}


_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_CRON_FIELDS = (
    _Field("seconds", 0, 59),
    _Field("minutes", 0, 59),
    _Field("hours", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, _MONTHS),
    _Field("day of week", 0, 6, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)


def schedule_pattern(schedule: ScheduleLike) -> str:
    """The ``Nats-Schedule`` value of ``schedule`` (see the module doc), checked as the
    server would check it; :class:`InvalidArgumentError` naming the problem otherwise."""
    if isinstance(schedule, datetime):
        return "@at " + _rfc3339(schedule)
    if isinstance(schedule, timedelta):
        seconds = schedule.total_seconds()
        if seconds < 1:
            raise errors.InvalidArgumentError(
                f"a repeating schedule's interval must be 1 s or more, got {schedule!r}"
            )
        micros = schedule // timedelta(microseconds=1)
        return f"@every {micros // 10**6}s" if micros % 10**6 == 0 else f"@every {micros}us"
    if not isinstance(schedule, str):
        raise errors.InvalidArgumentError(f"{_HOW}; got {type(schedule).__name__} {schedule!r}")
    if schedule.startswith("@at "):
        _check_rfc3339(schedule[4:])
    elif schedule.startswith("@every "):
        if _duration_seconds(schedule[7:]) < 1:
            raise errors.InvalidArgumentError(
                f"schedule {schedule!r}: the interval must be 1 s or more"
            )
    elif schedule.startswith("@"):
        if schedule not in PREDEFINED:
            raise errors.InvalidArgumentError(f"schedule {schedule!r} is not one: {_HOW}")
    else:
        _check_cron(schedule)
    return schedule


def _is_cron(pattern: str) -> bool:
    """True for a cron (predefined or six fields), the only kind a time zone applies to."""
    return not pattern.startswith(("@at ", "@every "))


def schedule_headers(
    subject: str,
    headers: Optional[HeadersLike],
    schedule: ScheduleLike,
    target: Optional[str],
    ttl: Optional[Union[float, timedelta, str]] = None,
    source: Optional[str] = None,
    time_zone: Optional[Union[str, tzinfo]] = None,
    rollup: bool = False,
) -> Tuple[Headers, Tuple[str, int]]:
    """The user's headers plus a schedule's, and the API level feature it needs (``@at`` is
    nats-server 2.12's; intervals, crons, sources, time zones and rollups came in 2.14)."""
    pattern = schedule_pattern(schedule)
    if target is None:
        raise errors.InvalidArgumentError(
            "a schedule needs schedule_target: the subject (in the same stream) its messages "
            "are published to"
        )
    check_publish_subject(target, "schedule_target")
    if target == subject:
        raise errors.InvalidArgumentError(
            f"schedule_target {target!r} is the schedule's own subject: a schedule publishes "
            "to another subject of the stream"
        )
    extra: List[Tuple[str, str]] = [(SCHEDULE, pattern), (SCHEDULE_TARGET, target)]
    # @at schedules (and their TTL) are nats-server 2.12's; everything else came in 2.14.
    newer = not pattern.startswith("@at ")
    if source is not None:
        check_publish_subject(source, "schedule_source")
        if source in (subject, target):
            raise errors.InvalidArgumentError(
                f"schedule_source {source!r} must differ from the schedule's subject and "
                "from its target"
            )
        extra.append((SCHEDULE_SOURCE, source))
        newer = True
    if ttl is not None:
        extra.append((SCHEDULE_TTL, _ttl(ttl)))
    if time_zone is not None:
        if not _is_cron(pattern):
            raise errors.InvalidArgumentError(
                f"schedule_time_zone applies to a cron only, not to {pattern!r} (an @at time "
                "carries its own offset; an @every interval has no time of day)"
            )
        extra.append((SCHEDULE_TIME_ZONE, _zone_name(time_zone)))
        newer = True
    if not isinstance(rollup, bool):
        raise errors.InvalidArgumentError(f"schedule_rollup must be a bool, got {rollup!r}")
    if rollup:
        extra.append((SCHEDULE_ROLLUP, "sub"))
        newer = True
    feature = api_level.REPEATING_SCHEDULES if newer else api_level.SCHEDULES
    return _merged(headers, extra), feature


def cancel_headers(
    subject: str, headers: Optional[HeadersLike], schedule_subject: str
) -> Tuple[Headers, Tuple[str, int]]:
    """The headers that make a publish to ``subject`` also remove the schedule on
    ``schedule_subject``, atomically (ADR-51: ``Nats-Scheduler`` with ``Nats-Schedule-Next:
    purge``), and the API level feature that needs: nats-server 2.14, which refuses (10212)
    if that subject holds a message that is not a schedule (2.12 would purge it anyway)."""
    check_publish_subject(schedule_subject, "cancel_schedule")
    if schedule_subject == subject:
        raise errors.InvalidArgumentError(
            f"cancel_schedule {schedule_subject!r} is the subject being published to: the "
            "message that cancels a schedule goes to another subject (to replace a schedule, "
            "publish the new one to its subject)"
        )
    merged = _merged(headers, [(SCHEDULER, schedule_subject), (SCHEDULE_NEXT, PURGE)])
    return merged, api_level.CANCEL_SCHEDULE


def _merged(headers: Optional[HeadersLike], extra: List[Tuple[str, str]]) -> Headers:
    merged = Headers(headers) if headers else Headers()
    for name, _ in extra:
        if name in merged:  # case-insensitive, as Headers looks keys up
            raise errors.InvalidArgumentError(
                f"headers has {name} already: give the schedule by the keyword or by the "
                "header, not both"
            )
    for name, value in extra:
        merged.add(name, value)
    return merged


def _rfc3339(when: datetime) -> str:
    if when.tzinfo is None or when.utcoffset() is None:
        raise errors.InvalidArgumentError(
            f"schedule datetime {when.isoformat()} has no time zone: give an aware one "
            "(datetime.now(timezone.utc) + timedelta(...)), the server cannot guess the zone"
        )
    utc = when.astimezone(timezone.utc)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if utc.microsecond:
        text += f".{utc.microsecond:06d}".rstrip("0")
    return text + "Z"


def _check_rfc3339(text: str) -> None:
    m = _RFC3339.match(text)
    ok = m is not None
    if m is not None:
        y, mo, d, h, mi, s, sign, oh, om = m.groups()
        try:
            datetime(int(y), int(mo), int(d), int(h), int(mi), int(s))
        except ValueError:
            ok = False
        if sign and (int(oh) > 23 or int(om) > 59):
            ok = False
    if not ok:
        raise errors.InvalidArgumentError(
            f"schedule '@at {text}': the time must be RFC 3339, as 2026-01-02T03:04:05Z or "
            "2026-01-02T04:04:05+01:00 (or pass an aware datetime)"
        )


def _duration_seconds(text: str) -> float:
    """Go's ``time.ParseDuration``: ``1h30m``, ``1.5s``, ``500ms``...; in seconds."""
    body = text[1:] if text[:1] in "+-" else text
    if body == "0":  # Go's one unitless duration
        return 0.0
    total = 0.0
    pos = 0
    for m in _DURATION_PART.finditer(body):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if not body or pos != len(body):
        raise errors.InvalidArgumentError(
            f"schedule '@every {text}': the interval must be a Go duration, as 1s, 90s, 5m "
            "or 1h30m (or pass a timedelta)"
        )
    return -total if text.startswith("-") else total


def _check_cron(pattern: str) -> None:
    fields = pattern.split()
    if len(fields) != 6:
        raise errors.InvalidArgumentError(
            f"cron schedule {pattern!r} has {len(fields)} fields; the server's cron has six, "
            "seconds first: 'sec min hour day-of-month month day-of-week' ('0 30 * * * *' is "
            "every hour at :30)"
        )
    for text, spec in zip(fields, _CRON_FIELDS):
        problem = _cron_field_problem(text, spec)
        if problem:
            raise errors.InvalidArgumentError(
                f"cron schedule {pattern!r}: {spec.name} field {text!r} {problem}"
            )


def _cron_field_problem(text: str, spec: _Field) -> str:
    """What is wrong with one cron field (a comma list of ``*``, ``?``, ``n``, ``n-m``, each
    with an optional ``/step``), or "" (server/cron.go's getField)."""
    items = [item for item in text.split(",") if item]
    if not items:
        return "is empty"
    for item in items:
        span, _, step = item.partition("/")
        if step and (not step.isdigit() or int(step) == 0):
            return f"has a bad step {'/' + step!r}: a whole number of 1 or more"
        if span in ("*", "?"):
            continue
        low_text, dash, high_text = span.partition("-")
        low = _cron_value(low_text, spec)
        high = _cron_value(high_text, spec) if dash else low
        if low is None or high is None:
            names = f" or a name ({', '.join(spec.names)})" if spec.names else ""
            return f"is not '*', a number{names}, a range a-b, a list, with an optional /step"
        if step and not dash:
            high = spec.high  # "n/step" is "n-max/step"
        if not spec.low <= low <= high <= spec.high:
            return f"is out of range: {spec.low}-{spec.high}, a range's start at most its end"
    return ""


def _cron_value(text: str, spec: _Field) -> Optional[int]:
    named = spec.names.get(text.lower())
    if named is not None:
        return named
    return int(text) if text.isdigit() and text.isascii() else None


def _ttl(ttl: Union[float, timedelta, str]) -> str:
    """A produced message's TTL as the server reads it: whole seconds (1 or more), or
    "never"."""
    if isinstance(ttl, timedelta):
        ttl = ttl.total_seconds()
    if isinstance(ttl, str):
        if ttl.lower() == "never":
            return "never"
    elif not isinstance(ttl, bool) and isinstance(ttl, (int, float)) and 1 <= ttl < float("inf"):
        return str(int(ttl))
    raise errors.InvalidArgumentError(
        "schedule_ttl must be seconds >= 1 (a number or a timedelta; fractions are dropped: "
        f'the server keeps whole seconds) or "never", got {ttl!r}'
    )


def _zone_name(zone: Union[str, tzinfo]) -> str:
    """An IANA zone name: a str, or a ``zoneinfo.ZoneInfo`` (its ``key``)."""
    name = getattr(zone, "key", None) if isinstance(zone, tzinfo) else zone
    if not isinstance(name, str) or not name or name != name.strip():
        raise errors.InvalidArgumentError(
            "schedule_time_zone must be an IANA zone name ('Europe/Amsterdam', 'UTC') or a "
            f"zoneinfo.ZoneInfo, got {zone!r}"
        )
    if name[:1] in "+-" or name[:1].isdigit():
        raise errors.InvalidArgumentError(
            f"schedule_time_zone {name!r}: the server takes zone names, not UTC offsets "
            "(name the zone: 'Europe/Berlin', not '+02:00')"
        )
    return name


class MessageScheduling:
    """The JetStream mixin with ``cancel_schedule`` (publishing a schedule is ``publish``'s
    ``schedule=`` keyword)."""

    def cancel_schedule(self, stream: str, subject: str) -> bool:
        """Remove the schedule held on ``subject`` of ``stream``: it produces nothing more.

        True if a schedule was removed; False if the subject held none (never scheduled,
        cancelled already, or an ``@at`` schedule that has fired: it removes itself).
        :class:`InvalidArgumentError` if the subject's last message is not a schedule:
        nothing is removed then. To remove many schedules at once, purge their subjects:
        ``js.purge_stream(stream, subject="schedules.orders.>")``.
        """
        js: JetStream = self  # type: ignore[assignment]
        stream = api.check_stream_name(stream)
        check_publish_subject(subject, "schedule subject")
        try:
            held = js.get_msg(stream, last_by_subject=subject)
        except errors.NoMessageFoundError:
            return False
        if not held.headers or SCHEDULE not in held.headers:
            raise errors.InvalidArgumentError(
                f"the last message on {subject!r} in stream {stream!r} (sequence {held.seq}) "
                f"is not a schedule (it has no {SCHEDULE} header): nothing was removed"
            )
        # Only that message: everything on the subject below the next sequence. A schedule
        # replaced meanwhile (a later sequence) is a new one and stays.
        return js.purge_stream_count(stream, subject=subject, seq=held.seq + 1) > 0
