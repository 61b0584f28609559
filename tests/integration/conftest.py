"""Fixtures the JetStream integration modules share (the server and the client come from the
jetstream_sync.testing plugin)."""

from __future__ import annotations

from typing import Iterator

import pytest
from support import stream_name

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream


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
