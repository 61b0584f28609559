"""Network faults between the client and a real server, through our own fault proxy
(faultproxy.py): a half-dead connection (the peer neither reads nor closes, so the client's
send buffer fills), a black hole that heals, a cut in the middle of a frame, and 1-byte
fragmentation with latency.

Every blocking call must honour its timeout on a half-dead connection, writes included,
and close() must return promptly whatever the socket does (issue 17). Each such call runs
on a helper thread joined with a bound, so a regression fails the test instead of hanging
it; the client fixture heals and cuts the proxy before closing, so a regression cannot pin
the teardown either.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import pytest
from fault_table import print_table, run_fault_table
from faultproxy import BOTH, DOWN, UP, FaultProxy
from load import AckedPublisher, stream_msg_ids
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name, wait_until

STREAM_PREFIX = "FP"
# A call with timeout=1 must be done well within this on a 2-core machine shared with
# other test runs: the outcome matters, not the precise duration.
BOUND = 10.0
FILL_PAYLOAD = b"f" * 65536
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def stream(js: JetStream) -> Iterator[str]:
    """A fresh stream on ``<name>.>``, with direct gets (stream_msg_ids reads through them)."""
    name = stream_name(STREAM_PREFIX)
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_direct=True)
    try:
        yield name
    finally:
        try:
            js.delete_stream(name)
        except nats.StreamNotFoundError:
            pass


@pytest.fixture
def perrs() -> Errors:
    return Errors()


@pytest.fixture
def pnc(proxy: FaultProxy, perrs: Errors) -> Iterator[nats.Client]:
    """A client connected through the proxy."""
    client = nats.connect(proxy.url, name="through-proxy", error_cb=perrs)
    try:
        yield client
    finally:
        proxy.heal()
        proxy.close_links()  # a hung call (a regression) gets an error instead of the test
        client.close()


@pytest.fixture
def pjs(pnc: nats.Client) -> JetStream:
    return pnc.jetstream(timeout=5.0)


def writable(nc: nats.Client) -> bool:
    """Whether the client's socket has room in its send buffer (test-only introspection)."""
    conn = nc._link.conn
    assert conn is not None
    _, w, _ = select.select([], [conn.sock], [], 0)
    return bool(w)


def fill(nc: nats.Client, proxy: FaultProxy, direction: str = BOTH) -> None:
    """Make the link half-dead, then publish until the client's send buffer is full: the
    kernel takes no more and the proxy reads no more."""
    proxy.half_dead(direction)
    # ~13 MB: more than the largest send buffer the kernel gives a socket (tcp_wmem's 4 MB
    # here), and fewer frames than the publish path's high water mark.
    for _ in range(200):
        nc.publish("fill.x", FILL_PAYLOAD)
    wait_until(lambda: not writable(nc), timeout=20, what="the client's send buffer to fill")


def within(bound: float, fn: Callable[[], Any], what: str) -> Dict[str, Any]:
    """Run ``fn`` on a helper thread; fail unless it returned or raised within ``bound``
    seconds. Returns {"value": ...} or {"error": ...}."""
    box: Dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    t = threading.Thread(target=run, name=f"bounded-{what}", daemon=True)
    started = time.monotonic()
    t.start()
    t.join(bound)
    assert not t.is_alive(), f"{what} still blocked after {bound} s on a half-dead connection"
    box["took"] = time.monotonic() - started
    return box


def is_timeout(box: Dict[str, Any]) -> bool:
    return isinstance(box.get("error"), nats.TimeoutError)


# --- every blocking call honours its timeout on a half-dead connection -----------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("direction", [BOTH, UP])
def test_request_honours_its_timeout_when_the_peer_stops_reading(
    pnc: nats.Client, proxy: FaultProxy, direction: str
) -> None:
    fill(pnc, proxy, direction)
    box = within(BOUND, lambda: pnc.request("nobody.home", b"?", timeout=1), "request")
    assert is_timeout(box), box
    # A second one, with the first one's frame still queued behind the full buffer.
    box = within(BOUND, lambda: pnc.request("nobody.home", b"?", timeout=0.5), "request")
    assert is_timeout(box), box


@pytest.mark.timeout(120)
def test_flush_honours_its_timeout_when_the_peer_stops_reading(
    pnc: nats.Client, proxy: FaultProxy
) -> None:
    fill(pnc, proxy)
    box = within(BOUND, lambda: pnc.flush(timeout=1), "flush")
    assert is_timeout(box), box


@pytest.mark.timeout(120)
def test_js_publish_honours_its_timeout_when_the_peer_stops_reading(
    pnc: nats.Client, pjs: JetStream, proxy: FaultProxy, stream: str
) -> None:
    subject = f"{stream.lower()}.x"
    pjs.publish(subject, b"before", timeout=5)
    fill(pnc, proxy)
    box = within(BOUND, lambda: pjs.publish(subject, b"during", timeout=1), "js.publish")
    assert is_timeout(box), box


@pytest.mark.timeout(120)
@pytest.mark.parametrize("batch", [1, 10])
def test_pull_subscription_fetch_honours_its_timeout_when_the_peer_stops_reading(
    pnc: nats.Client, pjs: JetStream, js: JetStream, proxy: FaultProxy, stream: str, batch: int
) -> None:
    subject = f"{stream.lower()}.x"
    psub = pjs.pull_subscribe(subject, durable="d")
    js.publish(subject, b"one")
    assert len(psub.fetch(1, timeout=5)) == 1  # the path works before the fault
    for i in range(20):
        js.publish(subject, b"%d" % i)
    fill(pnc, proxy)
    box = within(BOUND, lambda: psub.fetch(batch, timeout=1), f"fetch({batch})")
    assert is_timeout(box), box


@pytest.mark.timeout(120)
def test_pull_consumer_fetch_and_next_honour_their_timeout_when_the_peer_stops_reading(
    pnc: nats.Client, pjs: JetStream, js: JetStream, proxy: FaultProxy, stream: str
) -> None:
    subject = f"{stream.lower()}.x"
    js.add_consumer(stream, durable_name="pc")
    consumer = pjs.consumer(stream, "pc")
    for i in range(20):
        js.publish(subject, b"%d" % i)
    fill(pnc, proxy)
    box = within(BOUND, lambda: consumer.fetch(5, max_wait=1), "PullConsumer.fetch")
    assert box.get("value") == [] or is_timeout(box), box
    box = within(BOUND, lambda: consumer.next(timeout=1), "PullConsumer.next")
    assert is_timeout(box), box


# --- close ---------------------------------------------------------------------------------


def _our_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if not t.name.startswith("faultproxy")]


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.timeout(120)
def test_close_is_prompt_when_the_peer_stops_reading_and_frees_threads_and_fds(
    proxy: FaultProxy,
) -> None:
    threads_before = len(_our_threads())
    fds_before = _fds()
    nc = nats.connect(proxy.url, name="closing", error_cb=Errors())
    try:
        nc.subscribe("some.sub", cb=lambda m: None)  # a dispatcher thread to end as well
        fill(nc, proxy)
        blocked = threading.Thread(
            target=lambda: within(BOUND, lambda: nc.request("x", timeout=30), "request"),
            daemon=True,
        )
        blocked.start()  # a waiter close() must wake
        box = within(BOUND, nc.close, "close")
        assert "error" not in box, box
        assert nc.is_closed
        blocked.join(BOUND)
        assert not blocked.is_alive()
    finally:
        proxy.heal()
        proxy.close_links()
        nc.close()
    wait_until(lambda: len(_our_threads()) <= threads_before, 10, "the client's threads to end")
    wait_until(lambda: _fds() <= fds_before, 10, "the client's sockets to close")


_CTRL_C = r"""
import faulthandler, select, signal, sys
import jetstream_sync as nats

faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test asks where it hangs
# Ctrl-C as in a terminal, whatever this process inherited: a shell starts background jobs
# with SIGINT ignored, and an ignored signal stays ignored across exec.
signal.signal(signal.SIGINT, signal.default_int_handler)

# Only Ctrl-C may end the request: no stale-write or ping verdict first, however slow the
# machine is between the stall and the signal.
with nats.connect(sys.argv[1], name="ctrl-c", write_timeout=600, ping_interval=600) as nc:
    print("connected", flush=True)
    sys.stdin.readline()  # the proxy is half-dead from here on
    for _ in range(200):
        nc.publish("fill.x", b"f" * 65536)
    for _ in range(2000):
        if not select.select([], [nc._link.conn.sock], [], 0.01)[1]:
            break
    print("requesting", flush=True)
    nc.request("nobody.home", b"", timeout=600)
"""


def _main_thread_sleeps(pid: int) -> bool:
    """Whether process ``pid``'s main thread is blocked (state S in /proc/<pid>/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "S"


@pytest.mark.timeout(120)
def test_ctrl_c_inside_with_connect_exits_on_a_half_dead_connection(proxy: FaultProxy) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CTRL_C, proxy.url],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline().strip() == "connected"
        proxy.half_dead()
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "requesting"
        # The main thread blocks in the request: Ctrl-C then must end the process.
        wait_until(lambda: _main_thread_sleeps(proc.pid), 10, "the request to block")
        proc.send_signal(signal.SIGINT)
        try:
            # close() is bounded by a few seconds; the wait is generous because the machine
            # may be loaded, and a hang is what fails.
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGUSR1)  # every thread's stack to stderr, then end it
            try:
                _, err = proc.communicate(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate(timeout=10)
            pytest.fail(f"Ctrl-C inside `with connect(...)` did not exit in 60 s:\n{err[-6000:]}")
        assert proc.returncode != 0
        assert "KeyboardInterrupt" in err, err[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


# --- a write that cannot progress marks the connection stale --------------------------------


@pytest.mark.timeout(120)
def test_a_stalled_write_marks_the_connection_stale_and_reconnects(
    proxy: FaultProxy, perrs: Errors
) -> None:
    with nats.connect(
        proxy.url,
        error_cb=perrs,
        write_timeout=1.0,
        reconnect_time_wait=0.2,
        max_reconnect_attempts=-1,
        connect_timeout=1.0,
    ) as nc:
        nc.flush(timeout=5)
        fill(nc, proxy)
        wait_until(
            lambda: any(isinstance(e, nats.StaleConnectionError) for e in perrs.seen),
            BOUND,
            "the stalled write to be reported as a stale connection",
        )
        proxy.heal()
        wait_until(lambda: nc.stats["reconnects"] >= 1, 20, "the reconnect")
        sub = nc.subscribe("after.stale")
        nc.publish("after.stale", b"ok")
        assert sub.next_msg(timeout=5).data == b"ok"


# --- a black hole that heals, a cut mid-frame, 1-byte fragments -----------------------------


@pytest.mark.timeout(180)
def test_a_black_hole_that_heals_loses_nothing_and_duplicates_nothing(
    pnc: nats.Client, pjs: JetStream, js: JetStream, proxy: FaultProxy, stream: str
) -> None:
    pub = AckedPublisher(pjs, f"{stream.lower()}.x", 300, deadline=120)
    pub.start()
    wait_until(lambda: len(pub.acked) >= 50, 30, "50 acked publishes")
    proxy.black_hole()
    wait_until(lambda: pub.failures, 20, "a publish to time out in the black hole")
    proxy.heal()
    pub.finish(timeout=120)
    assert proxy.accepted == 1, "the connection was closed"
    assert pnc.stats["reconnects"] == 0
    ids = stream_msg_ids(js, stream)
    assert len(ids) == len(set(ids)), "duplicates in the stream"
    assert set(ids) >= {f"m{i}" for i in pub.acked}


@pytest.mark.timeout(180)
@pytest.mark.parametrize("direction", [UP, DOWN])
def test_a_cut_in_the_middle_of_a_frame_reconnects_and_keeps_every_acked_message(
    proxy: FaultProxy, js: JetStream, stream: str, direction: str
) -> None:
    with nats.connect(
        proxy.url, reconnect_time_wait=0.2, max_reconnect_attempts=-1, error_cb=Errors()
    ) as nc:
        pub = AckedPublisher(nc.jetstream(), f"{stream.lower()}.x", 200, deadline=120)
        pub.start()
        wait_until(lambda: len(pub.acked) >= 30, 30, "30 acked publishes")
        proxy.cut(after=7, direction=direction)  # 7 bytes: inside any PUB or MSG line
        wait_until(lambda: proxy.cuts_done >= 1, 20, "the cut")
        wait_until(lambda: nc.stats["reconnects"] >= 1, 30, "the reconnect through the proxy")
        pub.finish(timeout=120)
        assert proxy.accepted >= 2
    ids = stream_msg_ids(js, stream)
    assert len(ids) == len(set(ids)), "duplicates in the stream"
    assert set(ids) >= {f"m{i}" for i in pub.acked}


@pytest.mark.timeout(180)
def test_one_byte_fragments_with_latency_carry_requests_and_fetches_with_headers(
    proxy: FaultProxy, nc: nats.Client, js: JetStream, stream: str
) -> None:
    def answer(msg: nats.Msg) -> None:
        msg.respond(b"re:" + msg.data, headers={"X-Echo": (msg.headers or {}).get("X-In", "")})

    nc.subscribe("echo.svc", cb=answer)
    nc.flush()
    subject = f"{stream.lower()}.x"
    for i in range(3):
        js.publish(subject, b"payload-%d" % i, headers={"X-N": str(i)}, msg_id=f"h{i}")
    proxy.fragment(delay=0.0005)
    with nats.connect(proxy.url, connect_timeout=20, error_cb=Errors()) as slow:
        reply = slow.request("echo.svc", b"hello", timeout=20, headers={"X-In": "abc"})
        assert reply.data == b"re:hello"
        assert reply.headers is not None and reply.headers.get("X-Echo") == "abc"
        psub = slow.jetstream(timeout=30).pull_subscribe(subject, durable="frag")
        got: List[nats.Msg] = []
        deadline = time.monotonic() + 60
        while len(got) < 3 and time.monotonic() < deadline:
            try:
                got += psub.fetch(3 - len(got), timeout=10)
            except nats.TimeoutError:
                continue
        assert [m.data for m in got] == [b"payload-0", b"payload-1", b"payload-2"]
        assert [(m.headers or {}).get("X-N") for m in got] == ["0", "1", "2"]
        for m in got:
            m.ack_sync(timeout=20)
    assert proxy.bytes_out[DOWN] > 0 and proxy.bytes_out[UP] > 0


# --- the fault table --------------------------------------------------------------------------


@pytest.mark.timeout(400)
def test_fault_table(nats_server: NATSServer) -> None:
    rows = run_fault_table(nats_server.port, seconds=2.5)
    print_table(rows)
    for row in rows:
        assert row["lost"] == 0, row
        assert row["duplicates"] == 0, row
        assert row["hangs"] == 0, row
        assert row["acked"] > 0, row
        assert row["consumed"] == row["acked"], row  # the pull consumer got every one too


def test_a_queue_member_that_just_joined_counts_when_the_durables_maker_leaves(
    proxy: FaultProxy, js: JetStream, stream: str
) -> None:
    """js.subscribe returns once the server has the member's SUB. Here every byte the
    joining member sends takes 10 ms, so its SUB would still be on its way for a good part
    of a second after its lookups. The member that made the queue durable leaves right
    after the other's subscribe returned: it must find the other bound and leave the
    durable to it (the usage matrix saw it deleted under a member that had just joined)."""
    p = stream.lower()
    maker = js.subscribe(f"{p}.>", queue="work", stream=stream)
    with nats.connect(proxy.url) as nc_b:
        js_b = nc_b.jetstream()
        proxy.fragment(0.01, direction=UP)
        joined = js_b.subscribe(f"{p}.>", queue="work", stream=stream)
        maker.unsubscribe()  # made it, others bound: leaves it
        proxy.heal()
        assert js.consumer_info(stream, "work").push_bound
        js.publish(f"{p}.x", b"still served")
        assert joined.next_msg(timeout=5).data == b"still served"
        joined.unsubscribe()
    js.delete_consumer(stream, "work")


def test_an_object_put_whose_info_ack_is_cut_keeps_the_object_it_stored(
    pnc: nats.Client, pjs: JetStream, js: JetStream, proxy: FaultProxy
) -> None:
    """Issue 35: the connection is cut (mid-frame, server -> client) right after the new
    info went out, so the server stores it and its ack is lost. The put must learn which
    info the server holds and never purge the chunks it points to: the replaced object is
    readable whole, and no chunks are left orphaned."""
    bucket = stream_name("OBJFAULT")
    store = pjs.create_object_store(bucket)
    try:
        meta = nats.ObjectMeta(options=nats.ObjectMetaOptions(max_chunk_size=100))
        store.put("doc", b"o" * 250, meta=meta)
        real = pjs.publish
        cut: List[str] = []

        def publish(subject: str, *args: Any, **kwargs: Any) -> Any:
            if subject.startswith(f"$O.{bucket}.M.") and not cut:
                cut.append(subject)
                proxy.cut(after=7, direction=DOWN)  # the next frame down: the info's ack
            return real(subject, *args, **kwargs)

        pjs.publish = publish  # type: ignore[method-assign]
        try:
            new = store.put("doc", b"n" * 350, meta=meta)
        except nats.ObjectOutcomeUnknownError:
            pytest.fail("the info's fate should be readable once the client reconnected")
        finally:
            pjs.publish = real  # type: ignore[method-assign]
        assert cut
        other = js.object_store(bucket)
        assert [i.nuid for i in other.list()] == [new.nuid]
        assert other.get("doc").data == b"n" * 350
        info = js.stream_info(f"OBJ_{bucket}", subjects_filter=f"$O.{bucket}.C.>")
        assert dict(info.state.subjects or {}) == {f"$O.{bucket}.C.{new.nuid}": 4}
    finally:
        js.delete_object_store(bucket)
