"""Pull internals with bytes and a frozen clock: request bodies, the expires margin, the
status table and the heartbeat alarm (no server, no sleeping)."""

from __future__ import annotations

import json
from typing import List

import pytest
from freezegun import freeze_time

from jetstream_sync import _protocol as proto
from jetstream_sync import errors
from jetstream_sync.jetstream import status
from jetstream_sync.jetstream.priority import PullPriority
from jetstream_sync.jetstream.pull import pull_expires, pull_request_body
from jetstream_sync.msg import Msg


def status_msg(line: str, extra: str = "") -> Msg:
    """A status message exactly as the parser makes it from the server's bytes."""
    block = f"NATS/1.0 {line}\r\n{extra}\r\n".encode()
    parser = proto.Parser()
    parser.receive_data(b"HMSG _INBOX.x 1 %d %d\r\n%s\r\n" % (len(block), len(block), block))
    (msg,) = parser.events()
    assert isinstance(msg, Msg)
    return msg


def test_request_bodies() -> None:
    assert pull_request_body(5, no_wait=True) == b'{"batch":5,"no_wait":true}'
    assert json.loads(pull_request_body(5, expires=4_900_000_000, heartbeat=0.5)) == {
        "batch": 5,
        "expires": 4_900_000_000,
        "idle_heartbeat": 500_000_000,
    }
    assert json.loads(pull_request_body(1, max_bytes=1024)) == {"batch": 1, "max_bytes": 1024}


def test_request_bodies_with_priority_group_fields() -> None:
    # seed 004: group always; min_pending / min_ack_pending (overflow), priority
    # (prioritized), and the pin as "id" once one is held (pinned_client).
    overflow = PullPriority("jobs", min_pending=10, min_ack_pending=5)
    assert json.loads(pull_request_body(3, no_wait=True, priority=overflow)) == {
        "batch": 3,
        "no_wait": True,
        "group": "jobs",
        "min_pending": 10,
        "min_ack_pending": 5,
    }
    pinned = PullPriority("jobs", pinned=True)
    assert json.loads(pull_request_body(1, expires=10, priority=pinned, pin_id="P1")) == {
        "batch": 1,
        "expires": 10,
        "group": "jobs",
        "id": "P1",
    }
    assert "id" not in json.loads(pull_request_body(1, priority=pinned, pin_id=None))
    assert json.loads(pull_request_body(1, priority=PullPriority("g", priority=0))) == {
        "batch": 1,
        "group": "g",
        "priority": 0,
    }


@pytest.mark.parametrize(
    ("remaining", "expected"),
    [
        (5.0, 4_900_000_000),  # seed 000: 100 ms before the client gives up
        (1.0, 900_000_000),
        (0.2, 100_000_000),  # short: half of it
        (0.01, 5_000_000),
        (0.0, 1_000_000),  # never 0 (that would mean "no expiry")
    ],
)
def test_expires_margin(remaining: float, expected: int) -> None:
    assert pull_expires(remaining) == pytest.approx(expected, abs=2)


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("100 Idle Heartbeat", status.HEARTBEAT),
        ("404 No Messages", status.NO_MESSAGES),
        ("408 Request Timeout", status.REQUEST_TIMEOUT),
        ("409 Message Size Exceeds MaxBytes", status.END),
        ("409 Batch Completed", status.END),
        ("409 Exceeded MaxWaiting", status.LIMIT),
        ("409 Exceeded MaxRequestBatch of 10", status.LIMIT),
        ("409 Exceeded MaxRequestExpires of 1s", status.LIMIT),
        ("409 Exceeded MaxRequestMaxBytes of 100", status.LIMIT),
        ("409 Leadership Change", status.RETRY),
        ("409 Server Shutdown", status.RETRY),
        ("409 Consumer Deleted", status.TERMINAL),
        ("409 Consumer is push based", status.TERMINAL),
        ("400 Bad Request", status.TERMINAL),
        ("423 Nats-Pin-Id mismatch", status.PIN_MISMATCH),
        ("503", status.ERROR),
        ("409 Something New", status.ERROR),
        ("418 Teapot", status.ERROR),
    ],
)
def test_status_table(line: str, kind: str) -> None:
    assert status.classify(status_msg(line)) == kind


def test_plain_messages_are_not_statuses() -> None:
    assert status.classify(Msg("a", "", b"x")) is None
    assert status.classify(Msg("a", "", b"x", 1, b"NATS/1.0\r\nA: b\r\n\r\n")) is None


@pytest.mark.parametrize(
    ("line", "cls"),
    [
        ("409 Consumer Deleted", errors.ConsumerDeletedError),
        ("409 Consumer is push based", errors.ConsumerIsPushBasedError),
        ("409 Exceeded MaxWaiting", errors.PullLimitExceededError),
        ("409 Leadership Change", errors.ConsumerLeadershipChangedError),
        ("409 Server Shutdown", errors.ConsumerLeadershipChangedError),
        ("400 Bad Request", errors.BadPullRequestError),
        ("409 Something New", errors.PullStatusError),
        ("503", errors.NoConsumerResponseError),
    ],
)
def test_status_errors_name_the_consumer(line: str, cls: type) -> None:
    err = status.status_error(status_msg(line), "pull consumer 'c' of stream 'S'")
    assert type(err) is cls
    assert "pull consumer 'c' of stream 'S'" in str(err)
    if isinstance(err, errors.PullStatusError):
        assert err.status == int(line[:3]) and err.description == line[4:]
    else:
        assert isinstance(err, errors.NoRespondersError)


def test_pending_counts_of_a_408() -> None:
    msg = status_msg(
        "408 Request Timeout", "Nats-Pending-Messages: 5\r\nNats-Pending-Bytes: 640\r\n"
    )
    assert status.pending_counts(msg) == (5, 640)
    assert status.pending_counts(status_msg("408 Request Timeout")) == (0, 0)


def test_heartbeat_alarm_at_twice_the_interval() -> None:
    with freeze_time("2026-01-01 00:00:00") as clock:
        watch = status.HeartbeatWatch(1.0)
        assert watch.limit == 2.0 and watch.due_in() == 2.0
        clock.tick(1.9)
        assert not watch.missed()
        watch.alive()  # a heartbeat (or a message) came
        clock.tick(1.9)
        assert not watch.missed() and watch.due_in() == pytest.approx(0.1, abs=1e-3)
        clock.tick(0.1)
        assert watch.missed() and watch.due_in() == 0.0


def test_a_missed_alarm_is_confirmed_by_a_ping_before_it_is_raised() -> None:
    # confirmed(): a PING round trip (flush) first; what the server wrote before its PONG has
    # then been read. The flush is given at most max(limit, 1 s), and no more than the wait.
    with freeze_time("2026-01-01 00:00:00") as clock:
        watch = status.HeartbeatWatch(0.1)  # limit 0.2 s
        clock.tick(0.5)  # this process did not run for 0.5 s
        assert watch.missed()
        queued: List[str] = []
        asked: List[float] = []

        def heartbeat_was_in_the_socket(timeout: float) -> None:
            asked.append(timeout)
            queued.append("heartbeat")  # read on the way to the PONG

        assert not watch.confirmed(heartbeat_was_in_the_socket, 5.0, lambda: bool(queued))
        assert asked == [1.0]  # the bound: max(0.2 s, 1 s)

        asked.clear()
        assert watch.confirmed(lambda t: asked.append(t), 5.0, lambda: False)  # PONG, nothing
        assert asked == [1.0]
        asked.clear()
        assert watch.confirmed(lambda t: asked.append(t), 0.3, lambda: False)
        assert asked == [0.3]  # the caller's deadline bounds the wait

        def no_pong(timeout: float) -> None:
            asked.append(timeout)
            raise errors.FlushTimeoutError("no PONG")

        assert watch.confirmed(no_pong, 5.0, lambda: False)  # no PONG in the whole bound: raise
        assert not watch.confirmed(no_pong, 5.0, lambda: True)  # but it came meanwhile
        # the caller's deadline cut the wait short: not a verdict, the deadline ends the call
        assert not watch.confirmed(no_pong, 0.3, lambda: False)
    with freeze_time("2026-01-01 00:00:00") as clock:
        slow = status.HeartbeatWatch(2.0)  # limit 4 s: the PONG may take that long
        clock.tick(4.0)
        asked.clear()
        assert slow.confirmed(lambda t: asked.append(t), 30.0, lambda: False)
        assert asked == [4.0]


def test_heartbeat_alarm_factor_is_configurable() -> None:
    with freeze_time("2026-01-01 00:00:00") as clock:
        watch = status.HeartbeatWatch(0.5, factor=3)  # the push side's 3x (ADR-15)
        clock.tick(1.49)
        assert not watch.missed()
        clock.tick(0.01)
        assert watch.missed()
    for bad in (0.0, -1.0):
        with pytest.raises(errors.InvalidArgumentError):
            status.HeartbeatWatch(bad)
