"""Batch direct get (ADR-31): get_batch and get_last_msgs_for against the real server, the
pieces a large batch is asked for in, and the refusals."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Callable, Dict, Iterator, List

import pytest

import jetstream_sync as nats
from jetstream_sync.client import Client
from jetstream_sync.jetstream import api_level
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.msg import Msg
from jetstream_sync.testing import stream_name


@pytest.fixture
def dstream(js: JetStream) -> Iterator[str]:
    """A stream with allow_direct; its subjects are ``<name lowercased>.>``."""
    name = stream_name("DG")
    js.add_stream(name=name, subjects=[f"{name.lower()}.>"], allow_direct=True)
    try:
        yield name
    finally:
        js.delete_stream(name)


def _p(stream: str) -> str:
    return stream.lower()


class Requests:
    """The direct get requests sent to a stream from now on, as the server got them (a plain
    subscriber sees them too; the server's responder is a queue group)."""

    def __init__(self, nc: Client, stream: str) -> None:
        self._nc = nc
        self._sub = nc.subscribe(f"$JS.API.DIRECT.GET.{stream}")
        nc.flush()

    def taken(self) -> List[Dict[str, Any]]:
        """Every request sent so far: the server copied each to us before it answers the
        flush's PING, so all are queued once flush returns."""
        self._nc.flush()
        seen = []
        while True:
            try:
                seen.append(json.loads(self._sub.next_msg(timeout=0).data))
            except nats.TimeoutError:
                return seen


def test_a_batch_from_a_sequence_on_wildcard_subjects(js: JetStream, dstream: str) -> None:
    p = _p(dstream)
    for i in range(30):
        js.publish(f"{p}.{'ab'[i % 2]}.{i}", str(i).encode(), headers={"N": str(i)})
    got = list(js.get_batch(dstream, seq=5, batch=10))
    assert [m.seq for m in got] == list(range(5, 15))
    first = got[0]
    assert (first.subject, first.data, first.stream) == (f"{p}.a.4", b"4", dstream)
    assert first.time is not None and first.time.tzinfo is not None
    assert dict(first.headers.items()) == {"N": "4"}  # the stored headers, not the batch's
    assert [m.seq for m in js.get_batch(dstream)] == list(range(1, 31))[:100]
    only_b = list(js.get_batch(dstream, subject=f"{p}.b.*", batch=100))
    assert [m.data for m in only_b] == [str(i).encode() for i in range(1, 30, 2)]
    from_seq = list(js.get_batch(dstream, seq=20, subject=f"{p}.*.*", batch=3))
    assert [m.seq for m in from_seq] == [20, 21, 22]
    assert [m.seq for m in js.get_batch(dstream, seq=28, batch=100)] == [28, 29, 30]
    # get_msgs, the first name of the same call
    assert [m.seq for m in js.get_msgs(dstream, seq=3, batch=2)] == [3, 4]


def test_a_batch_from_a_start_time(js: JetStream, dstream: str) -> None:
    p = _p(dstream)
    for i in range(10):
        js.publish(f"{p}.t", str(i).encode())
    sixth = js.get_msg(dstream, seq=6)
    assert sixth.time is not None
    got = list(js.get_batch(dstream, start_time=sixth.time, batch=3))
    assert [m.seq for m in got] == [6, 7, 8]  # the first stored at or after the time
    later = sixth.time + dt.timedelta(microseconds=1)
    assert [m.seq for m in js.get_batch(dstream, start_time=later, batch=100)] == [7, 8, 9, 10]
    east = sixth.time.astimezone(dt.timezone(dt.timedelta(hours=5)))  # any offset will do
    assert [m.seq for m in js.get_batch(dstream, start_time=east, batch=1)] == [6]


def test_max_bytes_cuts_the_batch(js: JetStream, dstream: str) -> None:
    subject = f"{_p(dstream)}.m"
    for _ in range(10):
        js.publish(subject, bytes(100))
    size = len(subject) + 100  # what the server counts: subject, headers (none), payload
    got = list(js.get_batch(dstream, batch=10, max_bytes=3 * size))
    assert [m.seq for m in got] == [1, 2, 3]
    got = list(js.get_batch(dstream, batch=10, max_bytes=3 * size + 1))
    assert len(got) == 4  # the message that reaches max_bytes is sent
    assert len(list(js.get_batch(dstream, batch=10, max_bytes=1))) == 1


def test_a_batch_larger_than_one_request_is_asked_for_in_pieces(
    js: JetStream, nc: Client, dstream: str
) -> None:
    # Each request asks for at most max_payload bytes (1 MiB): 40 messages of 64 KiB take
    # three requests, each from where the one before ended.
    subject = f"{_p(dstream)}.big"
    payloads = [bytes([i]) * 65536 for i in range(40)]
    for data in payloads:
        js.publish_async(subject, data)
    js.publish_async_completed()
    spy = Requests(nc, dstream)
    got = list(js.get_batch(dstream, batch=40))
    assert [m.data for m in got] == payloads
    requests = spy.taken()
    assert len(requests) == 3
    assert requests[0] == {"seq": 1, "batch": 40, "max_bytes": nc.max_payload}
    assert requests[1]["seq"] > 1 and requests[1]["batch"] == 41 - requests[1]["seq"]
    # max_bytes above one request's worth is a budget over several requests
    got = list(js.get_batch(dstream, batch=40, max_bytes=20 * 65540))
    assert len(got) == 20 and len(spy.taken()) == 2


def test_last_msgs_for_wildcards_up_to_seq_and_time(js: JetStream, dstream: str) -> None:
    p = _p(dstream)
    for i, key in enumerate("abcab"):  # seqs 1-5: a1 b2 c3 a4 b5
        js.publish(f"{p}.k.{key}", f"{key}{i + 1}".encode())
    js.publish(f"{p}.other", b"o6")

    def last(subjects: List[str], **kw: Any) -> List[bytes]:
        return [m.data for m in js.get_last_msgs_for(dstream, subjects, **kw)]

    assert last([f"{p}.k.*"]) == [b"c3", b"a4", b"b5"]  # in sequence order
    assert last([f"{p}.k.a", f"{p}.>"]) == [b"c3", b"a4", b"b5", b"o6"]  # each once
    assert last([f"{p}.k.*"], up_to_seq=3) == [b"a1", b"b2", b"c3"]
    assert last([f"{p}.k.*"], up_to_seq=4) == [b"b2", b"c3", b"a4"]
    assert last([f"{p}.k.*"], batch=2) == [b"c3", b"a4"]
    fourth = js.get_msg(dstream, seq=4).time
    assert fourth is not None
    assert last([f"{p}.k.*"], up_to_time=fourth) == [b"a1", b"b2", b"c3"]  # before it
    after = fourth + dt.timedelta(microseconds=1)
    assert last([f"{p}.k.*"], up_to_time=after) == [b"b2", b"c3", b"a4"]
    one = next(js.get_last_msgs_for(dstream, (f"{p}.k.c",)))
    assert (one.subject, one.seq, one.stream) == (f"{p}.k.c", 3, dstream)


def test_last_msgs_for_in_pieces_keeps_its_snapshot(
    js: JetStream, nc: Client, dstream: str
) -> None:
    # 24 subjects of 64 KiB: two requests. Values written after the first answer began are
    # not in the second: it asks as of the first's Nats-UpTo-Sequence.
    p = _p(dstream)
    for i in range(24):
        js.publish_async(f"{p}.s.{i}", b"old" + bytes(65536))
    js.publish_async_completed()
    spy = Requests(nc, dstream)
    it = js.get_last_msgs_for(dstream, [f"{p}.s.*"])
    first = next(it)
    for i in range(24):
        js.publish(f"{p}.s.{i}", b"new")
    rest = list(it)
    assert [m.data[:3] for m in [first, *rest]] == [b"old"] * 24
    assert [m.seq for m in [first, *rest]] == list(range(1, 25))
    requests = spy.taken()
    assert len(requests) == 2
    assert requests[1]["up_to_seq"] == 24 and requests[1]["seq"] > 1
    assert [m.data for m in js.get_last_msgs_for(dstream, [f"{p}.s.1"])] == [b"new"]


def test_nothing_matching_is_an_empty_iterator(js: JetStream, dstream: str) -> None:
    p = _p(dstream)
    assert list(js.get_batch(dstream)) == []  # an empty stream
    assert list(js.get_last_msgs_for(dstream, [">"])) == []
    js.publish(f"{p}.x", b"1")
    first = js.get_msg(dstream, seq=1).time
    assert first is not None
    assert list(js.get_batch(dstream, seq=2)) == []
    assert list(js.get_batch(dstream, subject=f"{p}.nope")) == []
    assert list(js.get_batch(dstream, start_time=first + dt.timedelta(days=1))) == []
    assert list(js.get_last_msgs_for(dstream, [f"{p}.nope.>"])) == []
    assert list(js.get_last_msgs_for(dstream, [f"{p}.x"], up_to_time=first)) == []


def test_a_stream_without_direct_gets_is_a_clear_error(js: JetStream, stream: str) -> None:
    with pytest.raises(nats.DirectGetNotAllowedError, match="allow_direct=True") as caught:
        list(js.get_batch(stream))
    assert isinstance(caught.value, nats.NoRespondersError)
    with pytest.raises(nats.DirectGetNotAllowedError, match=stream):
        list(js.get_last_msgs_for(stream, [">"]))
    with pytest.raises(nats.StreamNotFoundError, match="'NO_SUCH' does not exist"):
        list(js.get_batch("NO_SUCH"))


def test_filters_matching_more_than_1024_subjects_are_refused(
    js: JetStream, nc: Client, dstream: str
) -> None:
    p = _p(dstream)
    for i in range(1025):
        nc.publish(f"{p}.n.{i}", b"")
    js.publish(f"{p}.n.last", b"")  # acked once the 1025 sent before it are stored
    with pytest.raises(nats.TooManyResultsError, match="more than 1024 subjects") as caught:
        list(js.get_last_msgs_for(dstream, [f"{p}.n.*"]))
    assert caught.value.code == 413
    assert len(list(js.get_last_msgs_for(dstream, [f"{p}.n.1", f"{p}.n.2"]))) == 2


def test_a_batch_that_never_ends_times_out(js: JetStream, nc: Client) -> None:
    # A responder of our own that sends one message and no end of batch.
    def answer(msg: Msg) -> None:
        headers = {
            "Nats-Stream": "FAKE",
            "Nats-Subject": "fake.x",
            "Nats-Sequence": "1",
            "Nats-Time-Stamp": "2025-01-01T00:00:00Z",
            "Nats-Num-Pending": "5",
            "Nats-Last-Sequence": "0",
        }
        nc.publish(msg.reply, b"x", headers=headers)

    sub = nc.subscribe(f"{js.prefix}.DIRECT.GET.FAKE", cb=answer)
    try:
        nc.flush()
        got: List[Any] = []
        with pytest.raises(nats.TimeoutError, match=r"did not end its batch within 0.3 s \(1 "):
            got.extend(js.get_batch("FAKE", batch=10, timeout=0.3))
        assert [m.data for m in got] == [b"x"]
    finally:
        sub.unsubscribe()


def _later(value: int) -> dt.datetime:
    return dt.datetime(2025, 1, 1) + dt.timedelta(seconds=value)


BAD_CALLS: Dict[str, Callable[[JetStream], Any]] = {
    "seq and start_time": lambda js: js.get_batch(
        "S", seq=1, start_time=dt.datetime.now(dt.timezone.utc)
    ),
    "naive start_time": lambda js: js.get_batch("S", start_time=_later(0)),
    "start_time text": lambda js: js.get_batch("S", start_time="2025-01-01T00:00:00Z"),
    "seq 0": lambda js: js.get_batch("S", seq=0),
    "seq True": lambda js: js.get_batch("S", seq=True),
    "batch 0": lambda js: js.get_batch("S", batch=0),
    "batch 1.5": lambda js: js.get_batch("S", batch=1.5),
    "batch too big": lambda js: js.get_batch("S", batch=2**63),
    "max_bytes -1": lambda js: js.get_batch("S", max_bytes=-1),
    "bad subject": lambda js: js.get_batch("S", subject="a..b"),
    "bad timeout": lambda js: js.get_batch("S", timeout=-1),
    "bad stream": lambda js: js.get_batch("a.b"),
    "subjects a str": lambda js: js.get_last_msgs_for("S", "a.>"),
    "no subjects": lambda js: js.get_last_msgs_for("S", []),
    "a bad subject": lambda js: js.get_last_msgs_for("S", ["a", "b.>.c"]),
    "a subject not a str": lambda js: js.get_last_msgs_for("S", ["a", 1]),
    "up_to_seq and up_to_time": lambda js: js.get_last_msgs_for(
        "S", ["a"], up_to_seq=1, up_to_time=dt.datetime.now(dt.timezone.utc)
    ),
    "naive up_to_time": lambda js: js.get_last_msgs_for("S", ["a"], up_to_time=_later(0)),
    "up_to_seq 0": lambda js: js.get_last_msgs_for("S", ["a"], up_to_seq=0),
    "multi batch 0": lambda js: js.get_last_msgs_for("S", ["a"], batch=0),
}


@pytest.mark.parametrize("call", BAD_CALLS.values(), ids=BAD_CALLS.keys())
def test_bad_arguments_fail_at_the_call(js: JetStream, call: Callable[[JetStream], Any]) -> None:
    with pytest.raises(nats.InvalidArgumentError):
        call(js)  # at the call itself, not at the first next()


def test_a_server_below_the_level_is_refused_before_sending(js: JetStream) -> None:
    js._levels._known = (js.nc.server_info.get("server_id"), 0)  # as a 2.10 server says
    with pytest.raises(nats.ApiLevelError, match="batch direct get"):
        js.get_batch("S")
    with pytest.raises(nats.ApiLevelError, match=r"level 1 \(nats-server 2.11"):
        js.get_last_msgs_for("S", ["a"])
    assert api_level.BATCH_DIRECT_GET[1] == 1
