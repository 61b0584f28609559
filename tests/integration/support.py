"""What several integration test modules share: an error_cb that keeps what it is given,
the client operations a server trace log (``nats-server -V``) shows, draining a
Key-Value watcher, a time bound for a plain ``for`` over a blocking iterator, and a server
stopped once a pull waits on it."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Optional, Protocol

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.kv import Entry, KeyWatcher
from jetstream_sync.testing import wait_until


class Errors:
    """An error_cb that keeps what it is given."""

    def __init__(self) -> None:
        self.seen: List[Exception] = []

    def __call__(self, exc: Exception) -> None:
        self.seen.append(exc)

    def kinds(self) -> List[type]:
        return [type(e) for e in self.seen]


def our_ops(trace: Path) -> List[str]:
    """Every operation our client sent, in order, as the trace log shows it."""
    ops = []
    for line in trace.read_text(errors="replace").splitlines():
        if "python3-sync" in line and "<<- [" in line:
            ops.append(line.split("<<- [", 1)[1].rstrip("]"))
    return ops


def lose_the_create_race(
    js: Any, monkeypatch: pytest.MonkeyPatch, url: str, **consumer_fields: Any
) -> None:
    """Make ``js``'s next consumer lookup say 'not found' after another connection has
    created that durable with ``consumer_fields``: the library's create then finds it made
    meanwhile (the "already exists" race of seed 001). Later lookups are real."""
    real_info = js.consumer_info

    def lookup_then_lose_the_race(of_stream: str, name: str) -> Any:
        monkeypatch.setattr(js, "consumer_info", real_info)  # only the first lookup races
        with nats.connect(url) as other:
            other.jetstream().add_consumer(of_stream, durable_name=name, **consumer_fields)
        raise nats.ConsumerNotFoundError(404, 10014, "consumer not found")

    monkeypatch.setattr(js, "consumer_info", lookup_then_lose_the_race)


def drain(w: KeyWatcher, expect: int, timeout: float = 10.0) -> List[Optional[Entry]]:
    """The ``expect`` next things a Key-Value watcher hands out (each waited for up to
    ``timeout``: a loaded machine can pause mid-burst), then whatever else comes within a
    short quiet moment (nothing, if the test is right: the caller's assertion shows it)."""
    out: List[Optional[Entry]] = []
    try:
        for _ in range(expect):
            out.append(w.updates(timeout))
        while True:
            out.append(w.updates(0.3))
    except nats.TimeoutError:
        return out


class _Stoppable(Protocol):
    def stop(self) -> None: ...


@contextmanager
def stop_after(it: _Stoppable, seconds: float) -> Iterator[None]:
    """Call ``it.stop()`` after ``seconds`` unless the block has ended: a ``for`` over a
    blocking iterator (``messages()``, a watcher) then ends instead of waiting forever if
    messages stop coming, and the test's own assertion on what it read says what went
    wrong. The iteration under test stays the plain ``for`` a user writes."""
    timer = threading.Timer(seconds, it.stop)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


@contextmanager
def paused_once_pull_waits(srv: Any, js: Any, stream: str, consumer: str) -> Iterator[None]:
    """Stop ``srv`` (SIGSTOP) from another thread once ``consumer`` has a waiting pull, as
    the block's fetch makes one; resume it when the block ends. ``js`` must be a connection
    other than the fetching one (it asks the server while the fetch waits)."""

    def pause_when_the_pull_waits() -> None:
        wait_until(lambda: js.consumer_info(stream, consumer).num_waiting == 1, what="the pull")
        srv.pause()

    t = threading.Thread(target=pause_when_the_pull_waits)
    t.start()
    try:
        yield
    finally:
        t.join(15)
        srv.resume()
    assert not t.is_alive()
