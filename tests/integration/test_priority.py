"""Priority groups of pull consumers (ADR-42, seed 004) against a real server: the config
rules (refused before anything is sent: the trace log shows no request), the pull options,
pinned failover (after priority_timeout and after unpin), overflow and prioritized pulls."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from support import Errors, our_ops

import jetstream_sync as nats
from jetstream_sync import ConsumerConfig, PriorityPolicy
from jetstream_sync.jetstream.consumer import PullConsumer
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

STREAM_PREFIX = "PRIO"  # the shared stream fixture names its streams PRIO<n>


def fill(js: JetStream, stream: str, n: int) -> List[int]:
    """Publish n messages; their stream sequences."""
    return [js.publish(f"{stream.lower()}.x", b"job").seq for _ in range(n)]


def pinned(js: JetStream, stream: str, name: str = "C", ttl: float = 1.0) -> PullConsumer:
    return js.create_or_update_consumer(
        stream,
        durable_name=name,
        priority_groups=["jobs"],
        priority_policy=PriorityPolicy.PINNED_CLIENT,
        priority_timeout=ttl,
    )


# --- 1. config rules, before anything is sent -----------------------------------------------

BAD_CONFIGS: List[Tuple[Dict[str, Any], str]] = [
    ({"priority_groups": ["jobs"], "priority_policy": "fair"}, "must be one of overflow"),
    ({"priority_groups": ["a", "b"], "priority_policy": "overflow"}, "exactly one group"),
    ({"priority_groups": [], "priority_policy": "overflow"}, "exactly one group"),
    ({"priority_policy": "pinned_client"}, "exactly one group"),
    ({"priority_groups": ["x" * 17], "priority_policy": "overflow"}, "1-16 characters"),
    ({"priority_groups": ["no spaces"], "priority_policy": "overflow"}, "1-16 characters"),
    ({"priority_groups": ["jobs.a"], "priority_policy": "overflow"}, "1-16 characters"),
    (
        {"priority_groups": ["jobs"], "priority_policy": "overflow", "deliver_subject": "d.x"},
        "pull consumers",
    ),
    (
        {"priority_groups": ["jobs"], "priority_policy": "overflow", "ack_policy": "none"},
        "needs ack_policy explicit",
    ),
    (
        {"priority_groups": ["jobs"], "priority_policy": "prioritized", "ack_policy": "all"},
        "needs ack_policy explicit",
    ),
    (
        {"priority_groups": ["jobs"], "priority_policy": "overflow", "priority_timeout": 5.0},
        "priority_timeout is for the pinned_client",
    ),
    ({"priority_timeout": 5.0}, "priority_timeout is for the pinned_client"),
    ({"priority_groups": ["jobs"]}, "needs a priority_policy"),
    (
        {"priority_groups": ["jobs"], "priority_policy": "pinned_client", "priority_timeout": -1},
        "must be > 0",
    ),
]


@pytest.mark.parametrize(("fields", "message"), BAD_CONFIGS)
def test_config_rules(js: JetStream, stream: str, fields: Dict[str, Any], message: str) -> None:
    with pytest.raises(nats.InvalidArgumentError, match=message):
        js.add_consumer(stream, ConsumerConfig(durable_name="bad", **fields))
    with pytest.raises(nats.InvalidArgumentError, match=message):
        js.create_or_update_consumer(stream, durable_name="bad", **fields)


def test_config_rules_are_checked_before_any_request(
    server_factory: Callable[..., NATSServer], tmp_path: Path
) -> None:
    trace = tmp_path / "trace.log"
    srv = server_factory(jetstream=True, trace_log=str(trace))
    with nats.connect(srv.url) as nc:
        js = nc.jetstream()
        js.add_stream(name="P", subjects=["p.>"])
        for fields, _ in BAD_CONFIGS:
            with pytest.raises(nats.InvalidArgumentError):
                js.add_consumer("P", ConsumerConfig(durable_name="bad", **fields))
            with pytest.raises(nats.InvalidArgumentError):
                js.update_consumer("P", ConsumerConfig(durable_name="bad", **fields))
        good = js.add_consumer(
            "P",
            ConsumerConfig(
                durable_name="good", priority_groups=["jobs"], priority_policy="overflow"
            ),
        )
        assert good.config.priority_policy is PriorityPolicy.OVERFLOW
        c = js.consumer("P", "good")
        for kwargs in ({}, {"group": "other"}, {"group": "jobs", "priority": 1}):
            with pytest.raises(nats.InvalidArgumentError):
                c.fetch(1, max_wait=1, **kwargs)
        nc.flush()
    creates = [op for op in our_ops(trace) if "CONSUMER.CREATE" in op]
    assert len(creates) == 1 and ".good" in creates[0]  # the good one only
    assert not [op for op in our_ops(trace) if "MSG.NEXT" in op]


def test_server_side_rejections_are_typed_api_errors(js: JetStream, stream: str) -> None:
    pinned(js, stream)
    # Only the server knows the consumer's groups: unpinning another is its refusal, typed.
    with pytest.raises(nats.PriorityGroupError) as err:
        js.unpin_consumer(stream, "C", "other")
    assert err.value.code == 400 and err.value.err_code == 10160


# --- 2. pull options ------------------------------------------------------------------------


def test_pull_options_are_checked_against_the_consumer(js: JetStream, stream: str) -> None:
    plain = js.create_or_update_consumer(stream, durable_name="plain")
    over = js.create_or_update_consumer(
        stream, durable_name="over", priority_groups=["jobs"], priority_policy="overflow"
    )
    prio = js.create_or_update_consumer(
        stream, durable_name="prio", priority_groups=["jobs"], priority_policy="prioritized"
    )
    sub = js.pull_subscribe(None, durable="over", stream=stream)
    cases: List[Tuple[Callable[[], Any], str]] = [
        (lambda: plain.fetch(1, max_wait=1, group="jobs"), "has no priority groups"),
        (lambda: plain.next(timeout=1, min_pending=3), "has no priority groups"),
        (lambda: over.fetch(1, max_wait=1), "give group= on every pull"),
        (lambda: over.next(timeout=1, group="other"), "not 'other'"),
        (lambda: over.messages(group="jobs", priority=2), "goes with the prioritized"),
        (lambda: over.fetch(1, max_wait=1, group="jobs", min_pending=0), "int >= 1"),
        (lambda: prio.consume(print, group="jobs", min_ack_pending=2), "overflow policy"),
        (lambda: prio.fetch(1, max_wait=1, group="jobs", priority=10), "int 0-9"),
        (lambda: prio.fetch(1, max_wait=1, group="bad group"), "1-16 characters"),
        (lambda: sub.fetch(1, timeout=1), "give group= on every pull"),
        (lambda: sub.fetch(1, timeout=1, group="jobs", priority=1), "prioritized"),
    ]
    for call, message in cases:
        with pytest.raises(nats.InvalidArgumentError, match=message):
            call()
    fill(js, stream, 2)
    assert len(over.fetch(1, max_wait=2, group="jobs", min_pending=1)) == 1
    assert len(sub.fetch(1, timeout=2, group="jobs")) == 1
    assert len(prio.fetch(1, max_wait=2, group="jobs", priority=0)) == 1


# --- 3. pinned_client -----------------------------------------------------------------------


class Worker:
    """One client consuming the pinned consumer through consume(), acking what it gets."""

    def __init__(self, url: str, stream: str, errs: Errors) -> None:
        self.nc = nats.connect(url, error_cb=errs)
        self.consumer = self.nc.jetstream().consumer(stream, "C")
        self.seqs: List[int] = []
        self.events: List[Tuple[str, Optional[str]]] = []
        self.ctx: Optional[nats.jetstream.consumer.ConsumeContext] = None

    def start(self) -> None:
        self.ctx = self.consumer.consume(
            self._cb,
            group="jobs",
            expires=5,
            on_pinned=lambda pin: self.events.append(("pinned", pin)),
            on_unpinned=lambda: self.events.append(("unpinned", None)),
        )

    def _cb(self, msg: nats.Msg) -> None:
        self.seqs.append(msg.metadata.sequence.stream)
        msg.ack()

    def stop(self) -> None:
        if self.ctx is not None:
            self.ctx.stop()
            assert self.ctx.wait(10)
            self.ctx = None

    def pins(self) -> List[Optional[str]]:
        return [pin for kind, pin in self.events if kind == "pinned"]

    def close(self) -> None:
        self.stop()
        self.nc.close()


@pytest.fixture
def workers(nats_server: NATSServer, js: JetStream, stream: str) -> Iterator[List[Worker]]:
    pinned(js, stream, ttl=1.0)
    errs = Errors()
    ws = [Worker(nats_server.url, stream, errs) for _ in range(2)]
    try:
        yield ws
    finally:
        for w in ws:
            w.close()


def test_pinned_failover_after_priority_timeout(
    js: JetStream, stream: str, workers: List[Worker]
) -> None:
    a, b = workers
    a.start()
    first = fill(js, stream, 1)
    wait_until(lambda: a.seqs == first and len(a.pins()) == 1, what="A pinned")
    pin_a = a.pins()[0]
    assert a.consumer.pin_id() == pin_a
    b.start()  # a standby: nothing for it while A pulls
    batch = fill(js, stream, 20)
    wait_until(lambda: len(a.seqs) == 21, what="the batch at A")
    assert b.seqs == [] and b.pins() == []
    info = js.consumer_info(stream, "C")
    assert info.priority_groups and info.priority_groups[0].pinned_id == pin_a

    a.stop()  # the pinned client goes quiet: after priority_timeout (1 s) B is pinned
    # stop() does not wait for the server to see A's UNSUB: until it does, A's outstanding
    # pull takes what is published (A gives it back, -NAK, and B gets it as a redelivery, out
    # of `later`'s order). On a busy machine the UNSUB came after the publishes below (B's
    # seqs began at 31, not 22): the flush makes the order this test is about (A gone, then
    # the messages) certain.
    a.nc.flush()
    later = fill(js, stream, 20)
    wait_until(lambda: len(b.seqs) == 20, timeout=15, what="the standby taking over")
    pin_b = b.pins()[0]
    assert pin_b != pin_a and b.seqs == later

    # A comes back with its old pin: 423, and it goes on as a standby (gets nothing).
    assert a.consumer.fetch(5, max_wait=1.5, group="jobs") == []
    assert a.consumer.pin_id() is None
    more = fill(js, stream, 5)
    wait_until(lambda: len(b.seqs) == 25, what="B keeps the pin")
    assert a.seqs == first + batch  # never a message of B's
    assert b.seqs == later + more
    assert not set(a.seqs) & set(b.seqs)
    wait_until(lambda: js.consumer_info(stream, "C").num_ack_pending == 0, what="every ack")


def test_pinned_failover_after_unpin(js: JetStream, stream: str, workers: List[Worker]) -> None:
    a, b = workers
    a.start()
    wait_until(lambda: js.consumer_info(stream, "C").num_waiting >= 1, what="A's pull")
    fill(js, stream, 1)
    wait_until(lambda: len(a.pins()) == 1, what="A pinned")
    b.start()
    wait_until(lambda: js.consumer_info(stream, "C").num_waiting >= 2, what="B's pull")
    js.unpin_consumer(stream, "C", "jobs")
    # A's waiting pulls carry the old pin: 423 when the server next delivers; then a new pin.
    after = fill(js, stream, 10)
    wait_until(lambda: len(a.seqs) + len(b.seqs) == 11, what="all delivered once")
    wait_until(lambda: ("unpinned", None) in a.events, what="A told it lost the pin")
    new_pins = [p for p in a.pins()[1:] + b.pins() if p is not None]
    assert new_pins and a.pins()[0] not in new_pins
    holder = js.consumer_info(stream, "C").priority_groups
    assert holder and holder[0].pinned_id in new_pins
    assert sorted(a.seqs[1:] + b.seqs) == after  # each exactly once
    assert not set(a.seqs) & set(b.seqs)


def test_pin_kept_across_fetch_calls(js: JetStream, stream: str) -> None:
    c = pinned(js, stream, ttl=30.0)
    fill(js, stream, 6)
    first = c.fetch(2, max_wait=2, group="jobs")
    pin = c.pin_id()
    assert pin and all(m.headers.get("Nats-Pin-Id") == pin for m in first)
    for m in first:
        m.ack()
    rest = [m for _ in range(4) for m in c.fetch(1, max_wait=2, group="jobs")]
    assert len(rest) == 4 and c.pin_id() == pin  # a plain loop stays the pinned worker
    for m in rest:
        m.ack()


def test_pin_lost_on_the_legacy_fetch_path(js: JetStream, stream: str) -> None:
    # pull_subscribe + fetch keeps the pin too; after an unpin its next pull carries the old
    # id, the server answers 423, and the fetch goes on without it and gets the new pin.
    pinned(js, stream, ttl=30.0)
    psub = js.pull_subscribe(f"{stream.lower()}.x", durable="C", stream=stream)
    seqs = fill(js, stream, 3)
    (first,) = psub.fetch(1, timeout=5, group="jobs")
    old = psub.pin_id()
    assert old and first.headers.get("Nats-Pin-Id") == old
    first.ack()
    js.unpin_consumer(stream, "C", "jobs")
    lost: List[Any] = []
    real_pin_lost = psub._pin_lost
    psub._pin_lost = lambda prio, sent: (lost.append(sent), real_pin_lost(prio, sent))[1]  # type: ignore[method-assign]
    (second,) = psub.fetch(1, timeout=5, group="jobs")
    assert lost == [old]  # the server's 423 for the old pin, once
    new = psub.pin_id()
    assert new and new != old and second.headers.get("Nats-Pin-Id") == new
    assert [first.metadata.sequence.stream, second.metadata.sequence.stream] == seqs[:2]
    second.ack()
    psub.unsubscribe()


def test_callback_errors_of_pin_callbacks_are_reported(
    nats_server: NATSServer, stream: str, js: JetStream
) -> None:
    pinned(js, stream, ttl=30.0)
    errs = Errors()
    with nats.connect(nats_server.url, error_cb=errs) as nc:
        c = nc.jetstream().consumer(stream, "C")
        got: List[int] = []

        def boom(pin: str) -> None:
            raise RuntimeError("user bug")

        ctx = c.consume(lambda m: (got.append(1), m.ack()), group="jobs", on_pinned=boom)
        fill(js, stream, 3)
        wait_until(lambda: len(got) == 3, what="messages despite the failing on_pinned")
        wait_until(lambda: nats.CallbackError in errs.kinds(), what="the report")
        assert "on_pinned" in str(errs.seen[-1])
        ctx.stop()


# --- overflow and prioritized ---------------------------------------------------------------


def test_overflow_serves_only_above_the_thresholds(js: JetStream, stream: str) -> None:
    c = js.create_or_update_consumer(
        stream, durable_name="O", priority_groups=["jobs"], priority_policy="overflow"
    )
    fill(js, stream, 3)
    # num_pending 3 < 5: the pull waits like one with nothing to get.
    assert c.fetch(1, max_wait=1, group="jobs", min_pending=5) == []
    fill(js, stream, 2)  # num_pending 5: served
    got = c.fetch(1, max_wait=2, group="jobs", min_pending=5)
    assert len(got) == 1  # not acked: 1 ack pending, 4 pending
    assert c.fetch(1, max_wait=1, group="jobs", min_pending=5, min_ack_pending=2) == []
    # Either threshold is enough: ack pending 1 >= 1.
    more = c.fetch(1, max_wait=2, group="jobs", min_pending=50, min_ack_pending=1)
    assert len(more) == 1
    for m in got + more:
        m.ack()


def test_overflow_pulls_without_conditions_are_served_first(
    nats_server: NATSServer, js: JetStream, stream: str
) -> None:
    """With max_ack_pending 1, a plain pull is served while a conditional one that came
    first waits for its backlog. (nats-server 2.15.1 counts the message being delivered in
    num_pending, so a ``min_pending: 1`` pull is served in arrival order like a plain one:
    ADR-42's special case for it is not what this server does; min_pending 2 shows the
    ordering the ADR asks for.)"""
    js.create_or_update_consumer(
        stream,
        durable_name="O",
        priority_groups=["jobs"],
        priority_policy="overflow",
        max_ack_pending=1,
    )
    results: Dict[str, List[int]] = {}

    def pull(name: str, **kwargs: Any) -> None:
        with nats.connect(nats_server.url) as nc:
            c = nc.jetstream().consumer(stream, "O")
            got = c.fetch(1, max_wait=20, group="jobs", **kwargs)  # both are served
            results[name] = [m.metadata.sequence.stream for m in got]
            for m in got:
                m.ack()

    conditional = threading.Thread(target=pull, args=("conditional",), kwargs={"min_pending": 2})
    conditional.start()
    wait_until(lambda: js.consumer_info(stream, "O").num_waiting == 1, what="the first pull")
    plain = threading.Thread(target=pull, args=("plain",))
    plain.start()
    wait_until(lambda: js.consumer_info(stream, "O").num_waiting == 2, what="the second pull")
    first = fill(js, stream, 1)
    plain.join(10)
    assert results["plain"] == first  # came second, served first
    assert "conditional" not in results  # still waiting: the backlog is below 2
    wait_until(lambda: js.consumer_info(stream, "O").num_ack_pending == 0, what="the ack")
    backlog = fill(js, stream, 3)
    conditional.join(10)
    assert results["conditional"] == backlog[:1]  # served once the backlog reached 2


def test_prioritized_lower_numbers_are_served_first(
    nats_server: NATSServer, js: JetStream, stream: str
) -> None:
    js.create_or_update_consumer(
        stream, durable_name="P", priority_groups=["jobs"], priority_policy="prioritized"
    )
    results: Dict[int, List[int]] = {}
    threads = []

    def pull(priority: int) -> None:
        # 0 and 3 are served (they return when their batch fills); 7 is left to expire.
        max_wait = 3 if priority == 7 else 20
        with nats.connect(nats_server.url) as nc:
            c = nc.jetstream().consumer(stream, "P")
            got = c.fetch(2, max_wait=max_wait, group="jobs", priority=priority)
            for m in got:
                m.ack()
            results[priority] = [m.metadata.sequence.stream for m in got]

    for n, priority in enumerate((7, 3, 0)):  # the most urgent asks last
        t = threading.Thread(target=pull, args=(priority,))
        t.start()
        threads.append(t)
        wait_until(lambda n=n: js.consumer_info(stream, "P").num_waiting == n + 1)
    seqs = fill(js, stream, 4)
    for t in threads:
        t.join(10)
    assert results[0] == seqs[:2] and results[3] == seqs[2:] and results[7] == []


def test_unpin_refuses_a_bad_group_before_sending(js: JetStream, stream: str) -> None:
    pinned(js, stream)
    with pytest.raises(nats.InvalidArgumentError, match="1-16 characters"):
        js.unpin_consumer(stream, "C", "not valid")
    js.unpin_consumer(stream, "C", "jobs")  # nothing pinned yet: fine
    with pytest.raises(nats.ConsumerNotFoundError):
        js.unpin_consumer(stream, "missing", "jobs")
