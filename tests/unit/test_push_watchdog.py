"""The push heartbeat watchdog with a frozen clock: the alarm comes after ``heartbeat_alarm``
idle heartbeat intervals without anything (3 unless asked otherwise), once per silence."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable, List

import pytest
from freezegun import freeze_time

from jetstream_sync import errors
from jetstream_sync.jetstream.push import HEARTBEAT_ALARM, JetStreamSubscription
from jetstream_sync.jetstream.status import check_alarm


class FakeClient:
    """The parts of the Core (_seam.py) the watchdog uses: the timer and error reporting."""

    def __init__(self) -> None:
        self.reported: List[errors.NATSError] = []
        self.timers: List[Callable[[], None]] = []

    def report(self, err: errors.NATSError) -> None:
        self.reported.append(err)

    def call_later(self, delay: float, fn: Callable[[], None]) -> None:
        self.timers.append(fn)


def alarms(nc: FakeClient) -> int:
    return sum(isinstance(e, errors.NoHeartbeatError) for e in nc.reported)


def watched(alarm: float = HEARTBEAT_ALARM) -> tuple[JetStreamSubscription, FakeClient]:
    nc = FakeClient()
    js: Any = SimpleNamespace(_nc=nc, _core=nc)
    return JetStreamSubscription(js, "S", "C", False, None, False, 1.0, alarm), nc


def test_default_alarm_after_three_silent_intervals_once() -> None:
    with freeze_time("2026-01-01 00:00:00") as clock:
        jsub, nc = watched()
        clock.tick(2.9)
        jsub._watchdog()
        assert alarms(nc) == 0
        clock.tick(0.1)
        jsub._watchdog()
        assert alarms(nc) == 1
        clock.tick(5)
        jsub._watchdog()
        assert alarms(nc) == 1  # once per silence
        jsub._seen = True  # something arrived: the next silence alarms again
        jsub._watchdog()
        clock.tick(3)
        jsub._watchdog()
        assert alarms(nc) == 2
        assert len(nc.timers) == 5  # every tick re-arms itself


def test_alarm_factor_is_configurable() -> None:
    with freeze_time("2026-01-01 00:00:00") as clock:
        jsub, nc = watched(alarm=1.5)
        clock.tick(1.4)
        jsub._watchdog()
        assert alarms(nc) == 0
        clock.tick(0.1)
        jsub._watchdog()
        assert alarms(nc) == 1
        assert "nothing for 1.5 s" in str(nc.reported[0])


@pytest.mark.parametrize("bad", [1, 0.5, -3, True, "3", None])
def test_alarm_factor_must_be_more_than_one_interval(bad: Any) -> None:
    with pytest.raises(errors.InvalidArgumentError, match="heartbeat_alarm"):
        check_alarm(bad)
    assert check_alarm(2) == 2.0
