"""connect(..., retry_on_failed_connect=True): no server yet at connect, one comes up later
on the port the client was given."""

from __future__ import annotations

import random
import socket
import threading
import time
from pathlib import Path
from typing import Callable, List

import pytest

import jetstream_sync as nats
from jetstream_sync.server import NATSServer

ServerFactory = Callable[..., NATSServer]


def free_port() -> int:
    """A port nothing listens on now, for a server that comes up on it later. It is taken
    from below the kernel's ephemeral range: a port bound to 0 and closed could be handed
    to another test's connection or server before ours starts; one down here never is."""
    low = 32768
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pass
    candidates = list(range(max(1024, low - 12000), low))
    random.shuffle(candidates)
    for port in candidates[:200]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port below the ephemeral range in 200 tries")


class Events:
    def __init__(self) -> None:
        self.errors: List[Exception] = []
        self.reconnected = threading.Event()
        self.disconnected = threading.Event()
        self.closed = threading.Event()

    def options(self) -> dict:  # type: ignore[type-arg]
        return {
            "error_cb": self.errors.append,
            "reconnected_cb": self.reconnected.set,
            "disconnected_cb": self.disconnected.set,
            "closed_cb": self.closed.set,
        }


@pytest.mark.smoke
def test_returns_at_once_buffers_and_subscribes_once_the_server_is_up(
    server_factory: ServerFactory,
) -> None:
    port = free_port()
    ev = Events()
    started = time.monotonic()
    nc = nats.connect(
        f"nats://127.0.0.1:{port}",
        retry_on_failed_connect=True,
        reconnect_time_wait=0.1,
        max_reconnect_attempts=-1,
        connect_timeout=0.5,
        **ev.options(),
    )
    try:
        assert time.monotonic() - started < 10.0  # it returned: waiting would be forever
        assert nc.is_reconnecting and not nc.is_connected and not nc.is_closed
        assert nc.connected_url is None
        sub = nc.subscribe("early.x")
        got: List[bytes] = []
        done = threading.Event()

        def on_msg(msg: nats.Msg) -> None:
            got.append(msg.data)
            if len(got) == 50:
                done.set()

        nc.subscribe("early.cb", cb=on_msg)
        for i in range(50):
            nc.publish("early.x", str(i).encode())  # into the reconnect buffer
            nc.publish("early.cb", str(i).encode())
        time.sleep(0.3)  # a few failed attempts first
        assert nc.is_reconnecting

        server_factory(port=port, jetstream=False)
        assert ev.reconnected.wait(10), "no connection once the server came up"
        nc.flush(timeout=10)
        assert nc.is_connected and nc.connected_url == f"nats://127.0.0.1:{port}"
        # The SUBs went out before the buffered publishes: nothing was lost, in order.
        assert [int(sub.next_msg(timeout=5).data) for _ in range(50)] == list(range(50))
        assert done.wait(5) and [int(d) for d in got] == list(range(50))
        nc.subscribe("svc.echo", cb=lambda m: m.respond(m.data))
        assert nc.request("svc.echo", b"hi", timeout=5).data == b"hi"
        # Not a reconnect: the first connection there ever was.
        assert nc.stats["reconnects"] == 0
        assert not ev.disconnected.is_set()
        # The failed first attempt (as nats-py, each goes to error_cb), then why connect
        # went on in the background.
        assert [type(e) for e in ev.errors[:2]] == [
            nats.ConnectionRefusedError,
            nats.NoServersError,
        ]
    finally:
        nc.close()


def test_a_flush_made_meanwhile_waits_for_the_first_connection(
    server_factory: ServerFactory,
) -> None:
    port = free_port()
    with nats.connect(
        f"127.0.0.1:{port}", retry_on_failed_connect=True, reconnect_time_wait=0.1
    ) as nc:
        with pytest.raises(nats.TimeoutError):
            nc.flush(timeout=0.3)
        outcome: List[object] = []
        waiter = threading.Thread(target=lambda: outcome.append(nc.flush(timeout=15)))
        waiter.start()
        time.sleep(0.2)
        server_factory(port=port, jetstream=False)
        waiter.join(20)
        assert outcome == [None] and nc.is_connected


def test_gives_up_after_max_reconnect_attempts_and_closes() -> None:
    ev = Events()
    nc = nats.connect(
        f"nats://127.0.0.1:{free_port()}",
        retry_on_failed_connect=True,
        reconnect_time_wait=0.05,
        reconnect_jitter=0.0,
        max_reconnect_attempts=3,
        **ev.options(),
    )
    assert ev.closed.wait(10)
    assert nc.is_closed
    assert isinstance(nc.last_error, nats.NoServersError)
    assert "retry_on_failed_connect gave up" in str(nc.last_error)
    with pytest.raises(nats.ConnectionClosedError):
        nc.publish("x", b"y")


def test_close_while_waiting_reports_what_was_buffered() -> None:
    ev = Events()
    nc = nats.connect(
        f"nats://127.0.0.1:{free_port()}",
        retry_on_failed_connect=True,
        reconnect_time_wait=5,
        max_reconnect_attempts=-1,
        **ev.options(),
    )
    nc.publish("x", b"1")
    nc.publish("x", b"2")
    started = time.monotonic()
    nc.close()
    assert time.monotonic() - started < 3.0  # close does not wait out reconnect_time_wait
    assert nc.is_closed and ev.closed.wait(5)
    lost = [e for e in ev.errors if isinstance(e, nats.MessagesLostError)]
    assert lost and lost[0].count == 2  # type: ignore[attr-defined]


def test_default_is_unchanged_and_the_argument_is_checked() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    with pytest.raises(nats.NoServersError):
        nats.connect(url, connect_timeout=0.5)
    for bad in ("yes", 1, None):
        with pytest.raises(
            nats.InvalidArgumentError, match="retry_on_failed_connect must be a bool"
        ):
            nats.connect(url, retry_on_failed_connect=bad)
