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
from support import lose_the_create_race, paused_once_pull_waits

import jetstream_sync as nats
from jetstream_sync import AckPolicy, ConsumerConfig
from jetstream_sync._seam import core_of
from jetstream_sync.jetstream import _linger as linger_module
from jetstream_sync.jetstream import pull as pull_module
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


def test_fetch_n_wire_one_no_wait_pull_with_an_expiry(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    nc, js, trace = traced
    psub = js.pull_subscribe("w.x", durable="d")
    with pytest.raises(nats.TimeoutError):
        psub.fetch(5, timeout=1.0)
    nc.flush()
    ops = pull_ops(client_ops(trace))
    (sub, _), (unsub_n, _), (pub, body), (unsub, _) = ops[-4:]
    sid = sub.split()[-1]
    inbox = sub.split()[1]
    assert unsub_n == f"UNSUB {sid} 5"  # served by the batch, the server drops the inbox
    assert pub.startswith(f"PUB $JS.API.CONSUMER.MSG.NEXT.W.d {inbox} ")
    pull = json.loads(body)
    # One request (nats.go's Fetch): what is there now, else the first to come, and an
    # expiry so it ends by itself: the timeout less the 100 ms margin.
    assert set(pull) == {"batch", "no_wait", "expires"} and pull["batch"] == 5
    assert pull["no_wait"] is True and 0 < pull["expires"] <= 0.9e9
    assert unsub == f"UNSUB {sid}"  # the 408 ended it with interest left: removed


def test_fetch_n_with_messages_waiting_takes_them_with_one_pull(
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
    sub, unsub_n, pub, unsub = ops[-4:]
    sid = sub[0].split()[-1]
    assert unsub_n[0] == f"UNSUB {sid} 5"
    assert json.loads(pub[1])["no_wait"] is True  # the 404 after the three ends it at once
    assert unsub[0] == f"UNSUB {sid}"
    assert len([op for op, _ in ops if "MSG.NEXT" in op]) == 1


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


def test_a_fetch_that_returns_early_leaves_no_pull_waiting(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    """fetch(10) got one message: its no_wait pull ended there (the server's 404 once it
    had nothing more), so no pull of this subscription holds the next message hostage
    while the application works (another worker can take it)."""
    _, js, trace = traced
    psub = js.pull_subscribe("w.x", durable="d")
    publish_to_the_long_pull(js, "W", "d", "w.x")
    assert [m.data for m in psub.fetch(10, timeout=6)] == [b"0"]
    assert js.consumer_info("W", "d").num_waiting == 0
    js.publish("w.x", b"1")
    wait_until(lambda: js.consumer_info("W", "d").num_pending == 1, what="1 waits at the server")
    assert psub.pending == 0
    again = psub.fetch(10, timeout=5)
    assert [(m.data, m.metadata.num_delivered) for m in again] == [(b"1", 1)]
    ops = pull_ops(client_ops(trace))
    pulls = [body for op, body in ops if "MSG.NEXT" in op]
    assert len(pulls) == 2 and all(json.loads(b)["no_wait"] for b in pulls)


def test_a_fetch_that_times_out_keeps_its_pull_until_the_server_ends_it(
    js: JetStream, stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server counts a pull's expiry from when it reads the pull, later than the fetch
    sent it, so on a loaded machine the pull outlives the fetch that gave up. Removing its
    inbox then races a delivery: a message picked for the pull goes to nobody until its ack
    wait. Here the server reads the pull "10 s late": its expiry is 10 s after the fetch's
    timeout, while the client's reckoning says it ended before. The pull stays (until the
    server ends it, however late: GRACE made long), what it delivers is kept for the next
    fetch, and once it has ended (its 404 after that message) the next fetch pulls anew."""
    monkeypatch.setattr(pull_module, "EXPIRES_MARGIN", -10.0)
    monkeypatch.setattr(linger_module, "GRACE", 30.0)
    track = linger_module.LongPulls.track
    monkeypatch.setattr(
        linger_module.LongPulls,
        "track",
        lambda self, sub, batch, ends: track(self, sub, batch, ends - 10.1),
    )
    psub = js.pull_subscribe(subj(stream), durable="w")
    with pytest.raises(nats.TimeoutError):
        psub.fetch(2, timeout=0.5)
    assert js.consumer_info(stream, "w").num_waiting == 1  # its pull, still live
    js.publish(subj(stream), b"0")
    wait_until(lambda: psub.pending == 1, what="the pull's late message, kept")
    got = psub.fetch(2, timeout=5)
    assert [(m.data, m.metadata.num_delivered) for m in got] == [(b"0", 1)]
    assert js.consumer_info(stream, "w").num_waiting == 0
    js.publish(subj(stream), b"1")
    assert [m.data for m in psub.fetch(2, timeout=5)] == [b"1"]


def test_a_pull_waiting_on_max_ack_pending_is_ended_by_the_server_not_by_the_timeout(
    traced: Tuple[nats.Client, JetStream, Path],
) -> None:
    """Another member holds max_ack_pending, so our fetch's pull waits at the server and
    the fetch times out. Had the pull no expiry, it would wait there with no end and the
    fetch would have to remove its inbox while it is live: a message picked for it in that
    moment goes to nobody until its ack wait (the usage matrix saw it: "redelivered, so
    once lost"). It has one: the server ends it (408) before its inbox goes."""
    nc, js, trace = traced
    js.add_consumer("W", durable_name="shared", filter_subject="w.x", max_ack_pending=1)
    ours = js.pull_subscribe("w.x", "shared")
    with nats.connect(str(nc.connected_url)) as other:
        theirs = other.jetstream().pull_subscribe("w.x", "shared")
        js.publish("w.x", b"0")
        held = theirs.fetch(1, timeout=5)[0]
        js.publish("w.x", b"1")
        wait_until(lambda: ours.consumer_info().num_pending == 1, what="1 counted")
        with pytest.raises(nats.TimeoutError):
            ours.fetch(5, timeout=1.0)
        nc.flush()
        held.ack_sync()
    ops = pull_ops(client_ops(trace))
    inbox = next(op for op, body in ops if '"batch":5' in body).split()[2]
    sid = next(op.split()[-1] for op, _ in ops if op.startswith(f"SUB {inbox} "))
    lines = trace_lines(trace)
    unsub = next(n for n, ln in enumerate(lines) if f"<<- [UNSUB {sid}]" in ln)
    ended = [n for n, ln in enumerate(lines) if f"->> [HMSG {inbox} {sid} " in ln]
    assert ended and ended[0] < unsub, "the inbox went while the pull was live"
    info = js.consumer_info("W", "shared")  # "1" was sent nowhere: it waits, unacked by none
    assert (info.num_pending, info.num_ack_pending, info.num_waiting) == (1, 0, 0)


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


def test_a_reconnect_ends_the_wait_for_a_pull_left_early(
    server_factory: Callable[..., NATSServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crashed and restarted server has forgotten the pull a fetch left behind (one that
    outlived the fetch's timeout: made to here, by 120 s), and had no time to say so: the
    next fetch must not wait for it, but pull anew."""
    monkeypatch.setattr(pull_module, "EXPIRES_MARGIN", -120.0)
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
        with pytest.raises(nats.TimeoutError):
            psub.fetch(10, timeout=0.5)
        assert js.consumer_info("RS", "w").num_waiting == 1  # left behind, live
        srv.kill()  # no goodbye to the pull (a stop would end it with a status)
        srv.start()
        assert reconnected.wait(20), "no reconnect"
        js.publish("rs.x", b"after", timeout=15)
        # Waiting for the lost pull would run out the timeout: FetchTimeoutError.
        assert [m.data for m in psub.fetch(10, timeout=10)] == [b"after"]


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
        # (two withs: a parenthesized one needs Python 3.10, and the smoke set runs on 3.9)
        with paused_once_pull_waits(srv, watcher.jetstream(), "HB", "w"):  # noqa: SIM117
            with pytest.raises(nats.NoHeartbeatError, match="heartbeat"):
                psub.fetch(5, timeout=10, heartbeat=0.2)


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
