"""close() racing a fresh connection's reader (found by nats-py's ported reconnect tests).

kill_socket marks the conn broken, shuts its socket down and closes it. A reader that had
not yet put the descriptor into its epoll set must not do so afterwards: the number may
belong to another socket by then, an epoll on that one never sees our end, and close()
waited for the network thread in vain (5 s per thread).
"""

from __future__ import annotations

import select
import socket
import threading
from typing import List

import pytest

from jetstream_sync import _protocol as proto
from jetstream_sync import errors
from jetstream_sync._conn import Conn
from jetstream_sync._link import Link
from jetstream_sync._reader import Reader
from jetstream_sync._servers import parse_url

pytestmark = pytest.mark.skipif(not hasattr(select, "epoll"), reason="the epoll path (Linux)")


def test_a_reader_does_not_wait_on_a_socket_killed_before_it_registered() -> None:
    # The descriptor number the reader would read now names someone else's live socket,
    # on which nothing ever happens: that is what a closed-and-reused number looks like.
    someone_elses, their_peer = socket.socketpair()
    try:
        conn = Conn(someone_elses, proto.Parser(), parse_url("nats://127.0.0.1:4222"), {})
        conn.broken = True  # kill_socket got there first
        result: List[errors.NATSError] = []
        reader = Reader(Link(), {}, lambda e: None)
        t = threading.Thread(target=lambda: result.append(reader.read_until_error(conn)))
        t.daemon = True
        t.start()
        t.join(5.0)
        assert not t.is_alive(), "the reader waits on a socket that is not its own"
        assert isinstance(result[0], errors.ConnectionLostError)
        assert conn.reader_left.is_set() and conn.ep is None
    finally:
        someone_elses.close()
        their_peer.close()
