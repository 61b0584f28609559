"""Fixtures the JetStream integration modules share (the server and the client come from the
jetstream_sync.testing plugin)."""

from __future__ import annotations

from typing import Iterator

import pytest
from support import Errors, stream_name

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer


@pytest.fixture
def js(nc: nats.Client) -> JetStream:
    return nc.jetstream()


@pytest.fixture
def stream(js: JetStream, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh stream ``<PREFIX><n>`` on the subjects ``<prefix><n>.>``, deleted afterwards
    (unless the test deleted it); PREFIX is the test module's ``STREAM_PREFIX``."""
    name = stream_name(getattr(request.module, "STREAM_PREFIX", "S"))
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
    try:
        yield name
    finally:
        try:
            js.delete_stream(name)
        except nats.StreamNotFoundError:
            pass


@pytest.fixture
def errs() -> Errors:
    """What error_cb was given, on the ``ejs`` client."""
    return Errors()


@pytest.fixture
def ejs(nats_server: NATSServer, errs: Errors) -> Iterator[JetStream]:
    """JetStream on a client of its own whose error_cb is ``errs``."""
    with nats.connect(nats_server.url, error_cb=errs) as nc:
        yield nc.jetstream()
