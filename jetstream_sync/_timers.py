"""One timer thread per client: a heap of deadlines, each firing a small internal callable.

Timers run internal code only (ping, watchdogs, expiries), never user callbacks, and must
not block. Deadlines are ``time.monotonic()`` values.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable, List, Optional, Tuple

__all__ = ["Timer", "Timers"]


class Timer:
    """A handle to one scheduled call; ``cancel()`` is idempotent and thread-safe."""

    __slots__ = ("cancelled", "deadline", "fn")

    def __init__(self, deadline: float, fn: Callable[[], None]) -> None:
        self.deadline = deadline
        self.fn = fn
        self.cancelled = False

    def cancel(self) -> None:
        """Cancel the call: it will not run (nothing if it ran already)."""
        self.cancelled = True


class Timers:
    """The timer thread of one client and its heap of deadlines."""

    def __init__(self, name: str, on_error: Callable[[BaseException], None]) -> None:
        self._heap: List[Tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition(threading.Lock())
        self._stopped = False
        self._on_error = on_error
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def call_later(self, delay: float, fn: Callable[[], None]) -> Timer:
        """Run ``fn`` on the timer thread ``delay`` seconds from now (at once if negative);
        returns a Timer to cancel it."""
        timer = Timer(time.monotonic() + max(0.0, delay), fn)
        with self._cond:
            heapq.heappush(self._heap, (timer.deadline, next(self._seq), timer))
            if self._heap[0][2] is timer:
                self._cond.notify()
        return timer

    def stop(self, join: bool = True) -> None:
        """Stop the thread and drop the pending calls; ``join`` waits for it (up to 5 s) unless
        called from the timer thread itself."""
        with self._cond:
            self._stopped = True
            self._heap.clear()
            self._cond.notify()
        if join and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5.0)

    def _next_due(self) -> Optional[Timer]:
        """Wait for the earliest live timer to come due; None once stopped."""
        with self._cond:
            while not self._stopped:
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, _, timer = self._heap[0]
                if timer.cancelled:
                    heapq.heappop(self._heap)
                    continue
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                return timer
            return None

    def _run(self) -> None:
        while True:
            timer = self._next_due()
            if timer is None:
                return
            try:
                timer.fn()
            except BaseException as exc:  # a timer bug must not kill the thread
                self._on_error(exc)
