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


def test_a_stream_config_of_a_newer_level_carries_it_and_a_plain_one_does_not(
    nc: nats.Client, js: JetStream, nats_server: NATSServer
) -> None:
    """The create request of a stream with allow_batched (level 4) carries
    Nats-Required-Api-Level: 4, for the server to refuse it below that level (one before
    2.12 would make the stream without the field, silently); a plain one carries nothing."""
    with nats.connect(nats_server.url) as spy:
        seen = spy.subscribe(f"{js.prefix}.STREAM.CREATE.>")
        spy.flush()
        js.add_stream(name="LVL4", subjects=["lvl4.>"], allow_batched=True)
        js.add_stream(name="LVL0", subjects=["lvl0.>"])
        fast, plain = seen.next_msg(timeout=5), seen.next_msg(timeout=5)
    assert fast.subject.endswith(".LVL4") and plain.subject.endswith(".LVL0")
    assert (fast.headers or {}).get(api_level.REQUIRED_API_LEVEL) == "4"
    assert api_level.REQUIRED_API_LEVEL not in (plain.headers or {})
    js.delete_stream("LVL4")
    js.delete_stream("LVL0")


def test_a_stream_config_above_the_servers_level_is_refused_before_it_is_sent(
    nc: nats.Client, js: JetStream
) -> None:
    """As on a 2.11 server (level 1): counters need 2. Refused, naming the field, and no
    stream made without it."""
    js.api_level()
    js._levels._known = (nc.server_info.get("server_id"), 1)
    with pytest.raises(nats.ApiLevelError) as caught:
        js.add_stream(name="CNT", subjects=["cnt.>"], allow_msg_counter=True, allow_direct=True)
    assert "allow_msg_counter" in str(caught.value) and "level 2" in str(caught.value)
    with pytest.raises(nats.StreamNotFoundError):
        js.stream_info("CNT")
    js.add_stream(name="TTL", subjects=["ttl.>"], allow_msg_ttl=True)  # level 1: fine
    js.delete_stream("TTL")
