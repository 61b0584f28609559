"""The server's JetStream API level (ADR-44): read once, and features refused with
ApiLevelError, by the client before sending and by the server for Nats-Required-Api-Level."""

from __future__ import annotations

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream import api_level
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer


def test_the_level_is_the_servers_and_asked_once(js: JetStream, nats_server: NATSServer) -> None:
    level = js.api_level()
    assert level == js.account_info().api.level  # the same number $JS.API.INFO reports
    assert level >= api_level.FAST_INGEST[1]  # the shipped server (2.14+) has every feature
    calls = []
    real = js._api
    js._levels._api = lambda suffix: calls.append(suffix) or real(suffix)  # type: ignore[method-assign]
    for _ in range(3):
        assert js.api_level() == level
    assert calls == []  # cached for this server


def test_a_feature_above_the_level_is_refused_before_anything_is_sent(js: JetStream) -> None:
    level = js.api_level()
    with pytest.raises(nats.ApiLevelError) as caught:
        js._levels.require(("time travel", level + 1))
    err = caught.value
    assert isinstance(err, nats.APIError) and err.err_code == 10185 and err.code == 412
    text = str(err)
    assert "time travel" in text and f"level {level + 1}" in text and f"has level {level}" in text
    js._levels.require(("what the server has", level))  # no error at its own level


def test_the_server_refuses_a_request_above_its_level(nc: nats.Client, js: JetStream) -> None:
    too_high = js.api_level() + 1
    reply = nc.request(
        f"{js.prefix}.INFO", b"", timeout=5, headers=api_level.required_level_header(too_high)
    )
    with pytest.raises(nats.ApiLevelError) as caught:
        from jetstream_sync.jetstream._response import parse_api_response

        parse_api_response(reply.data, f"{js.prefix}.INFO")
    assert caught.value.err_code == 10185
