"""Status messages of consumers: what each one means, and the heartbeat watch.

JetStream answers pulls, and interrupts deliveries, with header-only messages whose first
line carries a status (``NATS/1.0 404 No Messages``). None of them is ever handed to the
user as a message; this module says what each one is (the table in ARCHITECTURE.md) and
builds the error for those that are errors. The callers decide what a kind means to them:
a legacy fetch raises on a limit that a consume() loop only reports.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Optional, Tuple

from .. import errors
from .._seam import raw_headers
from ..msg import Msg

__all__ = [
    "END",
    "ERROR",
    "HEARTBEAT",
    "LIMIT",
    "NO_MESSAGES",
    "PIN_MISMATCH",
    "PULL_HEARTBEAT_ALARM",
    "REQUEST_TIMEOUT",
    "RETRY",
    "TERMINAL",
    "HeartbeatWatch",
    "check_alarm",
    "classify",
    "pending_counts",
    "status_error",
]

# Kinds of status message.
HEARTBEAT = "heartbeat"  # 100 Idle Heartbeat (flow control is the push side's business)
NO_MESSAGES = "no_messages"  # 404: a no_wait pull found nothing (more)
REQUEST_TIMEOUT = "request_timeout"  # 408: the pull's expires ran out
END = "end"  # 409 Message Size Exceeds MaxBytes / Batch Completed: the pull is over
LIMIT = "limit"  # 409 Exceeded MaxWaiting / MaxRequestBatch / ...: the pull was refused
RETRY = "retry"  # 409 Leadership Change / Server Shutdown: cut, pulling again works
TERMINAL = "terminal"  # 409 Consumer Deleted / Consumer is push based, 400: give up
PIN_MISMATCH = "pin_mismatch"  # 423: another client holds the priority group's pin
ERROR = "error"  # 503 (nobody answered) and anything unknown

_409_KINDS: Tuple[Tuple[str, str], ...] = (
    ("message size exceeds maxbytes", END),
    ("batch completed", END),
    ("exceeded max", LIMIT),  # MaxWaiting, MaxRequestBatch, MaxRequestExpires, ...
    ("leadership change", RETRY),
    ("server shutdown", RETRY),
    ("consumer deleted", TERMINAL),
    ("consumer is push based", TERMINAL),
)


def classify(msg: Msg) -> Optional[str]:
    """The kind of status ``msg`` is, or None for a message to hand to the user."""
    if raw_headers(msg) is None:
        return None
    code = msg.status
    if code is None:
        return None
    if code == 100:
        return HEARTBEAT
    if code == 404:
        return NO_MESSAGES
    if code == 408:
        return REQUEST_TIMEOUT
    if code == 409:
        text = msg.description.lower()
        for prefix, kind in _409_KINDS:
            if text.startswith(prefix):
                return kind
        return ERROR
    if code == 400:
        return TERMINAL
    if code == 423:
        return PIN_MISMATCH
    return ERROR


def status_error(msg: Msg, where: str) -> errors.JetStreamError:
    """The error a status message stands for; ``where`` names the consumer."""
    code = msg.status or 0
    text = msg.description
    if code == 503:
        return errors.NoConsumerResponseError(
            f"{where}: no answer to the pull (503): the consumer or its stream does not exist"
        )
    lowered = text.lower()
    cls: type[errors.PullStatusError] = errors.PullStatusError
    if code == 400:
        cls = errors.BadPullRequestError
    elif code == 423:
        cls = errors.PinIdMismatchError
    elif code == 409:
        if lowered.startswith("consumer deleted"):
            cls = errors.ConsumerDeletedError
        elif lowered.startswith("consumer is push based"):
            cls = errors.ConsumerIsPushBasedError
        elif lowered.startswith("exceeded max"):
            cls = errors.PullLimitExceededError
        elif lowered.startswith(("leadership change", "server shutdown")):
            cls = errors.ConsumerLeadershipChangedError
    return cls(code, text, where=where)


def pending_counts(msg: Msg) -> Tuple[int, int]:
    """(messages, bytes) a 408/409 says were still owed to the pull (0 when absent)."""
    headers = msg.all_headers
    try:
        n = int(headers.get("Nats-Pending-Messages") or 0)
        b = int(headers.get("Nats-Pending-Bytes") or 0)
    except ValueError:
        return 0, 0
    return n, b


PULL_HEARTBEAT_ALARM = 2.0  # missed intervals before NoHeartbeatError on a pull (ADR-37)
CONFIRM_WAIT = 1.0  # the longest a missed alarm waits for its PING's PONG (HeartbeatWatch)


def check_alarm(alarm: Any) -> float:
    """A ``heartbeat_alarm`` factor: more than one interval, or every heartbeat is late."""
    if isinstance(alarm, bool) or not isinstance(alarm, (int, float)) or not alarm > 1:
        raise errors.InvalidArgumentError(
            f"heartbeat_alarm must be a number of idle heartbeat intervals > 1, got {alarm!r}"
        )
    return float(alarm)


class HeartbeatWatch:
    """Raises the alarm when nothing (message or status) came for ``factor`` heartbeats.

    ``alive()`` on every arrival; ``due_in()`` says how long a waiter may sleep before it
    must look again, ``missed()`` whether the alarm is up. Reads ``time.monotonic`` on
    each call, so tests move time with freezegun instead of sleeping.
    """

    __slots__ = ("_last", "limit")

    def __init__(self, interval: float, factor: float = 2.0) -> None:
        if interval <= 0 or factor <= 0:
            raise errors.InvalidArgumentError(
                f"heartbeat interval and factor must be > 0, got {interval!r} and {factor!r}"
            )
        self.limit = interval * factor
        self._last = time.monotonic()

    def alive(self) -> None:
        """Note an arrival (a message or a status): the alarm starts again."""
        self._last = time.monotonic()

    def due_in(self) -> float:
        """Seconds until the alarm is due (0 when it is)."""
        return max(0.0, self._last + self.limit - time.monotonic())

    def missed(self) -> bool:
        """True when nothing came for ``limit`` seconds."""
        return time.monotonic() - self._last >= self.limit

    def confirmed(
        self, flush: Callable[[float], None], wait: float, arrived: Callable[[], bool]
    ) -> bool:
        """Whether a missed alarm is the server's silence, not this process's: called when
        ``missed()``, before raising. ``flush`` sends a PING and waits up to ``wait`` seconds
        for its PONG (``Client.flush``); everything the server wrote before the PONG has then
        been read, so a heartbeat that only sat in the socket while this process did not run
        (a busy machine: the waiting thread woke past the alarm and looked at an empty queue)
        is seen, and ``arrived()`` is true. The PONG wait is bounded by ``max(limit, 1 s)``
        and by ``wait`` (what is left of the caller's deadline).

        True (raise): the PONG came and nothing else did, or no PONG came within the whole
        bound. False (go on: the caller's loop takes what came, or ends at its deadline):
        something arrived, or the caller's deadline cut the PONG wait short."""
        bound = max(self.limit, CONFIRM_WAIT)
        try:
            flush(min(wait, bound))
        except errors.NATSError:  # no PONG (or no connection)
            return not arrived() and wait >= bound
        return not arrived()
