"""Push subscriptions (ADR-15, seeds 001/003) against a real server; the trace log is the
witness for what goes on the wire (subscribe before create, flow-control replies, deletes)."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional, Set, Tuple

import pytest
from support import Errors, lose_the_create_race, our_ops

import jetstream_sync as nats
from jetstream_sync import AckPolicy, ConsumerConfig
from jetstream_sync._seam import core_of
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import drop_inbound, wait_until

STREAM_PREFIX = "PUSH"  # the shared stream fixture names its streams PUSH<n>


def subj(stream: str, tail: str = "x") -> str:
    return f"{stream.lower()}.{tail}"


def fill(js: JetStream, stream: str, n: int, tail: str = "x") -> None:
    for i in range(n):
        js.publish(subj(stream, tail), str(i).encode())


@pytest.fixture
def traced(
    server_factory: Callable[..., NATSServer], tmp_path: Path
) -> Iterator[Tuple[nats.Client, JetStream, Path]]:
    trace = tmp_path / "trace.log"
    srv = server_factory(jetstream=True, trace_log=str(trace))
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="T", subjects=["t.>"])
        yield nc, js, trace


# --- 1. checks before any server call -------------------------------------------------------


def test_argument_checks(js: JetStream, stream: str) -> None:
    s = subj(stream)
    with pytest.raises(nats.InvalidArgumentError, match="queue subscription cannot"):
        js.subscribe(s, queue="q", idle_heartbeat=1.0)
    with pytest.raises(nats.InvalidArgumentError, match="queue subscription cannot"):
        js.subscribe(s, queue="q", flow_control=True, idle_heartbeat=1.0)
    with pytest.raises(nats.InvalidArgumentError, match="needs an idle heartbeat"):
        js.subscribe(s, flow_control=True)
    with pytest.raises(nats.InvalidArgumentError, match="subject or a stream"):
        js.subscribe(None)
    with pytest.raises(nats.InvalidArgumentError, match="callable"):
        js.subscribe(s, cb="nope")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.subscribe(s, durable="a", config=ConsumerConfig(durable_name="b"))
    with pytest.raises(nats.BadSubjectError):
        js.subscribe("")
    with pytest.raises(nats.InvalidArgumentError, match="deliver_group 'g' differ"):
        js.subscribe(s, queue="q", config=ConsumerConfig(deliver_group="g"))
    with pytest.raises(nats.BadSubjectError, match=r"config\.deliver_subject"):
        js.subscribe(s, config=ConsumerConfig(deliver_subject="my.*"))
    with pytest.raises(nats.InvalidArgumentError, match="queue subscription cannot"):
        js.subscribe(s, config=ConsumerConfig(deliver_group="g"), idle_heartbeat=1.0)
    with pytest.raises(nats.InvalidArgumentError, match="heartbeat_alarm"):
        js.subscribe(s, idle_heartbeat=1.0, heartbeat_alarm=1)
    with pytest.raises(nats.InvalidArgumentError, match="heartbeat_alarm"):
        js.subscribe(s, ordered_consumer=True, heartbeat_alarm=0.5)
    assert js.consumer_names(stream) == []  # none of these made anything


def test_deliver_subject_and_group_from_the_config_are_used(js: JetStream, stream: str) -> None:
    # The library picks an inbox only when the config names no deliver subject (seed 001);
    # a deliver group in the config is the queue group (and so the durable name).
    s = subj(stream)
    sub = js.subscribe(s, config=ConsumerConfig(deliver_subject=f"own.{stream}"))
    assert js.consumer_info(stream, sub.consumer).config.deliver_subject == f"own.{stream}"
    fill(js, stream, 3)
    assert [sub.next_msg(timeout=5).data for _ in range(3)] == [b"0", b"1", b"2"]
    sub.unsubscribe()
    t = subj(stream, "t")
    a = js.subscribe(t, config=ConsumerConfig(deliver_group="team"))
    b = js.subscribe(t, queue="team")
    info = js.consumer_info(stream, "team")
    assert info.config.deliver_group == "team" and info.config.durable_name == "team"
    fill(js, stream, 20, tail="t")
    got: List[int] = []
    deadline = time.monotonic() + 30  # the 20 are split between a and b in no set way
    while len(got) < 20 and time.monotonic() < deadline:
        for sub in (a, b):
            with contextlib.suppress(nats.TimeoutError):
                got.append(int(sub.next_msg(timeout=0.2).data))
    for sub in (a, b):  # and nothing more
        with pytest.raises(nats.TimeoutError):
            sub.next_msg(timeout=0.3)
    assert sorted(got) == list(range(20))
    b.unsubscribe()
    a.unsubscribe()


# --- 2. the stream --------------------------------------------------------------------------


def test_stream_found_by_subject_or_a_clear_error(js: JetStream, stream: str) -> None:
    sub = js.subscribe(subj(stream))
    assert sub.stream == stream
    sub.unsubscribe()
    with pytest.raises(nats.StreamNotFoundError, match="no stream captures"):
        js.subscribe("nothing.captures.this")


# --- 3. checks of an existing consumer --------------------------------------------------------


def test_existing_consumer_checks(js: JetStream, stream: str) -> None:
    s = subj(stream)
    js.add_consumer(stream, durable_name="pull", ack_policy=AckPolicy.EXPLICIT)
    with pytest.raises(nats.InvalidArgumentError, match="pull consumer"):
        js.subscribe(s, durable="pull")
    js.add_consumer(stream, durable_name="grouped", deliver_subject="dg.x", deliver_group="g1")
    with pytest.raises(nats.InvalidArgumentError, match="queue group 'g1'"):
        js.subscribe(s, durable="grouped")
    with pytest.raises(nats.InvalidArgumentError, match="not 'g2'"):
        js.subscribe(s, durable="grouped", queue="g2")
    js.add_consumer(stream, durable_name="plain", deliver_subject="dp.x", filter_subject=s)
    with pytest.raises(nats.InvalidArgumentError, match="no deliver group"):
        js.subscribe(s, durable="plain", queue="q")
    with pytest.raises(nats.InvalidArgumentError, match="does not match the filter"):
        js.subscribe(subj(stream, "other"), durable="plain")
    with pytest.raises(nats.InvalidArgumentError, match="max_ack_pending"):
        js.subscribe(s, durable="plain", config=ConsumerConfig(max_ack_pending=3))
    first = js.subscribe(s, durable="plain")  # binds: the consumer exists
    with pytest.raises(nats.InvalidArgumentError, match="duplicate subscription"):
        wait_until(lambda: js.consumer_info(stream, "plain").push_bound, what="bound")
        js.subscribe(s, durable="plain")
    first.unsubscribe()
    assert "plain" in js.consumer_names(stream)  # not made by the library: never deleted
    js.add_consumer(
        stream,
        durable_name="beating",
        deliver_subject="db.x",
        deliver_group="g3",
        idle_heartbeat=5.0,
    )
    with pytest.raises(nats.InvalidArgumentError, match="not usable by a queue group"):
        js.subscribe(s, durable="beating", queue="g3")


def test_a_subject_captured_by_several_streams_is_a_clear_error(js: JetStream) -> None:
    js.add_stream(name="WIDE1", subjects=["wide.one"])
    js.add_stream(name="WIDE2", subjects=["wide.two"])
    try:
        with pytest.raises(nats.JetStreamError, match=r"several streams capture 'wide\.>'"):
            js.subscribe("wide.>")
    finally:
        js.delete_stream("WIDE1")
        js.delete_stream("WIDE2")


def test_deleting_what_it_made_fails_loudly(ejs: JetStream, errs: Errors, stream: str) -> None:
    # unsubscribe raises the delete's error; drain hands it to error_cb (seed 001).
    sub = ejs.subscribe(subj(stream), durable="gone")
    drained = ejs.subscribe(subj(stream, "y"), durable="gone2")
    ejs.delete_stream(stream)  # the consumers go with it: deleting them now fails
    with pytest.raises(nats.StreamNotFoundError):
        sub.unsubscribe()
    drained.drain(timeout=5)
    wait_until(lambda: nats.StreamNotFoundError in errs.kinds(), what="error_cb")


def test_ack_policy_none_ignores_acks_on_push(js: JetStream, stream: str) -> None:
    sub = js.subscribe(subj(stream), config=ConsumerConfig(ack_policy=AckPolicy.NONE))
    fill(js, stream, 2)
    msgs = [sub.next_msg(timeout=5) for _ in range(2)]
    before = js.nc.stats["out_msgs"]
    for m in msgs:
        m.ack()
        m.nak()
        m.term()
    assert js.nc.stats["out_msgs"] == before  # nothing was sent
    sub.unsubscribe()


# --- 4, 5, 7: queue durable, subscribe before create, deletion ---------------------------------


def test_subscribe_before_create_and_delete_on_unsubscribe(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    nc, js, trace = traced
    sub = js.subscribe("t.x", durable="made")
    info = js.consumer_info("T", "made")
    deliver = info.config.deliver_subject
    assert deliver and deliver.startswith("_INBOX.")
    sub.unsubscribe()
    nc.flush()
    ops = our_ops(trace)
    i_sub = next(i for i, op in enumerate(ops) if op.startswith(f"SUB {deliver} "))
    i_create = next(i for i, op in enumerate(ops) if "CONSUMER.CREATE.T.made" in op)
    i_delete = next(i for i, op in enumerate(ops) if "CONSUMER.DELETE.T.made" in op)
    assert i_sub < i_create < i_delete
    with pytest.raises(nats.ConsumerNotFoundError):
        js.consumer_info("T", "made")


def test_a_drain_that_times_out_still_deletes_what_it_made(js: JetStream, stream: str) -> None:
    fill(js, stream, 3)
    release = threading.Event()
    handled: List[bytes] = []

    def slow(msg: nats.Msg) -> None:
        release.wait(30)
        handled.append(msg.data)

    sub = js.subscribe(subj(stream), durable="slow", cb=slow)
    wait_until(lambda: sub.pending_msgs == 2, what="two messages queued behind the first")
    with pytest.raises(nats.TimeoutError, match="still busy"):
        sub.drain(timeout=0.2)
    assert "slow" in js.consumer_names(stream)  # the callback still has work: kept for now
    release.set()
    wait_until(lambda: "slow" not in js.consumer_names(stream), what="deleted after the callback")
    assert handled == [b"0", b"1", b"2"]
    # next_msg mode: nobody will take what is queued, so it goes at once, as on unsubscribe.
    sub = js.subscribe(subj(stream), durable="idle")
    wait_until(lambda: sub.pending_msgs == 3, what="three messages queued")
    with pytest.raises(nats.TimeoutError, match="not taken"):
        sub.drain(timeout=0.2)
    assert "idle" not in js.consumer_names(stream)


@pytest.mark.smoke
def test_queue_name_is_the_durable_and_members_share(js: JetStream, stream: str) -> None:
    got: List[Tuple[int, bytes]] = []
    lock = threading.Lock()

    def member(n: int) -> Callable[[nats.Msg], None]:
        def cb(msg: nats.Msg) -> None:
            with lock:
                got.append((n, msg.data))

        return cb

    a = js.subscribe(subj(stream), queue="workers", cb=member(1))
    b = js.subscribe(subj(stream), queue="workers", cb=member(2))
    info = js.consumer_info(stream, "workers")
    assert info.config.deliver_group == "workers"
    fill(js, stream, 50)
    wait_until(lambda: len(got) == 50, what="all 50")
    assert sorted(int(d) for _, d in got) == list(range(50))
    # a made the consumer, but b is still bound when a leaves: it stays for b.
    a.drain(timeout=10)
    assert js.consumer_info(stream, "workers").name == "workers"
    b.drain(timeout=10)  # b only bound to it: b never deletes it
    assert "workers" in js.consumer_names(stream)
    # The creator leaving last does delete it.
    c = js.subscribe(subj(stream), queue="crew", cb=member(3))
    d = js.subscribe(subj(stream), queue="crew", cb=member(4))
    d.drain(timeout=10)
    c.drain(timeout=10)
    wait_until(lambda: "crew" not in js.consumer_names(stream), what="deleted")


# --- 8. acks ------------------------------------------------------------------------------------


@pytest.mark.smoke
def test_callbacks_ack_unless_manual(js: JetStream, stream: str) -> None:
    fill(js, stream, 10)
    seen: List[bytes] = []
    auto = js.subscribe(subj(stream), durable="auto", cb=lambda m: seen.append(m.data))
    wait_until(lambda: len(seen) == 10, what="auto")
    js.nc.flush()
    wait_until(lambda: js.consumer_info(stream, "auto").num_ack_pending == 0, what="acked")
    manual: List[nats.Msg] = []
    man = js.subscribe(subj(stream), durable="man", cb=manual.append, manual_ack=True)
    wait_until(lambda: len(manual) == 10, what="manual")
    js.nc.flush()
    assert js.consumer_info(stream, "man").num_ack_pending == 10
    for m in manual:
        m.ack()
    js.nc.flush()
    wait_until(lambda: js.consumer_info(stream, "man").num_ack_pending == 0, what="acked")
    auto.unsubscribe()
    man.unsubscribe()


# --- 9. status management ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["next_msg", "callback"])
def test_flow_control_answered_once_each_and_statuses_never_handed_out(
    traced: Tuple[nats.Client, JetStream, Path], mode: str
) -> None:
    nc, js, trace = traced
    payload = b"x" * 4096
    subject = f"t.big{mode}"
    for _ in range(800):  # enough bytes for the server to ask for flow control
        js.publish_async(subject, payload)
    js.publish_async_completed(timeout=30)
    # Heartbeats 30 s apart: a stalled consumer's heartbeat (also answered) cannot come to
    # the rescue within the waits below, so only answers where messages are handed out
    # let all 800 through.
    if mode == "next_msg":
        sub = js.subscribe(subject, idle_heartbeat=30, flow_control=True)
        got = [sub.next_msg(timeout=20) for _ in range(800)]
    else:  # answered on the callback thread, where the message before it is handed over
        got = []
        sub = js.subscribe(subject, cb=got.append, idle_heartbeat=30, flow_control=True)
        wait_until(lambda: len(got) >= 800, 20, "800 messages through the callback")
    assert len(got) == 800
    assert all(m.status is None and m.data == payload for m in got)
    nc.flush()
    replies = [op for op in our_ops(trace) if op.startswith("PUB $JS.FC.")]
    assert replies, "the server asked for flow control and got no reply"
    assert len(replies) == len(set(replies))  # each subject once
    sub.unsubscribe()


def test_missing_heartbeats_are_reported(server_factory: Callable[..., NATSServer]) -> None:
    srv = server_factory(jetstream=True)
    errs = Errors()
    with nats.connect(srv.url, error_cb=errs, ping_interval=60) as nc:
        js = nc.jetstream()
        js.add_stream(name="HB", subjects=["hb"])
        sub = js.subscribe("hb", idle_heartbeat=0.2)
        srv.pause()
        try:
            wait_until(lambda: nats.NoHeartbeatError in errs.kinds(), what="the alarm")
        finally:
            srv.resume()
        js.publish("hb", b"after", timeout=10)
        assert sub.next_msg(timeout=10).data == b"after"
        sub.unsubscribe()


def test_subscribe_bind(js: JetStream, stream: str) -> None:
    js.add_consumer(
        stream, durable_name="bound", deliver_subject="bound.here", ack_policy=AckPolicy.EXPLICIT
    )
    fill(js, stream, 3)
    sub = js.subscribe_bind(stream, "bound")
    assert [sub.next_msg(timeout=5).data for _ in range(3)] == [b"0", b"1", b"2"]
    sub.unsubscribe()
    assert "bound" in js.consumer_names(stream)  # bound, not made: kept
    with pytest.raises(nats.ConsumerNotFoundError):
        js.subscribe_bind(stream, "missing")


# --- 11. fault injection, and the stalled-heartbeat path ---------------------------------------


def test_drop_inbound_drops_what_it_is_told(nc: nats.Client) -> None:
    sub = nc.subscribe("drops")
    with drop_inbound(nc, lambda m: m.data == b"lost") as dropped:
        for data in (b"a", b"lost", b"b"):
            nc.publish("drops", data)
        nc.flush()
        got = [sub.next_msg(timeout=5).data for _ in range(2)]
    assert got == [b"a", b"b"] and [m.data for m in dropped] == [b"lost"]
    nc.publish("drops", b"lost")  # the filter is gone with the context
    assert sub.next_msg(timeout=5).data == b"lost"


def is_flow_control(msg: nats.Msg) -> bool:
    return (
        msg._hdr is not None
        and msg.status == 100
        and "flowcontrol" in (msg.description.lower().replace(" ", ""))
    )


def test_flow_control_stall_recovers_through_stalled_heartbeats(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    nc, js, trace = traced
    payload = b"y" * 4096
    for _ in range(800):
        js.publish_async("t.stall", payload)
    js.publish_async_completed(timeout=30)
    with drop_inbound(nc, is_flow_control) as dropped:
        sub = js.subscribe("t.stall", idle_heartbeat=0.3, flow_control=True)
        got = [sub.next_msg(timeout=20) for _ in range(800)]
    assert len(got) == 800 and dropped, "no flow-control request was dropped"
    nc.flush()
    answered = {op.split()[1] for op in our_ops(trace) if op.startswith("PUB $JS.FC.")}
    # Every flow-control request was dropped, yet flow-control subjects were answered and all
    # 800 messages came: the answers went out for Nats-Consumer-Stalled heartbeats.
    assert answered
    stalled = [
        line
        for line in trace.read_text(errors="replace").splitlines()
        if "Nats-Consumer-Stalled" in line
    ]
    assert stalled and all(any(subject in line for line in stalled) for subject in answered)
    sub.unsubscribe()


# --- 10. ordered push consumers ---------------------------------------------------------------


def stream_seq(msg: nats.Msg) -> int:
    return msg.metadata.sequence.stream


def drop_once(targets: Set[int]) -> Callable[[nats.Msg], bool]:
    """A filter dropping each chosen stream sequence the first time it arrives."""

    def pick(msg: nats.Msg) -> bool:
        if msg._hdr is None and msg.reply.startswith("$JS.ACK."):
            seq = stream_seq(msg)
            if seq in targets:
                targets.discard(seq)
                return True
        return False

    return pick


@pytest.mark.parametrize("which", ["one percent", "the first", "the last"])
@pytest.mark.smoke
def test_ordered_push_consumer_delivers_everything_in_order(
    server_factory: Callable[..., NATSServer], which: str
) -> None:
    srv = server_factory(jetstream=True)
    n = 50_000
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="ORD", subjects=["ord"])
        for i in range(n):
            js.publish_async("ord", str(i).encode())
        js.publish_async_completed(timeout=60)
        targets = {
            "one percent": set(range(37, n + 1, 100)),
            "the first": {1},
            "the last": {n},
        }[which]
        wanted = len(targets)
        with drop_inbound(nc, drop_once(targets)) as dropped:
            sub = js.subscribe("ord", ordered_consumer=True, idle_heartbeat=0.5)
            got = [int(sub.next_msg(timeout=30).data) for _ in range(n)]
        assert got == list(range(n))
        assert len(dropped) == wanted and sub.resets >= 1

        def current() -> Optional[nats.ConsumerInfo]:
            try:  # a relink may be finishing in the background: look until it has
                return js.consumer_info("ORD", sub.consumer)
            except nats.ConsumerNotFoundError:
                return None

        info = wait_until(current, what="the current link's info").config
        assert info.ack_policy == AckPolicy.NONE and info.max_deliver == 1
        assert info.flow_control and info.mem_storage and info.num_replicas == 1
        sub.unsubscribe()


def test_ordered_push_consumer_argument_checks(js: JetStream, stream: str) -> None:
    for kwargs in ({"durable": "d"}, {"queue": "q"}, {"manual_ack": True}):
        with pytest.raises(nats.InvalidArgumentError, match="ordered consumer"):
            js.subscribe(subj(stream), ordered_consumer=True, **kwargs)
    for config in (ConsumerConfig(deliver_subject="d.x"), ConsumerConfig(deliver_group="g")):
        with pytest.raises(nats.InvalidArgumentError, match="new inbox for every link"):
            js.subscribe(subj(stream), ordered_consumer=True, config=config)


def test_ordered_push_consumer_survives_a_server_restart(
    server_factory: Callable[..., NATSServer],
) -> None:
    srv = server_factory(jetstream=True)
    with nats.connect(srv.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1) as nc:
        js = nc.jetstream()
        js.add_stream(name="OR", subjects=["or"])  # file storage: the stream survives
        for i in range(10):
            js.publish("or", str(i).encode())
        sub = js.subscribe("or", ordered_consumer=True, idle_heartbeat=0.5)
        got = [int(sub.next_msg(timeout=10).data) for _ in range(10)]
        srv.restart()  # the memory consumer is gone after this
        for i in range(10, 20):
            js.publish("or", str(i).encode(), timeout=15)
        got += [int(sub.next_msg(timeout=30).data) for _ in range(10)]
        assert got == list(range(20)) and sub.resets >= 1
        sub.unsubscribe()


# --- 6. the "already exists" race ---------------------------------------------------------------


def test_consumer_made_by_someone_else_meanwhile_is_joined(
    js: JetStream, stream: str, nats_server: NATSServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup says 'not found', another process creates the durable before our create:
    the library looks it up again, checks it, and subscribes to its deliver subject."""
    lose_the_create_race(
        js,
        monkeypatch,
        nats_server.url,
        deliver_subject="raced.deliver",
        filter_subject=subj(stream),
        ack_policy=AckPolicy.EXPLICIT,
    )
    sub = js.subscribe(subj(stream), durable="racy")
    assert js.consumer_info(stream, "racy").config.deliver_subject == "raced.deliver"
    fill(js, stream, 3)
    assert [sub.next_msg(timeout=5).data for _ in range(3)] == [b"0", b"1", b"2"]
    sub.unsubscribe()
    assert "racy" in js.consumer_names(stream)  # not made by this subscription: kept


def test_gaps_are_reported_but_not_for_queue_groups(
    ejs: JetStream, errs: Errors, stream: str
) -> None:
    js, nc, name = ejs, ejs.nc, stream
    fill(js, name, 5)
    with drop_inbound(nc, drop_once({3})):
        sub = js.subscribe(subj(name), durable="gappy")
        got = [sub.next_msg(timeout=5).data for _ in range(4)]
    assert got == [b"0", b"1", b"3", b"4"]  # stream seq 3 (data "2") was lost
    wait_until(lambda: nats.ConsumerSequenceMismatchError in errs.kinds(), what="the gap")
    assert "expected 3, got 4" in str(errs.seen[-1])
    sub.unsubscribe()
    errs.seen.clear()
    with drop_inbound(nc, drop_once({2})):
        qsub = js.subscribe(subj(name), queue="crew")
        assert len([qsub.next_msg(timeout=5) for _ in range(4)]) == 4
    nc.flush()
    assert nats.ConsumerSequenceMismatchError not in errs.kinds()
    qsub.unsubscribe()


def test_error_statuses_are_raised_not_handed_out(js: JetStream, stream: str) -> None:
    """409 / 503 / unknown statuses on a push subscription are errors (seed 003). The server
    has no easy way to send one on demand, so one is put where it would arrive."""
    sub = js.subscribe(subj(stream))
    for line, cls in (
        ("409 Consumer Deleted", nats.ConsumerDeletedError),
        ("503", nats.NoConsumerResponseError),
        ("418 Something New", nats.PullStatusError),
    ):
        hdr = f"NATS/1.0 {line}\r\n\r\n".encode()
        sub._sub._deliver(nats.Msg(sub._sub.subject, "", b"", sub._sub.sid, hdr, js.nc))
        with pytest.raises(cls):
            sub.next_msg(timeout=5)
    fill(js, stream, 1)
    assert sub.next_msg(timeout=5).data == b"0"  # and the subscription goes on
    sub.unsubscribe()


def test_error_statuses_in_callback_mode_go_to_error_cb(
    ejs: JetStream, errs: Errors, stream: str
) -> None:
    got: List[bytes] = []
    sub = ejs.subscribe(subj(stream), cb=lambda m: got.append(m.data))
    hdr = b"NATS/1.0 409 Consumer Deleted\r\n\r\n"
    sub._sub._deliver(nats.Msg(sub._sub.subject, "", b"", sub._sub.sid, hdr, ejs.nc))
    wait_until(lambda: nats.ConsumerDeletedError in errs.kinds(), what="error_cb")
    ejs.publish(subj(stream), b"after")
    wait_until(lambda: got == [b"after"], what="the next message")  # never the status
    sub.unsubscribe()


# --- issue 17: restarts rebind, a subject and a config filter must agree -------------------


def test_a_restarted_push_durable_binds_with_the_config_it_always_had(
    js: JetStream, stream: str
) -> None:
    cfg = ConsumerConfig(
        ack_wait=0.25, headers_only=False, max_deliver=0, metadata={"team": "push"}
    )
    first = js.subscribe(subj(stream, "*"), durable="again", config=cfg, manual_ack=True)
    fill(js, stream, 2, "a")
    first.next_msg(timeout=5).ack_sync()
    # A process that stops without unsubscribing: the durable stays and is no longer bound.
    core_of(js.nc).unsubscribe(first._sub)
    wait_until(lambda: not js.consumer_info(stream, "again").push_bound, 10, "unbound")
    # The server added _nats.* metadata and left out False/0: the same config binds again.
    second = js.subscribe(subj(stream, "*"), durable="again", config=cfg, manual_ack=True)
    msg = second.next_msg(timeout=5)
    assert msg.data == b"1"
    msg.ack_sync()
    second.unsubscribe()
    # The server marks the durable unbound a moment after our UNSUB; until then a subscribe
    # is rightly refused as a duplicate, before its config is compared.
    wait_until(lambda: not js.consumer_info(stream, "again").push_bound, 10, "unbound again")
    with pytest.raises(nats.InvalidArgumentError, match=r"another configuration.*metadata"):
        js.subscribe(subj(stream, "*"), durable="again", config=ConsumerConfig(metadata={"x": "y"}))


def test_push_subject_and_config_filter_that_differ_are_refused(js: JetStream, stream: str) -> None:
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.subscribe(subj(stream, "a"), config=ConsumerConfig(filter_subject=subj(stream, "b")))
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.subscribe(
            subj(stream, "a"),
            ordered_consumer=True,
            config=ConsumerConfig(filter_subject=subj(stream, "b")),
        )
    assert js.consumer_names(stream) == []


def test_a_queue_durables_maker_leaving_alone_deletes_it_every_time(
    js: JetStream, stream: str
) -> None:
    # The server updates push_bound a little after our UNSUB: read once, it said "bound" in
    # about 5 % of leaves and the durable stayed behind (found by the usage matrix).
    for i in range(20):
        sub = js.subscribe(subj(stream, "*"), queue=f"q{i}")
        fill(js, stream, 1, "a")
        sub.next_msg(timeout=5).ack_sync()
        sub.unsubscribe()
        assert f"q{i}" not in js.consumer_names(stream), f"left behind on round {i}"


def test_ordered_pull_chains_are_deleted_on_leaving(js: JetStream, stream: str) -> None:
    fill(js, stream, 3, "a")
    oc = js.ordered_consumer(stream, filter_subjects=[subj(stream, "*")])
    with oc.messages() as it:
        assert next(it).data == b"0"
    wait_until(lambda: js.consumer_names(stream) == [], 5, "the link deleted")
    assert oc.next(timeout=5).data == b"1"  # a new link, after the last message handed out
    with oc:
        assert oc.next(timeout=5).data == b"2"
    wait_until(lambda: js.consumer_names(stream) == [], 5, "the link deleted")


def test_a_pattern_subject_may_cover_the_configs_filter_subjects(
    js: JetStream, stream: str
) -> None:
    # nats-py's subscribe("events.>", config=ConsumerConfig(filter_subjects=[...])).
    config = ConsumerConfig(filter_subjects=[subj(stream, "1"), subj(stream, "2")])
    sub = js.subscribe(subj(stream, ">"), "f", config=config)
    for i in range(4):
        js.publish(subj(stream, str(i)), str(i).encode())
    got = sorted(sub.next_msg(timeout=5).data for _ in range(2))
    assert got == [b"1", b"2"]
    wait_until(lambda: sub.consumer_info().num_pending == 0, 5, "nothing else to deliver")
    with pytest.raises(nats.TimeoutError):
        sub.next_msg(timeout=0.2)
    with pytest.raises(nats.InvalidArgumentError, match="nor a pattern covering"):
        js.subscribe(subj(stream, "*.x"), "g", config=config)


def test_unsubscribing_or_draining_an_ended_subscription_is_bad_subscription(
    js: JetStream, stream: str
) -> None:
    # As a core subscription and nats-py.
    first = js.subscribe(subj(stream, "*"), queue="q")
    second = js.subscribe(subj(stream, "*"), queue="q")
    first.unsubscribe()
    second.drain()
    for ended in (first, second):
        with pytest.raises(nats.BadSubscriptionError, match="has ended"):
            ended.unsubscribe()
        with pytest.raises(nats.BadSubscriptionError, match="has ended"):
            ended.drain()
    ordered = js.subscribe(subj(stream, "*"), ordered_consumer=True)
    ordered.unsubscribe()
    with pytest.raises(nats.BadSubscriptionError, match="has ended"):
        ordered.unsubscribe()


def test_binding_refusals_carry_natspy_description(js: JetStream, stream: str) -> None:
    # nats-py raises its js Error there and code reads .description.
    js.subscribe(subj(stream, "*"), durable="single", cb=lambda m: None)
    with pytest.raises(nats.InvalidArgumentError, match="duplicate subscription") as err:
        js.subscribe(subj(stream, "*"), durable="single")
    assert err.value.description == "consumer is already bound to a subscription"
    with pytest.raises(nats.InvalidArgumentError, match="no deliver group") as err:
        js.subscribe(subj(stream, "*"), queue="foo", durable="single")
    assert err.value.description == "cannot create queue subscription 'foo' to consumer 'single'"
    assert nats.InvalidArgumentError("plain").description == "plain"


def test_close_with_a_flow_control_reply_queued_leaves_the_callback_thread_alone(
    server_factory: Callable[..., NATSServer],
) -> None:
    """nats-py raises nothing when the client closes before a queued flow-control request
    is handed out; here its answer was a publish on a closed client, whose
    ConnectionClosedError killed the subscription's callback thread. The request is handed
    out after close() directly: on the callback thread it is a race."""
    srv = server_factory(jetstream=True)
    nc = nats.connect(srv.url)
    js = nc.jetstream()
    js.add_stream(name="FC", subjects=["fc"])
    sub = js.subscribe("fc", cb=lambda m: None, idle_heartbeat=30, flow_control=True)
    fc = nats.Msg("fc", "$JS.FC.FC.x.1", b"", 1, b"NATS/1.0 100 FlowControl Request\r\n\r\n")
    nc.close()
    assert sub._on_take(fc) is True  # taken as a status, nothing raised
