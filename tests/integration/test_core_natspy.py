"""nats-py's core names (issue 20) against real nats-servers: connect's nats-py options,
the Client attributes nats-py has, payload=, Subscription and Msg names, and the nats-py
error classes raised where nats-py raises them."""

from __future__ import annotations

import ssl
import threading
import urllib.parse
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest

import jetstream_sync as nats
from jetstream_sync._servers import PoolServer, ServerVersion
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSCluster, NATSServer
from jetstream_sync.testing import wait_until

ServerFactory = Callable[..., NATSServer]


class Seen:
    """What a client's callbacks were given, with events to wait on."""

    def __init__(self) -> None:
        self.errors: List[Exception] = []
        self.reconnected = threading.Event()
        self.discovered = threading.Event()
        self.lame = threading.Event()

    def of(self, cls: type) -> List[Exception]:
        return [e for e in list(self.errors) if isinstance(e, cls)]


# --- connect's nats-py options ------------------------------------------------------------


def test_no_echo_and_dont_randomize(nats_server: NATSServer) -> None:
    urls = [nats_server.url] + [f"nats://127.0.0.1:{p}" for p in (1, 2, 3, 4, 5)]
    with (
        nats.connect(urls, no_echo=True, dont_randomize=True) as nc,
        nats.connect(nats_server.url) as other,
    ):
        assert nc.servers[: len(urls)] == urls  # in the order given
        sub = nc.subscribe("natspy.echo")
        nc.flush()
        nc.publish("natspy.echo", b"mine")
        nc.flush()
        other.publish("natspy.echo", b"theirs")
        other.flush()
        # With echo the client's own message would come first.
        assert sub.next_msg(timeout=10).data == b"theirs"
        assert sub.pending_msgs == 0


def test_token_callable_is_called_at_every_connect(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False, config='authorization { token: "t0k3n" }')
    seen = Seen()
    calls: List[bool] = []
    client = nats.Client()

    def token() -> str:
        calls.append(client.is_connecting)
        return "t0k3n"

    client.connect(
        srv.url, token=token, reconnect_time_wait=0.05, reconnected_cb=seen.reconnected.set
    )
    try:
        assert calls == [True]  # called during connect(), which is "connecting"
        assert not client.is_connecting
        client.force_reconnect()
        assert seen.reconnected.wait(20)
        assert calls == [True, False] and client.is_connected
        client.flush(timeout=10)
    finally:
        client.close()
    with pytest.raises(nats.AuthorizationError):
        nats.connect(srv.url, token=lambda: "wrong", allow_reconnect=False)


def test_nkeys_seed_str(server_factory: ServerFactory) -> None:
    nk = pytest.importorskip("nkeys")
    import os

    seed = nk.encode_seed(os.urandom(32), nk.PREFIX_BYTE_USER).decode()
    public = nk.from_seed(bytearray(seed.encode())).public_key.decode()
    srv = server_factory(
        jetstream=False, config=f"authorization {{ users = [ {{ nkey: {public} }} ] }}"
    )
    with nats.connect(srv.url, nkeys_seed_str=seed) as nc:
        nc.flush(timeout=10)
        assert nc.is_connected


def test_flush_timeout_is_flushs_default(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    with nats.connect(srv.url, flush_timeout=0.3, ping_interval=600) as nc:
        assert nc.rtt(timeout=10) > 0
        srv.pause()
        try:
            with pytest.raises(nats.FlushTimeoutError, match=r"within 0\.3 s"):
                nc.flush()
            with pytest.raises(nats.TimeoutError):
                nc.rtt()
        finally:
            srv.resume()
        assert isinstance(nc.rtt(timeout=10), float)


def test_drain_timeout_is_drains_default(nats_server: NATSServer) -> None:
    release = threading.Event()
    states: List[Tuple[bool, bool]] = []
    seen = Seen()
    nc = nats.connect(nats_server.url, drain_timeout=0.3, error_cb=seen.errors.append)
    try:

        def cb(msg: nats.Msg) -> None:
            states.append((nc.is_draining, nc.is_draining_pubs))
            release.wait(60)

        nc.subscribe("natspy.drain", cb=cb)
        nc.publish("natspy.drain", b"x")
        nc.flush()
        wait_until(lambda: states, 10, "the callback started")
        assert not nc.is_draining
        # The callback holds the drain up: drain_timeout (not drain's 30 s) ends it, and
        # (as nats-py) the DrainTimeoutError goes to error_cb; drain() returns.
        nc.drain()
        assert nc.is_closed and not nc.is_draining
        wait_until(lambda: seen.of(nats.DrainTimeoutError), 10, "DrainTimeoutError reported")
        assert "within 0.3 s" in str(seen.of(nats.DrainTimeoutError)[0])
    finally:
        release.set()
        nc.close()
    assert states[0] == (False, False)


def test_drain_states_while_draining(nats_server: NATSServer) -> None:
    nc = nats.connect(nats_server.url)
    inside = threading.Event()
    release = threading.Event()
    seen: List[Tuple[bool, bool]] = []

    def cb(msg: nats.Msg) -> None:
        inside.set()
        release.wait(60)

    nc.subscribe("natspy.draining", cb=cb)
    nc.publish("natspy.draining", b"x")
    nc.flush()
    assert inside.wait(10)
    t = threading.Thread(target=nc.drain, kwargs={"timeout": 60})
    t.start()
    try:
        wait_until(lambda: nc.is_draining, 10, "drain started")
        seen.append((nc.is_draining, nc.is_draining_pubs))
    finally:
        release.set()
        t.join(60)
    assert seen == [(True, False)]
    assert nc.is_closed and not nc.is_draining


def test_pending_size_and_pending_data_size(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    seen = Seen()
    opts: Dict[str, Any] = {"reconnect_time_wait": 30, "error_cb": seen.errors.append}
    with (
        nats.connect(srv.url, pending_size=0, **opts) as none,
        nats.connect(srv.url, pending_size=1 << 20, **opts) as some,
    ):
        none.publish("natspy.p", b"ok while connected")
        none.flush()
        srv.stop()
        wait_until(lambda: none.is_reconnecting and some.is_reconnecting, 20, "disconnected")
        with pytest.raises(nats.OutboundBufferLimitError):
            none.publish("natspy.p", b"x")
        before = some.pending_data_size
        some.publish("natspy.p", b"y" * 1000)
        assert some.pending_data_size >= before + 1000
        with pytest.raises(nats.OutboundBufferLimitError):
            some.publish("natspy.p", b"z" * (1 << 20))
    # The server's graceful stop closed the socket: nats-py's UnexpectedEOF.
    assert seen.of(nats.UnexpectedEOF), seen.errors


def test_discovered_server_cb(tmp_path: Any) -> None:
    with NATSCluster(n=2, jetstream=False) as cluster:
        first, second = cluster.servers
        first_url = first.url
        first.stop()
        seen = Seen()
        with nats.connect(
            second.url, discovered_server_cb=seen.discovered.set, reconnect_time_wait=0.05
        ) as nc:
            assert nc.discovered_servers == []
            assert not seen.discovered.is_set()
            first.restart()  # joins the cluster: the server's INFO announces it
            assert seen.discovered.wait(30)
            assert nc.discovered_servers == [first_url]
            assert nc.servers[-1] == nc.discovered_servers[0]


def test_lame_duck_mode_cb(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    seen = Seen()
    with nats.connect(
        srv.url,
        lame_duck_mode_cb=seen.lame.set,
        error_cb=seen.errors.append,
        reconnect_time_wait=0.05,
    ):
        assert not seen.lame.is_set()
        srv.lame_duck()
        assert seen.lame.wait(20)
        wait_until(lambda: seen.of(nats.LameDuckModeError), 20, "lame duck report")


def test_reconnect_to_server_handler(server_factory: ServerFactory) -> None:
    a = server_factory(jetstream=False)
    b = server_factory(jetstream=False)
    seen = Seen()
    calls: List[Tuple[List[str], Dict[str, Any]]] = []
    choice: Dict[str, Optional[PoolServer]] = {"next": None}

    def handler(
        servers: List[PoolServer], info: Dict[str, Any]
    ) -> Tuple[Optional[PoolServer], float]:
        calls.append(([s.uri.netloc for s in servers], info))
        return choice["next"], 0.0

    with nats.connect(
        [a.url, b.url],
        dont_randomize=True,
        reconnect_to_server_handler=handler,
        reconnected_cb=seen.reconnected.set,
        error_cb=seen.errors.append,
    ) as nc:
        assert nc.connected_url is not None and str(a.port) in nc.connected_url
        # The handler picks b: without it the pool's order would take a again.
        choice["next"] = PoolServer(urllib.parse.urlparse(b.url))
        nc.force_reconnect()
        assert seen.reconnected.wait(20)
        wait_until(lambda: nc.is_connected, 20, "reconnected")
        assert nc.connected_url is not None and str(b.port) in nc.connected_url
        netlocs, info = calls[0]
        assert sorted(netlocs) == sorted(f"127.0.0.1:{s.port}" for s in (a, b))
        assert "server_id" in info
        # A server that is not in the pool: reported, and the first eligible one is taken.
        seen.reconnected.clear()
        choice["next"] = PoolServer(urllib.parse.urlparse("nats://10.255.255.1:4222"))
        nc.force_reconnect()
        assert seen.reconnected.wait(20)
        wait_until(lambda: seen.of(nats.ServerNotInPoolError), 10, "the stranger reported")
        assert "10.255.255.1:4222" in str(seen.of(nats.ServerNotInPoolError)[0])
        nc.flush(timeout=10)


def test_skip_subject_validation_publishes(nats_server: NATSServer) -> None:
    with nats.connect(nats_server.url, skip_subject_validation=True) as nc:
        sub = nc.subscribe("natspy.skip")
        nc.publish("natspy.skip", b"still checked where it matters")
        nc.publish("natspy..skip", b"not checked: empty token")  # BadSubjectError otherwise
        nc.flush(timeout=10)
        assert sub.next_msg(timeout=10).data == b"still checked where it matters"
        with pytest.raises(nats.BadSubjectError):
            nc.publish("natspy skip", b"whitespace would break the protocol")


# --- Client attributes ----------------------------------------------------------------------


def test_client_attributes_from_info(nats_server: NATSServer) -> None:
    with nats.connect(nats_server.url) as nc:
        info = nc.server_info
        assert nc.client_id == info["client_id"] and isinstance(nc.client_id, int)
        assert nc.client_ip == info.get("client_ip") == "127.0.0.1"
        version = nc.connected_server_version
        assert isinstance(version, ServerVersion)
        assert str(version) == info["version"] and version >= (2, 0, 0)
        assert nc.discovered_servers == []
        assert isinstance(nc.ssl_context, ssl.SSLContext)
        assert not nc.is_connecting and not nc.is_draining
        js = nc.jsm(timeout=10)
        assert isinstance(js, JetStream)
        assert js.account_info() is not None
    assert str(nc.connected_server_version) == "0.0.0-unknown"
    with pytest.raises(nats.ConnectionClosedError):
        nc.rtt()


def test_tls_context_is_the_ssl_context_and_wanted_tls_is_refused(
    server_factory: ServerFactory,
) -> None:
    srv = server_factory(jetstream=False)
    ctx = ssl.create_default_context()
    with pytest.raises(nats.SecureConnWantedError, match="does not offer it"):
        nats.connect(srv.url, tls=ctx, connect_timeout=5, allow_reconnect=False)


# --- payload=, request, Subscription, Msg ---------------------------------------------------


def test_payload_keyword_and_request_old_style(nats_server: NATSServer) -> None:
    with nats.connect(nats_server.url) as nc:
        sub = nc.subscribe("natspy.payload", queue="workers")
        assert (sub.subject, sub.queue) == ("natspy.payload", "workers")
        responder = nc.subscribe("natspy.service", cb=lambda m: m.respond(m.data.upper()))
        nc.publish("natspy.payload", payload=b"by payload")
        nc.publish("natspy.payload", b"by data")
        nc.flush()
        wait_until(lambda: sub.pending_msgs == 2, 10, "both queued")  # the loop never waits
        got = [m.data for _, m in zip(range(2), sub.messages)]
        assert got == [b"by payload", b"by data"]
        assert sub.delivered == 2
        reply = nc.request("natspy.service", payload=b"hi", timeout=10, old_style=True)
        assert reply.data == b"HI"
        assert nc.request("natspy.service", b"again", timeout=10).data == b"AGAIN"
        responder.unsubscribe()


def test_msg_is_acked(js: JetStream, stream: str) -> None:
    subject = f"{stream.lower()}.acked"
    js.publish(subject, b"one")
    psub = js.pull_subscribe(subject, durable="natspy_acked")
    (msg,) = psub.fetch(1, timeout=10)
    assert msg.is_acked is False
    msg.in_progress()
    assert msg.is_acked is False  # +WPI is not terminal
    msg.ack()
    assert msg.is_acked is True
    assert isinstance(msg.metadata, nats.Msg.Metadata)
    psub.unsubscribe()


def test_set_server_pool_is_where_the_next_reconnect_goes(server_factory: ServerFactory) -> None:
    a = server_factory(jetstream=False)
    b = server_factory(jetstream=False)
    seen = Seen()
    with nats.connect(a.url, reconnected_cb=seen.reconnected.set, reconnect_time_wait=0.1) as nc:
        assert [s.uri.port for s in nc.server_pool] == [a.port]
        assert nc.server_pool[0].uri.password is None  # a copy, without credentials
        with pytest.raises(nats.InvalidArgumentError, match="non-empty list"):
            nc.set_server_pool([])
        with pytest.raises(nats.InvalidArgumentError, match="non-empty list"):
            nc.set_server_pool(b.url)  # type: ignore[arg-type]
        with pytest.raises(nats.InvalidArgumentError, match="scheme"):
            nc.set_server_pool(["http://127.0.0.1:1"])
        assert [s.uri.port for s in nc.server_pool] == [a.port]  # a refused list changes nothing
        nc.set_server_pool([b.url])
        assert [s.uri.port for s in nc.server_pool] == [b.port]
        assert nc.connected_url is not None and str(a.port) in nc.connected_url  # no reconnect yet
        nc.force_reconnect()
        assert seen.reconnected.wait(20)
        wait_until(lambda: nc.is_connected, 20, "reconnected")
        assert nc.connected_url is not None and str(b.port) in nc.connected_url
        nc.flush(timeout=10)
    with pytest.raises(nats.ConnectionClosedError):
        nc.set_server_pool([a.url])
