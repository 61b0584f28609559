"""Message schedules (ADR-51) between nats.js 3.4.0 (@nats-io/jetstream's ``schedule`` and
``cancelSchedule`` publish options) and jetstream_sync on one real server.

A schedule nats.js publishes (an @every interval with a TTL, a cron, an @at Date) is seen
landing by our consumer and cancelled by our ``cancel_schedule``; ours (a timedelta, a
datetime) is seen landing by nats.js's ordered consumer and cancelled by its
``cancelSchedule`` publish.
"""

from __future__ import annotations

import json
import subprocess
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest
from interop_peers import HERE

from jetstream_sync.jetstream.api import StreamConfig
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name

PEER = HERE / "schedule_peer.mjs"
DUE = 5.0  # for a message due within a second or two, on a loaded machine


def run_peer(node: str, server: NATSServer, mode: str, job: Any) -> Any:
    out = subprocess.run(
        [node, str(PEER), server.url, mode, json.dumps(job)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout)


@pytest.fixture
def sched(js: JetStream) -> Iterator[str]:
    name = stream_name("JSSCHED")
    js.add_stream(
        StreamConfig(
            name=name, subjects=[f"{name.lower()}.>"], allow_msg_schedules=True, allow_msg_ttl=True
        )
    )
    yield name
    js.delete_stream(name)


def test_a_natsjs_schedule_lands_for_us_and_we_cancel_it(
    node: str, nats_server: NATSServer, js: JetStream, sched: str
) -> None:
    p = sched.lower()
    every, cron, at = (js.subscribe(f"{p}.out.{w}", ordered_consumer=True) for w in "eca")
    seen = run_peer(
        node,
        nats_server,
        "publish",
        {
            "schedules": [
                {
                    "subject": f"{p}.sched.every",
                    "data": "every",
                    "target": f"{p}.out.e",
                    "spec": {"every": "1s"},
                    "ttl": "30s",
                    "header": ["Origin", "nats.js"],
                },
                {
                    "subject": f"{p}.sched.cron",
                    "data": "cron",
                    "target": f"{p}.out.c",
                    "spec": {"cron": "* * * * * *"},
                },
                {
                    "subject": f"{p}.sched.at",
                    "data": "at",
                    "target": f"{p}.out.a",
                    "spec": {"at_in_ms": 500},
                },
            ]
        },
    )
    assert [ack["stream"] for ack in seen["acks"]] == [sched] * 3
    for _ in range(2):
        msg = every.next_msg(timeout=DUE)
        assert msg.data == b"every" and msg.headers["Origin"] == "nats.js"
        assert msg.headers["Nats-TTL"] == "30s"  # nats.js's TTL text, passed on as it is
        assert msg.headers["Nats-Scheduler"] == f"{p}.sched.every"
    msg = cron.next_msg(timeout=DUE)
    assert msg.data == b"cron" and msg.headers["Nats-Schedule-Next"].endswith("Z")
    msg = at.next_msg(timeout=DUE)
    assert msg.data == b"at" and msg.headers["Nats-Schedule-Next"] == "purge"
    # nats.js's schedules are schedules to us: ours cancels them.
    assert js.cancel_schedule(sched, f"{p}.sched.every") is True
    assert js.cancel_schedule(sched, f"{p}.sched.cron") is True
    assert js.cancel_schedule(sched, f"{p}.sched.at") is False  # fired, so gone
    held = js.stream_info(sched, subjects_filter=f"{p}.sched.>").state.subjects
    assert not held


def test_our_schedule_lands_for_natsjs_and_it_cancels_it(
    node: str, nats_server: NATSServer, js: JetStream, sched: str
) -> None:
    p = sched.lower()
    js.publish(
        f"{p}.sched.every",
        b"ours",
        headers={"Origin": "jetstream_sync"},
        schedule=timedelta(seconds=1),
        schedule_target=f"{p}.out.e",
        schedule_ttl=30,
    )
    js.publish(
        f"{p}.sched.at",
        b"once",
        schedule=datetime.now(timezone.utc) + timedelta(milliseconds=500),
        schedule_target=f"{p}.out.a",
    )
    seen = run_peer(
        node,
        nats_server,
        "watch",
        {
            "stream": sched,
            "target": f"{p}.out.e",
            "count": 2,
            "cancel": {"subject": f"{p}.cancelled", "schedule": f"{p}.sched.every"},
        },
    )
    for msg in seen["msgs"]:
        assert msg["subject"] == f"{p}.out.e" and msg["data"] == "ours"
        assert msg["headers"]["Origin"] == ["jetstream_sync"]
        assert msg["headers"]["Nats-TTL"] == ["30"]
        assert msg["headers"]["Nats-Scheduler"] == [f"{p}.sched.every"]
    assert seen["cancel_ack"]["stream"] == sched
    # nats.js's cancelSchedule removed our schedule.
    assert js.cancel_schedule(sched, f"{p}.sched.every") is False
    (at,) = run_peer(
        node, nats_server, "watch", {"stream": sched, "target": f"{p}.out.a", "count": 1}
    )["msgs"]
    assert at["data"] == "once" and at["headers"]["Nats-Schedule-Next"] == ["purge"]
