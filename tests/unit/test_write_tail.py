"""The write path without a server: a socketpair stands in for the connection, so a full
send buffer is a test's choice (issue 17 1e: writes have deadlines)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Iterator, List, Tuple

import pytest

from jetstream_sync import _protocol as proto
from jetstream_sync import errors
from jetstream_sync._conn import Conn
from jetstream_sync._link import CONNECTED, Link
from jetstream_sync._outbox import Outbox
from jetstream_sync._servers import parse_url


@pytest.fixture
def wired() -> Iterator[Tuple[Outbox, Conn, socket.socket, List[Exception]]]:
    ours, peer = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    ours.settimeout(0.0)
    seen: List[Exception] = []
    link = Link()
    outbox = Outbox(link, seen.append)  # errors straight to the list: no callback thread
    conn = Conn(ours, proto.Parser(), parse_url("nats://127.0.0.1:4222"), {})
    link.conn = conn
    link.state = CONNECTED
    try:
        yield outbox, conn, peer, seen
    finally:
        ours.close()
        peer.close()


def _read_all(peer: socket.socket, n: int, bound: float = 10.0) -> bytes:
    got = bytearray()
    peer.settimeout(0.2)
    deadline = time.monotonic() + bound
    while len(got) < n and time.monotonic() < deadline:
        try:
            got += peer.recv(65536)
        except socket.timeout:
            pass
    return bytes(got)


def test_a_full_send_buffer_leaves_a_tail_that_the_next_write_sends_first(
    wired: Tuple[Outbox, Conn, socket.socket, List[Exception]],
) -> None:
    outbox, conn, peer, _ = wired
    frames = [b"PUB a %d\r\n%s\r\n" % (i, bytes([65 + i % 26]) * 200_000) for i in range(3)]
    for f in frames:
        outbox.out.append(f)
    started = time.monotonic()
    assert outbox.write_pending() is False  # the kernel took part: the caller did not wait
    assert time.monotonic() - started < 10.0  # the peer reads nothing: a wait never ends
    assert conn.tail is not None
    outbox.out.append(b"PING\r\n")
    assert outbox.write_pending() is False  # the tail first; the PING stays queued
    assert list(outbox.out) == [b"PING\r\n"]
    expected = b"".join(frames) + b"PING\r\n"
    got: List[bytes] = []
    reader = threading.Thread(target=lambda: got.append(_read_all(peer, len(expected))))
    reader.start()  # the peer reads again: the waiting writer gets the rest out
    for _ in range(100):
        if conn.tail is None and not outbox.out:
            break
        outbox.write_slow()
        outbox.write_pending()
    reader.join(15)
    assert got == [expected]  # in order, nothing lost, nothing twice


def test_a_write_without_progress_marks_the_connection_stale(
    wired: Tuple[Outbox, Conn, socket.socket, List[Exception]],
) -> None:
    outbox, conn, _, seen = wired
    outbox.write_timeout = 0.3
    outbox.out.append(b"PUB a 1000000\r\n" + b"x" * 1_000_000 + b"\r\n")
    assert outbox.write_pending() is False
    started = time.monotonic()
    assert outbox.write_slow() is False
    assert time.monotonic() - started < 5.0
    assert conn.broken
    assert any(isinstance(e, errors.StaleConnectionError) for e in seen)
    assert outbox.write_pending() is True  # a broken connection takes nothing more
