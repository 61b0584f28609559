"""Bad input gets a specific error that names the problem; nothing reaches the wire."""

from __future__ import annotations

import socket
import threading
from typing import List

import pytest

import jetstream_sync as nats
from jetstream_sync import errors
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until


@pytest.mark.parametrize(
    ("subject", "needle"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("a b", "whitespace"),
        ("a\tb", "whitespace"),
        ("a\r\nPUB x 1", "whitespace"),
        ("a..b", "empty token"),
        ("a.*", "wildcard"),
        ("a.>", "wildcard"),
        (">", "wildcard"),
    ],
)
def test_bad_publish_subjects(nc: nats.Client, subject: str, needle: str) -> None:
    with pytest.raises(nats.BadSubjectError, match=needle):
        nc.publish(subject, b"x")


def test_non_str_subject_and_non_bytes_data(nc: nats.Client) -> None:
    with pytest.raises(nats.BadSubjectError, match="must be a str"):
        nc.publish(b"bytes-subject", b"x")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match=r"encode it first"):
        nc.publish("ok", "text")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="bytes"):
        nc.publish("ok", 12)  # type: ignore[arg-type]
    nc.publish("ok", bytearray(b"fine"))
    nc.publish("ok", memoryview(b"fine"))


def test_bad_reply_and_headers(nc: nats.Client) -> None:
    with pytest.raises(nats.BadSubjectError, match="reply"):
        nc.publish("ok", b"", reply="has space")
    with pytest.raises(nats.InvalidArgumentError, match="CR or LF"):
        nc.publish("ok", b"", headers={"k": "v\r\nInjected: 1"})
    with pytest.raises(nats.InvalidArgumentError, match="header key"):
        nc.publish("ok", b"", headers={"bad key": "v"})


@pytest.mark.parametrize("subject", ["", "a b", "a.>.b", "a..b"])
def test_bad_subscribe_subjects(nc: nats.Client, subject: str) -> None:
    with pytest.raises(nats.BadSubjectError):
        nc.subscribe(subject)


def test_bad_subscribe_arguments(nc: nats.Client) -> None:
    with pytest.raises(nats.BadSubjectError, match="queue"):
        nc.subscribe("ok", queue="a b")
    with pytest.raises(nats.InvalidArgumentError, match="cb"):
        nc.subscribe("ok", cb="not callable")  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="max_msgs"):
        nc.subscribe("ok", max_msgs=0)
    with pytest.raises(nats.InvalidArgumentError, match="pending_msgs_limit"):
        nc.subscribe("ok", pending_msgs_limit=1.5)  # type: ignore[arg-type]
    with pytest.raises(nats.InvalidArgumentError, match="pending_bytes_limit"):
        nc.subscribe("ok", pending_bytes_limit=True)


@pytest.mark.parametrize("timeout", [-1, -0.001, float("nan"), "1", True])
def test_bad_timeouts(nc: nats.Client, timeout: object) -> None:
    sub = nc.subscribe("bad.timeout")
    with pytest.raises(nats.BadTimeoutError, match="timeout"):
        sub.next_msg(timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(nats.BadTimeoutError, match="timeout"):
        nc.request("bad.timeout", b"", timeout=timeout)  # type: ignore[arg-type]
    with pytest.raises(nats.BadTimeoutError, match="timeout"):
        nc.flush(timeout=timeout)  # type: ignore[arg-type]


def test_closed_client_refuses_work(nats_server: NATSServer) -> None:
    nc = nats.connect(nats_server.url)
    nc.close()
    with pytest.raises(nats.ConnectionClosedError, match="closed"):
        nc.publish("x", b"")
    with pytest.raises(nats.ConnectionClosedError, match="closed"):
        nc.subscribe("x")
    with pytest.raises(nats.ConnectionClosedError, match="closed"):
        nc.request("x", b"")
    with pytest.raises(nats.ConnectionClosedError, match="closed"):
        nc.flush()


def test_next_msg_on_unsubscribed_and_callback_subscriptions(nc: nats.Client) -> None:
    sub = nc.subscribe("bad.unsub")
    sub.unsubscribe()
    with pytest.raises(nats.BadSubscriptionError, match="unsubscribed"):
        sub.next_msg(timeout=1)
    cb_sub = nc.subscribe("bad.cb", cb=lambda m: None)
    with pytest.raises(nats.BadSubscriptionError, match="callback"):
        cb_sub.next_msg()


def test_bad_connect_options() -> None:
    with pytest.raises(nats.InvalidArgumentError, match="scheme"):
        nats.connect("http://127.0.0.1:4222")
    with pytest.raises(nats.InvalidArgumentError, match="empty"):
        nats.connect([])
    with pytest.raises(nats.InvalidArgumentError, match="error_cb"):
        nats.connect("nats://127.0.0.1:1", error_cb=42)
    with pytest.raises(nats.InvalidArgumentError, match="user and password"):
        nats.connect("nats://127.0.0.1:1", user="only")
    with pytest.raises(nats.BadTimeoutError, match="connect_timeout"):
        nats.connect("nats://127.0.0.1:1", connect_timeout=-1)
    with pytest.raises(nats.InvalidArgumentError, match="tls"):
        nats.connect("nats://127.0.0.1:1", tls=True)


def test_no_server_listening() -> None:
    with socket.socket() as s:  # a port that certainly refuses: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(nats.NoServersError, match=str(port)):
            nats.connect(f"nats://127.0.0.1:{port}", connect_timeout=2)


class FakeServer:
    """A TCP listener that completes a valid handshake, waits for a SUB, then sends ``frames``.

    Only for input no real server would send: everything else uses nats-server.
    """

    def __init__(self, frames: List[bytes]) -> None:
        self.frames = frames
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.listener.settimeout(10)
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            conn.sendall(b'INFO {"server_id":"fake","max_payload":1048576,"headers":true}\r\n')
            conn.settimeout(5)
            data = b""
            while b"PING\r\n" not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            conn.sendall(b"PONG\r\n")
            while b"SUB " not in data:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                data += chunk
            for frame in self.frames:
                conn.sendall(frame)
            self.stop.wait(10)

    def close(self) -> None:
        self.stop.set()
        self.listener.close()
        self.thread.join(5)


@pytest.mark.parametrize(
    ("frames", "needle"),
    [
        ([b"HELLO WORLD\r\n"], "unknown protocol operation"),
        ([b"MSG a 1 notanumber\r\n"], "malformed"),
        ([b"MSG a 1 3\r\nabcXY"], "not followed by CRLF"),
        ([b"HMSG a 1 5 7\r\nHELLOhi\r\n"], "NATS/1.0"),
        ([b"INFO {not json}\r\n"], "JSON"),
        ([b"X" * 70000], "control line longer"),
    ],
)
def test_server_sending_garbage_is_a_protocol_error(frames: List[bytes], needle: str) -> None:
    fake = FakeServer(frames)
    errs: List[Exception] = []
    lost = threading.Event()
    nc = nats.connect(
        f"nats://127.0.0.1:{fake.port}",
        error_cb=errs.append,
        disconnected_cb=lost.set,
        allow_reconnect=False,
    )
    try:
        nc.subscribe("anything")
        assert lost.wait(10)
        wait_until(lambda: any(isinstance(e, errors.ProtocolError) for e in errs), 5, "report")
        proto_errs = [e for e in errs if isinstance(e, errors.ProtocolError)]
        assert needle in str(proto_errs[0]), proto_errs
        wait_until(lambda: nc.is_closed, 5, "client closed")
    finally:
        nc.close()
        fake.close()


def test_fatal_server_error_closes_the_connection() -> None:
    fake = FakeServer([b"-ERR 'Unknown Protocol Operation'\r\n"])  # and keeps the socket open
    errs: List[Exception] = []
    lost = threading.Event()
    nc = nats.connect(
        f"nats://127.0.0.1:{fake.port}",
        error_cb=errs.append,
        disconnected_cb=lost.set,
        allow_reconnect=False,
    )
    try:
        nc.subscribe("anything")
        assert lost.wait(10)
        wait_until(lambda: nc.is_closed, 5, "client closed")
        server_errs = [e for e in errs if isinstance(e, errors.ServerError)]
        assert server_errs and "Unknown Protocol Operation" in str(server_errs[0])
    finally:
        nc.close()
        fake.close()


def test_an_empty_queue_is_no_queue_group_as_in_nats_py(nc: nats.Client) -> None:
    # nats-py's examples call nc.subscribe("discover", "", cb): "" is its default queue
    a = nc.subscribe("empty.q", "")
    b = nc.subscribe("empty.q", queue="")
    assert a.queue == b.queue == ""
    nc.publish("empty.q", b"both")
    assert a.next_msg(timeout=5).data == b.next_msg(timeout=5).data == b"both"
