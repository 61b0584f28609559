"""Fixtures the JetStream integration modules share (the server, the client, ``js`` and
``stream`` come from the jetstream_sync.testing plugin)."""

from __future__ import annotations

from typing import Iterator

import pytest
from faultproxy import FaultProxy
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.jetstream.kv import KeyValue
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name


@pytest.fixture
def errs() -> Errors:
    """What error_cb was given, on the ``ejs`` client."""
    return Errors()


@pytest.fixture
def proxy(nats_server: NATSServer) -> Iterator[FaultProxy]:
    """A fault proxy (faultproxy.py) in front of the module's server; closed after the test."""
    p = FaultProxy("127.0.0.1", nats_server.port)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def ejs(nats_server: NATSServer, errs: Errors) -> Iterator[JetStream]:
    """JetStream on a client of its own whose error_cb is ``errs``."""
    with nats.connect(nats_server.url, error_cb=errs) as nc:
        yield nc.jetstream()


@pytest.fixture
def bucket(js: JetStream) -> Iterator[str]:
    """A Key-Value bucket name no other test uses; the bucket is deleted afterwards if it
    was made."""
    name = stream_name("KV")
    yield name
    try:
        js.delete_key_value(name)
    except nats.BucketNotFoundError:
        pass


@pytest.fixture
def kv(js: JetStream, bucket: str) -> KeyValue:
    return js.create_key_value(bucket=bucket, history=5)
