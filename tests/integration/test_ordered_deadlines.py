"""An ordered consumer's wait holds while its chain cannot be rebuilt.

The chain breaks (its consumer is deleted while a pull waits), and the requests that would
make the next link get no answer: the fault proxy swallows everything the client sends.
Each request then waits its whole timeout (5 s here), and a rebuild used to try 100 times
whatever the caller had asked for: ``fetch(max_wait=2)`` kept its caller for minutes. Now
the caller's wait bounds the rebuild; the chain stays broken until a later read, which
rebuilds it once the server answers, and the messages still come once each, in order.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator, List

import pytest
from faultproxy import UP, FaultProxy
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream import ordered
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.jetstream.ordered import OrderedConsumer
from jetstream_sync.testing import stream_name, wait_until

WAIT = 2.0  # what the caller asks for
# What it may take at most: its wait, one rebuild request given at least 1 s, and a noisy
# machine's scheduling. The old code took 100 requests of 5 s each.
BOUND = WAIT + 6.0


@pytest.fixture
def pjs(proxy: FaultProxy, errs: Errors) -> Iterator[JetStream]:
    """JetStream on a client connected through the proxy (the ordered consumer's)."""
    nc = nats.connect(proxy.url, reconnect_time_wait=0.1, max_reconnect_attempts=-1, error_cb=errs)
    try:
        yield nc.jetstream(timeout=5.0)
    finally:
        proxy.heal()
        nc.close()


@pytest.fixture
def stream(js: JetStream) -> Iterator[str]:
    name = stream_name("ODL")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
    try:
        yield name
    finally:
        js.delete_stream(name)


def publish(js: JetStream, stream: str, values: range) -> None:
    for i in values:
        js.publish(f"{stream.lower()}.n", str(i).encode())


def break_unreachably(js: JetStream, proxy: FaultProxy, stream: str, oc: OrderedConsumer) -> None:
    """Once the ordered consumer's pull waits on the server: swallow whatever the client
    sends from now on, then delete its consumer (on the direct connection), so the server
    tells it its link is gone and its rebuild gets no answer."""
    name = oc.name
    wait_until(lambda: js.consumer_info(stream, name).num_waiting >= 1, what="the pull")
    proxy.black_hole(UP)
    js.delete_consumer(stream, name)


def restore(proxy: FaultProxy) -> None:
    """The outage ends as a server restart's does: the connection drops (what the proxy
    held, the unanswered rebuild requests, is lost with it) and the client reconnects."""
    proxy.close_links()
    proxy.heal()


def timed(call: Callable[[], Any]) -> Callable[[], List[Any]]:
    """Run ``call`` on a thread; the returned function gives [result or exception, seconds],
    failing if it has not ended within 60 s (the old behaviour: it would run for minutes)."""
    out: List[Any] = []

    def run() -> None:
        start = time.monotonic()
        try:
            out.append(call())
        except Exception as exc:
            out.append(exc)
        out.append(time.monotonic() - start)

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def result() -> List[Any]:
        t.join(60)
        assert not t.is_alive(), "the call still waits 60 s on, far past its wait"
        return out

    return result


def values(msgs: List[nats.Msg]) -> List[int]:
    return [int(m.data) for m in msgs]


def test_fetch_returns_at_its_deadline_when_the_chain_cannot_be_rebuilt(
    js: JetStream, pjs: JetStream, proxy: FaultProxy, errs: Errors, stream: str
) -> None:
    publish(js, stream, range(3))
    oc = pjs.ordered_consumer(stream)
    assert values(oc.fetch(3, max_wait=5)) == [0, 1, 2]
    resets = oc.resets
    result = timed(lambda: oc.fetch(1, max_wait=WAIT))
    break_unreachably(js, proxy, stream, oc)
    got, took = result()
    assert got == [] and took < BOUND, (got, took)
    # the rebuild's unanswered request, reported (error_cb runs on the callback thread)
    wait_until(lambda: nats.TimeoutError in errs.kinds(), what="the timeout reported")
    restore(proxy)
    publish(js, stream, range(3, 6))
    assert values(oc.fetch(3, max_wait=10)) == [3, 4, 5]  # once each, in order
    assert oc.resets == resets + 1  # one rebuild, resumed by the second fetch


def test_next_raises_timeout_at_its_deadline_when_the_chain_cannot_be_rebuilt(
    js: JetStream, pjs: JetStream, proxy: FaultProxy, stream: str
) -> None:
    publish(js, stream, range(1))
    oc = pjs.ordered_consumer(stream)
    assert int(oc.next(timeout=5).data) == 0
    result = timed(lambda: oc.next(timeout=WAIT))
    break_unreachably(js, proxy, stream, oc)
    got, took = result()
    assert isinstance(got, nats.TimeoutError) and took < BOUND, (got, took)
    restore(proxy)
    publish(js, stream, range(1, 3))
    assert [int(oc.next(timeout=10).data) for _ in range(2)] == [1, 2]


def test_messages_next_raises_timeout_at_its_deadline_and_the_iteration_carries_on(
    js: JetStream, pjs: JetStream, proxy: FaultProxy, stream: str
) -> None:
    publish(js, stream, range(2))
    oc = pjs.ordered_consumer(stream)
    with oc.messages(max_messages=5, expires=2) as it:
        assert [int(it.next(timeout=5).data) for _ in range(2)] == [0, 1]
        result = timed(lambda: it.next(timeout=WAIT))
        break_unreachably(js, proxy, stream, oc)
        got, took = result()
        assert isinstance(got, nats.TimeoutError) and took < BOUND, (got, took)
        restore(proxy)
        publish(js, stream, range(2, 5))
        assert [int(it.next(timeout=10).data) for _ in range(3)] == [2, 3, 4]


def test_stop_while_a_consume_rebuilds_ends_it_and_leaves_no_link(
    js: JetStream, pjs: JetStream, proxy: FaultProxy, stream: str
) -> None:
    """consume() has no deadline: its rebuild goes on trying while the server does not
    answer, and its ``error`` stays None meanwhile (the broken link's 409 did not end it).
    stop() ends it once the rebuild's current request is over (5 s here), the server still
    unreachable; nothing of the chain is left on the server."""
    publish(js, stream, range(1))
    oc = pjs.ordered_consumer(stream)
    got: List[int] = []
    first = threading.Event()

    def cb(msg: nats.Msg) -> None:
        got.append(int(msg.data))
        first.set()

    cc = oc.consume(cb, max_messages=5, expires=2)
    assert first.wait(10)
    resets = oc.resets
    break_unreachably(js, proxy, stream, oc)
    wait_until(lambda: oc.resets > resets, what="the rebuild to begin")
    assert cc.error is None and not cc.closed, cc.error
    cc.stop()
    assert cc.wait(15), "consume() still runs after stop()"
    restore(proxy)
    wait_until(lambda: js.stream_info(stream).state.consumer_count == 0, what="no link left")
    assert got == [0]


def test_a_consume_whose_rebuild_never_gets_through_ends_with_the_error(
    js: JetStream, proxy: FaultProxy, stream: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """consume() gives up after its tries (two here, of 1 s requests, instead of a hundred
    of the context's timeout) and keeps the last error in ``error``."""
    monkeypatch.setattr(ordered, "_TRIES", 2)
    publish(js, stream, range(1))
    with nats.connect(proxy.url, error_cb=Errors()) as nc:
        oc = nc.jetstream(timeout=1.0).ordered_consumer(stream)
        first = threading.Event()
        cc = oc.consume(lambda msg: first.set(), max_messages=5, expires=2)
        assert first.wait(10)
        break_unreachably(js, proxy, stream, oc)
        assert cc.wait(30), "consume() still tries"
        assert isinstance(cc.error, nats.TimeoutError), cc.error


def test_a_read_waiting_for_another_readers_call_keeps_to_its_wait(
    js: JetStream, stream: str
) -> None:
    """One reader at a time: a fetch() or messages().next() while a consume() of the same
    consumer waits for messages (or a rebuild of another reader waits on the server) gets
    nothing within its wait; it used to wait for the lock as long as no message came."""
    publish(js, stream, range(1))
    oc = js.ordered_consumer(stream)
    first = threading.Event()
    cc = oc.consume(lambda msg: first.set(), max_messages=5, expires=30)
    try:
        assert first.wait(10)  # the consume now waits for message 1, holding the chain
        got, took = timed(lambda: oc.fetch(1, max_wait=WAIT))()
        assert got == [] and took < BOUND, (got, took)
        with oc.messages(expires=2) as it:
            got, took = timed(lambda: it.next(timeout=WAIT))()
        assert isinstance(got, nats.TimeoutError) and took < BOUND, (got, took)
    finally:
        cc.stop()
