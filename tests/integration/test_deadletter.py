"""Dead letters and advisories against a real server: the helper keeps exactly the messages
that exceeded max_deliver or were terminated, once each, across a restart of the helper;
the pin advisories come typed."""

from __future__ import annotations

import json
from typing import Callable, Dict, Iterator, List

import pytest
from support import Errors

import jetstream_sync as nats
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import stream_name, wait_until


@pytest.fixture
def work(js: JetStream) -> Iterator[str]:
    """A stream with a consumer W that gives a message two deliveries, 0.5 s apart."""
    name = stream_name("WORK")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"])
    js.add_stream(name=f"{name}_DLQ", subjects=[f"dlq.{name.lower()}"])
    js.create_or_update_consumer(name, durable_name="W", max_deliver=2, ack_wait=0.5)
    try:
        yield name
    finally:
        for s in (name, f"{name}_DLQ", f"DLQ_ADV_{name}_W"):
            try:
                js.delete_stream(s)
            except nats.StreamNotFoundError:
                pass


def publish(js: JetStream, stream: str, kinds: List[str]) -> Dict[int, str]:
    """One message per kind ('ok', 'drop' never acked, 'term' terminated): seq -> kind."""
    return {
        js.publish(f"{stream.lower()}.job", kind.encode(), headers={"Kind": kind}).seq: kind
        for kind in kinds
    }


def work_until(js: JetStream, stream: str, predicate: Callable[[], bool], what: str) -> None:
    """Be the worker until ``predicate``: ack 'ok', terminate 'term', leave 'drop' alone
    (it times out and is redelivered until max_deliver)."""
    c = js.consumer(stream, "W")

    def step() -> bool:
        for m in c.fetch(10, max_wait=1, no_wait=True):  # what is there, at once
            if m.data == b"ok":
                m.ack()
            elif m.data == b"term":
                m.term("poison")
        return predicate()

    wait_until(step, timeout=30, what=what)


def dlq_entries(js: JetStream, stream: str) -> List[nats.RawStreamMsg]:
    info = js.stream_info(f"{stream}_DLQ")
    return [js.get_msg(f"{stream}_DLQ", seq) for seq in range(1, info.state.last_seq + 1)]


def test_dead_letters_republished_once_each_across_a_restart(
    nats_server: NATSServer, js: JetStream, work: str
) -> None:
    errs = Errors()
    dlq = f"dlq.{work.lower()}"
    with nats.connect(nats_server.url, error_cb=errs) as hnc:
        hjs = hnc.jetstream()
        sent = publish(js, work, ["ok", "drop", "term", "ok", "drop"])
        helper = hjs.dead_letters(work, "W", subject=dlq)
        work_until(js, work, lambda: len(dlq_entries(js, work)) == 3, "three entries")
        helper.stop()

        # While no helper runs, more messages die: the advisory stream keeps the news.
        sent.update(publish(js, work, ["drop", "term", "ok"]))
        kept = f"DLQ_ADV_{work}_W"
        work_until(js, work, lambda: js.stream_info(kept).state.messages == 2, "news kept")
        assert len(dlq_entries(js, work)) == 3

        restarted = hjs.dead_letters(work, "W", subject=dlq)
        wait_until(lambda: len(dlq_entries(js, work)) == 5, what="the news kept meanwhile")

        # The same news twice (a redelivered advisory) makes no second entry.
        first_dead = min(s for s, k in sent.items() if k == "drop")
        twice = {"type": "io.nats.jetstream.advisory.v1.max_deliver", "stream": work,
                 "consumer": "W", "stream_seq": first_dead, "deliveries": 2}  # fmt: skip
        hnc.publish(
            f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{work}.W", json.dumps(twice).encode()
        )
        wait_until(lambda: restarted.handled == 3, what="the duplicate handled")
        entries = dlq_entries(js, work)
        restarted.stop()

    dead = {s: k for s, k in sent.items() if k != "ok"}
    by_seq = {int(e.headers["Nats-DLQ-Sequence"]): e for e in entries if e.headers}
    assert len(entries) == len(dead) == 5 and set(by_seq) == set(dead)
    for seq, kind in dead.items():
        h = by_seq[seq].headers
        assert h is not None
        assert h["Nats-DLQ-Stream"] == work and h["Nats-DLQ-Consumer"] == "W"
        assert h["Nats-DLQ-Reason"] == ("terminated" if kind == "term" else "max_deliveries")
        assert h["Kind"] == kind and by_seq[seq].data == kind.encode()
        assert h["Nats-DLQ-Subject"] == f"{work.lower()}.job"
        if kind == "term":
            assert h["Nats-DLQ-Description"] == "poison"
    # Every advisory acked: the server removes acked work-queue messages a moment later.
    wait_until(
        lambda: js.stream_info(f"DLQ_ADV_{work}_W").state.messages == 0, what="advisories acked"
    )
    assert errs.seen == []


def test_dead_letters_to_a_callback_and_a_failing_callback_retries(
    nats_server: NATSServer, js: JetStream, work: str
) -> None:
    errs = Errors()
    got: List[nats.DeadLetter] = []
    failures = [1]

    def cb(dead: nats.DeadLetter) -> None:
        if failures:
            failures.pop()
            raise RuntimeError("disk full")
        got.append(dead)

    with nats.connect(nats_server.url, error_cb=errs) as hnc:
        sent = publish(js, work, ["term", "ok"])
        with hnc.jetstream().dead_letters(work, "W", cb=cb):
            work_until(js, work, lambda: len(got) == 1, "the dead letter, after a retry")
    (dead,) = got
    (seq,) = [s for s, k in sent.items() if k == "term"]
    assert (dead.stream_seq, dead.reason, dead.description, dead.data) == (
        seq, "terminated", "poison", b"term")  # fmt: skip
    assert dead.headers is not None and dead.headers["Kind"] == "term" and not dead.missing
    assert nats.CallbackError in errs.kinds()  # the failure was reported, then retried


def test_dead_letters_arguments(js: JetStream, work: str) -> None:
    with pytest.raises(nats.InvalidArgumentError, match="exactly one"):
        js.dead_letters(work, "W")
    with pytest.raises(nats.InvalidArgumentError, match="exactly one"):
        js.dead_letters(work, "W", cb=print, subject="x")
    with pytest.raises(nats.InvalidArgumentError):
        js.dead_letters(work, "W", subject="bad subject")
    with pytest.raises(nats.InvalidArgumentError):
        js.dead_letters("bad.stream", "W", cb=print)


# --- pin advisories -----------------------------------------------------------------------


def test_pin_advisories_come_typed(js: JetStream, work: str) -> None:
    c = js.create_or_update_consumer(
        work,
        durable_name="P",
        priority_groups=["jobs"],
        priority_policy="pinned_client",
        priority_timeout=30.0,
    )
    with js.watch_pin_advisories(work, "P") as watch:
        publish(js, work, ["ok"])
        (m,) = c.fetch(1, max_wait=2, group="jobs")
        m.ack()
        pinned = watch.next(timeout=5)
        assert isinstance(pinned, nats.ConsumerPinnedAdvisory)
        assert (pinned.stream, pinned.consumer, pinned.group) == (work, "P", "jobs")
        assert pinned.pinned_id == c.pin_id()
        js.unpin_consumer(work, "P", "jobs")
        unpinned = watch.next(timeout=5)
        assert isinstance(unpinned, nats.ConsumerUnpinnedAdvisory)
        assert unpinned.reason == "admin" and unpinned.group == "jobs"
        with pytest.raises(nats.TimeoutError):
            watch.next(timeout=0.3)  # nothing else, and no other kind of advisory
