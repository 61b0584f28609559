"""The request mux: one wildcard inbox subscription for every request of a client, and a
table from reply token to the caller waiting for it.

A request publishes with reply ``<prefix>.<token>`` and waits on a Waiter; the inbox's hook
(on the reading thread) wakes the waiter whose token the reply names. The waiting thread
usually reads the reply itself (Reader.wait_for): no thread wake-up on its path.
"""

from __future__ import annotations

import itertools
import re
import threading
from typing import Dict, Optional

from . import _protocol as proto
from . import errors
from ._conn import Waiter
from ._nuid import NUID
from ._outbox import CRLF, SIZE_LINES, Outbox, as_bytes, size_line
from ._reader import Reader
from ._subs import SubscriptionTable
from .msg import HeadersLike, Msg
from .subscription import Subscription

__all__ = ["RequestMux"]

DEFAULT_PENDING_MSGS = 65536
DEFAULT_PENDING_BYTES = 64 * 1024 * 1024
# The server's refusal of a PUB names its subject: see fail_denied.
_DENIED_PUB_RE = re.compile(r'permissions violation for publish to "([^"]*)"', re.I)


class RequestMux:
    """Requests of one client, each waiting for its first reply."""

    def __init__(
        self,
        outbox: Outbox,
        reader: Reader,
        table: SubscriptionTable,
        nuid: NUID,
    ) -> None:
        self._outbox = outbox
        self._reader = reader
        self._table = table
        self._nuid = nuid
        self.inbox_prefix = "_INBOX"  # set at connect
        self._lock = threading.Lock()
        self.sub: Optional[Subscription] = None
        self._prefix = ""
        self.waiting: Dict[str, Waiter] = {}
        self._ids = itertools.count(1)

    def _ensure_sub(self) -> None:
        if self.sub is not None:
            return
        with self._lock:
            if self.sub is None:
                prefix = f"{self.inbox_prefix}.{self._nuid.next()}."
                self._prefix = prefix
                self.sub = self._table.add(
                    prefix + "*",
                    None,
                    None,
                    None,
                    DEFAULT_PENDING_MSGS,
                    DEFAULT_PENDING_BYTES,
                    hook=self._on_response,
                )

    def _on_response(self, msg: Msg) -> bool:
        waiter = self.waiting.pop(msg.subject[len(self._prefix) :], None)
        if waiter is not None:
            waiter.wake(msg)
        return True  # replies nobody waits for any more (timed out) are expected: drop

    def request(
        self,
        subject: str,
        data: bytes,
        t: float,
        headers: Optional[HeadersLike],
        prefix: Optional[bytes] = None,
    ) -> Msg:
        """Publish a request and wait up to ``t`` s for its first reply. ``prefix`` is a
        ready ``PUB <subject> `` for subjects built from checked parts (see api_request)."""
        self._table.link.check_open("request")
        self._ensure_sub()
        token = str(next(self._ids))
        waiter = Waiter(subject)
        self.waiting[token] = waiter
        reader = self._reader
        quiet = reader.quiet_begin()  # the reply is ours to read: the network thread sleeps on
        try:
            if prefix is None:
                self._outbox.send_request(subject, data, self._prefix + token, headers)
            else:  # (never through the publish cache, which holds checked subjects only)
                data = as_bytes(data)
                n = len(data)
                self._outbox.check_payload(n)
                reply = (self._prefix + token).encode()
                size = SIZE_LINES.get(n) or size_line(n)
                self._outbox.send_frame(b"".join((prefix, reply, b" ", size, data, CRLF)), n)
            if not reader.wait_for(waiter, t):
                raise errors.TimeoutError(
                    f"nats: timeout: request on {subject!r}: no reply within {t} s"
                )
        finally:
            self.waiting.pop(token, None)
            reader.quiet_end(quiet)
        if waiter.error is not None:
            raise waiter.error
        msg = waiter.msg
        assert msg is not None
        if msg._hdr is not None and msg.status == 503:
            raise errors.NoRespondersError(
                f"nats: no responders available for request on {subject!r}"
            )
        return msg

    def api_request(self, subject: str, data: bytes, timeout: float) -> Msg:
        """A request on a subject JetStream built from checked parts. A consumer-create
        subject ends with the consumer's filter, wildcards included (the server and nats.go
        do so), which the check of a user's publish subject refuses: only the subscribe
        rules apply here."""
        proto.check_subscribe_subject(subject)
        return self.request(subject, data, timeout, None, b"PUB %b " % subject.encode())

    def fail_all(self, error: errors.NATSError) -> None:
        """Wake every waiting request with ``error`` (the connection was lost or closed)."""
        while self.waiting:
            try:
                _, waiter = self.waiting.popitem()
            except KeyError:
                break
            waiter.wake(error=error)

    def fail_denied(self, message: str, err: errors.NATSError) -> None:
        """The server refused a PUB: if a request to that subject waits for its reply, fail
        the oldest such request with ``err`` instead of letting it run into its timeout.
        The server answers every denied PUB with its own -ERR, in order, so the oldest
        waiting request to that subject is the one this -ERR is about."""
        m = _DENIED_PUB_RE.match(message)
        if m is None:
            return
        subject = m.group(1)
        for token, waiter in list(self.waiting.items()):
            if waiter.subject == subject:
                if self.waiting.pop(token, None) is waiter:
                    waiter.wake(error=err)
                return
