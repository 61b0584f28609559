"""Push gap detection with bytes alone: sequences are checked once per read (the first and
last reply of a read), and a read that does not add up is walked message by message, so
every gap is still reported with the sequence expected and the one that came."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, List

from jetstream_sync import _protocol as proto
from jetstream_sync import errors
from jetstream_sync.jetstream.push import JetStreamSubscription
from jetstream_sync.msg import Msg


class FakeClient:
    """The two parts of the Core (_seam.py) the arrival hook uses: after_read and report."""

    def __init__(self) -> None:
        self._after_read: List[Any] = []
        self.reported: List[errors.NATSError] = []

    def after_read(self, fn: Any) -> None:
        self._after_read.append(fn)

    def report(self, err: errors.NATSError) -> None:
        self.reported.append(err)

    def end_of_read(self) -> None:
        after, self._after_read = self._after_read, []
        for fn in after:
            fn()


def make(queue: str = "") -> tuple[JetStreamSubscription, FakeClient]:
    nc = FakeClient()
    js: Any = SimpleNamespace(_nc=nc, _core=nc)
    return JetStreamSubscription(js, "S", "C", False, queue or None, False, None), nc


def read(jsub: JetStreamSubscription, nc: FakeClient, cseqs: List[int]) -> None:
    """One read's worth of messages with these consumer sequences, from the wire."""
    wire = b""
    for c in cseqs:
        reply = f"$JS.ACK.S.C.1.{c + 100}.{c}.1700000000000000000.0"
        wire += f"MSG deliver 1 {reply} 2\r\nhi\r\n".encode()
    parser = proto.Parser()
    parser.receive_data(wire)
    for msg in parser.events():
        assert isinstance(msg, Msg)
        assert jsub._on_arrival(msg) is False  # data is for the user
    nc.end_of_read()


def heartbeat(jsub: JetStreamSubscription, nc: FakeClient, last: int) -> None:
    block = f"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: {last}\r\n\r\n".encode()
    parser = proto.Parser()
    parser.receive_data(b"HMSG deliver 1 %d %d\r\n%s\r\n" % (len(block), len(block), block))
    (msg,) = parser.events()
    assert isinstance(msg, Msg)
    assert jsub._on_arrival(msg) is True  # never for the user
    nc.end_of_read()


def gaps(nc: FakeClient) -> List[str]:
    return [str(e) for e in nc.reported if isinstance(e, errors.ConsumerSequenceMismatchError)]


def test_reads_without_holes_report_nothing_and_register_once_per_read() -> None:
    jsub, nc = make()
    read(jsub, nc, [7, 8, 9])  # a durable resuming: counting starts where it starts
    read(jsub, nc, [10])
    read(jsub, nc, list(range(11, 500)))
    assert gaps(nc) == []
    assert jsub._consumer_seq == 499
    assert nc._after_read == [] and jsub._arrived == []


def test_a_hole_inside_a_read_is_found_and_named() -> None:
    jsub, nc = make()
    read(jsub, nc, [1, 2, 3])
    read(jsub, nc, [4, 5, 7, 8])
    assert gaps(nc) == ["consumer 'C' of stream 'S': consumer sequence gap: expected 6, got 7"]
    read(jsub, nc, [9, 10])  # counting goes on from the message after the hole
    assert len(gaps(nc)) == 1


def test_holes_between_reads_and_in_the_first_read() -> None:
    jsub, nc = make()
    read(jsub, nc, [1, 3])
    read(jsub, nc, [4])
    read(jsub, nc, [9, 10])
    assert [g.rsplit(": ", 1)[1] for g in gaps(nc)] == [
        "expected 2, got 3",
        "expected 5, got 9",
    ]


def test_heartbeat_reveals_trailing_loss_after_the_reads_messages() -> None:
    jsub, nc = make()
    read(jsub, nc, [1, 2])
    heartbeat(jsub, nc, 2)
    assert gaps(nc) == []
    heartbeat(jsub, nc, 5)  # three messages after 2 never came
    assert gaps(nc) == ["consumer 'C' of stream 'S': consumer sequence gap: expected 3, got 5"]
    read(jsub, nc, [6])
    assert len(gaps(nc)) == 1


def test_queue_members_do_not_check() -> None:
    jsub, nc = make(queue="crew")
    read(jsub, nc, [1, 5, 9])
    heartbeat(jsub, nc, 20)
    assert gaps(nc) == [] and nc._after_read == []


def test_a_heartbeat_before_any_message_sets_where_counting_starts() -> None:
    # Binding to a durable that delivered 41 messages before: its first heartbeat says 41.
    jsub, nc = make()
    heartbeat(jsub, nc, 41)
    assert gaps(nc) == []
    read(jsub, nc, [42, 43])
    assert gaps(nc) == []
    read(jsub, nc, [45])
    assert [g.rsplit(": ", 1)[1] for g in gaps(nc)] == ["expected 44, got 45"]
