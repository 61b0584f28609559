"""The connection's life as nats-py lives it (issue 28: nats-py's own core tests, ported by
deleting ``await``, found these differences): failover to a healthy server at once (the
reconnect wait is per server), close() calling disconnected_cb then closed_cb, a failed
connect reported to error_cb and kept in last_error (with the INFO the server sent),
subscribe() refused while draining, a drain timeout reported through error_cb, unsubscribe()
after max_msgs, servers that used up their attempts leaving the pool, client_id after
close, and a ``with`` block left by an exception not waiting on a dead peer."""

from __future__ import annotations

import threading
import time
from typing import Callable, List, Optional

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSCluster, NATSServer
from jetstream_sync.testing import wait_until

ServerFactory = Callable[..., NATSServer]


class Calls:
    """The connection callbacks' calls, in order, with events to wait on."""

    def __init__(self) -> None:
        self.calls: List[str] = []
        self.errors: List[Exception] = []
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.closed = threading.Event()

    def error_cb(self, exc: Exception) -> None:
        self.errors.append(exc)

    def disconnected_cb(self) -> None:
        self.calls.append("disconnected")
        self.disconnected.set()

    def reconnected_cb(self) -> None:
        self.calls.append("reconnected")
        self.reconnected.set()

    def closed_cb(self) -> None:
        self.calls.append("closed")
        self.closed.set()

    def of(self, cls: type) -> List[Exception]:
        return [e for e in list(self.errors) if isinstance(e, cls)]


# --- 1. failover at once --------------------------------------------------------------------


def test_failover_to_a_healthy_server_takes_no_reconnect_wait() -> None:
    """The connected server dies: another server of the pool, never tried, is dialled at
    once. Before, the dead server came first and was retried after reconnect_time_wait."""
    with NATSCluster(n=3, jetstream=False) as cluster:
        seen = Calls()
        with nats.connect(
            cluster.urls,
            reconnect_time_wait=5,
            reconnected_cb=seen.reconnected_cb,
            error_cb=seen.error_cb,
        ) as nc:
            url = nc.connected_url
            victim = next(s for s in cluster.servers if s.url == url)
            start = time.monotonic()
            victim.kill()
            assert seen.reconnected.wait(10), seen.errors
            took = time.monotonic() - start
            assert nc.connected_url != url
            nc.flush(timeout=10)
        # reconnect_time_wait is 5 s: well under it, no wait was taken.
        assert took < 2.5, f"failover took {took:.2f} s"


def test_the_same_server_still_waits_reconnect_time_wait(server_factory: ServerFactory) -> None:
    """The wait stays per server: a pool of one is not hammered."""
    srv = server_factory(jetstream=False)
    seen = Calls()
    with nats.connect(
        srv.url,
        reconnect_time_wait=0.6,
        reconnect_jitter=0,
        disconnected_cb=seen.disconnected_cb,
        reconnected_cb=seen.reconnected_cb,
        error_cb=seen.error_cb,
    ) as nc:
        srv.stop()
        assert seen.disconnected.wait(10)
        start = time.monotonic()
        wait_until(lambda: len(refused(seen)) >= 3, 20, "three refused reconnects")
        took = time.monotonic() - start
        srv.start()
        assert seen.reconnected.wait(20)
        assert nc.is_connected
    # Three refusals of the only server: at least two waits of 0.6 s between them.
    assert took >= 2 * 0.6 - 0.05, f"three attempts in {took:.2f} s"


def refused(seen: Calls) -> List[Exception]:
    return [e for e in seen.of(nats.ConnectionLostError) if "reconnect to" in str(e)]


# --- 2. close() calls disconnected_cb, then closed_cb --------------------------------------


def test_close_calls_disconnected_cb_then_closed_cb(nats_server: NATSServer) -> None:
    seen = Calls()
    nc = nats.connect(
        nats_server.url, disconnected_cb=seen.disconnected_cb, closed_cb=seen.closed_cb
    )
    nc.close()
    assert seen.closed.wait(10)
    assert seen.calls == ["disconnected", "closed"]


def test_close_when_already_disconnected_calls_disconnected_cb_once(
    server_factory: ServerFactory,
) -> None:
    srv = server_factory(jetstream=False)
    seen = Calls()
    nc = nats.connect(
        srv.url,
        reconnect_time_wait=30,
        disconnected_cb=seen.disconnected_cb,
        closed_cb=seen.closed_cb,
        error_cb=seen.error_cb,
    )
    srv.stop()
    assert seen.disconnected.wait(10)
    nc.close()
    assert seen.closed.wait(10)
    assert seen.calls == ["disconnected", "closed"]


def test_drain_calls_disconnected_cb_then_closed_cb(nats_server: NATSServer) -> None:
    seen = Calls()
    nc = nats.connect(
        nats_server.url, disconnected_cb=seen.disconnected_cb, closed_cb=seen.closed_cb
    )
    nc.subscribe("lifecycle.drain")
    nc.drain(timeout=10)
    assert seen.closed.wait(10)
    assert seen.calls == ["disconnected", "closed"]


# --- 3. a failed connect is reported and kept ---------------------------------------------


def test_refused_connect_goes_to_error_cb_last_error_and_keeps_the_info(
    server_factory: ServerFactory,
) -> None:
    srv = server_factory(jetstream=False, config='authorization { token: "s3cret" }')
    seen = Calls()
    nc = nats.Client()
    with pytest.raises(nats.AuthorizationError):
        nc.connect(srv.url, token="wrong", error_cb=seen.error_cb, allow_reconnect=False)
    assert [type(e) for e in seen.errors] == [nats.AuthorizationError]
    assert isinstance(nc.last_error, nats.AuthorizationError)
    assert nc.server_info.get("server_id"), nc.server_info
    assert nc.server_info.get("auth_required") is True


def test_unreachable_server_before_a_good_one_goes_to_error_cb(
    nats_server: NATSServer,
) -> None:
    seen = Calls()
    nc = nats.Client()
    nc.connect(["nats://127.0.0.1:1", nats_server.url], dont_randomize=True, error_cb=seen.error_cb)
    try:
        assert nc.is_connected
        assert len(seen.errors) == 1 and "127.0.0.1:1" in str(seen.errors[0])
        assert nc.last_error is seen.errors[0]
    finally:
        nc.close()


def test_no_server_reachable_reports_every_attempt() -> None:
    seen = Calls()
    nc = nats.Client()
    with pytest.raises(nats.NoServersError):
        nc.connect(
            ["nats://127.0.0.1:1", "nats://127.0.0.1:2"],
            dont_randomize=True,
            error_cb=seen.error_cb,
        )
    assert len(seen.errors) == 2, seen.errors
    assert nc.last_error is seen.errors[-1]


def test_refused_reconnects_leave_a_builtin_connection_refused_error(
    server_factory: ServerFactory,
) -> None:
    """nats-py keeps the socket's ConnectionRefusedError in last_error while nothing
    listens; ours is a ConnectionLostError and also that builtin."""
    srv = server_factory(jetstream=False)
    seen = Calls()
    nc = nats.connect(
        srv.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1, error_cb=seen.error_cb
    )
    try:
        srv.stop()
        wait_until(lambda: seen.of(ConnectionRefusedError), 5, "a refused reconnect")
        refused = seen.of(ConnectionRefusedError)[0]
        assert isinstance(refused, nats.ConnectionLostError)
        assert isinstance(refused, nats.ConnectionRefusedError)
    finally:
        nc.close()
    assert isinstance(nc.last_error, ConnectionRefusedError), repr(nc.last_error)


def test_a_closed_client_connects_again(nats_server: NATSServer) -> None:
    """nats-py: connect() after close() reconnects the same Client object, afresh."""
    seen = Calls()
    nc = nats.Client()
    nc.connect(nats_server.url, closed_cb=seen.closed_cb)
    with pytest.raises(nats.InvalidArgumentError, match="close"):
        nc.connect(nats_server.url)  # still connected: refused
    old = nc.subscribe("again.old")
    with pytest.raises(nats.NoRespondersError):
        nc.request("again.missing", timeout=1)
    nc.close()
    assert seen.closed.is_set() and nc.is_closed
    nc.connect(nats_server.url)
    try:
        assert nc.is_connected and not nc.is_closed
        with pytest.raises(nats.NoRespondersError):
            nc.request("again.missing", timeout=1)
        sub = nc.subscribe("again.new")
        nc.publish("again.new", b"hi")
        assert sub.next_msg(timeout=2).data == b"hi"
        with pytest.raises(nats.ConnectionClosedError):
            old.next_msg(timeout=0.1)  # the old connection's subscription stays ended
    finally:
        nc.close()
    assert seen.calls.count("closed") == 1  # the new connection got its own options


def test_a_client_closed_before_connecting_connects(nats_server: NATSServer) -> None:
    nc = nats.Client()
    nc.close()
    nc.connect(nats_server.url)
    try:
        nc.flush()
    finally:
        nc.close()


def test_natspy_status_numbers(server_factory: ServerFactory) -> None:
    """nats-py's ``_status`` (its tests read it in callbacks): connected, reconnecting,
    closed, with nats-py's numbers."""
    srv = server_factory(jetstream=False)
    states: List[int] = []
    nc = nats.Client()
    assert nc._status == nats.Client.DISCONNECTED
    seen = Calls()

    def disconnected_cb() -> None:
        states.append(nc._status)
        seen.disconnected_cb()

    nc.connect(srv.url, disconnected_cb=disconnected_cb, reconnect_time_wait=0.05)
    assert nc._status == nats.Client.CONNECTED
    srv.stop()
    assert seen.disconnected.wait(5)
    nc.close()
    assert states[0] == nats.Client.RECONNECTING
    assert nc._status == nats.Client.CLOSED


def test_handler_picking_a_server_not_in_the_pool_is_reported(
    server_factory: ServerFactory,
) -> None:
    """nats-py's way to name a server in reconnect_to_server_handler (``Server`` and
    ``Client._parse_server_uri`` of nats.aio.client): a stranger is reported as
    ServerNotInPoolError and the default pick is dialled."""
    from jetstream_sync.client import Client, Server

    a, b = server_factory(jetstream=False), server_factory(jetstream=False)
    calls: List[int] = []

    def handler(servers: object, info: object) -> object:
        calls.append(1)
        if len(calls) == 1:
            return Server(uri=Client._parse_server_uri("nats://127.0.0.1:1")), 0
        return None, 0

    seen = Calls()
    nc = nats.connect(
        [a.url, b.url],
        dont_randomize=True,
        reconnect_time_wait=0.05,
        error_cb=seen.error_cb,
        reconnected_cb=seen.reconnected_cb,
        reconnect_to_server_handler=handler,
    )
    try:
        a.stop()
        assert seen.reconnected.wait(5)
        assert seen.of(nats.ServerNotInPoolError), seen.errors
        assert not seen.of(nats.CallbackError), seen.errors
        assert nc.connected_url is not None and nc.connected_url.port == b.port
    finally:
        nc.close()
    assert Client._parse_server_uri("h").netloc == "h:4222"


# --- 4. drain ---------------------------------------------------------------------------------


def test_subscribe_while_draining_raises_connection_draining_error(
    nats_server: NATSServer,
) -> None:
    nc = nats.connect(nats_server.url)
    inside, release = threading.Event(), threading.Event()

    def cb(msg: nats.Msg) -> None:
        inside.set()
        release.wait(60)

    nc.subscribe("lifecycle.draining", cb=cb)
    nc.publish("lifecycle.draining", b"x")
    nc.flush()
    assert inside.wait(10)
    t = threading.Thread(target=nc.drain, kwargs={"timeout": 60})
    t.start()
    try:
        wait_until(lambda: nc.is_draining, 10, "drain started")
        with pytest.raises(nats.ConnectionDrainingError):
            nc.subscribe("lifecycle.late")
    finally:
        release.set()
        t.join(60)
    assert nc.is_closed


def test_drain_timeout_goes_to_error_cb(nats_server: NATSServer) -> None:
    """nats-py: a drain that runs out of time reports DrainTimeoutError through error_cb
    and closes; drain() itself returns."""
    seen = Calls()
    release = threading.Event()
    nc = nats.connect(nats_server.url, error_cb=seen.error_cb, closed_cb=seen.closed_cb)
    try:
        nc.subscribe("lifecycle.slow", cb=lambda msg: release.wait(60))
        nc.publish("lifecycle.slow", b"x")
        nc.flush()
        nc.drain(timeout=0.3)
        assert nc.is_closed
        assert seen.closed.wait(10)
        assert [type(e) for e in seen.of(nats.DrainTimeoutError)] == [nats.DrainTimeoutError]
    finally:
        release.set()
        nc.close()


# --- 5. unsubscribe after max_msgs, exhausted servers, client_id --------------------------


def test_unsubscribe_after_max_msgs_reached_does_not_raise(nc: nats.Client) -> None:
    sub = nc.subscribe("lifecycle.max", max_msgs=2)
    for _ in range(2):
        nc.publish("lifecycle.max", b"x")
    nc.flush()
    assert [sub.next_msg(timeout=10).data for _ in range(2)] == [b"x", b"x"]
    sub.unsubscribe()  # nats-py: no error, the server has dropped it already
    sub.unsubscribe(limit=1)
    auto = nc.subscribe("lifecycle.auto")
    auto.unsubscribe(limit=1)
    nc.publish("lifecycle.auto", b"y")
    nc.flush()
    assert auto.next_msg(timeout=10).data == b"y"
    wait_until(lambda: not auto.is_valid, 10, "the limit reached")
    auto.unsubscribe()
    gone = nc.subscribe("lifecycle.gone")
    gone.unsubscribe()
    with pytest.raises(nats.BadSubscriptionError):
        gone.unsubscribe()  # explicitly unsubscribed twice: nats-py raises too


def test_servers_that_used_up_their_attempts_leave_the_pool(nats_server: NATSServer) -> None:
    dead = "nats://127.0.0.1:1"
    seen = Calls()
    with nats.connect(
        [nats_server.url, dead],
        dont_randomize=True,
        max_reconnect_attempts=2,
        reconnect_time_wait=0.05,
        reconnected_cb=seen.reconnected_cb,
        error_cb=seen.error_cb,
    ) as nc:
        assert dead in nc.servers
        deadline = time.monotonic() + 30
        while dead in nc.servers and time.monotonic() < deadline:
            seen.reconnected.clear()
            nc.force_reconnect()
            assert seen.reconnected.wait(10)
        assert nc.servers == [nats_server.url]
        assert nc.is_connected


def test_client_id_is_none_after_close(nats_server: NATSServer) -> None:
    nc = nats.connect(nats_server.url)
    assert isinstance(nc.client_id, int)
    assert nc.client_ip
    nc.close()
    assert nc.client_id is None
    assert nc.client_ip is None


# --- 6. leaving a with block by an exception ------------------------------------------------


def test_exception_out_of_with_block_does_not_wait_for_a_dead_peer(
    server_factory: ServerFactory,
) -> None:
    """The server stops reading (SIGSTOP) with megabytes buffered for it: a KeyboardInterrupt
    leaving the with block closes at once instead of giving the peer 2 s to take them."""
    srv = server_factory(jetstream=False)
    seen = Calls()
    start: Optional[float] = None
    try:
        with (
            pytest.raises(KeyboardInterrupt),
            nats.connect(srv.url, write_timeout=60, error_cb=seen.error_cb) as nc,
        ):
            nc.flush(timeout=10)
            srv.pause()
            # More than the kernel can take in (send and receive buffers: Linux allows up
            # to 4 MiB and 32 MiB by default), so some stays in ours.
            chunk = b"x" * (512 * 1024)
            deadline = time.monotonic() + 20
            while nc.pending_data_size < 48 << 20 and time.monotonic() < deadline:
                nc.publish("lifecycle.fill", chunk)
            assert nc.pending_data_size >= 48 << 20, "the buffer never filled"
            start = time.monotonic()
            raise KeyboardInterrupt
        assert start is not None
        took = time.monotonic() - start
        assert nc.is_closed
    finally:
        srv.resume()
    assert took < 1.0, f"leaving the with block took {took:.2f} s"
    # What could not be sent is reported, not silently dropped.
    wait_until(lambda: seen.of(nats.MessagesLostError), 10, "MessagesLostError reported")


def test_with_block_left_normally_still_flushes(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    with nats.connect(srv.url) as reader:
        sub = reader.subscribe("lifecycle.flushed")
        reader.flush()
        with nats.connect(srv.url) as nc:
            for i in range(100):
                nc.publish("lifecycle.flushed", str(i).encode())
        got = [sub.next_msg(timeout=10).data for _ in range(100)]
    assert got == [str(i).encode() for i in range(100)]
