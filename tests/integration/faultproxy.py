"""A TCP proxy for the test suite that injects network faults between a client and a real
nats-server, switchable while traffic flows.

Stdlib only (threads and sockets), loopback only. Every thread waits in short slices and
checks the proxy's state between them, so ``close()`` always ends them all; at most
``max_links`` connections are proxied at once (two threads each, plus one accepting), so
the thread count is bounded whatever the client does.

Faults, per direction (``UP`` client -> server, ``DOWN`` server -> client, ``BOTH``):

* ``half_dead()``: neither read nor forward, and close nothing. The sender's kernel send
  buffer fills (the proxy's receive buffer is made small with SO_RCVBUF so that this takes
  little data), then its writes stop making progress: a peer that stopped reading.
* ``black_hole()``: keep reading (up to ``hold_cap`` bytes held) but forward nothing;
  ``heal()`` forwards what was held, in order, then carries on: nothing is lost or closed.
* ``cut(after)``: forward ``after`` bytes of the next chunk read in that direction, then
  close the connection: a connection that dies in the middle of a frame.
* ``fragment(delay)``: forward every byte as its own write with ``delay`` seconds between
  bytes (TCP_NODELAY on: one segment each).
* ``release_cut(after)``: end a black hole by forwarding ``after`` bytes of what it held,
  then close the connection: an answer cut mid-frame while its caller waits.
* ``heal()``: back to plain forwarding, everywhere.

Counters: ``bytes_in[d]`` (read from the sender) and ``bytes_out[d]`` (written on), per
direction, over all connections.
"""

from __future__ import annotations

import select
import socket
import threading
import time
from typing import Dict, List, Optional, Tuple

__all__ = ["BOTH", "DOWN", "UP", "FaultProxy"]

UP = "up"  # client -> server
DOWN = "down"  # server -> client
BOTH = "both"

_PASS, _HOLD, _HOLE, _TRICKLE = "pass", "half-dead", "black-hole", "fragment"
_SLICE = 0.05  # the longest any proxy thread waits before looking at its state again
_CHUNK = 16 * 1024


def _directions(direction: str) -> Tuple[str, ...]:
    if direction == BOTH:
        return (UP, DOWN)
    if direction in (UP, DOWN):
        return (direction,)
    raise ValueError(f"direction must be up, down or both, got {direction!r}")


class _Link:
    """One proxied connection: the client's socket and ours to the server."""

    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client = client
        self.server = server
        self.closed = threading.Event()
        self.threads: List[threading.Thread] = []

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


class FaultProxy:
    """Forwards 127.0.0.1:<port> to ``target`` (a loopback host and port), with faults."""

    def __init__(
        self,
        target_host: str,
        target_port: int,
        *,
        rcvbuf: int = 4096,
        max_links: int = 8,
        hold_cap: int = 8 * 1024 * 1024,
    ) -> None:
        if target_host not in ("127.0.0.1", "localhost"):
            raise ValueError("the fault proxy forwards to loopback only")
        self.target = ("127.0.0.1", target_port)
        self.rcvbuf = rcvbuf
        self.max_links = max_links
        self.hold_cap = hold_cap
        self._cond = threading.Condition()
        self._modes: Dict[str, str] = {UP: _PASS, DOWN: _PASS}
        self._delay = 0.0
        self._cuts: Dict[str, Optional[int]] = {UP: None, DOWN: None}
        self._links: List[_Link] = []
        self._closed = False
        self.bytes_in: Dict[str, int] = {UP: 0, DOWN: 0}
        self.bytes_out: Dict[str, int] = {UP: 0, DOWN: 0}
        self.accepted = 0
        self.refused = 0
        self.cuts_done = 0
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Set on the listener so that accepted sockets inherit it before the handshake
        # fixes their window: a small receive buffer makes a half-dead link fill the
        # client's send buffer with little data.
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self._listener.settimeout(_SLICE)
        self.port: int = self._listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, name="faultproxy-accept")
        self._acceptor.daemon = True
        self._acceptor.start()

    # --- faults -----------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def half_dead(self, direction: str = BOTH) -> None:
        self._set(direction, _HOLD)

    def black_hole(self, direction: str = BOTH) -> None:
        self._set(direction, _HOLE)

    def fragment(self, delay: float = 0.001, direction: str = BOTH) -> None:
        with self._cond:
            self._delay = delay
        self._set(direction, _TRICKLE)

    def cut(self, after: int, direction: str = BOTH) -> None:
        """Forward ``after`` bytes of the next chunk in ``direction``, then close that
        connection (one shot: later connections pass)."""
        with self._cond:
            for d in _directions(direction):
                self._cuts[d] = after
            self._cond.notify_all()

    def release_cut(self, after: int, direction: str = BOTH) -> None:
        """End a black hole in ``direction`` by forwarding ``after`` bytes of what it held,
        then closing that connection: an answer the server sent, cut in the middle of its
        frame while the caller waits for it. Nothing held: like ``cut(after)``."""
        with self._cond:
            for d in _directions(direction):
                self._cuts[d] = after
                self._modes[d] = _PASS
            self._cond.notify_all()

    def heal(self) -> None:
        with self._cond:
            self._modes = {UP: _PASS, DOWN: _PASS}
            self._cuts = {UP: None, DOWN: None}
            self._cond.notify_all()

    def mode(self, direction: str) -> str:
        return self._modes[direction]

    def _set(self, direction: str, mode: str) -> None:
        with self._cond:
            for d in _directions(direction):
                self._modes[d] = mode
            self._cond.notify_all()

    # --- state ------------------------------------------------------------------------

    @property
    def live_links(self) -> int:
        with self._cond:
            return sum(1 for link in self._links if not link.closed.is_set())

    def threads(self) -> List[threading.Thread]:
        with self._cond:
            ts = [t for link in self._links for t in link.threads]
        return [t for t in [self._acceptor, *ts] if t.is_alive()]

    def close_links(self) -> None:
        """Close every proxied connection now (the listener stays)."""
        with self._cond:
            links = list(self._links)
        for link in links:
            link.close()

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, close every connection, and wait for every thread to end."""
        with self._cond:
            self._closed = True
            links = list(self._links)
            self._cond.notify_all()
        for link in links:
            link.close()
        deadline = time.monotonic() + timeout
        for t in [self._acceptor, *[t for link in links for t in link.threads]]:
            t.join(max(0.0, deadline - time.monotonic()))
        self._listener.close()
        alive = self.threads()
        if alive:
            raise RuntimeError(f"fault proxy threads still running after close: {alive}")

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- threads ----------------------------------------------------------------------

    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            with self._cond:
                self._links = [link for link in self._links if not link.closed.is_set()]
                full = len(self._links) >= self.max_links or self._closed
            if full:
                self.refused += 1
                client.close()
                continue
            try:
                server = socket.create_connection(self.target, timeout=2.0)
            except OSError:
                client.close()
                continue
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                s.settimeout(_SLICE)
            link = _Link(client, server)
            for d in (UP, DOWN):
                t = threading.Thread(
                    target=self._pump, args=(link, d), name=f"faultproxy-{d}", daemon=True
                )
                link.threads.append(t)
            with self._cond:
                self._links.append(link)
                self.accepted += 1
            for t in link.threads:
                t.start()

    def _wait_readable(self, sock: socket.socket) -> bool:
        try:
            r, _, _ = select.select([sock], [], [], _SLICE)
        except (OSError, ValueError):
            return False
        return bool(r)

    def _pump(self, link: _Link, d: str) -> None:
        src, dst = (link.client, link.server) if d == UP else (link.server, link.client)
        held = bytearray()
        try:
            while not link.closed.is_set() and not self._closed:
                mode = self._modes[d]
                if mode == _HOLD:
                    with self._cond:
                        self._cond.wait(_SLICE)
                    continue
                if held and mode != _HOLE:
                    data, held = bytes(held), bytearray()
                    with self._cond:
                        cut = self._cuts[d]
                        if cut is not None:
                            self._cuts[d] = None
                    if cut is not None:  # release_cut: part of what was held, then close
                        self._forward(link, dst, data[:cut], d, _PASS)
                        with self._cond:
                            self.cuts_done += 1
                        return
                    if not self._forward(link, dst, data, d, mode):
                        return
                    continue
                if mode == _HOLE and len(held) >= self.hold_cap:
                    with self._cond:
                        self._cond.wait(_SLICE)
                    continue
                if not self._wait_readable(src):
                    continue
                try:
                    data = src.recv(_CHUNK)
                except socket.timeout:
                    continue
                except OSError:
                    return
                if not data:
                    return
                with self._cond:
                    self.bytes_in[d] += len(data)
                    cut = self._cuts[d]
                    if cut is not None:
                        self._cuts[d] = None
                if cut is not None:
                    self._forward(link, dst, data[:cut], d, _PASS)
                    with self._cond:
                        self.cuts_done += 1
                    return
                if self._modes[d] == _HOLE:
                    held += data
                    continue
                if not self._forward(link, dst, data, d, self._modes[d]):
                    return
        finally:
            link.close()

    def _forward(self, link: _Link, dst: socket.socket, data: bytes, d: str, mode: str) -> bool:
        """Write ``data`` on (a byte at a time when fragmenting); False once the link is
        gone. Waits in slices, so a receiver that stops reading cannot pin this thread."""
        pieces = [data[i : i + 1] for i in range(len(data))] if mode == _TRICKLE else [data]
        for piece in pieces:
            view = memoryview(piece)
            while view:
                if link.closed.is_set() or self._closed:
                    return False
                try:
                    n = dst.send(view)
                except socket.timeout:
                    continue
                except OSError:
                    return False
                view = view[n:]
                with self._cond:
                    self.bytes_out[d] += n
            if mode == _TRICKLE:
                time.sleep(self._delay)
        return True
