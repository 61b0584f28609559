"""How the trace context goes into a message's headers: added to a copy, never over a
traceparent of the user's, in every shape of headers publish accepts."""

from __future__ import annotations

from typing import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

from jetstream_sync.msg import Headers
from jetstream_sync.otel._telemetry import with_context

MINE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def in_span() -> Iterator[str]:
    tracer = TracerProvider().get_tracer("t")
    with tracer.start_as_current_span("s") as span:
        yield f"{span.get_span_context().trace_id:032x}"


def test_no_headers_get_a_dict_with_the_context(in_span: str) -> None:
    out = with_context(None)
    assert isinstance(out, dict) and in_span in out["traceparent"]


def test_without_a_current_span_nothing_is_added() -> None:
    assert not trace.get_current_span().get_span_context().is_valid
    assert with_context(None) is None
    mine = {"a": "1"}
    assert with_context(mine) is mine


def test_a_dict_is_copied_with_its_multi_values(in_span: str) -> None:
    mine = {"a": ["1", "2"]}
    out = with_context(mine)
    assert mine == {"a": ["1", "2"]}  # the caller's object is unchanged
    assert out is not mine and out["a"] == ["1", "2"] and in_span in out["traceparent"]


def test_headers_are_copied_with_every_value(in_span: str) -> None:
    mine = Headers([("a", "1"), ("a", "2")])
    out = with_context(mine)
    assert isinstance(out, Headers) and out is not mine
    assert out.get_all("a") == ["1", "2"] and in_span in out["traceparent"]
    assert "traceparent" not in mine


@pytest.mark.parametrize("key", ["traceparent", "TraceParent", "TRACEPARENT"])
def test_a_users_traceparent_is_never_overwritten(in_span: str, key: str) -> None:
    mine = {key: MINE}
    assert with_context(mine) is mine
    headers = Headers([(key, MINE)])
    assert with_context(headers) is headers
