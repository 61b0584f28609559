"""The reconnect policy of ServerPool (issue 28): the reconnect wait is per server, so a
server whose wait has passed (or that was never tried) is dialled at once; servers that
used up max_reconnect_attempts leave the pool, as nats-py."""

from __future__ import annotations

import threading
import time

from jetstream_sync._servers import ServerPool, parse_url


def pool(*urls: str, attempts: int = 60, wait: float = 5.0) -> ServerPool:
    return ServerPool([parse_url(u) for u in urls], False, attempts, wait, 0.0)


def test_a_server_tried_just_now_is_passed_over_for_one_never_tried() -> None:
    p = pool("a:1", "b:2", "c:3")
    a = p.servers[0]
    a.last_attempt = time.monotonic()  # the server we were just connected to
    chosen = p.next_server()
    assert chosen is not None and chosen.host == "b"
    stop = threading.Event()
    start = time.monotonic()
    assert p.wait_turn(chosen, stop)
    assert time.monotonic() - start < 0.5  # no reconnect wait for b


def test_when_every_server_was_tried_recently_the_soonest_ready_is_waited_for() -> None:
    p = pool("a:1", "b:2", wait=0.2)
    now = time.monotonic()
    p.servers[0].last_attempt = now
    p.servers[1].last_attempt = now - 0.1  # ready 0.1 s sooner
    chosen = p.next_server()
    assert chosen is not None and chosen.host == "b"
    start = time.monotonic()
    assert p.wait_turn(chosen, threading.Event())
    assert 0.05 <= time.monotonic() - start < 1.0


def test_lame_duck_servers_come_last() -> None:
    p = pool("a:1", "b:2")
    p.servers[0].lame_until = time.monotonic() + 60
    p.servers[1].last_attempt = time.monotonic()  # not ready, but not lame
    chosen = p.next_server()
    assert chosen is not None and chosen.host == "b"


def test_lost_server_goes_to_the_back() -> None:
    p = pool("a:1", "b:2", "c:3")
    p.to_back(p.servers[0])
    assert [s.host for s in p.servers] == ["b", "c", "a"]


def test_servers_that_used_up_their_attempts_leave_the_pool() -> None:
    p = pool("a:1", "b:2", attempts=2, wait=0.0)
    a, b = p.servers
    a.reconnects = 2
    chosen = p.next_server()
    assert chosen is b
    assert p.servers == [b]
    b.reconnects = 2
    assert p.next_server() is None
    assert p.servers == []


def test_no_limit_keeps_every_server() -> None:
    p = pool("a:1", attempts=-1, wait=0.0)
    p.servers[0].reconnects = 10_000
    assert p.next_server() is p.servers[0]
