"""Fixtures the JetStream integration modules share (the server, the client, ``js`` and
``stream`` come from the jetstream_sync.testing plugin)."""

from __future__ import annotations

from typing import Iterator

import pytest
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer


@pytest.fixture
def errs() -> Errors:
    """What error_cb was given, on the ``ejs`` client."""
    return Errors()


@pytest.fixture
def ejs(nats_server: NATSServer, errs: Errors) -> Iterator[JetStream]:
    """JetStream on a client of its own whose error_cb is ``errs``."""
    with nats.connect(nats_server.url, error_cb=errs) as nc:
        yield nc.jetstream()
