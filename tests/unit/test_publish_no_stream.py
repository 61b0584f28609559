"""js.publish's retries after a 503 (no responders): the client's own logic, so a scripted
request stands in for the connection. The server's side of a 503 is in
tests/integration/test_jetstream.py."""

from __future__ import annotations

from typing import Any, List

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream.publish import Publisher


class ScriptedRequests:
    """``nc.request`` raising the scripted errors in turn; records each attempt's timeout."""

    def __init__(self, *outcomes: BaseException) -> None:
        self.outcomes = list(outcomes)
        self.timeouts: List[float] = []

    def request(self, subject: str, data: bytes, timeout: float, headers: Any) -> Any:
        self.timeouts.append(timeout)
        raise self.outcomes.pop(0)


def publisher(nc: ScriptedRequests) -> Publisher:
    pub = Publisher.__new__(Publisher)
    pub._nc = nc  # type: ignore[assignment]
    pub._timeout = 5.0
    return pub


def test_a_retry_timing_out_after_a_503_is_still_no_stream() -> None:
    # The last retry gets what the backoff left of the deadline; under load its reply can
    # be late. The caller asked "is there a stream?": the 503 already answered.
    nc = ScriptedRequests(errors.NoRespondersError("503"), errors.TimeoutError("late"))
    with pytest.raises(errors.NoStreamResponseError, match="no stream answered a publish"):
        publisher(nc).publish("orders.new", b"x", timeout=2.0)
    assert len(nc.timeouts) == 2 and nc.timeouts[1] < nc.timeouts[0] <= 2.0


def test_a_timeout_with_no_503_before_it_stays_a_timeout() -> None:
    nc = ScriptedRequests(errors.TimeoutError("no reply"))
    with pytest.raises(errors.TimeoutError) as caught:
        publisher(nc).publish("orders.new", b"x", timeout=2.0)
    assert not isinstance(caught.value, errors.NoStreamResponseError)
    assert len(nc.timeouts) == 1
