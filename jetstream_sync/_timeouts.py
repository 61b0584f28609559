"""Timeouts as deadlines that count down (after urllib3's Timeout).

A blocking call turns its ``timeout`` into a :class:`Deadline` once, then asks it for
``remaining()`` before each wait, so a call made of several waits never overruns.
"""

from __future__ import annotations

import math
import time
from typing import Any, Literal, Optional, overload

from .errors import BadTimeoutError, TimeoutError

__all__ = ["SIGNAL_SLICE", "Deadline", "check_timeout"]

# The longest a caller's thread waits inside one system call. Python runs signal handlers
# (Ctrl-C's KeyboardInterrupt) only in the main thread, and only between bytecodes: a
# signal the kernel hands to another of our threads (it may, e.g. when the main thread
# blocks the signal or already has one pending) does not interrupt the main thread's
# poll(), so a blocking call with a long timeout would ignore Ctrl-C until it ended.
# Waking this often lets a pending signal be seen within the slice
# (tests/integration/test_ctrl_c.py).
SIGNAL_SLICE = 0.5


@overload
def check_timeout(value: Any, what: str = ..., *, allow_none: Literal[False] = ...) -> float: ...
@overload
def check_timeout(value: Any, what: str = ..., *, allow_none: bool) -> Optional[float]: ...
def check_timeout(
    value: Any, what: str = "timeout", *, allow_none: bool = False
) -> Optional[float]:
    """A timeout in seconds: a finite number >= 0, or None where ``allow_none``."""
    if value is None:
        if allow_none:
            return None
        raise BadTimeoutError(f"{what} must be a number of seconds, got None")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadTimeoutError(f"{what} must be a number of seconds, got {type(value).__name__}")
    try:
        t = float(value)
    except OverflowError:  # an int too large for a float: as good as forever
        t = math.inf
    if math.isnan(t) or t < 0:
        raise BadTimeoutError(f"{what} must be >= 0 seconds, got {value!r}")
    if math.isinf(t):
        if allow_none:
            return None
        raise BadTimeoutError(f"{what} must be finite, got {value!r}")
    return t


class Deadline:
    """A point in monotonic time; ``remaining()`` counts down to zero, never below."""

    __slots__ = ("at", "what")

    def __init__(self, timeout: float, what: str = "operation") -> None:
        self.at = time.monotonic() + timeout
        self.what = what

    def remaining(self) -> float:
        """Seconds left, 0 once passed."""
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        """True once the deadline has passed."""
        return time.monotonic() >= self.at

    def check(self) -> float:
        """The remaining time, or TimeoutError when none is left."""
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"{self.what} timed out")
        return left
