"""Connection life: auth, permissions, reconnect, stale detection, lame duck, fork, TLS."""

from __future__ import annotations

import os
import re
import shutil
import ssl
import subprocess
import threading
from pathlib import Path
from typing import Callable, List

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

ServerFactory = Callable[..., NATSServer]


class Events:
    """Collects what a client reports, with events to wait on."""

    def __init__(self) -> None:
        self.errors: List[Exception] = []
        self.disconnected = threading.Event()
        self.reconnected = threading.Event()
        self.closed = threading.Event()

    def options(self) -> dict:  # type: ignore[type-arg]
        return {
            "error_cb": self.errors.append,
            "disconnected_cb": self.disconnected.set,
            "reconnected_cb": self.reconnected.set,
            "closed_cb": self.closed.set,
        }

    def of(self, cls: type) -> List[Exception]:
        return [e for e in self.errors if isinstance(e, cls)]


# --- authentication -----------------------------------------------------------------------


@pytest.mark.smoke
def test_user_password_in_options_and_url(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False, config="authorization { user: alice, password: s3cr3t }")
    with nats.connect(srv.url, user="alice", password="s3cr3t") as nc:
        nc.flush()
    with nats.connect(f"nats://alice:s3cr3t@127.0.0.1:{srv.port}") as nc:
        nc.flush()
        assert "s3cr3t" not in repr(nc) and all("s3cr3t" not in u for u in nc.servers)
    with pytest.raises(nats.AuthorizationError) as info:
        nats.connect(srv.url, user="alice", password="wrong")
    assert "Authorization Violation" in str(info.value) and "wrong" not in str(info.value)


def test_token_in_options_and_url(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False, config='authorization { token: "t0k3n" }')
    with nats.connect(srv.url, token="t0k3n") as nc:
        nc.flush()
    with nats.connect(f"nats://t0k3n@127.0.0.1:{srv.port}") as nc:
        nc.flush()
    with pytest.raises(nats.AuthorizationError):
        nats.connect(srv.url)


def test_permissions_violation_reported_and_connection_survives(
    server_factory: ServerFactory,
) -> None:
    srv = server_factory(
        jetstream=False,
        config="""
        authorization { users = [
          { user: bob, password: pw,
            permissions: { publish: { deny: ["secret.>"] }, subscribe: { deny: ["hidden.>"] } } }
        ] }
        """,
    )
    ev = Events()
    with nats.connect(srv.url, user="bob", password="pw", **ev.options()) as nc:
        nc.publish("secret.plans", b"x")
        nc.subscribe("hidden.stuff")
        wait_until(lambda: len(ev.of(nats.PermissionsError)) >= 2, 10, "two permission errors")
        texts = " ".join(str(e) for e in ev.of(nats.PermissionsError))
        assert "secret.plans" in texts and "hidden.stuff" in texts
        sub = nc.subscribe("open.topic")
        nc.publish("open.topic", b"still works")
        assert sub.next_msg(timeout=5).data == b"still works"
        assert nc.is_connected and not ev.disconnected.is_set()


# --- reconnect ----------------------------------------------------------------------------


def test_restart_mid_publish_loop_nothing_silently_lost(
    server_factory: ServerFactory, tmp_path: Path
) -> None:
    """SIGKILL the server mid-loop and restart it: every publish is accounted for.

    The server's trace log is the witness of what it received. A publish is either in that
    log, or refused to the caller with an error, or counted in the ``unconfirmed`` figure the
    client reported when the connection died. Publishes after the reconnect all arrive.
    """
    trace = tmp_path / "trace.log"
    srv = server_factory(jetstream=False, trace_log=str(trace))
    ev = Events()
    nc = nats.connect(srv.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1, **ev.options())
    watcher = nats.connect(srv.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1)
    try:
        sub = watcher.subscribe("loop.>", pending_msgs_limit=1_000_000)
        watcher.flush()
        published: List[int] = []
        refused: List[int] = []
        stop = threading.Event()

        def publish_loop() -> None:
            for i in range(200_000):
                if stop.is_set():
                    return
                try:
                    nc.publish(f"loop.{i % 4}", str(i).encode())
                    published.append(i)
                except nats.OutboundBufferLimitError:
                    refused.append(i)  # the caller was told: not silently lost
                if i % 100 == 0:
                    stop.wait(0.002)  # a steady trickle keeps the trace log small

        t = threading.Thread(target=publish_loop)
        t.start()
        wait_until(lambda: len(published) > 1000, 10, "publishing under way")
        srv.kill()
        assert ev.disconnected.wait(10)
        srv.restart()
        assert ev.reconnected.wait(20)
        wait_until(lambda: watcher.stats["reconnects"] == 1, 20, "watcher reconnected")
        watcher.flush(timeout=10)
        mark = len(published)
        wait_until(lambda: len(published) > mark + 1000, 10, "publishing after reconnect")
        stop.set()
        t.join(10)
        nc.flush(timeout=10)
        watcher.flush(timeout=10)
        got = set()
        while True:
            try:
                got.add(int(sub.next_msg(timeout=0.5).data))
            except nats.TimeoutError:
                break
    finally:
        nc.close()
        watcher.close()
    after = published[mark:]
    assert after and all(i in got for i in after)
    text = trace.read_text(errors="replace")
    seen = {int(x) for x in re.findall(r'MSG_PAYLOAD: \["(\d+)"\]', text)}
    missing = [i for i in published if i not in seen]
    unconfirmed = sum(e.unconfirmed for e in ev.of(nats.ConnectionLostError))  # type: ignore[attr-defined]
    assert len(missing) <= unconfirmed, (len(missing), unconfirmed, missing[:10])


@pytest.mark.smoke
def test_buffered_during_outage_delivered_after_resubscribe(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    ev = Events()
    with nats.connect(
        srv.url, reconnect_time_wait=0.05, max_reconnect_attempts=-1, **ev.options()
    ) as nc:
        sub = nc.subscribe("outage.x")
        limited = nc.subscribe("outage.limited", max_msgs=3)
        nc.publish("outage.limited", b"before")
        nc.flush()
        assert limited.next_msg(timeout=5).data == b"before"
        srv.stop()
        assert ev.disconnected.wait(10)
        assert nc.is_reconnecting and not nc.is_connected
        for i in range(100):
            nc.publish("outage.x", str(i).encode())  # buffered: the server is down
        for i in range(5):
            nc.publish("outage.limited", str(i).encode())
        srv.start()
        assert ev.reconnected.wait(20)
        nc.flush(timeout=10)
        assert [int(sub.next_msg(timeout=5).data) for _ in range(100)] == list(range(100))
        # The resubscription carries the remaining max_msgs (3 - 1 delivered = 2).
        assert [m.data for m in limited] == [b"0", b"1"]
        assert nc.stats["reconnects"] == 1


def test_reconnect_buffer_limit_raises(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    ev = Events()
    nc = nats.connect(
        srv.url,
        reconnect_time_wait=5,
        reconnect_buf_size=2000,
        max_reconnect_attempts=-1,
        **ev.options(),
    )
    try:
        srv.stop()
        assert ev.disconnected.wait(10)
        accepted = 0
        with pytest.raises(nats.OutboundBufferLimitError, match="reconnect buffer"):
            for _ in range(100):
                nc.publish("buf.x", b"y" * 100)
                accepted += 1
        assert 10 <= accepted < 20
    finally:
        nc.close()
    lost = ev.of(nats.MessagesLostError)
    assert lost and lost[0].count == accepted  # closed with them unsent: reported


def test_blocked_flush_and_request_wake_on_disconnect(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    ev = Events()
    with nats.connect(srv.url, reconnect_time_wait=5, **ev.options()) as nc:
        nc.subscribe("deaf.svc")
        caught: List[BaseException] = []

        def call() -> None:
            try:
                nc.request("deaf.svc", b"", timeout=30)
            except BaseException as exc:
                caught.append(exc)

        t = threading.Thread(target=call)
        t.start()
        wait_until(lambda: nc._requests.waiting, 5, "request in flight")
        srv.kill()
        t.join(10)
        assert not t.is_alive()
        assert len(caught) == 1 and isinstance(caught[0], nats.ConnectionLostError)


def test_gives_up_after_max_reconnect_attempts(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    ev = Events()
    nc = nats.connect(
        srv.url,
        reconnect_time_wait=0.05,
        max_reconnect_attempts=2,
        connect_timeout=0.5,
        **ev.options(),
    )
    sub = nc.subscribe("gone")
    srv.kill()
    assert ev.closed.wait(20)
    assert nc.is_closed
    assert ev.of(nats.NoServersError)
    with pytest.raises(nats.ConnectionClosedError):
        sub.next_msg(timeout=1)


def test_no_reconnect_when_disabled(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    ev = Events()
    nc = nats.connect(srv.url, allow_reconnect=False, **ev.options())
    srv.kill()
    assert ev.closed.wait(10) and nc.is_closed


def test_stale_connection_detected_then_recovers(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    ev = Events()
    nc = nats.connect(
        srv.url,
        ping_interval=0.1,
        max_outstanding_pings=2,
        reconnect_time_wait=0.1,
        connect_timeout=0.5,
        max_reconnect_attempts=-1,
        **ev.options(),
    )
    try:
        srv.pause()
        try:
            wait_until(lambda: ev.of(nats.StaleConnectionError), 15, "stale detection")
            assert ev.disconnected.wait(10)
        finally:
            srv.resume()
        assert ev.reconnected.wait(20)
        sub = nc.subscribe("after.stale")
        nc.publish("after.stale", b"ok")
        assert sub.next_msg(timeout=5).data == b"ok"
        assert "did not answer" in str(ev.of(nats.StaleConnectionError)[0])
    finally:
        nc.close()


def test_lame_duck_mode_reported(server_factory: ServerFactory) -> None:
    srv = server_factory(jetstream=False)
    ev = Events()
    with nats.connect(srv.url, reconnect_time_wait=0.05, **ev.options()):
        srv.lame_duck()
        wait_until(lambda: ev.of(nats.LameDuckModeError), 15, "lame duck report")
    assert "lame duck" in str(ev.of(nats.LameDuckModeError)[0])


def test_cluster_urls_discovered_and_failover(tmp_path: Path) -> None:
    from jetstream_sync.server import NATSCluster

    with NATSCluster(n=2, jetstream=False) as cluster:
        first, second = cluster.servers
        ev = Events()
        with nats.connect(
            first.url, reconnect_time_wait=0.05, max_reconnect_attempts=5, **ev.options()
        ) as nc:
            wait_until(lambda: len(nc.servers) == 2, 10, "connect_urls from INFO")
            first.kill()
            assert ev.reconnected.wait(20)
            assert nc.connected_url is not None and str(second.port) in nc.connected_url
            sub = nc.subscribe("after.failover")
            nc.publish("after.failover", b"ok")
            assert sub.next_msg(timeout=5).data == b"ok"


# --- fork -----------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_gets_clear_error_and_parent_undisturbed(nats_server: NATSServer) -> None:
    nc = nats.connect(nats_server.url)
    try:
        sub = nc.subscribe("fork.x")
        nc.flush()
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # child: report what happened, never return into pytest
            out = []
            try:
                try:
                    nc.publish("fork.x", b"from child")
                    out.append("publish: no error")
                except nats.ClientForkedError as exc:
                    out.append("publish: " + str(exc))
                try:
                    sub.next_msg(timeout=0.1)
                    out.append("next_msg: no error")
                except nats.ClientForkedError:
                    out.append("next_msg: forked")
                nc.close()  # must not disturb the parent's socket
                out.append("closed")
            finally:
                os.write(w, "\n".join(out).encode())
                os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            report = f.read().decode()
        os.waitpid(pid, 0)
        assert "cannot be used after fork" in report and str(pid) in report, report
        assert "next_msg: forked" in report and "closed" in report
        nc.publish("fork.x", b"parent still fine")
        assert sub.next_msg(timeout=5).data == b"parent still fine"
        assert nc.is_connected
    finally:
        nc.close()


# --- TLS ------------------------------------------------------------------------------------


def _make_certs(d: Path) -> None:
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=jetstream-sync test CA",
    )
    run("req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost")
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    )


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls_with_ssl_context(server_factory: ServerFactory, tmp_path: Path) -> None:
    _make_certs(tmp_path)
    srv = server_factory(
        jetstream=False,
        config=f'tls {{ cert_file: "{tmp_path}/server.pem", key_file: "{tmp_path}/server.key" }}',
    )
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    with nats.connect(f"tls://127.0.0.1:{srv.port}", tls=ctx) as nc:
        sub = nc.subscribe("tls.x")
        nc.publish("tls.x", b"secret payload")
        assert sub.next_msg(timeout=5).data == b"secret payload"
    # Without the CA the server's certificate cannot be verified: a clear error.
    with pytest.raises(nats.SecureConnectionRequiredError, match="certificate verif"):
        nats.connect(srv.url)


# --- interop with pynats2 -------------------------------------------------------------------


def test_interop_with_pynats2_both_directions(nats_server: NATSServer) -> None:
    pynats2 = pytest.importorskip("pynats2")
    peer = pynats2.NATSClient(nats_server.url, socket_timeout=5)
    peer.connect()
    try:
        with nats.connect(nats_server.url) as nc:
            # pynats2 -> us
            sub = nc.subscribe("interop.to_us")
            nc.flush()
            peer.publish("interop.to_us", payload=b"from pynats2")
            assert sub.next_msg(timeout=5).data == b"from pynats2"
            # us -> pynats2; its SUB is asynchronous, so publish until it has arrived.
            got: List[bytes] = []
            peer.subscribe("interop.to_peer", callback=lambda m: got.append(m.payload))
            wait_until(
                lambda: got or nc.publish("interop.to_peer", b"from us"),
                10,
                "pynats2 to receive",
            )
            assert got[0] == b"from us"
            # pynats2 request -> our responder
            nc.subscribe("interop.svc", cb=lambda m: m.respond(b"answer:" + m.data))
            nc.flush()
            reply = peer.request("interop.svc", payload=b"q", timeout=5)
            assert reply.payload == b"answer:q"
    finally:
        peer.close()
