"""Message schedules (ADR-51) on a real server: each kind is seen landing on its target when
due, a cancelled one stops, and the server's refusals arrive as MessageScheduleError and its
kin. Every wait is a consumer's next_msg or a poll with a deadline; the schedules fire every
second, so the module takes a few seconds."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any, Dict, Iterator, List, Tuple

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream import api_level
from jetstream_sync.jetstream.api import StreamConfig, StreamSource
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.jetstream.push import JetStreamSubscription
from jetstream_sync.msg import Msg
from jetstream_sync.testing import stream_name, wait_until

DUE = 5.0  # how long a message due within a second or two may take on a loaded machine


class Sched:
    """A stream that allows schedules and TTLs, with its schedule and target subjects."""

    def __init__(self, js: JetStream, allow_ttl: bool = True) -> None:
        self.js = js
        self.name = stream_name("SCHED")
        self.prefix = self.name.lower()
        js.add_stream(
            StreamConfig(
                name=self.name,
                subjects=[f"{self.prefix}.>"],
                allow_msg_schedules=True,
                allow_msg_ttl=allow_ttl or None,
            )
        )

    def subject(self, what: str) -> str:
        return f"{self.prefix}.{what}"

    def watch(self, what: str) -> JetStreamSubscription:
        """The produced messages are stored, not published: a consumer sees them."""
        return self.js.subscribe(self.subject(what), ordered_consumer=True)

    def count(self, what: str) -> int:
        subjects = self.js.stream_info(self.name, subjects_filter=self.subject(what)).state
        return (subjects.subjects or {}).get(self.subject(what), 0)


@pytest.fixture
def sched(js: JetStream) -> Iterator[Sched]:
    s = Sched(js)
    yield s
    js.delete_stream(s.name)


def produced(sub: JetStreamSubscription, n: int) -> List[Msg]:
    return [sub.next_msg(timeout=DUE) for _ in range(n)]


def test_every_kind_of_schedule_lands_when_due(sched: Sched) -> None:
    """@at, @every (by publish_async), a cron in a zone with rollups, and a sampling
    schedule, published together: they run side by side, so the test waits about two
    seconds for all of them."""
    js, at, every, cron = sched.js, sched.watch("out.at"), sched.watch("out.every"), None
    sampled, fallback = sched.watch("out.sampled"), sched.watch("out.fallback")
    core = js.nc.subscribe(sched.subject("out.>"))
    for value in (b"20.5", b"21.0"):
        js.publish(sched.subject("sensor"), value, headers={"Unit": "C"})
    due = datetime.now(timezone.utc) + timedelta(seconds=1)
    ack = js.publish(
        sched.subject("sched.at"),
        b"later",
        headers={"Order": "42"},
        schedule=due,
        schedule_target=sched.subject("out.at"),
    )
    assert ack.stream == sched.name
    fut = js.publish_async(
        sched.subject("sched.every"),
        b"tick",
        schedule=timedelta(seconds=1),
        schedule_target=sched.subject("out.every"),
        schedule_ttl=60,
    )
    try:
        js.publish(
            sched.subject("sched.cron"),
            b"cron",
            schedule="* * * * * *",
            schedule_target=sched.subject("out.cron"),
            schedule_time_zone="Europe/Amsterdam",
            schedule_rollup=True,
        )
        cron = sched.watch("out.cron")
    except nats.MessageScheduleError as exc:
        if exc.err_code != 10223:
            raise  # (10223: this server's host has no tzdata for the zone; the rest goes on)
    for what, source in (("sampled", "sensor"), ("fallback", "silent")):
        js.publish(
            sched.subject(f"sched.{what}"),
            b"own body",
            schedule="@every 1s",
            schedule_target=sched.subject(f"out.{what}"),
            schedule_source=sched.subject(source),
        )
    assert fut.result(timeout=5).stream == sched.name

    (msg,) = produced(at, 1)
    assert msg.data == b"later"
    assert msg.headers["Order"] == "42"  # the schedule's headers go along
    assert msg.headers["Nats-Scheduler"] == sched.subject("sched.at")
    assert msg.headers["Nats-Schedule-Next"] == "purge"
    assert msg.metadata.timestamp >= due  # stored when due, not before
    # A fired @at schedule is gone: nothing left to cancel.
    assert sched.count("sched.at") == 0
    assert js.cancel_schedule(sched.name, sched.subject("sched.at")) is False

    for msg in produced(every, 2):
        assert msg.data == b"tick"
        assert msg.headers["Nats-TTL"] == "60"
        assert msg.headers["Nats-Scheduler"] == sched.subject("sched.every")
        assert msg.headers["Nats-Schedule-Next"].endswith("Z")  # the next run, in UTC
    assert sched.count("sched.every") == 1  # the schedule stays, for the next run

    (msg,) = produced(sampled, 1)  # the source's last message, headers and all
    assert msg.data == b"21.0" and msg.headers["Unit"] == "C"
    assert msg.headers["Nats-Scheduler"] == sched.subject("sched.sampled")
    (msg,) = produced(fallback, 1)  # no message on the source: the schedule's own body
    assert msg.data == b"own body"

    if cron is not None:
        msgs = produced(cron, 2)
        for msg in msgs:
            assert msg.data == b"cron" and msg.headers["Nats-Rollup"] == "sub"
            assert msg.headers["Nats-Schedule-Next"][-6:] in ("+01:00", "+02:00")  # Amsterdam
        assert msgs[1].metadata.sequence.stream > msgs[0].metadata.sequence.stream
        assert sched.count("out.cron") == 1  # each rolled the one before up
    # Stored by the stream, never published: the core subscriber saw none of them.
    assert core.delivered == 0


def test_cancel_schedule_stops_further_deliveries(sched: Sched) -> None:
    js, out = sched.js, sched.watch("out.stopped")
    target = sched.subject("out.stopped")
    js.publish(sched.subject("sched.stopped"), b"x", schedule="@every 1s", schedule_target=target)
    # Cancel just after a run, while the next is still well ahead: none is under way.
    for _ in range(5):
        (last,) = produced(out, 1)
        was_due = datetime.fromisoformat(last.headers["Nats-Schedule-Next"].replace("Z", "+00:00"))
        if was_due - datetime.now(timezone.utc) > timedelta(seconds=0.3):
            break
    assert js.cancel_schedule(sched.name, sched.subject("sched.stopped")) is True
    landed = sched.count("out.stopped")
    # A witness made after the cancel, firing each second: once it has fired after the
    # cancelled schedule's next run was due, that run would have landed.
    witness = sched.watch("out.witness")
    js.publish(
        sched.subject("sched.witness"),
        b"w",
        schedule="* * * * * *",
        schedule_target=sched.subject("out.witness"),
    )
    wait_until(
        lambda: witness.next_msg(timeout=DUE).metadata.timestamp > was_due,
        timeout=3 * DUE,
        what="the witness schedule to run after the cancelled one was due",
    )
    assert sched.count("out.stopped") == landed
    assert sched.count("sched.stopped") == 0
    assert js.cancel_schedule(sched.name, sched.subject("sched.stopped")) is False
    # A subject whose last message is not a schedule is left alone.
    with pytest.raises(nats.InvalidArgumentError, match="is not a schedule"):
        js.cancel_schedule(sched.name, target)
    assert sched.count("out.stopped") == landed


def test_a_publish_can_cancel_a_schedule_atomically(sched: Sched) -> None:
    js = sched.js
    never = datetime(2099, 1, 1, tzinfo=timezone.utc)
    js.publish(
        sched.subject("sched.order"), b"late", schedule=never, schedule_target=sched.subject("o")
    )
    ack = js.publish(
        sched.subject("orders.cancelled"),
        b"sent early",
        cancel_schedule=sched.subject("sched.order"),
    )
    assert ack.stream == sched.name
    assert sched.count("sched.order") == 0 and sched.count("orders.cancelled") == 1
    # The server refuses to cancel what is not a schedule (and stores nothing).
    with pytest.raises(nats.MessageScheduleError) as caught:
        js.publish(
            sched.subject("orders.other"), b"", cancel_schedule=sched.subject("orders.cancelled")
        )
    assert caught.value.err_code == 10212 and "holds a schedule" in str(caught.value)
    assert sched.count("orders.other") == 0


def test_the_servers_refusals_say_what_to_do(js: JetStream, sched: Sched) -> None:
    plain = stream_name("NOSCHED")
    js.add_stream(name=plain, subjects=[f"{plain.lower()}.>"])
    no_ttl = Sched(js, allow_ttl=False)
    try:
        with pytest.raises(nats.MessageSchedulesDisabledError, match="allow_msg_schedules=True"):
            js.publish(f"{plain.lower()}.s", b"", schedule="@hourly", schedule_target=f"{plain}.t")
        fut = js.publish_async(
            f"{plain.lower()}.s", b"", schedule="@hourly", schedule_target=f"{plain}.t"
        )
        assert isinstance(fut.exception(timeout=5), nats.MessageSchedulesDisabledError)
        with pytest.raises(nats.MessageTTLDisabledError, match="allow_msg_ttl=True"):
            no_ttl.js.publish(
                no_ttl.subject("s"), b"", schedule="@hourly", schedule_target=no_ttl.subject("t"),
                schedule_ttl=5,
            )  # fmt: skip
        refusals = [
            ({"schedule_target": "elsewhere"}, 10190),  # not a subject of the stream
            ({"schedule": "0 0 0 30 2 *"}, 10189),  # February 30th never comes
            ({"schedule_time_zone": "Mars/Olympus"}, 10223),
            ({"schedule_source": "elsewhere.too"}, 10203),
        ]
        for change, err_code in refusals:
            kwargs = {"schedule": "@hourly", "schedule_target": sched.subject("t"), **change}
            with pytest.raises(nats.MessageScheduleError) as caught:
                js.publish(sched.subject("s"), b"", **kwargs)  # type: ignore[arg-type]
            assert caught.value.err_code == err_code
        assert sched.count("s") == 0
        # A stream that sources cannot hold schedules.
        with pytest.raises(nats.MessageScheduleError) as caught:
            js.add_stream(
                StreamConfig(
                    name=stream_name("SRCSCHED"),
                    sources=[StreamSource(name=sched.name)],
                    allow_msg_schedules=True,
                )
            )
        assert caught.value.err_code == 10187
    finally:
        js.delete_stream(plain)
        js.delete_stream(no_ttl.name)


def test_what_the_client_refuses_is_never_sent(sched: Sched) -> None:
    js, target = sched.js, sched.subject("t")
    cases: List[Tuple[Dict[str, Any], str]] = [
        ({"schedule": datetime(2030, 1, 1), "schedule_target": target}, "no time zone"),
        ({"schedule": "* * * * *", "schedule_target": target}, "has 5 fields"),
        ({"schedule": "@every 100ms", "schedule_target": target}, "1 s or more"),
        ({"schedule": "@hourly"}, "needs schedule_target"),
        ({"schedule_target": target}, "go with schedule="),
        ({"schedule": "@hourly", "schedule_target": f"{target}.*"}, "wildcard"),
        ({"schedule": "@hourly", "cancel_schedule": sched.subject("x")}, "not both"),
        ({"cancel_schedule": sched.subject("x"), "schedule_ttl": 5}, "takes no schedule_"),
    ]
    for kwargs, words in cases:
        with pytest.raises(nats.InvalidArgumentError, match=words):
            js.publish(sched.subject("s"), b"", **kwargs)
        with pytest.raises(nats.InvalidArgumentError, match=words):
            js.publish_async(sched.subject("s"), b"", **kwargs)
    assert js.stream_info(sched.name).state.messages == 0


def test_a_server_below_the_level_is_refused_before_sending(sched: Sched) -> None:
    js = sched.js
    js._levels.level = lambda: api_level.SCHEDULES[1]  # type: ignore[method-assign]
    with pytest.raises(nats.ApiLevelError, match="repeating message schedules"):
        js.publish(
            sched.subject("s"), b"", schedule="@every 1s", schedule_target=sched.subject("t")
        )
    with pytest.raises(nats.ApiLevelError, match="cancelling a message schedule"):
        js.publish(sched.subject("t"), b"", cancel_schedule=sched.subject("s"))
    assert js.stream_info(sched.name).state.messages == 0
    # An @at schedule is 2.12's: that level is enough.
    never = datetime(2099, 1, 1, tzinfo=timezone.utc)
    js.publish(sched.subject("s"), b"", schedule=never, schedule_target=sched.subject("t"))
    assert sched.count("s") == 1
