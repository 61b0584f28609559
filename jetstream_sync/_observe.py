"""The core's one hook for instrumentation: a module-level slot, None unless a package such as
:mod:`jetstream_sync.otel` installs an :class:`Observer` in it.

It is read only where something rare happens: an error handed to error_cb (a slow consumer,
a callback that raised, ...), a message dropped by a full subscription queue, a reconnect,
and a
JetStream API call (``JetStream._api``, a request and its JSON answer). Those paths read
``_observe.observer`` once and test it against None, so with nothing installed they cost one
attribute read; the hot paths (publish, delivery, acks) never read it at all: the
instrumentation reaches them by wrapping public methods instead (see
``jetstream_sync/otel/__init__.py``). Nothing here imports anything: the core keeps zero
runtime dependencies.
"""

from __future__ import annotations

from typing import Callable, Optional, Protocol, TypeVar

__all__ = ["Observer", "observer"]

T = TypeVar("T")


class Observer(Protocol):
    """What the core tells an installed observer. Every method may run on any thread and
    must not raise (what it raises is swallowed)."""

    def reported(self, err: BaseException) -> None:
        """An error was handed to error_cb (or logged, without one): a NATSError, or the
        exception a message callback raised."""
        ...

    def dropped(self, subject: str) -> None:
        """A message for a subscription on ``subject`` was dropped: its queue was full."""
        ...

    def reconnected(self) -> None:
        """A client connected again after losing its connection."""
        ...

    def api_call(self, subject: str, call: Callable[[], T]) -> T:
        """Run ``call`` (one JetStream API request on ``subject`` and its parsed answer) and
        return what it returns, or raise what it raises."""
        ...


observer: Optional[Observer] = None
"""The installed observer; None: nothing is observed."""


def notify_reported(err: BaseException) -> None:
    """Tell the observer, if any, of a reported error; what it raises is swallowed (an
    observer's fault must not change what the client does)."""
    obs = observer
    if obs is not None:
        try:
            obs.reported(err)
        except Exception:  # pragma: no cover - an observer must not raise
            pass


def notify_dropped(subject: str) -> None:
    """Tell the observer, if any, of a dropped message (as :func:`notify_reported`)."""
    obs = observer
    if obs is not None:
        try:
            obs.dropped(subject)
        except Exception:  # pragma: no cover - an observer must not raise
            pass


def notify_reconnected() -> None:
    """Tell the observer, if any, of a reconnect (as :func:`notify_reported`)."""
    obs = observer
    if obs is not None:
        try:
            obs.reconnected()
        except Exception:  # pragma: no cover - an observer must not raise
            pass
