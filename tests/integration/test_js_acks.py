"""Acks on the wire: what each ack call sends, as the server's trace log shows it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, List

import pytest

import jetstream_sync as nats
from jetstream_sync import AckPolicy
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until


def _pull(nc: nats.Client, stream: str, consumer: str, batch: int) -> List[nats.Msg]:
    """A plain pull request (the full fetch API is issue 4's): batch messages, no_wait."""
    inbox = nc.new_inbox()
    sub = nc.subscribe(inbox)
    nc.publish(
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}",
        json.dumps({"batch": batch, "expires": 2_000_000_000}).encode(),
        reply=inbox,
    )
    out = []
    while len(out) < batch:
        msg = sub.next_msg(timeout=5)
        if msg.status is None:
            out.append(msg)
    sub.unsubscribe()
    return out


def test_ack_kinds_on_the_wire(server_factory: Callable[..., NATSServer], tmp_path: Path) -> None:
    trace = tmp_path / "trace.log"
    srv = server_factory(jetstream=True, trace_log=str(trace))
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="A", subjects=["a.>"])
        js.add_consumer("A", durable_name="w", ack_policy=AckPolicy.EXPLICIT, ack_wait=30.0)
        for i in range(5):
            js.publish("a.x", str(i).encode())
        m1, m2, m3, m4, m5 = _pull(nc, "A", "w", 5)
        md = m1.metadata
        assert (md.stream, md.consumer, md.sequence.stream, md.num_delivered) == ("A", "w", 1, 1)
        m1.ack()
        assert m1.is_acked
        with pytest.raises(nats.MsgAlreadyAckdError):  # a terminal ack sent already
            m1.ack()
        with pytest.raises(nats.MsgAlreadyAckdError):  # nothing sent
            m1.nak()
        m2.nak(delay=10.0)
        m3.in_progress()
        m3.in_progress()  # not terminal: both sent
        m3.term("cannot parse")
        confirmed = m4.ack_sync(timeout=5)
        assert isinstance(confirmed, nats.Msg) and confirmed.data == b""  # nats-py's return
        with pytest.raises(nats.MsgAlreadyAckdError):
            m4.ack_sync(timeout=5)
        m4.in_progress()  # not terminal: after a terminal ack, nothing sent and no error
        m5.ack()
        nc.flush()
        # m2 waits for its nak delay; every other one is acked or terminated. The server
        # takes acks from its own queue after the PONG has gone: poll, not read once.
        info = wait_until(
            lambda: (i := js.consumer_info("A", "w")).num_ack_pending == 1 and i,
            10,
            "the acks processed",
        )
        assert info.ack_floor.stream_seq == 1
    log = trace.read_text(errors="replace")
    sent = [
        line.split("MSG_PAYLOAD: ")[1]
        for line in log.splitlines()
        if "<<- MSG_PAYLOAD" in line
        and ("ACK" in line or "NAK" in line or "WPI" in line or "TERM" in line)
    ]
    assert sent == [
        '["+ACK"]',
        '["-NAK {\\"delay\\": 10000000000}"]',
        '["+WPI"]',
        '["+WPI"]',
        '["+TERM cannot parse"]',
        '["+ACK"]',
        '["+ACK"]',
    ]


def test_ack_policy_none_ignores_acks(nc: nats.Client) -> None:
    """An ack state of 'none' (set by the consumer APIs for ack policy none) sends nothing."""
    from jetstream_sync.jetstream.ack import ACK_NONE

    msg = nats.Msg("s", "$JS.ACK.S.C.1.2.3.4.5", b"", client=nc)
    msg._ack = ACK_NONE
    msg.ack()
    msg.nak()
    msg.term()
    assert msg.ack_sync() is None
    assert nc.stats["out_msgs"] == 0
    with pytest.raises(nats.NotJSMessageError):
        nats.Msg("s", "", b"", client=nc).in_progress()


def test_a_lone_ack_goes_out_without_any_later_write(
    server_factory: Callable[..., NATSServer], tmp_path: Path
) -> None:
    """Acks linger for a write to take them along; with none coming, the flusher sends them.
    Nothing else may carry it: no pings either way, and the consumer is watched from
    another connection."""
    trace = tmp_path / "trace.log"
    srv = server_factory(jetstream=True, config='ping_interval: "10m"\n', trace_log=str(trace))
    with nats.connect(srv.url, ping_interval=600) as nc, nats.connect(srv.url) as watcher:
        js = nc.jetstream()
        js.add_stream(name="LONE", subjects=["lone"])
        js.add_consumer("LONE", durable_name="w", ack_policy=AckPolicy.EXPLICIT)
        js.publish("lone", b"x")
        (msg,) = _pull(nc, "LONE", "w", 1)
        wjs = watcher.jetstream()
        assert wjs.consumer_info("LONE", "w").num_ack_pending == 1
        # The server pings each new client once, about 2 s after it connects; the PONG
        # would carry the ack. Let that happen first.
        wait_until(lambda: trace.read_text().count("->> [PING]") >= 2, what="first pings")
        nc.flush()  # the buffer is empty and the flusher idle
        msg.ack()  # nothing else is sent by nc from here on
        wait_until(
            lambda: wjs.consumer_info("LONE", "w").num_ack_pending == 0,
            timeout=20,
            what="the ack to reach the server",
        )
