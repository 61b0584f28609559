"""js.publish's retries after a 503 (no responders): the client's own logic, so a scripted
request stands in for the connection. The server's side of a 503 is in
tests/integration/test_publish_retry.py."""

from __future__ import annotations

import math
import threading
import time
from typing import Any, List

import pytest

from jetstream_sync import errors
from jetstream_sync.jetstream import publish as publish_module
from jetstream_sync.jetstream.publish import (
    DEFAULT_RETRY_ATTEMPTS,
    DEFAULT_RETRY_WAIT,
    Publisher,
    check_retry_attempts,
)


class ScriptedRequests:
    """``nc.request`` raising the scripted errors in turn (the last one for ever); records
    each attempt's timeout."""

    def __init__(self, *outcomes: BaseException) -> None:
        self.outcomes = list(outcomes)
        self.timeouts: List[float] = []

    def request(self, subject: str, data: bytes, timeout: float, headers: Any) -> Any:
        self.timeouts.append(timeout)
        raise self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]


def publisher(nc: ScriptedRequests) -> Publisher:
    pub = Publisher.__new__(Publisher)
    pub._nc = nc  # type: ignore[assignment]
    pub._timeout = 5.0
    pub._async = None
    return pub


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> List[float]:
    """The waits between attempts, recorded instead of slept. Only this thread's: the patch is
    on the time module, and a thread another test left in this worker that sleeps in a loop
    once filled the list with 7,008 ones (its sleeps returned at once); it sleeps for real."""
    slept: List[float] = []
    here = threading.get_ident()
    real_sleep = time.sleep

    def sleep(seconds: float) -> None:
        if threading.get_ident() == here:
            slept.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(publish_module.time, "sleep", sleep)
    return slept


def no_responders() -> errors.NoRespondersError:
    return errors.NoRespondersError("503")


def test_the_defaults_are_nats_go_s() -> None:
    assert (DEFAULT_RETRY_ATTEMPTS, DEFAULT_RETRY_WAIT) == (2, 0.25)


def test_by_default_a_503_is_sent_again_twice_a_quarter_second_apart(sleeps: List[float]) -> None:
    nc = ScriptedRequests(no_responders())
    with pytest.raises(errors.NoStreamResponseError, match=r"sent 3 times, 0\.25 s apart"):
        publisher(nc).publish("orders.new", b"x", timeout=5.0)
    assert len(nc.timeouts) == 3
    assert sleeps == [0.25, 0.25]


@pytest.mark.parametrize("attempts", [0, 1, 5])
def test_retry_attempts_is_how_many_times_it_is_sent_again(
    sleeps: List[float], attempts: int
) -> None:
    nc = ScriptedRequests(no_responders())
    with pytest.raises(errors.NoStreamResponseError):
        publisher(nc).publish("orders.new", b"x", retry_attempts=attempts, retry_wait=0.1)
    assert len(nc.timeouts) == attempts + 1
    assert sleeps == [0.1] * attempts


def test_the_context_s_defaults_apply_when_publish_gives_none(sleeps: List[float]) -> None:
    nc = ScriptedRequests(no_responders())
    pub = publisher(nc)
    pub._retry_attempts, pub._retry_wait = 1, 0.5
    with pytest.raises(errors.NoStreamResponseError, match="sent 2 times"):
        pub.publish("orders.new", b"x")
    assert sleeps == [0.5]
    nc.timeouts.clear()
    sleeps.clear()
    with pytest.raises(errors.NoStreamResponseError, match="sent once"):
        pub.publish("orders.new", b"x", retry_attempts=0)  # the call's own wins
    assert len(nc.timeouts) == 1 and sleeps == []


def test_a_503_then_an_ack_is_the_ack(sleeps: List[float]) -> None:
    class Reply:
        data = b'{"stream":"ORDERS","seq":7}'

    class ThenAck(ScriptedRequests):
        def request(self, subject: str, data: bytes, timeout: float, headers: Any) -> Any:
            self.timeouts.append(timeout)
            if len(self.timeouts) < 3:
                raise no_responders()
            return Reply()

    nc = ThenAck()
    ack = publisher(nc).publish("orders.new", b"x")
    assert (ack.stream, ack.seq) == ("ORDERS", 7) and len(nc.timeouts) == 3


def test_retries_stay_within_the_timeout() -> None:
    # 0.3 s: after the first 503 a wait of 0.25 s still leaves room for one more attempt;
    # after that one, no wait fits: the error at once, not at the third attempt.
    nc = ScriptedRequests(no_responders())
    start = time.monotonic()
    with pytest.raises(errors.NoStreamResponseError, match="sent 2 times"):
        publisher(nc).publish("orders.new", b"x", timeout=0.3)
    assert time.monotonic() - start < 0.3
    assert len(nc.timeouts) == 2 and nc.timeouts[1] < 0.3 - 0.25 + 0.01


def test_minus_one_retries_until_the_timeout() -> None:
    nc = ScriptedRequests(no_responders())
    with pytest.raises(errors.NoStreamResponseError):
        publisher(nc).publish("orders.new", b"x", timeout=0.2, retry_attempts=-1, retry_wait=0.02)
    assert 3 <= len(nc.timeouts) <= 11  # every 0.02 s for 0.2 s, whatever the scheduling


def test_a_retry_timing_out_after_a_503_is_still_no_stream(sleeps: List[float]) -> None:
    # The last retry gets what the waits left of the deadline; under load its reply can be
    # late. The caller asked "is there a stream?": the 503 already answered.
    nc = ScriptedRequests(no_responders(), errors.TimeoutError("late"))
    with pytest.raises(errors.NoStreamResponseError, match="no stream answered a publish"):
        publisher(nc).publish("orders.new", b"x", timeout=2.0)
    assert len(nc.timeouts) == 2 and nc.timeouts[1] <= nc.timeouts[0] <= 2.0


def test_a_timeout_with_no_503_before_it_stays_a_timeout() -> None:
    nc = ScriptedRequests(errors.TimeoutError("no reply"))
    with pytest.raises(errors.TimeoutError) as caught:
        publisher(nc).publish("orders.new", b"x", timeout=2.0)
    assert not isinstance(caught.value, errors.NoStreamResponseError)
    assert len(nc.timeouts) == 1


BAD_ATTEMPTS = [(-2, ">= 0"), (1.5, "float"), ("2", "str"), (True, "bool"), (None, "NoneType")]
BAD_WAITS = [(-0.1, ">= 0"), ("0.25", "number"), (math.nan, ">= 0"), (math.inf, "finite")]


@pytest.mark.parametrize(("value", "why"), BAD_ATTEMPTS)
def test_check_retry_attempts_names_the_argument(value: Any, why: str) -> None:
    with pytest.raises(errors.InvalidArgumentError, match=f"publish_retry_attempts.*{why}"):
        check_retry_attempts(value, "publish_retry_attempts")


@pytest.mark.parametrize(("value", "why"), [v for v in BAD_ATTEMPTS if v[0] is not None])
@pytest.mark.parametrize("method", ["publish", "publish_async"])
def test_bad_retry_attempts_are_refused_before_sending(value: Any, why: str, method: str) -> None:
    nc = ScriptedRequests(no_responders())
    with pytest.raises(ValueError, match=f"retry_attempts.*{why}"):
        getattr(publisher(nc), method)("orders.new", b"x", retry_attempts=value)
    assert nc.timeouts == []


@pytest.mark.parametrize(("value", "why"), BAD_WAITS)
@pytest.mark.parametrize("method", ["publish", "publish_async"])
def test_bad_retry_waits_are_refused_before_sending(value: Any, why: str, method: str) -> None:
    nc = ScriptedRequests(no_responders())
    with pytest.raises(errors.InvalidArgumentError, match=f"retry_wait.*{why}"):
        getattr(publisher(nc), method)("orders.new", b"x", retry_wait=value)
    assert nc.timeouts == []


def test_good_edge_values_are_taken() -> None:
    assert check_retry_attempts(-1) == -1 and check_retry_attempts(0) == 0
    nc = ScriptedRequests(no_responders())
    with pytest.raises(errors.NoStreamResponseError):
        publisher(nc).publish("orders.new", b"x", timeout=0.05, retry_wait=0, retry_attempts=3)
    assert len(nc.timeouts) == 4
