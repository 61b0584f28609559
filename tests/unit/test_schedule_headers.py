"""Message schedules (ADR-51) as headers: what schedule_pattern / schedule_headers /
cancel_headers make of each kind of schedule, what they refuse before anything is sent, and
the classes and advice the server's refusals map to. Bytes and strings only; the server's
side is tests/integration/test_schedule.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

import jetstream_sync as nats
from jetstream_sync import errors
from jetstream_sync.jetstream import api_level
from jetstream_sync.jetstream.schedule import (
    cancel_headers,
    schedule_headers,
    schedule_pattern,
)
from jetstream_sync.msg import Headers

AMSTERDAM = timezone(timedelta(hours=1))


@pytest.mark.parametrize(
    "schedule, pattern",
    [
        (datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "@at 2026-01-02T03:04:05Z"),
        # any zone, converted to UTC; microseconds kept, without trailing zeros
        (datetime(2026, 1, 2, 4, 4, 5, 250000, tzinfo=AMSTERDAM), "@at 2026-01-02T03:04:05.25Z"),
        (timedelta(seconds=1), "@every 1s"),
        (timedelta(minutes=5), "@every 300s"),
        (timedelta(seconds=1, milliseconds=500), "@every 1500000us"),
        ("@at 2026-01-02T03:04:05Z", "@at 2026-01-02T03:04:05Z"),
        ("@at 2026-01-02T04:04:05.123+01:00", "@at 2026-01-02T04:04:05.123+01:00"),
        ("@every 1s", "@every 1s"),
        ("@every 1h30m", "@every 1h30m"),
        ("@every 1.5s", "@every 1.5s"),
        ("@every 1000ms", "@every 1000ms"),
        ("@hourly", "@hourly"),
        ("@annually", "@annually"),
        ("* * * * * *", "* * * * * *"),
        ("0 30 9 * * mon-fri", "0 30 9 * * mon-fri"),
        ("*/5 0-29/10 1,2,3 ? JAN-mar 0", "*/5 0-29/10 1,2,3 ? JAN-mar 0"),
        ("5/15 * * 1-31 12 6", "5/15 * * 1-31 12 6"),
    ],
)
def test_each_kind_of_schedule_is_the_header_the_server_reads(schedule: Any, pattern: str) -> None:
    assert schedule_pattern(schedule) == pattern


@pytest.mark.parametrize(
    "schedule, words",
    [
        (datetime(2026, 1, 2, 3, 4, 5), "has no time zone"),
        (timedelta(milliseconds=999), "1 s or more"),
        (timedelta(0), "1 s or more"),
        (timedelta(seconds=-5), "1 s or more"),
        ("@every 500ms", "1 s or more"),
        ("@every 0", "1 s or more"),
        ("@every -1s", "1 s or more"),
        ("@every 1", "a Go duration"),
        ("@every 1 s", "a Go duration"),
        ("@every", "not one"),  # no space, no interval: not "@every <interval>"
        ("@every ", "a Go duration"),
        ("@at 2026-01-02 03:04:05Z", "RFC 3339"),
        ("@at 2026-01-02T03:04:05", "RFC 3339"),  # no zone
        ("@at 2026-02-30T03:04:05Z", "RFC 3339"),
        ("@at 2026-01-02T24:00:00Z", "RFC 3339"),
        ("@at 2026-01-02T03:04:05+25:00", "RFC 3339"),
        ("@HOURLY", "not one"),  # the server matches the names exactly
        ("@fortnightly", "not one"),
        ("* * * * *", "has 5 fields"),
        ("0 0 * * * * *", "has 7 fields"),
        ("", "has 0 fields"),
        ("60 * * * * *", "seconds field '60' is out of range"),
        ("* * 24 * * *", "hours field '24' is out of range"),
        ("* * * 0 * *", "day of month field '0' is out of range"),
        ("* * * * 13 *", "month field '13' is out of range"),
        ("* * * * * 7", "day of week field '7' is out of range"),
        ("* 30-10 * * * *", "minutes field '30-10' is out of range"),
        ("*/0 * * * * *", "bad step"),
        ("*/x * * * * *", "bad step"),
        ("1/2/3 * * * * *", "bad step"),
        ("* * * * jan-foo *", "month field 'jan-foo' is not"),
        ("* * * * * sun-mon-tue", "is not"),
        ("a * * * * *", "seconds field 'a' is not"),
        ("mon * * * * *", "seconds field 'mon' is not"),  # names only where they belong
        (", * * * * *", "is empty"),
        (5, "got int 5"),
        (None, "got NoneType"),
    ],
)
def test_a_schedule_the_server_would_refuse_is_refused_before_sending(
    schedule: Any, words: str
) -> None:
    with pytest.raises(nats.InvalidArgumentError) as caught:
        schedule_pattern(schedule)
    assert words in str(caught.value)
    assert isinstance(caught.value, ValueError)


def test_schedule_headers_carry_every_option_after_the_users_own() -> None:
    hdrs, feature = schedule_headers(
        "sched.a",
        {"Trace": "1"},
        "0 0 * * * *",
        "orders",
        ttl=timedelta(minutes=5),
        source="sensors.last",
        time_zone="Europe/Amsterdam",
        rollup=True,
    )
    assert list(hdrs.multi_items()) == [
        ("Trace", "1"),
        ("Nats-Schedule", "0 0 * * * *"),
        ("Nats-Schedule-Target", "orders"),
        ("Nats-Schedule-Source", "sensors.last"),
        ("Nats-Schedule-TTL", "300"),
        ("Nats-Schedule-Time-Zone", "Europe/Amsterdam"),
        ("Nats-Schedule-Rollup", "sub"),
    ]
    assert feature == api_level.REPEATING_SCHEDULES


def test_an_at_schedule_needs_2_12_and_the_rest_2_14() -> None:
    at = datetime(2030, 1, 1, tzinfo=timezone.utc)
    assert schedule_headers("s", None, at, "t")[1] == api_level.SCHEDULES
    assert schedule_headers("s", None, at, "t", ttl=60)[1] == api_level.SCHEDULES
    assert schedule_headers("s", None, at, "t", source="u")[1] == api_level.REPEATING_SCHEDULES
    assert schedule_headers("s", None, at, "t", rollup=True)[1] == api_level.REPEATING_SCHEDULES
    assert schedule_headers("s", None, "@every 1s", "t")[1] == api_level.REPEATING_SCHEDULES
    assert api_level.SCHEDULES[1] == 2 and api_level.REPEATING_SCHEDULES[1] == 4


def test_a_zoneinfo_is_its_name_and_never_is_a_ttl() -> None:
    zoneinfo = pytest.importorskip("zoneinfo")
    try:
        zone = zoneinfo.ZoneInfo("Europe/Amsterdam")
    except zoneinfo.ZoneInfoNotFoundError:
        pytest.skip("this machine has no tzdata for Europe/Amsterdam")
    hdrs, _ = schedule_headers("s", None, "@daily", "t", ttl="never", time_zone=zone)
    assert hdrs["Nats-Schedule-Time-Zone"] == "Europe/Amsterdam"
    assert hdrs["Nats-Schedule-TTL"] == "never"


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"target": None}, "needs schedule_target"),
        ({"target": "orders.*"}, "wildcard"),
        ({"target": "orders..x"}, "empty token"),
        ({"target": "sched.a"}, "the schedule's own subject"),
        ({"source": "orders"}, "must differ"),
        ({"source": "sched.a"}, "must differ"),
        ({"source": "sensors.>"}, "wildcard"),
        ({"ttl": 0.5}, "schedule_ttl must be seconds >= 1"),
        ({"ttl": timedelta(milliseconds=10)}, "schedule_ttl"),
        ({"ttl": True}, "schedule_ttl"),
        ({"ttl": "5m"}, "schedule_ttl"),
        ({"time_zone": "+02:00"}, "not UTC offsets"),
        ({"time_zone": ""}, "IANA zone name"),
        ({"time_zone": 2}, "IANA zone name"),
        ({"rollup": "sub"}, "schedule_rollup must be a bool"),
        ({"headers": {"nats-schedule": "@hourly"}}, "has Nats-Schedule already"),
    ],
)
def test_schedule_options_are_checked(kwargs: Any, words: str) -> None:
    args: dict[str, Any] = {"headers": None, "target": "orders", **kwargs}
    with pytest.raises(nats.InvalidArgumentError) as caught:
        schedule_headers("sched.a", args.pop("headers"), "0 0 * * * *", **args)
    assert words in str(caught.value)


def test_a_time_zone_goes_with_a_cron_only() -> None:
    for schedule in (timedelta(seconds=5), datetime(2030, 1, 1, tzinfo=timezone.utc)):
        with pytest.raises(nats.InvalidArgumentError, match="applies to a cron only"):
            schedule_headers("s", None, schedule, "t", time_zone="UTC")
    hdrs, _ = schedule_headers("s", None, "@weekly", "t", time_zone="UTC")
    assert hdrs["Nats-Schedule-Time-Zone"] == "UTC"


def test_cancel_headers_name_the_schedule_and_ask_for_its_purge() -> None:
    hdrs, feature = cancel_headers("orders.sent", Headers({"X": "1"}), "sched.order.1")
    assert list(hdrs.multi_items()) == [
        ("X", "1"),
        ("Nats-Scheduler", "sched.order.1"),
        ("Nats-Schedule-Next", "purge"),
    ]
    assert feature == api_level.CANCEL_SCHEDULE and feature[1] == 4
    with pytest.raises(nats.InvalidArgumentError, match="is the subject being published to"):
        cancel_headers("sched.order.1", None, "sched.order.1")
    with pytest.raises(nats.BadSubjectError):
        cancel_headers("orders.sent", None, "sched.>")


@pytest.mark.parametrize(
    "err_code, cls, advice",
    [
        (10188, nats.MessageSchedulesDisabledError, "allow_msg_schedules=True"),
        (10189, nats.MessageScheduleError, "cron of six fields"),
        (10190, nats.MessageScheduleError, "schedule_target must be a literal subject"),
        (10191, nats.MessageScheduleError, "schedule_ttl must be 1 s or more"),
        (10192, nats.MessageScheduleError, "'sub'"),
        (10203, nats.MessageScheduleError, "schedule_source must be"),
        (10212, nats.MessageScheduleError, "cancel_schedule must name another subject"),
        (10223, nats.MessageScheduleError, "tzdata"),
        (10186, nats.MessageScheduleError, "a mirror cannot allow_msg_schedules"),
        (10187, nats.MessageScheduleError, "sources cannot allow_msg_schedules"),
        (10166, nats.MessageTTLDisabledError, "allow_msg_ttl=True"),
    ],
)
def test_the_servers_refusals_map_to_classes_that_say_what_to_do(
    err_code: int, cls: type, advice: str
) -> None:
    err = errors.api_error(400, err_code, "the server's words", "sched.a")
    assert type(err) is cls
    assert isinstance(err, nats.BadRequestError)  # nats-py code's except still catches it
    assert err.description == "the server's words" and err.err_code == err_code
    text = str(err)
    assert text.startswith("the server's words [code=400") and advice in text
    assert cls.__name__ in (errors.__doc__ or "")
