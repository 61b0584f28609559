"""The simplified pull API (PullConsumer) and ordered consumers, against a real server."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Callable, List

import pytest
from support import Errors, paused_once_pull_waits, stop_after

import jetstream_sync as nats
from jetstream_sync import AckPolicy
from jetstream_sync.jetstream.ack import ACK_NONE
from jetstream_sync.jetstream.consumer import ConsumeContext, PullConsumer
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.jetstream.ordered import OrderedConsumer
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

STREAM_PREFIX = "CONS"  # the shared stream fixture names its streams CONS<n>


def fill(js: JetStream, stream: str, n: int, start: int = 0) -> None:
    for i in range(start, start + n):
        js.publish(f"{stream.lower()}.x", str(i).encode())


def data(msgs: List[nats.Msg]) -> List[int]:
    return [int(m.data) for m in msgs]


# --- fetch and next -----------------------------------------------------------------------


@pytest.mark.smoke
def test_fetch_next_and_no_wait(js: JetStream, stream: str) -> None:
    c = js.create_or_update_consumer(stream, durable_name="w", ack_policy=AckPolicy.EXPLICIT)
    assert c.name == "w" and c.info.config.durable_name == "w"
    fill(js, stream, 5)
    first = c.fetch(3, max_wait=5)
    assert data(first) == [0, 1, 2]
    assert data(c.fetch(10, max_wait=2)) == [3, 4]  # the pull expired with two
    assert c.fetch(10, no_wait=True) == []  # nothing there: at once, empty
    with pytest.raises(nats.TimeoutError):
        c.next(timeout=0.3)
    fill(js, stream, 1, start=5)
    msg = c.next()
    assert int(msg.data) == 5
    for m in [*first, msg]:
        m.ack()
    js.nc.flush()
    # 3 and 4 not acked yet. The server takes acks off a queue of its own, after the PONG:
    # wait for it, as the other ack counts here do.
    wait_until(lambda: c.consumer_info().num_ack_pending == 2, what="the four acks")


def test_fetch_by_bytes(js: JetStream, stream: str) -> None:
    c = js.create_or_update_consumer(stream, durable_name="w", ack_policy=AckPolicy.EXPLICIT)
    fill(js, stream, 20)
    got = c.fetch(max_bytes=300, max_wait=2)
    assert 0 < len(got) < 20  # each message is well over 30 bytes on the wire


def test_bind_checks_and_bad_arguments(js: JetStream, stream: str) -> None:
    with pytest.raises(nats.ConsumerNotFoundError):
        js.consumer(stream, "missing")
    js.add_consumer(stream, durable_name="push", deliver_subject="push.here")
    with pytest.raises(nats.ConsumerIsPushBasedError):
        js.consumer(stream, "push")
    with pytest.raises(nats.InvalidArgumentError, match="add_consumer"):
        js.create_or_update_consumer(stream, durable_name="p2", deliver_subject="x.y")
    c = js.create_or_update_consumer(stream, durable_name="w")
    assert js.consumer(stream, "w").name == "w"
    for bad in (0, -3, 2.5, True):
        with pytest.raises(nats.InvalidArgumentError, match="max_messages"):
            c.fetch(bad)  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="not both"):
        c.fetch(5, max_bytes=100)
    with pytest.raises(nats.BadTimeoutError):
        c.fetch(5, max_wait=0)
    with pytest.raises(nats.InvalidArgumentError, match="half"):
        c.fetch(5, max_wait=1, heartbeat=0.9)
    with pytest.raises(nats.InvalidArgumentError, match="expires"):
        c.messages(expires=0.5)
    with pytest.raises(nats.InvalidArgumentError, match="callable"):
        c.consume("not a function")  # type: ignore[arg-type]


def test_ack_policy_none_ignores_acks(js: JetStream, stream: str) -> None:
    c = js.create_or_update_consumer(stream, durable_name="n", ack_policy=AckPolicy.NONE)
    fill(js, stream, 2)
    msgs = c.fetch(2, max_wait=5)
    assert all(m._ack == ACK_NONE for m in msgs)
    before = js.nc.stats["out_msgs"]
    for m in msgs:
        m.ack()
        m.nak()
    assert js.nc.stats["out_msgs"] == before  # nothing was sent


def test_consumer_deleted_during_fetch_and_next(js: JetStream, stream: str) -> None:
    c = js.create_or_update_consumer(stream, durable_name="w")

    def delete_when_waiting() -> None:
        wait_until(lambda: js.consumer_info(stream, "w").num_waiting >= 1)
        js.delete_consumer(stream, "w")

    deleter = threading.Thread(target=delete_when_waiting, daemon=True)
    deleter.start()
    with pytest.raises(nats.ConsumerDeletedError):
        c.fetch(5, max_wait=10)
    # The 409 reaches the puller while the server is still removing the consumer's store;
    # creating the same name before the delete's answer can fail with "error creating store
    # for consumer" (err_code 10012). Wait for the answer first.
    deleter.join(timeout=30)
    assert not deleter.is_alive()
    c = js.create_or_update_consumer(stream, durable_name="w")
    deleter = threading.Thread(target=delete_when_waiting, daemon=True)
    deleter.start()
    with pytest.raises(nats.ConsumerDeletedError):
        c.next(timeout=10)
    deleter.join(timeout=30)
    assert not deleter.is_alive()
    with pytest.raises(nats.NoConsumerResponseError):
        c.next(timeout=5)


# --- messages() and consume() -------------------------------------------------------------


def test_messages_iterates_and_stops(js: JetStream, stream: str) -> None:
    c = js.create_or_update_consumer(stream, durable_name="w")
    fill(js, stream, 25)
    got: List[int] = []
    with c.messages(max_messages=10, expires=5) as it:
        with stop_after(it, 60):
            for msg in it:
                got.append(int(msg.data))
                msg.ack()
                if len(got) == 25:
                    break
        fill(js, stream, 1, start=25)
        assert int(it.next(timeout=5).data) == 25
    assert got == list(range(25))
    with pytest.raises(StopIteration):
        it.next(timeout=1)  # stopped by leaving the with block


def test_continuous_pull_asks_again_at_half(
    server_factory: Callable[..., NATSServer], tmp_path: Path
) -> None:
    trace = tmp_path / "trace.log"
    srv = server_factory(jetstream=True, trace_log=str(trace))
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="T", subjects=["t"])
        for i in range(30):
            js.publish("t", str(i).encode())
        c = js.create_or_update_consumer("T", durable_name="w")
        with c.messages(max_messages=10, expires=4) as it:
            got = [int(next(it).data) for _ in range(30)]
        assert got == list(range(30))
        nc.flush()
    bodies = []
    for line in trace.read_text(errors="replace").splitlines():
        if "<<- MSG_PAYLOAD" in line and "batch" in line and "python3-sync" in line:
            bodies.append(json.loads(json.loads(line.split("MSG_PAYLOAD: ")[1])[0]))
    assert bodies[0] == {"batch": 10, "expires": 4_000_000_000, "idle_heartbeat": 2_000_000_000}
    # Later pulls top the outstanding count back up to 10 once it falls to half.
    assert all(5 <= b["batch"] <= 10 for b in bodies[1:]) and len(bodies) >= 4


@pytest.mark.smoke
def test_consume_runs_callbacks_in_order_and_reports_their_errors(
    ejs: JetStream, errs: Errors, stream: str
) -> None:
    js, name = ejs, stream
    c = js.create_or_update_consumer(name, durable_name="w")
    got: List[int] = []
    done = threading.Event()

    def cb(msg: nats.Msg) -> None:
        got.append(int(msg.data))
        msg.ack()
        if int(msg.data) == 3:
            raise ValueError("bad message 3")
        if len(got) == 40:
            done.set()

    cc = c.consume(cb, max_messages=16)
    fill(js, name, 40)
    assert done.wait(20)
    assert got == list(range(40))
    cc.stop()
    assert cc.wait(10) and cc.error is None
    wait_until(lambda: ValueError in errs.kinds(), what="the callback's own error")


def test_consumer_deleted_during_consume_is_terminal(
    ejs: JetStream, errs: Errors, stream: str
) -> None:
    js, name = ejs, stream
    c = js.create_or_update_consumer(name, durable_name="w")
    cc = c.consume(lambda m: None, expires=5)
    wait_until(lambda: js.consumer_info(name, "w").num_waiting == 1, what="the pull")
    js.delete_consumer(name, "w")
    assert cc.wait(10)
    assert isinstance(cc.error, nats.ConsumerDeletedError)
    # error_cb runs on the client's callback thread: it may come a moment later.
    wait_until(lambda: nats.ConsumerDeletedError in errs.kinds(), what="error_cb")


def consume_holding_the_first(
    c: PullConsumer, got: List[int], release: threading.Event
) -> ConsumeContext:
    """consume() of 10 filled messages whose callback holds the first until ``release``
    (the other nine queue up behind it), then records and acks each."""
    started = threading.Event()

    def cb(msg: nats.Msg) -> None:
        started.set()
        release.wait(10)
        got.append(int(msg.data))
        msg.ack()

    cc = c.consume(cb, max_messages=10)
    assert started.wait(10)
    wait_until(lambda: c.consumer_info().num_pending == 0, what="all 10 delivered")
    return cc


def test_consume_drain_delivers_what_was_sent(js: JetStream, stream: str) -> None:
    c = js.create_or_update_consumer(stream, durable_name="w")
    fill(js, stream, 10)
    got: List[int] = []
    release = threading.Event()
    cc = consume_holding_the_first(c, got, release)
    threading.Timer(0.2, release.set).start()
    cc.drain(timeout=10)
    assert cc.closed and got == list(range(10))


def test_consume_stop_gives_back_what_was_not_handed_out(
    nats_server: NATSServer, js: JetStream, stream: str
) -> None:
    # ack_wait of a minute: without the give-back the other client would wait that long.
    c = js.create_or_update_consumer(stream, durable_name="w", ack_wait=60.0)
    fill(js, stream, 10)
    got: List[int] = []
    release = threading.Event()
    cc = consume_holding_the_first(c, got, release)
    cc.stop()  # nine are queued, not handed out: they go back (-NAK) now
    release.set()
    assert cc.wait(10) and got == [0]
    with nats.connect(nats_server.url) as other:
        theirs = other.jetstream().consumer(stream, "w")
        again: List[nats.Msg] = []
        for _ in range(9):  # the naks may still be arriving: fetch what is there, again
            again += theirs.fetch(9 - len(again), max_wait=10)
            if len(again) >= 9:
                break
        assert data(again) == list(range(1, 10))
        assert all(m.metadata.num_delivered == 2 for m in again)
        for m in again:
            m.ack()
    wait_until(lambda: c.consumer_info().num_ack_pending == 0, what="every ack")


def test_consume_survives_a_server_restart(server_factory: Callable[..., NATSServer]) -> None:
    srv = server_factory(jetstream=True)
    errs = Errors()
    with nats.connect(
        srv.url, error_cb=errs, reconnect_time_wait=0.1, max_reconnect_attempts=-1
    ) as nc:
        js = nc.jetstream()
        js.add_stream(name="R", subjects=["r"])  # file storage: survives the restart
        c = js.create_or_update_consumer("R", durable_name="w")
        got: List[int] = []
        lock = threading.Lock()

        def cb(msg: nats.Msg) -> None:
            with lock:
                got.append(int(msg.data))
            msg.ack()

        cc = c.consume(cb, max_messages=20, expires=2)
        for i in range(10):
            js.publish("r", str(i).encode())
        wait_until(lambda: len(got) == 10, what="before the restart")
        srv.restart()
        for i in range(10, 20):
            js.publish("r", str(i).encode(), timeout=15)
        wait_until(lambda: len(got) == 20, timeout=30, what="after the restart")
        assert sorted(got) == list(range(20)) and not cc.closed
        cc.stop()


def test_missed_heartbeats_are_reported_and_the_pull_renewed(
    server_factory: Callable[..., NATSServer],
) -> None:
    srv = server_factory(jetstream=True)
    errs = Errors()
    with nats.connect(srv.url, error_cb=errs, ping_interval=60) as nc:
        js = nc.jetstream()
        js.add_stream(name="H", subjects=["h"])
        c = js.create_or_update_consumer("H", durable_name="w")
        got: List[int] = []
        cc = c.consume(lambda m: got.append(int(m.data)), expires=2, heartbeat=0.2)
        wait_until(lambda: js.consumer_info("H", "w").num_waiting == 1, what="the pull")
        srv.pause()
        try:
            wait_until(lambda: nats.NoHeartbeatError in errs.kinds(), what="the alarm")
        finally:
            srv.resume()
        js.publish("h", b"7", timeout=10)
        wait_until(lambda: got == [7], timeout=20, what="a message after the alarm")
        assert not cc.closed
        cc.stop()


def test_a_fetch_raises_on_silence_but_returns_what_came_before_it(
    server_factory: Callable[..., NATSServer],
) -> None:
    """fetch(heartbeat=0.2) on a server that stops (SIGSTOP) while the pull waits: with nothing
    received, NoHeartbeatError (after the alarm and a PING that gets no PONG: about 1.4 s, far
    inside max_wait); with two messages received first, those two, not the error (they would
    be lost to this caller until ack_wait)."""
    srv = server_factory(jetstream=True)
    with nats.connect(srv.url, ping_interval=60) as nc, nats.connect(srv.url) as watcher:
        js = nc.jetstream()
        js.add_stream(name="HF", subjects=["hf"])
        wjs = watcher.jetstream()
        for sent in (0, 2):
            for i in range(sent):
                js.publish("hf", b"%d" % i)
            # a consumer each: the first round's pull still waits at the server afterwards
            c = js.create_or_update_consumer("HF", durable_name=f"w{sent}")
            with paused_once_pull_waits(srv, wjs, "HF", f"w{sent}"):
                if sent:
                    got = c.fetch(5, max_wait=20, heartbeat=0.2)
                    assert [int(m.data) for m in got] == [0, 1]
                else:
                    with pytest.raises(nats.NoHeartbeatError, match="heartbeat"):
                        c.fetch(5, max_wait=20, heartbeat=0.2)
            nc.flush(10)  # the server is back before the next round


# --- ordered consumers ----------------------------------------------------------------------


def test_ordered_consumer_survives_losing_its_consumer(js: JetStream, stream: str) -> None:
    fill(js, stream, 100)
    oc = js.ordered_consumer(stream)
    got: List[int] = []
    info = None
    with oc.messages(max_messages=10, expires=2) as it, stop_after(it, 60):
        for msg in it:
            got.append(int(msg.data))
            if len(got) == 30:
                js.delete_consumer(stream, oc.name)
            if len(got) == 100:
                # (read before leaving: leaving the block deletes the chain's current link)
                info = js.consumer_info(stream, oc.name).config
                break
    assert got == list(range(100)) and oc.resets >= 1
    assert info is not None
    assert info.ack_policy == AckPolicy.NONE and info.mem_storage and info.num_replicas == 1
    wait_until(lambda: js.consumer_names(stream) == [], 10, "the last link deleted on leaving")


@pytest.mark.smoke
def test_ordered_consume_and_fetch(js: JetStream, stream: str) -> None:
    fill(js, stream, 20)
    oc = js.ordered_consumer(stream, filter_subjects=[f"{stream.lower()}.x"], opt_start_seq=11)
    assert data(oc.fetch(5, max_wait=5)) == [10, 11, 12, 13, 14]
    js.delete_consumer(stream, oc.name)
    assert data(oc.fetch(3, max_wait=5)) == [15, 16, 17]  # rebuilt after 14
    assert int(oc.next().data) == 18
    got: List[int] = []
    done = threading.Event()

    def cb(msg: nats.Msg) -> None:
        got.append(int(msg.data))
        if len(got) == 11:
            done.set()

    cc = oc.consume(cb, max_messages=4, expires=2)
    fill(js, stream, 10, start=20)
    assert done.wait(20)
    cc.stop()
    assert got == list(range(19, 30))


def test_ordered_consumer_after_a_gap(js: JetStream, stream: str) -> None:
    """A consumer sequence that skips ahead makes a new link from the last stream seq."""
    fill(js, stream, 10)
    oc = js.ordered_consumer(stream)
    assert data(oc.fetch(3, max_wait=5)) == [0, 1, 2]
    oc._consumer_seq = 1  # as if sequence 3 of this consumer had been seen twice
    assert data(oc.fetch(3, max_wait=5)) == [3, 4, 5]
    assert oc.resets == 1


def test_ordered_consumer_carries_on_through_a_server_restart(
    server_factory: Callable[..., NATSServer],
) -> None:
    """Its memory consumer does not survive the restart: the chain is rebuilt from the last
    stream sequence, and the messages still come once each, in order."""
    srv = server_factory(jetstream=True)
    with nats.connect(srv.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1) as nc:
        js = nc.jetstream()
        js.add_stream(name="ORD", subjects=["ord"])  # file storage: the stream survives
        for i in range(20):
            js.publish("ord", str(i).encode())
        oc = js.ordered_consumer("ORD")
        got: List[int] = []
        with oc.messages(max_messages=5, expires=2) as it, stop_after(it, 90):
            for msg in it:
                got.append(int(msg.data))
                if len(got) == 10:
                    srv.restart()
                    for i in range(20, 30):
                        js.publish("ord", str(i).encode(), timeout=15)
                if len(got) == 30:
                    break
        assert got == list(range(30)) and oc.resets >= 1


def test_ordered_consumer_rebuilds_after_missed_heartbeats(
    server_factory: Callable[..., NATSServer],
) -> None:
    oc = _ordered_through_a_pause(server_factory(jetstream=True), "OHB")
    assert oc.resets >= 1


def test_ordered_heartbeat_alarm_is_configurable(
    server_factory: Callable[..., NATSServer],
) -> None:
    """The same pause, with an alarm at 1,000 intervals (200 s): no rebuild."""
    oc = _ordered_through_a_pause(server_factory(jetstream=True), "OHA", heartbeat_alarm=1000)
    assert oc.resets == 0
    for bad in (1, 0.5, "3", True, float("nan")):
        with pytest.raises(nats.InvalidArgumentError, match="heartbeat_alarm"):
            oc.messages(expires=2, heartbeat=0.2, heartbeat_alarm=bad)
        with pytest.raises(nats.InvalidArgumentError, match="heartbeat_alarm"):
            oc.consume(lambda m: None, expires=2, heartbeat=0.2, heartbeat_alarm=bad)


def _ordered_through_a_pause(srv: NATSServer, stream: str, **alarm: float) -> OrderedConsumer:
    """An ordered consumer (heartbeat 0.2 s) takes message 0, the server pauses for 1 s
    (no heartbeats while next() waits), then message 1 comes; the consumer, for its resets."""
    with nats.connect(srv.url, ping_interval=60) as nc:
        js = nc.jetstream()
        subject = stream.lower()
        js.add_stream(name=stream, subjects=[subject])
        js.publish(subject, b"0")
        oc = js.ordered_consumer(stream)
        with oc.messages(max_messages=5, expires=2, heartbeat=0.2, **alarm) as it:
            assert int(it.next(timeout=10).data) == 0
            srv.pause()

            def resume_and_publish() -> None:
                srv.resume()
                js.publish(subject, b"1", timeout=15)

            threading.Timer(1.0, resume_and_publish).start()
            assert int(it.next(timeout=20).data) == 1
        return oc


def test_heartbeat_alarm_is_set_per_consume(server_factory: Callable[..., NATSServer]) -> None:
    """Two consume loops lose their heartbeats together: the default alarm (2 intervals)
    goes off, one of 1,000 intervals (200 s) does not."""
    srv = server_factory(jetstream=True)
    errs = Errors()
    with nats.connect(srv.url, error_cb=errs, ping_interval=60) as nc:
        js = nc.jetstream()
        js.add_stream(name="HA", subjects=["ha"])
        quick = js.create_or_update_consumer("HA", durable_name="quick")
        patient = js.create_or_update_consumer("HA", durable_name="patient")
        for bad in (1, 0, -2, "3", True, None):
            with pytest.raises(nats.InvalidArgumentError, match="heartbeat_alarm"):
                patient.consume(lambda m: None, expires=2, heartbeat=0.2, heartbeat_alarm=bad)
            with pytest.raises(nats.InvalidArgumentError, match="heartbeat_alarm"):
                patient.messages(expires=2, heartbeat=0.2, heartbeat_alarm=bad)
            with pytest.raises(nats.InvalidArgumentError, match="heartbeat_alarm"):
                patient.fetch(1, max_wait=2, heartbeat=0.2, heartbeat_alarm=bad)
        c1 = quick.consume(lambda m: None, expires=2, heartbeat=0.2)
        c2 = patient.consume(lambda m: None, expires=2, heartbeat=0.2, heartbeat_alarm=1000)
        try:
            for name in ("quick", "patient"):
                wait_until(
                    lambda n=name: js.consumer_info("HA", n).num_waiting == 1,
                    what=f"the {name} pull",
                )
            srv.pause()
            try:
                wait_until(lambda: any("'quick'" in str(e) for e in alarms(errs)), what="the alarm")
            finally:
                srv.resume()
            assert not [e for e in alarms(errs) if "'patient'" in str(e)]
        finally:
            c1.stop()
            c2.stop()


def alarms(errs: Errors) -> List[Exception]:
    return [e for e in errs.seen if isinstance(e, nats.NoHeartbeatError)]
