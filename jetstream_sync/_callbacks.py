"""The callback thread, which runs the user's connection callbacks (error_cb,
disconnected_cb, reconnected_cb, closed_cb) in order, and the internal hooks that run when
the client reconnects or closes (JetStream re-pulls and ends its waits there).

User code never runs on the network, flusher or timer threads: what those have to tell the
user goes through this queue.
"""

from __future__ import annotations

import logging
import queue
from typing import Any, Callable, List, Optional, Tuple

from . import _observe, errors
from ._link import NEW, Link

__all__ = ["Callbacks", "Hooks"]

log = logging.getLogger("jetstream_sync")


class Callbacks:
    """The callback thread's queue (None ends it) and the error reporting built on it."""

    def __init__(self, link: Link) -> None:
        self._link = link
        self.error_cb: Optional[Callable[[Exception], None]] = None
        self._queue: queue.SimpleQueue[Optional[Tuple[Callable[..., None], Tuple[Any, ...]]]]
        self._queue = queue.SimpleQueue()

    def run(self) -> None:
        """The callback thread."""
        while True:
            item = self._queue.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except Exception:
                log.exception("jetstream_sync: a connection callback raised")

    def call(self, fn: Optional[Callable[..., None]], *args: Any) -> None:
        """Run ``fn(*args)`` on the callback thread, after the earlier ones (None: nothing)."""
        if fn is not None:
            self._queue.put((fn, args))

    def report(self, err: BaseException) -> None:
        """Hand ``err`` to error_cb on the callback thread (or log it when there is none)."""
        if _observe.observer is not None:
            _observe.notify_reported(err)
        if self.error_cb is not None and self._link.state is not NEW:
            self._queue.put((self.error_cb, (err,)))
        elif isinstance(err, errors.NATSError):
            log.warning("jetstream_sync: %s: %s", type(err).__name__, err)
        else:  # a user callback's own exception: its traceback says which callback
            log.warning("jetstream_sync: a callback raised %s", type(err).__name__, exc_info=err)

    def report_now(self, err: errors.NATSError) -> None:
        """Hand ``err`` to error_cb in this thread, now: connect() reports its failed
        attempts so, as nats-py does, before the callback thread exists (and when connect
        raises, it never will)."""
        if self.error_cb is None:
            log.warning("jetstream_sync: %s: %s", type(err).__name__, err)
            return
        try:
            self.error_cb(err)
        except Exception:
            log.exception("jetstream_sync: error_cb raised")

    def stop(self) -> None:
        """End the thread once what is queued has run."""
        self._queue.put(None)


class Hooks:
    """Internal code to run after each reconnect (on the network thread) and once at close."""

    def __init__(self, link: Link, on_error: Callable[[BaseException], None]) -> None:
        self._link = link
        self._on_error = on_error
        self._close: List[Callable[[], None]] = []
        self._reconnect: List[Callable[[], None]] = []

    def add_reconnect_hook(self, fn: Callable[[], None]) -> None:
        """Run internal ``fn`` on the network thread after each reconnect (it must not
        block: pull consumers use it to re-pull, since the server forgot their pulls)."""
        self._reconnect.append(fn)

    def remove_reconnect_hook(self, fn: Callable[[], None]) -> None:
        """Stop running ``fn`` after reconnects (nothing if it is not there)."""
        try:
            self._reconnect.remove(fn)
        except ValueError:
            pass

    def add_close_hook(self, fn: Callable[[], None]) -> None:
        """Run internal ``fn`` once when the client closes (or at once if it has)."""
        if self._link.closing:
            fn()
        else:
            self._close.append(fn)

    def remove_close_hook(self, fn: Callable[[], None]) -> None:
        """Stop running ``fn`` at close (nothing if it is not there)."""
        try:
            self._close.remove(fn)
        except ValueError:
            pass

    def run_reconnect_hooks(self) -> None:
        """Run every reconnect hook (on the network thread); a hook's exception goes to
        ``on_error`` and the others still run."""
        for hook in list(self._reconnect):
            try:
                hook()
            except Exception as exc:  # a bug in internal code: never stop the reconnect
                self._on_error(exc)

    def run_close_hooks(self) -> None:
        """Run every close hook; a hook's exception is logged and the others still run."""
        for hook in self._close:
            try:
                hook()
            except Exception:
                log.exception("jetstream_sync: a close hook failed")
