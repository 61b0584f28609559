"""PullConsumer.fetch() / next(): a message that arrives after the call gave up is kept for
the next call, not left in a queue nobody reads (lost on an ack-none consumer, redelivered
only after ack_wait and counted toward max_deliver on an explicit-ack one)."""

from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest

import jetstream_sync as nats
from jetstream_sync import AckPolicy
from jetstream_sync.jetstream.consumer import PullConsumer
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.testing import wait_until

STREAM_PREFIX = "LATE"  # the shared stream fixture names its streams LATE<n>


def give_up_before_the_message_is_read(
    c: PullConsumer, nc: nats.Client, other: JetStream, stream: str, call: str
) -> None:
    """One ``call`` ("fetch" or "next") that gives up while the message answering its pull
    is on its way: the server has sent it, but the client has not read it yet (its reader is
    held, as a busy machine would hold it) when the call's time runs out."""
    ended: Dict[str, Any] = {}

    def one_call() -> None:
        try:
            ended["result"] = c.fetch(1, max_wait=4) if call == "fetch" else c.next(4)
        except nats.TimeoutError as exc:
            ended["result"] = exc

    caller = threading.Thread(target=one_call)
    caller.start()
    wait_until(lambda: other.consumer_info(stream, c.name).num_waiting == 1, what="the pull")
    nc._link.read_lock.acquire()  # the client reads nothing until released
    try:
        other.publish(f"{stream.lower()}.new", b"late")
        wait_until(
            lambda: other.consumer_info(stream, c.name).delivered.consumer_seq == 1,
            what="the server to send the message",
        )
        caller.join(20)
        assert not caller.is_alive()
    finally:
        nc._link.read_lock.release()
    result = ended["result"]
    if call == "fetch":
        assert result == []
    else:
        assert isinstance(result, nats.TimeoutError)
    nc.flush(10)  # read past what came meanwhile: the message has reached the client


@pytest.mark.parametrize("call", ["fetch", "next"])
@pytest.mark.parametrize("ack", [AckPolicy.NONE, AckPolicy.EXPLICIT])
def test_a_message_arriving_after_the_call_gave_up_goes_to_the_next_call(
    js: JetStream, nc: nats.Client, stream: str, nats_server: NATSServer, call: str, ack: str
) -> None:
    c = js.create_or_update_consumer(
        stream,
        durable_name="late",
        ack_policy=ack,
        filter_subject=f"{stream.lower()}.*",
        max_deliver=None if ack == AckPolicy.NONE else 3,
        ack_wait=None if ack == AckPolicy.NONE else 60.0,
    )
    with nats.connect(nats_server.url) as other_nc:
        other = other_nc.jetstream()
        give_up_before_the_message_is_read(c, nc, other, stream, call)
        got: List[nats.Msg] = c.fetch(5, max_wait=3.0) if call == "fetch" else [c.next(3.0)]
        assert [m.data for m in got] == [b"late"]
        msg = got[0]
        assert msg.metadata.num_delivered == 1 and msg.metadata.sequence.consumer == 1
        if ack == AckPolicy.EXPLICIT:
            msg.ack_sync(10)  # the server has counted it once this returns
        info = other.consumer_info(stream, c.name)
        assert info.num_redelivered == 0 and info.delivered.consumer_seq == 1
        assert info.num_ack_pending == 0 and info.num_pending == 0
        # The kept message is handed out once: the next call finds nothing.
        assert c.fetch(1, max_wait=0.5) == []


def test_late_messages_are_kept_in_order_for_a_batch(
    js: JetStream, nc: nats.Client, stream: str, nats_server: NATSServer
) -> None:
    """Several late messages: the next fetch returns them, in order, without pulling."""
    c = js.create_or_update_consumer(
        stream, durable_name="late", ack_policy=AckPolicy.NONE, filter_subject=f"{stream.lower()}.>"
    )
    with nats.connect(nats_server.url) as other_nc:
        other = other_nc.jetstream()
        ended: Dict[str, Any] = {}

        def one_fetch() -> None:
            ended["result"] = c.fetch(3, max_wait=4)

        caller = threading.Thread(target=one_fetch)
        caller.start()
        wait_until(lambda: other.consumer_info(stream, c.name).num_waiting == 1, what="pull")
        nc._link.read_lock.acquire()
        try:
            for i in range(3):
                other.publish(f"{stream.lower()}.new", str(i).encode())
            wait_until(
                lambda: other.consumer_info(stream, c.name).delivered.consumer_seq == 3,
                what="the server to send the messages",
            )
            caller.join(20)
        finally:
            nc._link.read_lock.release()
        assert ended["result"] == []
        nc.flush(10)
        assert [m.data for m in c.fetch(2, max_wait=3.0)] == [b"0", b"1"]
        assert [m.data for m in c.fetch(2, max_wait=3.0)] == [b"2"]
        assert other.consumer_info(stream, c.name).num_redelivered == 0


def test_a_late_message_goes_to_a_call_already_waiting(
    js: JetStream, nc: nats.Client, stream: str, nats_server: NATSServer
) -> None:
    """The next call began (and pulled) before the late message was read: that call takes
    it, and its own pull, not over yet, still has its message kept when that comes."""
    c = js.create_or_update_consumer(
        stream,
        durable_name="late",
        ack_policy=AckPolicy.EXPLICIT,
        max_deliver=2,
        filter_subject=f"{stream.lower()}.*",
    )
    with nats.connect(nats_server.url) as other_nc:
        other = other_nc.jetstream()
        first: Dict[str, Any] = {}
        second: Dict[str, Any] = {}
        caller = threading.Thread(target=lambda: first.update(r=c.fetch(1, max_wait=4)))
        caller.start()
        wait_until(lambda: other.consumer_info(stream, c.name).num_waiting == 1, what="pull")
        nc._link.read_lock.acquire()
        try:
            other.publish(f"{stream.lower()}.new", b"late")
            wait_until(
                lambda: other.consumer_info(stream, c.name).delivered.consumer_seq == 1,
                what="the server to send the message",
            )
            caller.join(20)
            assert first["r"] == []
            waiter = threading.Thread(target=lambda: second.update(r=c.fetch(1, max_wait=10)))
            waiter.start()
            wait_until(lambda: other.consumer_info(stream, c.name).num_waiting == 1, what="2nd")
        finally:
            nc._link.read_lock.release()
        waiter.join(20)
        assert [m.data for m in second["r"]] == [b"late"]
        second["r"][0].ack_sync(10)
        other.publish(f"{stream.lower()}.new", b"next")
        got = c.fetch(1, max_wait=5) or c.fetch(1, max_wait=5)
        assert [m.data for m in got] == [b"next"]
        got[0].ack_sync(10)
        info = other.consumer_info(stream, c.name)
        assert info.num_redelivered == 0 and info.delivered.consumer_seq == 2
