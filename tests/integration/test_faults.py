"""Faults on a single server under JetStream load: SIGKILL and a restart on the same file
store, a SIGSTOP long enough for stale-connection detection, a flood into a slow consumer,
and lame duck mode (the client moves to another server before this one leaves)."""

from __future__ import annotations

import resource
import threading
import time
from typing import Callable, Iterator, List

import pytest
from load import AckedPublisher, Seen, consume_into, longest_gap, report, stream_msg_ids
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSCluster, NATSServer
from jetstream_sync.testing import wait_until

pytestmark = pytest.mark.slow

ServerFactory = Callable[..., NATSServer]


@pytest.fixture
def srv(server_factory: ServerFactory) -> NATSServer:
    return server_factory()


@pytest.fixture
def errors_seen() -> Errors:
    return Errors()


@pytest.fixture
def nc(srv: NATSServer, errors_seen: Errors) -> Iterator[nats.Client]:
    client = nats.connect(
        srv.url,
        reconnect_time_wait=0.2,
        max_reconnect_attempts=-1,
        connect_timeout=1.0,
        ping_interval=0.5,
        max_outstanding_pings=2,
        error_cb=errors_seen,
    )
    try:
        yield client
    finally:
        client.close()


def _consume_and_publish(
    js: JetStream, total: int, fault: Callable[[], None]
) -> tuple[AckedPublisher, Seen, float]:
    """Publish ``total`` acked messages while a consume loop takes them; ``fault`` strikes
    once a third has been consumed. Returns the publisher, what was seen, and when."""
    js.add_stream(name="F", subjects=["f.>"], allow_direct=True)
    cc, seen = consume_into(js, "F", "w")
    pub = AckedPublisher(js, "f.x", total)
    pub.start()
    try:
        wait_until(lambda: len(seen) >= total // 3, 60, "load under way")
        struck = time.monotonic()
        fault()
        pub.finish()
        wait_until(lambda: seen.distinct() >= set(range(total)), 120, "every message consumed")
        assert cc.error is None, cc.error
    finally:
        cc.stop()
    ids = wait_until(lambda: _ids(js), 60, "stream readable")
    assert len(ids) == len(set(ids)) == total
    return pub, seen, struck


def _report_consume(fault: str, pub: AckedPublisher, seen: Seen, struck: float) -> None:
    report(
        {
            "fault": fault,
            "load": "js.publish + consume(cb)",
            "published": pub.count,
            "acked": len(pub.acked),
            "consumed": len(seen.distinct()),
            "lost": 0,
            "duplicates in stream": 0,
            "redelivered": len(seen) - len(seen.distinct()),
            "stall s": round(longest_gap(seen.times, struck), 2),
        }
    )


def _ids(js: JetStream) -> List[str] | None:
    try:
        return stream_msg_ids(js, "F")
    except nats.NATSError:
        return None


def test_sigkill_and_restart_on_the_file_store(
    srv: NATSServer, nc: nats.Client, errors_seen: Errors
) -> None:
    js = nc.jetstream(timeout=5.0)

    def crash() -> None:
        srv.kill()
        srv.start()  # same ports, same store dir

    pub, seen, struck = _consume_and_publish(js, 2000, crash)
    assert nc.stats["reconnects"] >= 1
    assert any(isinstance(e, nats.ConnectionLostError) for e in errors_seen.seen)
    _report_consume("SIGKILL + restart on the file store", pub, seen, struck)


def test_sigstop_trips_stale_detection_then_recovers(
    srv: NATSServer, nc: nats.Client, errors_seen: Errors
) -> None:
    js = nc.jetstream(timeout=5.0)

    def freeze() -> None:
        srv.pause()
        try:
            wait_until(
                lambda: any(isinstance(e, nats.StaleConnectionError) for e in errors_seen.seen),
                30,
                "stale connection detected",
            )
        finally:
            srv.resume()

    pub, seen, struck = _consume_and_publish(js, 2000, freeze)
    assert nc.stats["reconnects"] >= 1
    _report_consume("SIGSTOP until stale detection, then SIGCONT", pub, seen, struck)


def _rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@pytest.fixture
def nc_default_pings(srv: NATSServer, errors_seen: Errors) -> Iterator[nats.Client]:
    """A client with the default ping settings: behind a 100 MiB backlog the server's PONG
    can take longer than ``nc``'s 1 s stale-connection detection, and a reconnect in the
    middle of the flood would lose messages the test counts."""
    client = nats.connect(srv.url, error_cb=errors_seen)
    try:
        yield client
    finally:
        client.close()


def test_flood_into_a_slow_consumer_stays_bounded(
    srv: NATSServer, nc_default_pings: nats.Client, errors_seen: Errors
) -> None:
    """A callback that blocks while 100 MiB flood in: its queue stays at its limit, the
    drops are counted and reported, and another subscription on the same connection gets
    every one of its messages."""
    nc = nc_default_pings
    limit = 4 * 1024 * 1024
    release = threading.Event()
    slow_got: List[int] = []

    def slow(msg: nats.Msg) -> None:
        release.wait(60)
        slow_got.append(len(msg.data))

    slow_sub = nc.subscribe("flood.slow", cb=slow, pending_bytes_limit=limit)
    fast_sub = nc.subscribe("flood.fast", pending_msgs_limit=1_000_000)
    nc.flush()
    before = _rss_mib()
    total, payload = 100_000, b"x" * 1024
    peak_pending = 0
    with nats.connect(srv.url) as flooder:
        for i in range(total):
            flooder.publish("flood.slow", payload)
            if i % 10 == 0:
                flooder.publish("flood.fast", str(i).encode())
            if i % 5000 == 0:
                peak_pending = max(peak_pending, slow_sub.pending_bytes)
        flooder.flush(timeout=30)
    nc.flush(timeout=30)  # everything the server sent before this reply has been read
    peak_pending = max(peak_pending, slow_sub.pending_bytes)
    grew = _rss_mib() - before
    release.set()
    fast = [int(fast_sub.next_msg(timeout=10).data) for _ in range(total // 10)]
    assert fast == list(range(0, total, 10)), "the other subscription lost nothing"
    wait_until(lambda: len(slow_got) + slow_sub.dropped == total, 60, "slow queue drained")
    assert slow_sub.dropped > 0
    assert peak_pending <= limit + len(payload) + 200
    assert grew < 60, f"RSS grew by {grew:.0f} MiB while 100 MiB flowed into a 4 MiB queue"
    reports = [e for e in errors_seen.seen if isinstance(e, nats.SlowConsumerError)]
    assert reports and reports[-1].dropped <= slow_sub.dropped
    report(
        {
            "fault": "flood into a blocked callback (4 MiB queue)",
            "load": "100,000 x 1 KiB + 10,000 on a second subscription",
            "published": total + total // 10,
            "consumed": len(slow_got) + len(fast),
            "dropped and reported": slow_sub.dropped,
            "lost": 0,
            "RSS growth MiB": round(grew, 1),
        }
    )


def test_lame_duck_client_moves_before_the_server_leaves() -> None:
    with NATSCluster(n=2, jetstream=False) as cluster:
        first, second = cluster.servers
        errors_seen = Errors()
        moved = threading.Event()
        first_alive_at_move: List[bool] = []

        def reconnected() -> None:
            first_alive_at_move.append(first.is_running)
            moved.set()

        with (
            nats.connect(
                first.url,
                reconnect_time_wait=0.05,
                error_cb=errors_seen,
                reconnected_cb=reconnected,
            ) as nc,
            nats.connect(second.url) as watcher,
        ):
            wait_until(lambda: len(nc.servers) == 2, 10, "connect_urls from INFO")
            got = watcher.subscribe("ldm.>")
            watcher.flush()

            def interest_crossed_the_route() -> bool:
                # The watcher's SUB reaches the first server over the route a moment after
                # the second one has it: until then the first drops what nc publishes.
                nc.publish("ldm.probe", b"")
                nc.flush()
                try:
                    got.next_msg(timeout=0.05)
                except nats.TimeoutError:
                    return False
                return True

            wait_until(interest_crossed_the_route, 10, "the watcher's interest on both servers")
            for i in range(500):
                nc.publish("ldm.before", str(i).encode())
            started = time.monotonic()
            first.lame_duck()
            assert moved.wait(20), "the client did not move"
            took = time.monotonic() - started
            assert first_alive_at_move == [True], "moved only after the server left"
            assert nc.connected_url is not None and str(second.port) in nc.connected_url
            nc.publish("ldm.after", b"x")
            nc.flush()
            seen: List[str] = []
            while len(seen) < 501:  # each wait bounded; a late probe is not counted
                subject = got.next_msg(timeout=10).subject
                if subject != "ldm.probe":
                    seen.append(subject)
            # Counts, not order: "after" goes straight to the second server while the last
            # "before" messages may still be crossing the route from the first.
            assert seen.count("ldm.before") == 500 and seen.count("ldm.after") == 1
            ldm = [e for e in errors_seen.seen if isinstance(e, nats.LameDuckModeError)]
            assert ldm and "moving to another server" in str(ldm[0])
    report(
        {
            "fault": "lame duck mode (2-node cluster)",
            "load": "core publish",
            "published": 501,
            "consumed": 501,
            "lost": 0,
            "moved after s": round(took, 2),
        }
    )
