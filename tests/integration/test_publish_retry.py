"""A publish no stream captures fails fast (issue 28, part 3): the server answers the
request with a 503 (no responders: our CONNECT says headers and no_responders), the client
sends it again ``retry_attempts`` times ``retry_wait`` apart (2 and 0.25 s, as nats.go),
then raises NoStreamResponseError — in about half a second, not after the 5 s timeout.
The attempts are counted in the server's trace log; no timing is asserted but a bound far
from the timeout."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Iterator, List, Union

import pytest
from support import our_ops

import jetstream_sync as nats
from jetstream_sync.jetstream.api import PubAck
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

_subjects = itertools.count(1)


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NATSServer]:
    trace = tmp_path_factory.mktemp("publish-retry") / "trace.log"
    with NATSServer(jetstream=True, trace_log=str(trace)) as srv:
        yield srv


@pytest.fixture
def tjs(traced: NATSServer) -> Iterator[JetStream]:
    with nats.connect(traced.url) as nc:
        yield nc.jetstream()


@pytest.fixture
def subject() -> str:
    """A subject no stream captures, and no other test publishes to."""
    return f"nostream.retry.{next(_subjects)}"


def sent(srv: NATSServer, subject: str, at_least: int = 1) -> int:
    """How many times a publish to ``subject`` reached the server (its trace log)."""

    def count() -> int:
        ops = our_ops(Path(srv.log_path or ""))
        return sum(1 for op in ops if op.split(" ", 2)[:2] in (["PUB", subject], ["HPUB", subject]))

    wait_until(lambda: count() >= at_least, 10, f"{at_least} publishes to {subject}")
    return count()


def test_connect_asks_for_no_responders_statuses(traced: NATSServer, tjs: JetStream) -> None:
    tjs.nc.flush()
    connects = [op for op in our_ops(Path(traced.log_path or "")) if op.startswith("CONNECT ")]
    options = json.loads(connects[-1][len("CONNECT ") :])
    assert options["headers"] is True and options["no_responders"] is True


def test_the_server_answers_a_publish_no_stream_captures_with_a_503(
    tjs: JetStream, subject: str
) -> None:
    start = time.monotonic()
    with pytest.raises(nats.NoRespondersError):
        tjs.nc.request(subject, b"x", timeout=5)
    assert time.monotonic() - start < 2  # the 503, not the timeout


def test_publish_to_no_stream_fails_fast_after_two_retries(
    traced: NATSServer, tjs: JetStream, subject: str
) -> None:
    start = time.monotonic()
    with pytest.raises(nats.NoStreamResponseError, match=r"sent 3 times, 0\.25 s apart"):
        tjs.publish(subject, b"x", timeout=5)
    elapsed = time.monotonic() - start
    assert elapsed < 2, f"{elapsed:.2f} s: waited for the timeout instead of the retries"
    assert sent(traced, subject, 3) == 3


def test_publish_with_headers_counts_the_same(
    traced: NATSServer, tjs: JetStream, subject: str
) -> None:
    with pytest.raises(nats.NoStreamResponseError):
        tjs.publish(subject, b"x", msg_id="one", retry_attempts=1, retry_wait=0.01)
    assert sent(traced, subject, 2) == 2


@pytest.mark.parametrize(("attempts", "expected"), [(0, 1), (4, 5)])
def test_retry_attempts_on_publish(
    traced: NATSServer, tjs: JetStream, subject: str, attempts: int, expected: int
) -> None:
    with pytest.raises(nats.NoStreamResponseError):
        tjs.publish(subject, b"x", retry_attempts=attempts, retry_wait=0.01)
    assert sent(traced, subject, expected) == expected


def test_the_context_s_defaults(traced: NATSServer, tjs: JetStream, subject: str) -> None:
    js = JetStream(tjs.nc, publish_retry_attempts=1, publish_retry_wait=0.01)
    with pytest.raises(nats.NoStreamResponseError, match=r"sent 2 times, 0\.01 s apart"):
        js.publish(subject, b"x")
    fut = js.publish_async(subject, b"y")
    with pytest.raises(nats.NoStreamResponseError, match="sent 2 times"):
        fut.result(timeout=5)
    assert sent(traced, subject, 4) == 4


def test_nc_jetstream_takes_the_context_s_defaults(
    traced: NATSServer, tjs: JetStream, subject: str
) -> None:
    js = tjs.nc.jetstream(publish_retry_attempts=3, publish_retry_wait=0.01)
    with pytest.raises(nats.NoStreamResponseError, match=r"sent 4 times, 0\.01 s apart"):
        js.publish(subject, b"x")
    assert sent(traced, subject, 4) == 4
    with pytest.raises(nats.InvalidArgumentError, match="publish_retry_wait"):
        tjs.nc.jetstream(publish_retry_wait=-1)


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("publish_retry_attempts", -2),
        ("publish_retry_attempts", "2"),
        ("publish_retry_wait", -1),
        ("publish_retry_wait", None),
    ],
)
def test_the_context_checks_its_defaults(tjs: JetStream, option: str, value: object) -> None:
    with pytest.raises(nats.InvalidArgumentError, match=option):
        JetStream(tjs.nc, **{option: value})  # type: ignore[arg-type]


def test_publish_async_to_no_stream_fails_fast_after_two_retries(
    traced: NATSServer, tjs: JetStream, subject: str
) -> None:
    start = time.monotonic()
    fut = tjs.publish_async(subject, b"x", timeout=5)
    with pytest.raises(nats.NoStreamResponseError, match="sent 3 times"):
        fut.result(timeout=5)
    assert time.monotonic() - start < 2
    assert sent(traced, subject, 3) == 3
    assert tjs.publish_async_pending == 0


def test_publish_async_retry_options(traced: NATSServer, tjs: JetStream, subject: str) -> None:
    futs = [
        tjs.publish_async(subject, b"x", retry_attempts=0),
        tjs.publish_async(subject, b"x", headers={"a": "b"}, retry_attempts=3, retry_wait=0.01),
    ]
    for fut in futs:
        with pytest.raises(nats.NoStreamResponseError):
            fut.result(timeout=5)
    assert sent(traced, subject, 5) == 5


def test_publish_async_retries_stay_within_its_timeout(
    traced: NATSServer, tjs: JetStream, subject: str
) -> None:
    fut = tjs.publish_async(subject, b"x", timeout=0.3, retry_attempts=-1, retry_wait=0.05)
    with pytest.raises(nats.NoStreamResponseError):
        fut.result(timeout=5)
    assert 2 <= sent(traced, subject, 2) <= 7  # every 0.05 s within 0.3 s


def test_publish_async_completed_waits_for_a_retry(tjs: JetStream, subject: str) -> None:
    fut = tjs.publish_async(subject, b"x", retry_attempts=1, retry_wait=0.2)
    tjs.publish_async_completed(timeout=5)  # not done while the retry waits
    assert fut.done()
    with pytest.raises(nats.NoStreamResponseError):
        fut.result(timeout=0)


@pytest.mark.parametrize("method", ["publish", "publish_async"])
def test_a_stream_appearing_between_retries_takes_the_message(
    traced: NATSServer, tjs: JetStream, method: str
) -> None:
    """retry_attempts=-1 retries until the timeout (a leader election, a restart)."""
    name = f"LATE{method.upper().replace('_', '')}"
    subject = f"{name.lower()}.x"
    result: List[Union[PubAck, BaseException]] = []

    def publish() -> None:
        try:
            if method == "publish":
                result.append(tjs.publish(subject, b"x", timeout=10, retry_attempts=-1))
            else:
                fut = tjs.publish_async(subject, b"x", timeout=10, retry_attempts=-1)
                result.append(fut.result(timeout=10))
        except BaseException as exc:
            result.append(exc)

    t = threading.Thread(target=publish)
    t.start()
    try:
        sent(traced, subject, 2)  # refused at least once already
        tjs.add_stream(name=name, subjects=[f"{name.lower()}.>"])
        t.join(15)
        assert len(result) == 1 and isinstance(result[0], PubAck), result
        assert result[0].stream == name and result[0].seq == 1
    finally:
        tjs.delete_stream(name)
