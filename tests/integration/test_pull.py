"""pull_subscribe and fetch (ADR-13, seed 000) against a real server.

The wire tests read the server's trace log: it shows each SUB, UNSUB and pull body as the
server received them, which is what seed 000 prescribes.
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, List, Tuple

import pytest
from support import lose_the_create_race

import jetstream_sync as nats
from jetstream_sync import AckPolicy, ConsumerConfig
from jetstream_sync._seam import core_of
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name, wait_until

STREAM_PREFIX = "PULL"  # the shared stream fixture names its streams PULL<n>


def subj(stream: str, tail: str = "x") -> str:
    return f"{stream.lower()}.{tail}"


def publish(js: JetStream, stream: str, n: int, tail: str = "x") -> None:
    for i in range(n):
        js.publish(subj(stream, tail), str(i).encode())


# --- the wire, as the server saw it -------------------------------------------------------


def client_ops(trace: Path) -> List[Tuple[str, str]]:
    """(operation line, payload or '') of every op our client sent, in order."""
    ops: List[Tuple[str, str]] = []
    for line in trace.read_text(errors="replace").splitlines():
        if "python3-sync" not in line or "<<- " not in line:
            continue
        body = line.split("<<- ", 1)[1]
        if body.startswith("MSG_PAYLOAD: "):
            if ops:
                ops[-1] = (ops[-1][0], json.loads(body[len("MSG_PAYLOAD: ") :])[0])
        else:
            ops.append((body.strip("[]"), ""))
    return ops


def pull_ops(ops: List[Tuple[str, str]]) -> List[Tuple[str, str]]:
    """Only what a fetch sends: SUB/UNSUB of inboxes and the pull requests."""
    keep = []
    for op, payload in ops:
        if op.startswith(("SUB _INBOX", "UNSUB")) or "CONSUMER.MSG.NEXT" in op:
            keep.append((op, payload))
    return keep


def publish_to_the_long_pull(
    js: JetStream, stream: str, durable: str, subject: str, data: bytes = b"0"
) -> None:
    """In a thread: publish ``data`` once ``durable`` has a pull waiting, so the fetch's long
    pull gets it (a timer could fire before the no_wait pull on a loaded machine)."""

    def publish_when_waited_for() -> None:
        wait_until(lambda: js.consumer_info(stream, durable).num_waiting == 1, what="a pull")
        js.publish(subject, data)

    threading.Thread(target=publish_when_waited_for, daemon=True).start()


@pytest.fixture
def traced(
    server_factory: Callable[..., NATSServer], tmp_path: Path
) -> Iterator[Tuple[nats.Client, JetStream, Path]]:
    trace = tmp_path / "trace.log"
    srv = server_factory(jetstream=True, trace_log=str(trace))
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="W", subjects=["w.>"])
        yield nc, js, trace


def test_fetch_n_wire_no_wait_then_long_pull(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    nc, js, trace = traced
    psub = js.pull_subscribe("w.x", durable="d")
    with pytest.raises(nats.TimeoutError):
        psub.fetch(5, timeout=1.0)
    nc.flush()
    ops = pull_ops(client_ops(trace))
    (sub, _), (pub1, body1), (unsub_n, _), (pub2, body2), (unsub, _) = ops[-5:]
    sid = sub.split()[-1]
    inbox = sub.split()[1]
    assert pub1.startswith(f"PUB $JS.API.CONSUMER.MSG.NEXT.W.d {inbox} ")
    assert body1 == '{"batch":5,"no_wait":true}'
    assert unsub_n == f"UNSUB {sid} 6"  # batch + 1: the 404 counted
    assert pub2.startswith(f"PUB $JS.API.CONSUMER.MSG.NEXT.W.d {inbox} ")
    long = json.loads(body2)
    assert set(long) == {"batch", "expires"} and long["batch"] == 5
    # expires: the timeout less the 100 ms margin, less what the no_wait round took.
    assert 0 < long["expires"] <= 0.9e9
    assert unsub == f"UNSUB {sid}"  # the 408 ended it with interest left: removed


def test_fetch_n_with_messages_waiting_needs_no_long_pull(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    nc, js, trace = traced
    psub = js.pull_subscribe("w.x", durable="d")
    publish_w = [js.publish("w.x", str(i).encode()) for i in range(3)]
    assert len(publish_w) == 3
    msgs = psub.fetch(5, timeout=5)
    assert [m.data for m in msgs] == [b"0", b"1", b"2"]
    nc.flush()
    ops = pull_ops(client_ops(trace))
    sub, pub, unsub = ops[-3:]
    sid = sub[0].split()[-1]
    assert pub[1] == '{"batch":5,"no_wait":true}'
    assert unsub[0] == f"UNSUB {sid}"
    assert not any('"expires"' in payload for _, payload in ops)


def test_fetch_one_uses_the_subscription_wildcard_inbox(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    nc, js, trace = traced
    psub = js.pull_subscribe("w.x", durable="d")
    for i in range(3):
        js.publish("w.x", str(i).encode())
    got = [psub.fetch(timeout=5)[0].data for _ in range(3)]
    assert got == [b"0", b"1", b"2"]
    nc.flush()
    ops = pull_ops(client_ops(trace))
    pulls = [(op, body) for op, body in ops if "MSG.NEXT" in op]
    prefix = pulls[-1][0].split()[2].rsplit(".", 1)[0] + "."
    wildcard = [op for op, _ in ops if op.startswith(f"SUB {prefix}* ")]
    assert len(wildcard) == 1  # made once, on the first fetch(1)
    assert [op.split()[2] for op, _ in pulls[-3:]] == [f"{prefix}1", f"{prefix}2", f"{prefix}3"]
    assert {body for _, body in pulls[-3:]} == {'{"batch":1,"no_wait":true}'}
    assert not [op for op, _ in ops if op.startswith("UNSUB")]  # nothing to clean up


def test_fetch_one_waits_with_a_long_pull_on_a_fresh_inbox(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    nc, js, trace = traced
    psub = js.pull_subscribe("w.x", durable="d")
    publish_to_the_long_pull(js, "W", "d", "w.x", b"late")
    assert [m.data for m in psub.fetch(timeout=5)] == [b"late"]
    nc.flush()
    ops = pull_ops(client_ops(trace))
    pulls = [(op, json.loads(body)) for op, body in ops if "MSG.NEXT" in op]
    assert pulls[0][1] == {"batch": 1, "no_wait": True}
    assert pulls[1][1]["batch"] == 1 and pulls[1][1]["expires"] > 0
    inbox = pulls[1][0].split()[2]
    sid = next(op.split()[-1] for op, _ in ops if op.startswith(f"SUB {inbox} "))
    assert (f"UNSUB {sid} 1", "") in ops  # served by one message: no interest left


def test_heartbeat_goes_in_the_long_pull(traced: Tuple[nats.Client, JetStream, Path]) -> None:
    nc, js, trace = traced
    psub = js.pull_subscribe("w.x", durable="d")
    with pytest.raises(nats.TimeoutError):  # alarm out of reach: only the timeout ends it
        psub.fetch(2, timeout=1.5, heartbeat=0.2, heartbeat_alarm=100)
    nc.flush()
    long = [json.loads(b) for op, b in pull_ops(client_ops(trace)) if '"expires"' in b]
    assert long[-1]["idle_heartbeat"] == 200_000_000


# --- behaviour ----------------------------------------------------------------------------


@pytest.mark.smoke
def test_fetch_returns_what_is_there_and_acks_work(js: JetStream, stream: str) -> None:
    psub = js.pull_subscribe(subj(stream), durable="w")
    publish(js, stream, 10)
    first = psub.fetch(4)
    rest = psub.fetch(100, timeout=2)
    assert [m.data for m in first + rest] == [str(i).encode() for i in range(10)]
    for m in first + rest:
        assert m.metadata.stream == stream and m.metadata.consumer == "w"
        m.ack()
    js.nc.flush()
    wait_until(lambda: js.consumer_info(stream, "w").num_ack_pending == 0, what="acks")


def test_fetch_that_gets_nothing_times_out_without_surfacing_statuses(
    js: JetStream, stream: str
) -> None:
    psub = js.pull_subscribe(subj(stream), durable="w")
    for batch in (1, 3):
        started = time.monotonic()
        with pytest.raises(nats.TimeoutError, match="no message"):
            psub.fetch(batch, timeout=0.5)
        assert time.monotonic() - started < 5  # bounded by its timeout, not hanging
    assert psub.pending == 0  # the 404s and 408s were not kept as messages
    publish(js, stream, 1)
    assert [m.data for m in psub.fetch(3, timeout=5)] == [b"0"]


def trace_lines(trace: Path) -> List[str]:
    return trace.read_text(errors="replace").splitlines()


def test_a_pull_left_early_stays_until_it_ends_and_what_it_sends_is_kept(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    _, js, trace = traced
    psub = js.pull_subscribe("w.x", durable="d")
    publish_to_the_long_pull(js, "W", "d", "w.x")
    assert [m.data for m in psub.fetch(10, timeout=6)] == [b"0"]
    # The long pull asked for 10 and got 1: it is live at the server until its expiry. Its
    # inbox stays, so what it delivers now is kept for the next fetch, not sent to no one.
    assert js.consumer_info("W", "d").num_waiting == 1
    js.publish("w.x", b"1")
    wait_until(lambda: psub.pending == 1, what="the message kept for the next fetch")
    again = psub.fetch(10, timeout=5)
    assert [(m.data, m.metadata.num_delivered) for m in again] == [(b"1", 1)]
    # It ends at its expiry, with the server's 408; only then does the UNSUB go out.
    wait_until(lambda: js.consumer_info("W", "d").num_waiting == 0, 15, "the pull's expiry")
    ops = pull_ops(client_ops(trace))
    inbox = next(op for op, body in ops if '"expires"' in body).split()[2]
    sid = next(op.split()[-1] for op, _ in ops if op.startswith(f"SUB {inbox} "))

    def unsub_line() -> int:
        lines = trace_lines(trace)
        return next((n for n, ln in enumerate(lines) if f"<<- [UNSUB {sid}]" in ln), 0)

    at = wait_until(unsub_line, 10, "the UNSUB once the pull ended")
    timeout_408 = [
        n for n, ln in enumerate(trace_lines(trace)) if f"->> [HMSG {inbox} {sid} " in ln
    ]
    assert timeout_408 and timeout_408[-1] < at, "the UNSUB went out before the pull ended"


def test_a_message_for_a_pull_left_early_is_not_lost_on_a_leafnode_server(
    server_factory: Callable[..., NATSServer],
) -> None:
    """A server that accepts leafnode (or gateway) connections counts a pull under 2 s old
    as wanted even when nobody is subscribed to its inbox. Had fetch removed the inbox of
    the pull it left early, the next message would go to nobody; with max_deliver=1 it
    would never come again."""
    srv = server_factory(jetstream=True, config="leafnodes { listen: 127.0.0.1:-1 }\n")
    with nats.connect(srv.url) as nc, nats.connect(srv.url) as other:
        js, ojs = nc.jetstream(), other.jetstream()
        js.add_stream(name="LF", subjects=["lf.>"])
        psub = js.pull_subscribe("lf.x", durable="w", config=ConsumerConfig(max_deliver=1))
        publish_to_the_long_pull(ojs, "LF", "w", "lf.x", b"first")
        first = psub.fetch(5, timeout=10)
        assert [m.data for m in first] == [b"first"]
        nc.flush()  # all that fetch sent has reached the server
        ojs.publish("lf.x", b"second")
        again = psub.fetch(5, timeout=5)
        assert [(m.data, m.metadata.num_delivered) for m in again] == [(b"second", 1)]
        for m in first + again:
            m.ack()


def test_a_pull_left_early_and_then_served_in_full_is_not_waited_for(
    js: JetStream, stream: str
) -> None:
    """The pull a fetch left early asked for 2 and sends its second message later: then it
    is over (the server dropped its inbox at the UNSUB count), and a fetch after that pulls
    anew at once instead of waiting for that pull's expiry (30 s here)."""
    psub = js.pull_subscribe(subj(stream), durable="w")
    publish_to_the_long_pull(js, stream, "w", subj(stream))
    assert [m.data for m in psub.fetch(2, timeout=30)] == [b"0"]
    js.publish(subj(stream), b"1")
    wait_until(lambda: psub.pending == 1, what="the pull's second message, kept")
    assert [m.data for m in psub.fetch(2, timeout=5)] == [b"1"]
    js.publish(subj(stream), b"2")
    assert [m.data for m in psub.fetch(2, timeout=5)] == [b"2"]


def test_a_reconnect_ends_the_wait_for_a_pull_left_early(
    server_factory: Callable[..., NATSServer],
) -> None:
    """A crashed and restarted server has forgotten the pull a fetch left early, and had
    no time to say so: the next fetch must not wait for it (it would until that pull's
    expiry, 120 s here), but pull anew."""
    srv = server_factory(jetstream=True)
    reconnected = threading.Event()
    with nats.connect(
        srv.url,
        reconnect_time_wait=0.1,
        max_reconnect_attempts=-1,
        reconnected_cb=reconnected.set,
    ) as nc:
        js = nc.jetstream()
        js.add_stream(name="RS", subjects=["rs.>"])  # file storage: it survives the restart
        psub = js.pull_subscribe("rs.x", durable="w")
        publish_to_the_long_pull(js, "RS", "w", "rs.x")
        assert [m.data for m in psub.fetch(10, timeout=120)] == [b"0"]
        srv.kill()  # no goodbye to the pull (a stop would end it with a status)
        srv.start()
        assert reconnected.wait(20), "no reconnect"
        js.publish("rs.x", b"after", timeout=15)
        got = [m.data for m in psub.fetch(10, timeout=10)]
        # "0" may come again: the server writes a consumer's delivered state to disk up
        # to 100 ms after the delivery (filestore's flush loop), and kill -9 can beat it.
        assert got in ([b"after"], [b"0", b"after"]), got


def test_fetches_that_return_early_leave_at_most_one_pull_waiting(
    js: JetStream, stream: str
) -> None:
    """A fetch waits for the pull an earlier one left early rather than adding its own, so
    pulls do not pile up at the server (its max_waiting is 512) while messages trickle."""
    psub = js.pull_subscribe(subj(stream), durable="w")
    most = 0
    got: List[bytes] = []
    for i in range(25):
        threading.Timer(0.05, lambda i=i: js.publish(subj(stream), str(i).encode())).start()
        got += [m.data for m in psub.fetch(10, timeout=5)]
        most = max(most, js.consumer_info(stream, "w").num_waiting)
    while len(got) < 25:
        got += [m.data for m in psub.fetch(10, timeout=5)]
    assert got == [str(i).encode() for i in range(25)]
    assert most <= 1


def test_message_in_flight_when_a_fetch_gives_up_is_kept(nc: nats.Client) -> None:
    """Core.retire: an UNSUBbed inbox is still routed until the server has seen the UNSUB."""
    got: List[nats.Msg] = []
    inbox = nc.new_inbox()

    def hook(msg: nats.Msg) -> bool:
        got.append(msg)
        return True

    core = core_of(nc)
    sub = core.subscribe(inbox, None, None, None, 100, 1 << 20, hook=hook)
    nc.flush()
    with nats.connect(nc.connected_url or "") as other:
        with nc._link.read_lock:  # the message waits in the socket while we unsubscribe
            other.publish(inbox, b"in flight")
            other.flush()
            core.retire(sub)
        wait_until(lambda: got, what="the in-flight message")
    assert [m.data for m in got] == [b"in flight"]
    wait_until(lambda: sub.sid not in nc._table.subs, what="the sid forgotten after the PONG")


def test_messages_arriving_after_a_fetch_returned_go_to_the_next(
    js: JetStream, stream: str
) -> None:
    psub = js.pull_subscribe(subj(stream), durable="w")
    publish(js, stream, 3)
    assert len(psub.fetch(3)) == 3
    # Whatever lands in the queue between fetches is handed out first, never dropped.
    psub._q.put(nats.Msg(subj(stream), "$JS.ACK.x.w.1.9.9.0.0", b"left over"))
    assert [m.data for m in psub.fetch(5, timeout=1)] == [b"left over"]


def test_consumer_deleted_during_fetch(js: JetStream, stream: str) -> None:
    psub = js.pull_subscribe(subj(stream), durable="w")
    deleter = threading.Thread(
        target=lambda: (
            wait_until(lambda: js.consumer_info(stream, "w").num_waiting == 1),
            js.delete_consumer(stream, "w"),
        ),
        daemon=True,
    )
    deleter.start()
    with pytest.raises(nats.ConsumerDeletedError, match="409 Consumer Deleted"):
        psub.fetch(5, timeout=10)
    with pytest.raises(nats.NoConsumerResponseError, match="503"):
        psub.fetch(1, timeout=5)
    # The server sends the pull its 409 before it answers the delete: let that answer come
    # before the fixture closes the client (else the thread dies on a closed client).
    deleter.join(10)
    assert not deleter.is_alive()


def test_max_waiting_exceeded(js: JetStream, stream: str) -> None:
    js.add_consumer(stream, durable_name="w", ack_policy=AckPolicy.EXPLICIT, max_waiting=1)
    first = js.pull_subscribe(subj(stream), durable="w")
    second = js.pull_subscribe(subj(stream), durable="w")
    errors: List[BaseException] = []

    def long_pull() -> None:
        try:
            first.fetch(5, timeout=6)
        except nats.TimeoutError:
            pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    t = threading.Thread(target=long_pull)
    t.start()
    wait_until(lambda: js.consumer_info(stream, "w").num_waiting == 1, what="the first pull")
    with pytest.raises(nats.PullLimitExceededError, match="Exceeded MaxWaiting"):
        second.fetch(5, timeout=3)
    t.join(10)
    assert not errors


def test_missing_heartbeats_raise(server_factory: Callable[..., NATSServer]) -> None:
    srv = server_factory(jetstream=True)
    with nats.connect(srv.url, ping_interval=30) as nc, nats.connect(srv.url) as watcher:
        js = nc.jetstream()
        js.add_stream(name="HB", subjects=["hb"])
        psub = js.pull_subscribe("hb", durable="w")
        wjs = watcher.jetstream()

        def pause_when_the_pull_waits() -> None:  # after the long pull is out
            wait_until(lambda: wjs.consumer_info("HB", "w").num_waiting == 1, what="the pull")
            srv.pause()

        t = threading.Thread(target=pause_when_the_pull_waits)
        t.start()
        try:
            with pytest.raises(nats.NoHeartbeatError, match="heartbeat"):
                psub.fetch(5, timeout=10, heartbeat=0.2)
        finally:
            t.join(15)
            srv.resume()
        assert not t.is_alive()


def test_heartbeat_alarm_sets_how_long_a_fetch_waits_for_signs_of_life(
    server_factory: Callable[..., NATSServer],
) -> None:
    """As above, with an alarm at 100 intervals (20 s): the 3 s fetch runs out first."""
    srv = server_factory(jetstream=True)
    with nats.connect(srv.url, ping_interval=30) as nc, nats.connect(srv.url) as watcher:
        js = nc.jetstream()
        js.add_stream(name="HA", subjects=["ha"])
        psub = js.pull_subscribe("ha", durable="w")
        for bad in (1, 0.5, "3", True):
            with pytest.raises(nats.InvalidArgumentError, match="heartbeat_alarm"):
                psub.fetch(5, timeout=3, heartbeat=0.2, heartbeat_alarm=bad)
        wjs = watcher.jetstream()

        def pause_when_the_pull_waits() -> None:
            wait_until(lambda: wjs.consumer_info("HA", "w").num_waiting == 1, what="the pull")
            srv.pause()

        t = threading.Thread(target=pause_when_the_pull_waits)
        t.start()
        try:
            with pytest.raises(nats.TimeoutError):
                psub.fetch(5, timeout=3, heartbeat=0.2, heartbeat_alarm=100)
        finally:
            t.join(15)
            srv.resume()
        assert not t.is_alive()


def test_close_wakes_a_waiting_fetch(nats_server: NATSServer) -> None:
    nc = nats.connect(nats_server.url)
    js = nc.jetstream()
    name = stream_name("PULL")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
    try:
        psub = js.pull_subscribe(f"{name.lower()}.x", durable="w")
        threading.Timer(0.3, nc.close).start()
        with pytest.raises(nats.ConnectionClosedError):
            psub.fetch(5, timeout=30)
    finally:
        with nats.connect(nats_server.url) as other:
            other.jetstream().delete_stream(name)


def test_threads_share_a_subscription_without_duplicates(js: JetStream, stream: str) -> None:
    psub = js.pull_subscribe(subj(stream), durable="w")
    publish(js, stream, 60)
    seen: List[bytes] = []
    lock = threading.Lock()

    deadline = time.monotonic() + 30

    def worker() -> None:
        while time.monotonic() < deadline:
            with lock:
                if len(seen) >= 60:
                    return
            try:
                msgs = psub.fetch(7, timeout=5)
            except nats.TimeoutError:
                continue
            for m in msgs:
                m.ack()
            with lock:
                seen.extend(m.data for m in msgs)

    threads = [threading.Thread(target=worker) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(45)  # the deadline and one last fetch
    assert sorted(seen, key=int) == [str(i).encode() for i in range(60)]


# --- pull_subscribe: the ADR-15 lookups ---------------------------------------------------


def test_stream_found_by_subject_and_made_durable_kept_on_unsubscribe(
    js: JetStream, stream: str
) -> None:
    # A durable is the user's (issue 17, 1b): made by pull_subscribe, kept by unsubscribe.
    psub = js.pull_subscribe(subj(stream), durable="made")
    assert psub.stream == stream
    info = psub.consumer_info()
    assert info.config.filter_subject == subj(stream)
    assert info.config.ack_policy == AckPolicy.EXPLICIT
    psub.unsubscribe()
    assert js.consumer_info(stream, "made").name == "made"


def test_made_ephemeral_deleted_on_unsubscribe(js: JetStream, stream: str) -> None:
    psub = js.pull_subscribe(subj(stream))
    assert js.consumer_names(stream) == [psub.consumer]
    psub.unsubscribe()
    assert js.consumer_names(stream) == []


def test_binding_to_an_existing_durable_keeps_it(js: JetStream, stream: str) -> None:
    js.add_consumer(
        stream, durable_name="kept", ack_policy=AckPolicy.EXPLICIT, filter_subject=subj(stream)
    )
    psub = js.pull_subscribe(subj(stream), durable="kept", stream=stream)
    publish(js, stream, 1)
    assert psub.fetch()[0].data == b"0"
    psub.drain(timeout=5)
    assert js.consumer_info(stream, "kept").name == "kept"


def test_durable_made_by_someone_else_meanwhile_is_joined(
    js: JetStream, stream: str, nats_server: NATSServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lookup says 'not found', another process creates the durable (with another
    config) before our create: the library looks it up again, checks it, binds, and never
    deletes it (seed 001)."""
    lose_the_create_race(
        js,
        monkeypatch,
        nats_server.url,
        ack_policy=AckPolicy.EXPLICIT,
        filter_subject=subj(stream),
        max_ack_pending=7,
    )
    psub = js.pull_subscribe(subj(stream), durable="racy", stream=stream)
    assert js.consumer_info(stream, "racy").config.max_ack_pending == 7  # theirs, unchanged
    publish(js, stream, 2)
    assert [m.data for m in psub.fetch(2, timeout=5)] == [b"0", b"1"]
    psub.unsubscribe()
    assert "racy" in js.consumer_names(stream)  # not made by this subscription: kept


def test_ephemeral_pull_subscription(js: JetStream, stream: str) -> None:
    psub = js.pull_subscribe(subj(stream))
    publish(js, stream, 2)
    assert len(psub.fetch(2, timeout=5)) == 2
    name = psub.consumer
    psub.unsubscribe()
    assert name not in js.consumer_names(stream)


def test_binding_checks(js: JetStream, stream: str) -> None:
    js.add_consumer(stream, durable_name="push", deliver_subject="somewhere.else")
    with pytest.raises(nats.ConsumerIsPushBasedError, match="push based"):
        js.pull_subscribe(subj(stream), durable="push")
    js.add_consumer(
        stream, durable_name="filtered", ack_policy="explicit", filter_subject=subj(stream, "a")
    )
    with pytest.raises(nats.InvalidArgumentError, match="does not match the filter"):
        js.pull_subscribe(subj(stream, "b"), durable="filtered")
    with pytest.raises(nats.InvalidArgumentError, match="max_ack_pending"):
        js.pull_subscribe(
            subj(stream, "a"), durable="filtered", config=ConsumerConfig(max_ack_pending=7)
        )
    js.add_consumer(stream, durable_name="none", ack_policy=AckPolicy.NONE)
    with pytest.raises(nats.InvalidArgumentError, match="ack_policy none"):
        js.pull_subscribe(subj(stream), durable="none")


def test_bad_arguments(js: JetStream, stream: str) -> None:
    with pytest.raises(nats.InvalidArgumentError, match="ack_policy explicit"):
        js.pull_subscribe(subj(stream), config=ConsumerConfig(ack_policy=AckPolicy.ALL))
    with pytest.raises(nats.InvalidArgumentError, match="ack_policy explicit"):
        js.pull_subscribe(subj(stream), config=ConsumerConfig(ack_policy=AckPolicy.NONE))
    with pytest.raises(nats.InvalidArgumentError, match="deliver"):
        js.pull_subscribe(subj(stream), config=ConsumerConfig(deliver_subject="push.here"))
    with pytest.raises(nats.InvalidArgumentError, match="subject or a stream"):
        js.pull_subscribe(None)
    with pytest.raises(nats.InvalidArgumentError, match="differ"):
        js.pull_subscribe(subj(stream), durable="a", config=ConsumerConfig(durable_name="b"))
    with pytest.raises(nats.StreamNotFoundError):
        js.pull_subscribe("no.stream.here")
    psub = js.pull_subscribe(subj(stream), durable="w")
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(nats.InvalidArgumentError, match="batch"):
            psub.fetch(bad)  # type: ignore[arg-type]
    with pytest.raises(nats.BadTimeoutError):
        psub.fetch(1, timeout=-1)
    with pytest.raises(nats.InvalidArgumentError, match="half the fetch timeout"):
        psub.fetch(1, timeout=1, heartbeat=0.8)
    psub.unsubscribe()
    with pytest.raises(nats.BadSubscriptionError, match="closed"):
        psub.fetch()
    assert re.search(r"PullSubscription", repr(psub))


def test_an_empty_subject_reads_the_whole_stream(
    server_factory: Callable[..., NATSServer],
) -> None:
    # nats-py's pull_subscribe("", durable): no filter; without stream=, the one stream.
    with nats.connect(server_factory(jetstream=True).url) as nc:
        js = nc.jetstream()
        js.add_stream(name="ALL", subjects=["all.a", "all.b"])
        js.publish("all.a", b"1")
        js.publish("all.b", b"2")
        psub = js.pull_subscribe("", "every")
        assert psub.consumer_info().config.filter_subject is None
        assert [m.data for m in psub.fetch(2, timeout=5)] == [b"1", b"2"]
        js.add_stream(name="OTHER", subjects=["other"])
        with pytest.raises(nats.InvalidArgumentError, match="exactly one stream"):
            js.pull_subscribe("", "which")
        psub = js.pull_subscribe("", "named", stream="ALL")
        assert [m.data for m in psub.fetch(2, timeout=5)] == [b"1", b"2"]


def test_fetch_without_a_timeout_waits_through_expired_pulls(
    js: JetStream, stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from jetstream_sync.jetstream import pull

    monkeypatch.setattr(pull, "FOREVER_SLICE", 0.3)
    psub = js.pull_subscribe(subj(stream), durable="w")
    got: List[nats.Msg] = []
    fetcher = threading.Thread(target=lambda: got.extend(psub.fetch(1, None)), daemon=True)
    fetcher.start()
    fetcher.join(timeout=1.0)  # several pulls of 0.3 s expire meanwhile
    assert fetcher.is_alive() and not got
    js.publish(subj(stream), b"at last")
    fetcher.join(timeout=10)
    assert [m.data for m in got] == [b"at last"]


def test_a_pattern_subject_may_cover_the_configs_filter_subjects(
    js: JetStream, stream: str
) -> None:
    # nats-py's pull_subscribe("events.>", config=ConsumerConfig(filter_subjects=[...])).
    config = ConsumerConfig(filter_subjects=[subj(stream, "1"), subj(stream, "2")])
    psub = js.pull_subscribe(subj(stream, ">"), "f", config=config)
    for i in range(4):
        js.publish(subj(stream, str(i)), str(i).encode())
    assert sorted(m.data for m in psub.fetch(10, timeout=2)) == [b"1", b"2"]
    js.pull_subscribe(subj(stream, ">"), "f", config=config)  # binding again: the same
    js.pull_subscribe(subj(stream, "1"), "f")  # one of its filters
    with pytest.raises(nats.InvalidArgumentError, match="does not match the filter"):
        js.pull_subscribe(subj(stream, "3"), "f")
    with pytest.raises(nats.InvalidArgumentError, match="nor a pattern covering"):
        js.pull_subscribe(subj(stream, "*.x"), "g", config=config)


def test_a_pull_the_server_refuses_is_an_api_error_too(js: JetStream, stream: str) -> None:
    # nats-py's fetch raises APIError for a 400; half the timeout passes our check, and the
    # server wants the heartbeat under half of expires (the timeout less its margin).
    psub = js.pull_subscribe(subj(stream), durable="w")
    with pytest.raises(nats.errors.APIError) as err:
        psub.fetch(1, timeout=1, heartbeat=0.5)
    assert isinstance(err.value, nats.errors.BadPullRequestError)
    assert (err.value.code, err.value.description) == (
        400,
        "Bad Request - heartbeat value too large",
    )
