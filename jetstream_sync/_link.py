"""What every room of the core shares about the live connection: the client's state, the
socket in use, and the three locks.

Locks, and the order in which a thread may hold more than one:

* ``read_lock``: held while reading the socket and routing what was read (the network
  thread, or a caller reading its own answer: see _reader.py).
* ``send_lock``: serialises writes to the socket; held for one non-blocking ``send``,
  never across a wait (see _outbox.py).
* ``wlock``: guards state changes, the write buffer's control frames whose order matters,
  the ping queue and the subscription table.

Order: ``read_lock`` before ``send_lock`` before ``wlock``. Nothing that can wait for the
network is done under any of them.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Optional

from . import errors

if TYPE_CHECKING:  # pragma: no cover
    from ._conn import Conn

__all__ = ["CLOSED", "CONNECTED", "FORKED", "NEW", "RECONNECTING", "Link"]

# Connection states. Identity comparisons on interned strings are the cheapest test there is.
NEW, CONNECTED, RECONNECTING, CLOSED, FORKED = (
    "new",
    "connected",
    "reconnecting",
    "closed",
    "forked",
)


class Link:
    """The client's state and live socket, read by every room, changed under ``wlock``."""

    __slots__ = ("closing", "conn", "pid", "read_lock", "send_lock", "state", "wlock")

    def __init__(self) -> None:
        self.state = NEW
        self.closing = False  # close() or a final failure has begun: nothing new starts
        self.conn: Optional[Conn] = None
        self.pid = os.getpid()
        self.read_lock = threading.Lock()
        self.send_lock = threading.Lock()
        self.wlock = threading.Lock()

    def check_usable(self) -> None:
        """Raise ClientForkedError in a forked child (the parent's socket is not ours)."""
        if self.state is FORKED:
            raise errors.ClientForkedError(
                f"this client was created in process {self.pid} and cannot be used after "
                f"fork in process {os.getpid()}: connect a new client in the child"
            )

    def check_open(self, what: str) -> None:
        """Raise unless the client is connected or reconnecting."""
        self.check_usable()
        if self.state is CLOSED or self.closing:
            raise errors.ConnectionClosedError(f"cannot {what}: the client is closed")
        if self.state is NEW:
            raise errors.ConnectionClosedError(f"cannot {what}: the client is not connected")
