"""nats.js 3 (an independent client, in a node process) and jetstream_sync on one real server.

Each test checks outcomes both clients agree on: the bytes, headers and msg ids of what one
publishes and the other consumes, the JetStream metadata (stream and consumer sequences,
deliveries, pending), who gets what from a shared or priority-group consumer, push consumers
made by nats.js with flow control and heartbeats that we bind, and the effect of each side's
nak / term / in_progress on the other. Waits are bounded: subprocess answers and polls carry
deadlines, never a bare sleep.
"""

from __future__ import annotations

import json
import threading
import time
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest
from interop_peers import (
    JsonLinesProcess,
    Msg,
    NodePeer,
    SyncPeer,
    b64,
    generated,
    ns,
    version_tuple,
)

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.testing import drop_inbound, wait_until

STREAM_PREFIX = "IOP"  # the stream fixture's names: IOP<n>

REGIONS = ("eu", "us", "ap")


def payload(i: int) -> bytes:
    """Distinct, binary, and empty for the first: what must cross both clients unchanged."""
    return b"" if i == 0 else f"order-{i}|".encode() + bytes(range(256))[: (i * 37) % 256]


def our_fetch(consumer: Any, n: int, timeout: float = 20.0, **kw: Any) -> List[nats.Msg]:
    """Fetch until n messages came (more than n fails the test); ack none of them."""
    got: List[nats.Msg] = []
    deadline = time.monotonic() + timeout
    while len(got) < n:
        left = deadline - time.monotonic()
        assert left > 0, f"only {len(got)} of {n} messages in {timeout} s"
        got += consumer.fetch(n - len(got), max_wait=min(left, 2.0), **kw)
    assert len(got) == n
    return got


def info(js: JetStream, stream: str, name: str) -> Any:
    return js.consumer_info(stream, name)


class Background:
    """A call on a thread of its own, so a test can act while it blocks."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._value: Any = None
        self._error: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._value = fn()
        except BaseException as e:  # handed to the test thread by result()
            self._error = e

    def join(self, timeout: float) -> bool:
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def result(self, timeout: float = 30.0) -> Any:
        assert self.join(timeout), f"the background call did not end within {timeout} s"
        if self._error is not None:
            raise self._error
        return self._value


# --- publish on one side, consume on the other ---------------------------------------------


def test_natsjs_publishes_what_we_consume(
    js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    peer = natsjs()
    subj = stream.lower()
    messages = [
        {
            "subject": f"{subj}.orders.{REGIONS[i % 3]}",
            "data": payload(i),
            "headers": {"X-Index": [str(i)], "X-Tags": ["a", "b"], "mixed-Case": ["v"]},
            "msg_id": f"js-{i}",
        }
        for i in range(50)
    ]
    acks = peer.publish(messages)
    assert [(a["stream"], a["seq"], a["duplicate"]) for a in acks] == [
        (stream, i, False) for i in range(1, 51)
    ]
    # A retry with the same ids is a duplicate, from either client: dedup is the stream's.
    again = peer.publish(messages[:5])
    assert [(a["seq"], a["duplicate"]) for a in again] == [(i, True) for i in range(1, 6)]
    ours = js.publish(f"{subj}.orders.eu", b"another body", msg_id="js-7")
    assert ours.duplicate and ours.seq == 8
    assert js.stream_info(stream).state.messages == 50

    consumer = js.create_or_update_consumer(
        stream, durable_name="ours", filter_subject=f"{subj}.orders.>"
    )
    got = our_fetch(consumer, 50)
    for i, m in enumerate(got):
        assert m.subject == messages[i]["subject"]
        assert m.data == payload(i)
        assert m.headers is not None
        assert m.headers.get_all("X-Tags") == ["a", "b"]  # multi-valued, in order
        assert m.headers["X-Index"] == str(i)
        assert m.headers["mixed-Case"] == "v"  # the key's case kept
        assert m.headers["Nats-Msg-Id"] == f"js-{i}"
        md = m.metadata
        assert (md.stream, md.consumer) == (stream, "ours")
        assert md.sequence.stream == acks[i]["seq"]
        assert md.sequence.consumer == i + 1
        assert md.num_delivered == 1
        assert md.num_pending == 49 - i
        m.ack()
    wait_until(lambda: info(js, stream, "ours").num_ack_pending == 0, what="our acks")
    assert info(js, stream, "ours").ack_floor.stream_seq == 50


def test_we_publish_what_natsjs_consumes(
    js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    peer = natsjs()
    subj = stream.lower()
    subjects = [f"{subj}.orders.{REGIONS[i % 3]}" for i in range(50)]

    def headers(i: int) -> Dict[str, Any]:
        return {"X-Index": str(i), "X-Tags": ["a", "b"], "mixed-Case": "v"}

    # Half with publish (each ack awaited), half with publish_async: both paths.
    seqs = [
        js.publish(subjects[i], payload(i), headers(i), msg_id=f"py-{i}").seq for i in range(25)
    ]
    futures = [
        js.publish_async(subjects[i], payload(i), headers=headers(i), msg_id=f"py-{i}")
        for i in range(25, 50)
    ]
    seqs += [f.result(timeout=10).seq for f in futures]
    assert seqs == list(range(1, 51))
    dup = js.publish(subjects[0], b"retry", msg_id="py-0")
    assert dup.duplicate and dup.seq == 1
    (theirs,) = peer.publish([{"subject": subjects[1], "data": b"retry", "msg_id": "py-1"}])
    assert theirs["duplicate"] and theirs["seq"] == 2
    assert js.stream_info(stream).state.messages == 50

    peer.call(
        "add_consumer",
        stream=stream,
        config={
            "durable_name": "theirs",
            "ack_policy": "explicit",
            "filter_subject": f"{subj}.orders.>",
        },
    )
    got: List[Msg] = []
    deadline = time.monotonic() + 20
    while len(got) < 50 and time.monotonic() < deadline:
        got += peer.fetch(
            stream, "theirs", opts={"max_messages": 50 - len(got), "expires": 2000}, action="ack"
        )
    assert len(got) == 50
    for i, m in enumerate(got):
        assert (m.subject, m.data) == (subjects[i], payload(i))
        assert m.headers["X-Tags"] == ["a", "b"]
        assert m.headers["X-Index"] == [str(i)]
        assert m.headers["mixed-Case"] == ["v"]
        assert m.headers["Nats-Msg-Id"] == [f"py-{i}"]
        assert (m.stream, m.consumer) == (stream, "theirs")
        assert (m.seq, m.dseq, m.delivered, m.pending) == (seqs[i], i + 1, 1, 49 - i)
    # nats.js acked with ackAck: the server has every ack before its answer came.
    assert info(js, stream, "theirs").num_ack_pending == 0


# --- priority groups (ADR-42) --------------------------------------------------------------

PIN_TTL = 3.0  # priority_timeout: a pinned client that stops pulling loses the pin after it
# A message the server sent to the killed side before it noticed the closed connection
# (its pull was still waiting) was acked by nobody: it comes back after ack_wait.
PIN_ACK_WAIT = 4.0


class Worker:
    """One side of the pinned group, whichever client it is: what it got, its pins, a kill."""

    def __init__(self, proc: JsonLinesProcess, tag: str = "") -> None:
        self.proc = proc
        self.tag = tag

    def msgs(self) -> List[Msg]:
        assert isinstance(self.proc, (NodePeer, SyncPeer))
        return self.proc.consumed(self.tag)

    def pins(self) -> List[str]:
        assert isinstance(self.proc, (NodePeer, SyncPeer))
        return self.proc.pins(self.tag)

    def wait(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        self.proc.wait_for(lambda _events: predicate(), timeout, f"{self.proc.name}: {what}")


@pytest.mark.parametrize("first", ["natsjs", "ours"])
def test_pinned_client_failover_when_the_pinned_process_is_killed(
    first: str,
    js: JetStream,
    stream: str,
    natsjs: Callable[[], NodePeer],
    syncpeer: Callable[[str, str, str], SyncPeer],
) -> None:
    """Whichever client holds the pin is SIGKILLed; the other takes over after the TTL and
    every message is handled exactly once across both. A message the server sent to the
    killed side in the moment before it saw the connection close is redelivered to the
    new pin after ack_wait (seen in 1 of ~6 runs of the same pattern under load): the only
    redelivery allowed."""
    peer = natsjs()
    subj = stream.lower()
    peer.call(
        "add_consumer",
        stream=stream,
        config={
            "durable_name": "W",
            "ack_policy": "explicit",
            "priority_groups": ["jobs"],
            "priority_policy": "pinned_client",
            "priority_timeout": ns(PIN_TTL),
            "ack_wait": ns(PIN_ACK_WAIT),
        },
    )

    def start(side: str) -> Worker:
        if side == "natsjs":
            # expires 1 s (nats.js's least): its consume pulls again well within the TTL.
            opts = {"group": "jobs", "max_messages": 10, "expires": 1000}
            peer.call("consume", stream=stream, consumer="W", tag="w", opts=opts)
            return Worker(peer, "w")
        return Worker(syncpeer(stream, "W", "jobs"))

    def publish(n: int) -> List[int]:
        return [js.publish(f"{subj}.job", f"job-{i}".encode()).seq for i in range(n)]

    a = start(first)
    wait_until(lambda: info(js, stream, "W").num_waiting >= 1, what="the first side's pull")
    one = publish(1)  # the first delivery picks the pinned client: the only one pulling
    a.wait(lambda: len(a.msgs()) == 1 and len(a.pins()) == 1, 15, "pinned and served")
    pin_a = a.pins()[0]
    assert [m.seq for m in a.msgs()] == one
    assert a.msgs()[0].headers.get("Nats-Pin-Id") == [pin_a]

    b = start("ours" if first == "natsjs" else "natsjs")
    wait_until(lambda: info(js, stream, "W").num_waiting >= 2, what="the standby's pull")
    batch = publish(10)
    a.wait(lambda: len(a.msgs()) == 11, 15, "the batch")
    assert b.msgs() == [] and b.pins() == []  # a standby gets nothing while the pin is held
    held = info(js, stream, "W")
    assert held.priority_groups and held.priority_groups[0].pinned_id == pin_a
    assert held.num_ack_pending == 0

    a.proc.kill()
    killed = time.monotonic()
    later = publish(10)
    b.wait(
        lambda: len(b.msgs()) == 10,
        PIN_TTL + PIN_ACK_WAIT + 20,
        "taking over from the killed side",
    )
    took = time.monotonic() - killed
    (pin_b,) = b.pins()
    assert pin_b != pin_a
    assert sorted(m.seq for m in b.msgs()) == later  # each once (a redelivery comes last)
    assert [m.seq for m in a.msgs()] == one + batch
    assert all(m.delivered == 1 for m in a.msgs())  # handled before the kill: exactly once
    again = [m for m in b.msgs() if m.delivered != 1]
    # Only what was in flight to the dead side comes again, and only once more.
    assert all(m.delivered == 2 for m in again), [(m.seq, m.delivered) for m in again]
    assert not again or took >= PIN_ACK_WAIT - 1.0, f"redelivered after {took:.1f} s"
    assert all(m.headers.get("Nats-Pin-Id") == [pin_b] for m in b.msgs())
    now = info(js, stream, "W")
    assert now.priority_groups and now.priority_groups[0].pinned_id == pin_b
    # The server does not unpin on a disconnect, only when the TTL runs out without a pull.
    assert took >= PIN_TTL - 1.6, f"the standby took over {took:.1f} s after the kill"


def test_overflow_thresholds_are_the_consumers_across_both_clients(
    js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    peer = natsjs()
    subj = stream.lower()
    c = js.create_or_update_consumer(
        stream, durable_name="O", priority_groups=["jobs"], priority_policy="overflow"
    )

    def publish(n: int) -> List[int]:
        acks = peer.publish([{"subject": f"{subj}.job", "data": b"j"} for _ in range(n)])
        return [a["seq"] for a in acks]

    def theirs(**opts: Any) -> List[int]:
        pull = {"group": "jobs", "max_messages": 1, "expires": 1000, **opts}
        return [m.seq for m in peer.fetch(stream, "O", opts=pull, action="hold")]

    seqs = publish(3)
    # num_pending 3 < 5: neither client's overflow pull is served.
    assert theirs(min_pending=5) == []
    assert c.fetch(1, max_wait=1.0, group="jobs", min_pending=5) == []
    seqs += publish(2)  # num_pending 5: nats.js's pull is served ...
    assert theirs(min_pending=5) == seqs[:1]
    # ... which leaves 4 pending: ours at 5 waits, ours at 4 is served.
    assert c.fetch(1, max_wait=1.0, group="jobs", min_pending=5) == []
    (mine,) = c.fetch(1, max_wait=5.0, group="jobs", min_pending=4)
    assert mine.metadata.sequence.stream == seqs[1]
    # Two unacked now (theirs held, ours): min_ack_pending 2 is met for either client while
    # min_pending 50 is not (either threshold is enough).
    assert theirs(min_pending=50, min_ack_pending=2) == seqs[2:3]
    (again,) = c.fetch(1, max_wait=5.0, group="jobs", min_pending=50, min_ack_pending=3)
    assert again.metadata.sequence.stream == seqs[3]
    assert info(js, stream, "O").num_ack_pending == 4
    for m in (mine, again):
        m.ack_sync()
    for seq in seqs[:1] + seqs[2:3]:
        peer.call("act", seq=seq, action="ack")
    assert info(js, stream, "O").num_ack_pending == 0


def test_prioritized_lower_priority_is_served_first_across_both_clients(
    nc: nats.Client, js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    version = str(nc.server_info.get("version", "0"))
    if version_tuple(version) < (2, 12):
        pytest.skip(f"the prioritized policy needs nats-server >= 2.12; this one is {version}")
    peer = natsjs()
    subj = stream.lower()
    c = js.create_or_update_consumer(
        stream, durable_name="P", priority_groups=["jobs"], priority_policy="prioritized"
    )

    def publish(n: int) -> List[int]:
        return [js.publish(f"{subj}.job", b"j").seq for _ in range(n)]

    def theirs_start(priority: int) -> int:
        opts = {"group": "jobs", "priority": priority, "max_messages": 2, "expires": 10_000}
        return peer.send("fetch", stream=stream, consumer="P", opts=opts, action="ack")

    def ours_start(priority: int) -> Background:
        return Background(lambda: c.fetch(2, max_wait=10.0, group="jobs", priority=priority))

    def waiting(n: int) -> None:
        wait_until(lambda: info(js, stream, "P").num_waiting == n, what=f"{n} waiting pulls")

    for ours_priority, their_priority in ((0, 5), (5, 0)):
        # The more urgent side asks last, so arrival order cannot explain who is served.
        if ours_priority < their_priority:
            fetch_id = theirs_start(their_priority)
            waiting(1)
            mine = ours_start(ours_priority)
        else:
            mine = ours_start(ours_priority)
            waiting(1)
            fetch_id = theirs_start(their_priority)
        waiting(2)
        urgent = publish(2)
        if ours_priority < their_priority:
            got = mine.result()
            assert [m.metadata.sequence.stream for m in got] == urgent
            for m in got:
                m.ack_sync()
            assert not peer.answered(fetch_id)  # nats.js's pull is still waiting
            rest = publish(2)  # now the other pull is the only one waiting
            assert [m["seq"] for m in peer.result(fetch_id)["msgs"]] == rest
        else:
            assert [m["seq"] for m in peer.result(fetch_id)["msgs"]] == urgent
            assert mine.join(0.2) is False  # still waiting: nothing was left for it
            rest = publish(2)
            got = mine.result()
            assert [m.metadata.sequence.stream for m in got] == rest
            for m in got:
                m.ack_sync()
    assert info(js, stream, "P").num_ack_pending == 0


# --- plain shared pull consumers -----------------------------------------------------------


class OurPuller:
    """Our side of a shared durable: a fetch loop on a thread, acking what it gets."""

    def __init__(self, psub: Any) -> None:
        self.psub = psub
        self.got: List[Tuple[int, bytes, str, int]] = []
        self.error: Optional[BaseException] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                try:
                    msgs = self.psub.fetch(10, timeout=1.0)
                except nats.TimeoutError:
                    continue
                for m in msgs:
                    md = m.metadata
                    self.got.append((md.sequence.stream, m.data, m.subject, md.num_delivered))
                    m.ack_sync()
        except BaseException as e:  # kept for leave() to raise: a dead loop must not hide
            self.error = e

    def leave(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert not self._thread.is_alive()
        if self.error is not None:
            raise self.error


def _shared_round(
    js: JetStream, stream: str, peer: NodePeer, start: int, n: int
) -> List[Tuple[int, bytes]]:
    """Publish n matching messages (half from each client) and n // 5 that do not match the
    filter; return the matching ones as (seq, data)."""
    subj = stream.lower()
    mine = [
        (f"{subj}.orders.{REGIONS[i % 3]}.new", f"order-{i}".encode())
        for i in range(start, start + n, 2)
    ]
    theirs = [
        (f"{subj}.orders.{REGIONS[i % 3]}", f"order-{i}".encode())
        for i in range(start + 1, start + n, 2)
    ]
    job = peer.send(
        "publish",
        messages=[{"subject": s, "data": b64(d)} for s, d in theirs],
    )
    futures = [js.publish_async(s, d) for s, d in mine]
    for i in range(n // 5):
        js.publish(f"{subj}.invoices.{i}", b"not an order")
    expected = [(f.result(timeout=10).seq, d) for f, (_, d) in zip(futures, mine)]
    expected += [(a["seq"], d) for a, (_, d) in zip(peer.result(job)["acks"], theirs)]
    return sorted(expected)


def _processed(peer: NodePeer, tag: str, ours: OurPuller) -> List[Tuple[int, bytes]]:
    return sorted(
        [(m.seq, m.data) for m in peer.consumed(tag)] + [(s, d) for s, d, _, _ in ours.got]
    )


def test_shared_durable_with_a_wildcard_filter_natsjs_leaves(
    js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    peer = natsjs()
    subj = stream.lower()
    peer.call(
        "add_consumer",
        stream=stream,
        config={
            "durable_name": "shared",
            "ack_policy": "explicit",
            "filter_subject": f"{subj}.orders.>",
        },
    )
    ours = OurPuller(js.pull_subscribe(f"{subj}.orders.>", durable="shared", stream=stream))
    try:
        peer.call(
            "consume",
            stream=stream,
            consumer="shared",
            tag="s",
            opts={"max_messages": 10, "expires": 2000},
        )
        wait_until(lambda: info(js, stream, "shared").num_waiting >= 2, what="both pulls")
        started = time.monotonic()
        expected = _shared_round(js, stream, peer, 0, 200)
        wait_until(lambda: len(_processed(peer, "s", ours)) >= 200, timeout=30, what="200 done")
        took = time.monotonic() - started
        assert _processed(peer, "s", ours) == expected  # each exactly once, across both
        assert peer.consumed("s") and ours.got  # both took part
        again = [(m.seq, m.delivered) for m in peer.consumed("s") if m.delivered != 1]
        again += [(s, n) for s, _, _, n in ours.got if n != 1]
        if again:
            # Seen once in ~14 runs (CI, 2026-11-24): a message processed once, but delivered
            # twice within the test's ~2 s (so not an ack_wait expiry). Under investigation
            # (issue 17's note); reported here with what each side took, not yet asserted.
            ours_seqs = sorted(s for s, _, _, _ in ours.got)
            # The round's time says whether the consumer's ack wait (30 s) can have expired.
            warnings.warn(
                f"redelivered (seq, delivered): {again}; ours took {ours_seqs}; the round "
                f"took {took:.1f} s (ack_wait {info(js, stream, 'shared').config.ack_wait} s)",
                stacklevel=1,
            )

        peer.call("stop", tag="s")  # nats.js leaves; we carry on alone
        before = len(ours.got)
        more = _shared_round(js, stream, peer, 200, 50)
        wait_until(lambda: len(ours.got) >= before + 50, timeout=30, what="the rest at ours")
        assert sorted((s, d) for s, d, _, _ in ours.got[before:]) == more
        assert _processed(peer, "s", ours) == sorted(expected + more)
    finally:
        ours.leave()
        ours.psub.unsubscribe()
    left = info(js, stream, "shared")
    assert left.num_pending == 0 and left.num_ack_pending == 0


def test_shared_durable_with_a_wildcard_filter_we_leave(
    js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    peer = natsjs()
    subj = stream.lower()
    # Our pull_subscribe makes the durable (filter_subject = the wildcard); nats.js joins it.
    ours = OurPuller(js.pull_subscribe(f"{subj}.orders.>", durable="shared", stream=stream))
    try:
        assert info(js, stream, "shared").config.filter_subject == f"{subj}.orders.>"
        opts = {"max_messages": 10, "expires": 2000}
        peer.call("consume", stream=stream, consumer="shared", tag="s", opts=opts)
        wait_until(lambda: info(js, stream, "shared").num_waiting >= 2, what="both pulls")
        expected = _shared_round(js, stream, peer, 0, 200)
        wait_until(lambda: len(_processed(peer, "s", ours)) >= 200, timeout=30, what="200 done")
        assert _processed(peer, "s", ours) == expected
        assert peer.consumed("s") and ours.got
    finally:
        ours.leave()
    ours.psub.unsubscribe()  # we leave: the durable must stay for nats.js
    kept = js.consumer_info(stream, "shared")
    assert kept.config.durable_name == "shared"
    before = len(peer.consumed("s"))
    more = _shared_round(js, stream, peer, 200, 50)
    wait_until(lambda: len(peer.consumed("s")) >= before + 50, timeout=30, what="the rest")
    assert sorted((m.seq, m.data) for m in peer.consumed("s")[before:]) == more
    assert _processed(peer, "s", ours) == sorted(expected + more)
    peer.call("stop", tag="s")


# --- push consumers made by nats.js, bound by us -------------------------------------------

PUSH_COUNT, PUSH_SIZE = 300, 16 * 1024  # ~4.9 MB: enough in flight for flow control


def test_push_consumers_made_by_natsjs_with_flow_control_are_bound_by_us(
    nc: nats.Client, js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    peer = natsjs()
    subj = stream.lower()
    for name in ("bound", "named"):
        peer.call(
            "add_consumer",
            stream=stream,
            config={
                "durable_name": name,
                "deliver_subject": f"dlv.{subj}.{name}",
                "ack_policy": "explicit",
                "flow_control": True,
                "idle_heartbeat": ns(1.0),
                "filter_subject": f"{subj}.events.>",
            },
        )
    subjects = [f"{subj}.events.{r}" for r in REGIONS]
    acks = peer.call(
        "publish_generated",
        subjects=subjects,
        count=PUSH_COUNT,
        size=PUSH_SIZE,
        msg_id_prefix="ev-",
    )["acks"]
    assert [a["seq"] for a in acks] == list(range(1, PUSH_COUNT + 1))

    def check(got: List[nats.Msg], name: str) -> None:
        assert len(got) == PUSH_COUNT
        for i, m in enumerate(got):
            assert (m.subject, m.data) == (subjects[i % 3], generated(i, PUSH_SIZE))
            assert m.headers is not None and m.headers["X-Index"] == str(i)
            assert m.headers["Nats-Msg-Id"] == f"ev-{i}"
            md = m.metadata
            assert (md.consumer, md.sequence.stream, md.sequence.consumer) == (name, i + 1, i + 1)
            assert md.num_delivered == 1

    statuses: List[Tuple[Optional[int], str, str]] = []

    def watch(msg: nats.Msg) -> bool:
        if msg.status is not None:  # seen, never dropped
            statuses.append((msg.status, msg.description, msg.subject))
        return False

    with drop_inbound(nc, watch):
        # subscribe_bind: the consumer as nats.js made it.
        sub = js.subscribe_bind(stream, "bound", manual_ack=True)
        got = []
        for _ in range(PUSH_COUNT):
            m = sub.next_msg(timeout=10)
            got.append(m)
            m.ack()
        check(got, "bound")
        # subscribe with durable=: looked up by name and checked against what we ask for.
        named: List[nats.Msg] = []
        sub2 = js.subscribe(
            f"{subj}.events.>",
            durable="named",
            cb=named.append,
            idle_heartbeat=1.0,
            flow_control=True,
        )
        wait_until(lambda: len(named) >= PUSH_COUNT, timeout=30, what="everything at named")
        check(named, "named")
        for name in ("bound", "named"):
            wait_until(
                lambda name=name: info(js, stream, name).num_ack_pending == 0,
                what=f"the acks of {name}",
            )
            done = info(js, stream, name)
            assert done.delivered.consumer_seq == PUSH_COUNT  # nothing delivered twice
            assert done.num_redelivered == 0
    flow = [s for s in statuses if s[0] == 100 and "FlowControl" in s[1]]
    assert flow, f"no flow-control request reached us: {statuses[:5]}"
    sub.unsubscribe()
    sub2.unsubscribe()
    # We only bound these consumers: they are nats.js's and stay after we leave.
    for name in ("bound", "named"):
        assert peer.call("consumer_info", stream=stream, consumer=name)["info"]["name"] == name


# --- nak / term / in_progress, seen by the other client ------------------------------------

ACK_WAIT = 1.5


@contextmanager
def _naked(js: JetStream, stream: str, consumer: str) -> Iterator[Callable[[int], None]]:
    """Waits for the server's MSG_NAKED advisory of a stream sequence. The server sends it
    under the consumer's lock, in the same step that puts the message back for redelivery:
    a pull sent after it has arrived sees the message back."""
    sub = js.nc.subscribe(f"$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.{stream}.{consumer}")
    js.nc.flush()  # the server has our SUB before the nak

    def wait(seq: int) -> None:
        advisory = json.loads(sub.next_msg(timeout=10).data)
        assert advisory["stream_seq"] == seq

    try:
        yield wait
    finally:
        sub.unsubscribe()


def test_natsjs_sees_our_nak_term_and_in_progress(
    js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    peer = natsjs()
    subj = stream.lower()
    peer.call(
        "add_consumer",
        stream=stream,
        config={"durable_name": "A", "ack_policy": "explicit", "ack_wait": ns(ACK_WAIT)},
    )
    seqs = [
        a["seq"]
        for a in peer.publish([{"subject": f"{subj}.x", "data": b"%d" % i} for i in range(3)])
    ]
    c = js.consumer(stream, "A")
    one = {"max_messages": 1, "expires": 5000}

    # We nak: nats.js gets it next, at once, as a redelivery.
    (m,) = c.fetch(1, max_wait=5.0)
    assert m.metadata.sequence.stream == seqs[0]
    with _naked(js, stream, "A") as naked:
        m.nak()
        # The server takes a nak off a queue of its own: a pull it sees first gets seqs[1].
        naked(m.metadata.sequence.stream)
    (theirs,) = peer.fetch(stream, "A", opts=one, action="ack")
    assert (theirs.seq, theirs.dseq, theirs.delivered) == (seqs[0], 2, 2)

    # We term one and keep the other in progress past several ack waits: nats.js, pulling
    # all along, gets neither.
    (termed,) = c.fetch(1, max_wait=5.0)
    termed.term("cannot be handled")
    # (A term not taken off the server's ack queue within the ack wait would be redelivered.)
    wait_until(lambda: info(js, stream, "A").num_ack_pending == 0, what="the term")
    (kept,) = c.fetch(1, max_wait=5.0)
    assert [termed.metadata.sequence.stream, kept.metadata.sequence.stream] == seqs[1:]
    window = 3 * ACK_WAIT
    job = peer.send(
        "fetch",
        stream=stream,
        consumer="A",
        opts={"max_messages": 1, "expires": int(window * 1000)},
    )
    started = time.monotonic()
    answer: Optional[Dict[str, Any]] = None
    while answer is None:
        kept.in_progress()
        try:
            answer = peer.result(job, timeout=ACK_WAIT / 4)
        except TimeoutError:
            assert time.monotonic() - started < window + 20, "nats.js's fetch never ended"
    assert answer["msgs"] == []
    assert time.monotonic() - started >= window - 0.2
    kept.ack_sync()
    done = info(js, stream, "A")
    assert done.delivered.consumer_seq == 4  # 3 deliveries and the one redelivery: no more
    assert done.num_ack_pending == 0 and done.ack_floor.stream_seq == seqs[-1]


def test_we_see_natsjs_nak_term_and_working(
    js: JetStream, stream: str, natsjs: Callable[[], NodePeer]
) -> None:
    peer = natsjs()
    subj = stream.lower()
    c = js.create_or_update_consumer(stream, durable_name="B", ack_wait=ACK_WAIT)
    seqs = [js.publish(f"{subj}.x", b"%d" % i).seq for i in range(3)]
    one = {"max_messages": 1, "expires": 5000}

    # nats.js naks: we get it next, as a redelivery.
    (t1,) = peer.fetch(stream, "B", opts=one, action="hold")
    with _naked(js, stream, "B") as naked:
        # nats.js's nak is fire-and-forget and a flush does not cover it (the server takes
        # it off a queue of its own): until the server has it, our pull gets seqs[1].
        peer.call("act", seq=t1.seq, action="nak")
        naked(t1.seq)
    (m,) = c.fetch(1, max_wait=5.0)
    md = m.metadata
    assert (md.sequence.stream, md.sequence.consumer, md.num_delivered) == (seqs[0], 2, 2)
    m.ack_sync()

    # nats.js terms one and keeps the other working past several ack waits: we get neither.
    (t2,) = peer.fetch(stream, "B", opts=one, action="hold")
    peer.call("act", seq=t2.seq, action="term", reason="cannot be handled")
    # (A term not taken off the server's ack queue within the ack wait would be redelivered.)
    wait_until(lambda: info(js, stream, "B").num_ack_pending == 0, what="their term")
    (t3,) = peer.fetch(stream, "B", opts=one, action="hold")
    assert [t2.seq, t3.seq] == seqs[1:]
    window = 3 * ACK_WAIT
    started = time.monotonic()
    mine = Background(lambda: c.fetch(1, max_wait=window))
    while not mine.join(ACK_WAIT / 4):
        peer.call("act", seq=t3.seq, action="working")
        assert time.monotonic() - started < window + 20, "our fetch never ended"
    assert mine.result() == []
    assert time.monotonic() - started >= window - 0.2
    peer.call("act", seq=t3.seq, action="ack")
    done = info(js, stream, "B")
    assert done.delivered.consumer_seq == 4
    assert done.num_ack_pending == 0 and done.ack_floor.stream_seq == seqs[-1]
