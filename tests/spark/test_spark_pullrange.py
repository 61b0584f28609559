"""spark/_pullrange.py against a real server, without Spark: ``pull_batches`` / ``RangePull``
read a range of stream sequences through an ephemeral ack-none pull consumer. Every test
checks the exact rows (stream sequence, subject, data, headers) against what it published,
and that no consumer is left behind."""

from __future__ import annotations

import threading
import time
import types
from datetime import datetime, timezone
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import pytest

import jetstream_sync as nats
from jetstream_sync.jetstream.api import AckPolicy
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.spark._pullrange import RangePull, pull_batches, range_batches
from jetstream_sync.spark._rows import COLUMNS
from jetstream_sync.testing import wait_until

Published = Dict[int, Tuple[str, bytes]]  # stream seq -> (subject, data)
ROW_COLUMNS = ["stream_seq", "subject", "data"]


def publish(
    js: JetStream, subjects: Sequence[str], published: Optional[Published] = None
) -> Published:
    """Publish one message per subject (data: the subject and its index); their sequences."""
    out: Published = {} if published is None else published
    first = len(out)
    for i, subject in enumerate(subjects):
        data = b"%s#%d" % (subject.encode(), first + i)
        ack = js.publish(subject, data)
        assert ack.seq not in out
        out[ack.seq] = (subject, data)
    return out


def fill(js: JetStream, stream: str, n: int) -> Published:
    prefix = stream.lower()
    return publish(js, [f"{prefix}.{'a' if i % 3 else 'b'}" for i in range(n)])


def rows_of(batches: Sequence[Any]) -> List[Tuple[int, str, bytes]]:
    out = []
    for b in batches:
        d = b.to_pydict()
        out += list(zip(d["stream_seq"], d["subject"], d["data"]))
    return out


def expected_rows(published: Published, seqs: Sequence[int]) -> List[Tuple[int, str, bytes]]:
    return [(s, *published[s]) for s in seqs]


def check_sizes(batches: Sequence[Any], batch_rows: int) -> None:
    """No batch is empty and none has more than ``batch_rows`` rows, the last included
    (a read may bring two pulls' worth at once: see
    test_the_last_batch_holds_at_most_batch_rows)."""
    sizes = [b.num_rows for b in batches]
    assert all(0 < s <= batch_rows for s in sizes), sizes


def no_consumers(js: JetStream, stream: str) -> None:
    assert js.consumer_names(stream) == []


def read(
    js: JetStream,
    stream: str,
    start: int,
    end: int,
    filters: Optional[Sequence[str]] = None,
    columns: Sequence[str] = ROW_COLUMNS,
    batch_rows: int = 7,
    include_headers: bool = True,
) -> List[Any]:
    batches = list(
        pull_batches(js, stream, start, end, filters, columns, include_headers, batch_rows, 10.0)
    )
    check_sizes(batches, batch_rows)
    for b in batches:
        assert b.schema.names == list(columns)
    no_consumers(js, stream)
    return batches


def subject_matches(subject: str, pattern: str) -> bool:
    s, p = subject.split("."), pattern.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(s) == len(p)


# --- ranges -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "storage,allow_direct",
    [("memory", False), ("file", False), ("memory", True), ("file", True)],
)
def test_a_range_in_the_middle(
    js: JetStream, new_stream: Callable[..., str], storage: str, allow_direct: bool
) -> None:
    stream = new_stream(storage, allow_direct)
    published = fill(js, stream, 100)
    assert sorted(published) == list(range(1, 101))
    batches = read(js, stream, 11, 73, batch_rows=7)
    assert rows_of(batches) == expected_rows(published, range(11, 74))
    assert len(batches) >= 9  # 63 rows, at most 7 (the last at most 14) a batch
    assert all(
        b.column("stream").to_pylist() == [stream] * b.num_rows
        for b in read(js, stream, 11, 12, columns=["stream"])
    )


@pytest.mark.parametrize("storage", ["memory", "file"])
def test_a_range_to_the_end_of_the_stream(
    js: JetStream, new_stream: Callable[..., str], storage: str
) -> None:
    stream = new_stream(storage)
    published = fill(js, stream, 60)
    last = js.stream_info(stream).state.last_seq
    assert last == 60
    assert rows_of(read(js, stream, 40, last, batch_rows=5)) == expected_rows(
        published, range(40, 61)
    )
    assert rows_of(read(js, stream, 1, last, batch_rows=1000)) == expected_rows(
        published, range(1, 61)
    )
    # an end past the stream's last sequence: what there is
    assert rows_of(read(js, stream, 55, 500, batch_rows=4)) == expected_rows(
        published, range(55, 61)
    )


def test_a_single_message(js: JetStream, new_stream: Callable[..., str]) -> None:
    stream = new_stream()
    published = fill(js, stream, 30)
    for seq in (1, 17, 30):
        batches = read(js, stream, seq, seq)
        assert [b.num_rows for b in batches] == [1]
        assert rows_of(batches) == expected_rows(published, [seq])
    assert rows_of(read(js, stream, 17, 17, batch_rows=1)) == expected_rows(published, [17])


def test_an_empty_range_yields_nothing_and_makes_no_consumer(
    js: JetStream, new_stream: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stream = new_stream()
    fill(js, stream, 10)
    made: List[str] = []
    real = js.add_consumer

    def counted(*args: Any, **kwargs: Any) -> Any:
        made.append("x")
        return real(*args, **kwargs)

    monkeypatch.setattr(js, "add_consumer", counted)
    assert read(js, stream, 6, 5) == []
    assert read(js, stream, 11, 5) == []
    assert made == []


def test_small_batches_many_pulls(js: JetStream, new_stream: Callable[..., str]) -> None:
    stream = new_stream()
    published = fill(js, stream, 500)
    for batch_rows in (1, 7, 64):
        batches = read(js, stream, 3, 498, batch_rows=batch_rows)
        assert rows_of(batches) == expected_rows(published, range(3, 499))
        assert len(batches) >= 496 // batch_rows
    # a range past its messages: messages beyond the end, already stored, are cut off
    batches = read(js, stream, 1, 10, batch_rows=7)
    assert rows_of(batches) == expected_rows(published, range(1, 11))


# --- filters ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "filters",
    [
        ["{p}.orders.*.eu"],
        ["{p}.orders.2.us"],
        ["{p}.orders.*.eu", "{p}.orders.2.us"],
        ["{p}.orders.1.*", "{p}.misc"],
        ["{p}.orders.>"],
        ["{p}.nothing.here"],
    ],
    ids=["one-wildcard", "one-literal", "two", "two-wildcard", "full-wildcard", "no-match"],
)
def test_filter_subjects(js: JetStream, new_stream: Callable[..., str], filters: List[str]) -> None:
    stream = new_stream()
    p = stream.lower()
    regions = ("eu", "us", "asia")
    subjects = [
        f"{p}.misc" if i % 11 == 0 else f"{p}.orders.{i % 4}.{regions[i % 3]}" for i in range(240)
    ]
    published = publish(js, subjects)
    wanted = [f.format(p=p) for f in filters]
    start, end = 31, 200
    seqs = [
        s for s in range(start, end + 1) if any(subject_matches(published[s][0], f) for f in wanted)
    ]
    for batch_rows in (5, 1000):
        got = rows_of(read(js, stream, start, end, wanted, batch_rows=batch_rows))
        assert got == expected_rows(published, seqs)
    assert all(any(subject_matches(s, f) for f in wanted) for _, s, _ in got)


def test_a_filter_whose_last_match_is_before_the_end(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    """The range ends on a message the filter does not take; matching ones follow it."""
    stream = new_stream()
    p = stream.lower()
    published = publish(js, [f"{p}.x" if i % 2 else f"{p}.y" for i in range(40)])
    xs = [s for s in range(1, 41) if published[s][0] == f"{p}.x"]
    end = xs[5] + 1  # a .y message
    got = rows_of(read(js, stream, 1, end, [f"{p}.x"], batch_rows=3))
    assert got == expected_rows(published, xs[:6])


# --- deletes, purges, messages stored after the read began ------------------------------------


@pytest.mark.parametrize("storage", ["memory", "file"])
def test_deleted_messages_and_messages_stored_after_the_read_began(
    js: JetStream, new_stream: Callable[..., str], storage: str
) -> None:
    stream = new_stream(storage)
    published = fill(js, stream, 40)
    deleted = {3, 5, 6, 20, 33, 39, 40}  # 40: the range's last sequence, and the stream's
    for seq in sorted(deleted):
        assert js.delete_msg(stream, seq)
    start, end = 3, 40
    gen = pull_batches(js, stream, start, end, None, ROW_COLUMNS, batch_rows=4, timeout=10.0)
    batches = [next(gen)]
    later = fill(js, stream, 25)  # stored after the read began: past the range
    assert min(later) == 41
    batches += list(gen)
    check_sizes(batches, 4)
    seqs = [s for s in range(start, end + 1) if s not in deleted]
    assert rows_of(batches) == expected_rows(published, seqs)
    no_consumers(js, stream)
    # read again, now that the messages after the range are stored
    assert rows_of(read(js, stream, start, end, batch_rows=4)) == expected_rows(published, seqs)
    assert rows_of(read(js, stream, 39, 40)) == []  # a range of deleted messages only


def test_a_purged_range_ends_with_no_rows_quickly(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream("file")
    fill(js, stream, 30)
    # planned as 1..20; then everything before 21 is purged: the consumer starts past the range
    assert js.purge_stream_count(stream, seq=21) == 20
    t = time.monotonic()
    assert read(js, stream, 1, 20) == []
    assert time.monotonic() - t < 3.0
    # then the whole stream: the consumer has nothing pending
    assert js.purge_stream_count(stream) == 10
    t = time.monotonic()
    assert read(js, stream, 1, 30) == []
    assert read(js, stream, 25, 30, [f"{stream.lower()}.a"]) == []
    assert time.monotonic() - t < 3.0


# --- headers ----------------------------------------------------------------------------------


def test_headers_and_msg_id(js: JetStream, new_stream: Callable[..., str]) -> None:
    stream = new_stream()
    p = stream.lower()
    sent: Dict[int, Tuple[Optional[Dict[str, List[str]]], Optional[str]]] = {}
    for i in range(30):
        headers: Optional[Dict[str, List[str]]] = None
        if i % 3 == 0:
            headers = {"K": ["v1", str(i)], "Single": [f"s{i}"]}
        msg_id = f"id-{i}" if i % 4 == 0 else None
        ack = js.publish(f"{p}.h", b"m%d" % i, headers=headers, msg_id=msg_id)
        want = dict(headers or {})
        if msg_id:
            want["Nats-Msg-Id"] = [msg_id]
        sent[ack.seq] = (want or None, msg_id)
    assert js.publish(f"{p}.h", b"dup", msg_id="id-0").duplicate  # not stored again

    batches = read(js, stream, 2, 29, columns=list(COLUMNS), batch_rows=6)
    rows = [r for b in batches for r in b.to_pylist()]
    assert [r["stream_seq"] for r in rows] == list(range(2, 30))
    for r in rows:
        want_headers, want_id = sent[r["stream_seq"]]
        assert r["data"] == b"m%d" % (r["stream_seq"] - 1)
        assert r["stream"] == stream and r["subject"] == f"{p}.h"
        got = None if r["headers"] is None else dict(r["headers"])
        assert got == want_headers, r
        assert r["msg_id"] == want_id, r

    # headers not asked for: null, but the ids are still there
    batches = read(js, stream, 1, 30, columns=["headers", "msg_id"], include_headers=False)
    assert all(b.column("headers").null_count == b.num_rows for b in batches)
    ids = [i for b in batches for i in b.column("msg_id").to_pylist()]
    assert ids == [sent[s][1] for s in range(1, 31)]


def test_timestamps_are_the_stored_times(js: JetStream, new_stream: Callable[..., str]) -> None:
    stream = new_stream()
    fill(js, stream, 12)
    batches = read(js, stream, 1, 12, columns=["stream_seq", "timestamp"], batch_rows=5)
    for b in batches:
        for seq, ts in zip(b.column("stream_seq").to_pylist(), b.column("timestamp").to_pylist()):
            t = js.get_msg(stream, seq).time
            assert t is not None and ts.utcoffset().total_seconds() == 0
            want = datetime(*t.utctimetuple()[:6], t.microsecond, tzinfo=timezone.utc)
            assert ts == want, (seq, ts, t)


# --- the consumer -----------------------------------------------------------------------------


def test_the_consumer_is_deleted_when_done_and_when_closed_early(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    fill(js, stream, 100)
    gen = pull_batches(js, stream, 1, 100, None, ROW_COLUMNS, batch_rows=10, timeout=10.0)
    assert isinstance(gen, types.GeneratorType)
    first = next(gen)
    assert first.num_rows == 10
    (name,) = js.consumer_names(stream)
    info = js.consumer_info(stream, name)
    assert info.config.ack_policy == AckPolicy.NONE
    assert info.config.durable_name in (None, "")
    gen.close()
    no_consumers(js, stream)
    # exhausted: nothing left either (read() checks it), and a RangePull's chunks the same
    read(js, stream, 1, 100, batch_rows=10)
    chunks = RangePull(js, stream, 20, 35, batch_rows=4).chunks()
    got = []
    for msgs, acks in chunks:
        assert len(js.consumer_names(stream)) == 1
        got += acks.sseq.to_pylist()
        assert [int(m.reply.split(".")[5]) for m in msgs] == acks.sseq.to_pylist()
    assert got == list(range(20, 36))
    no_consumers(js, stream)


def test_the_consumer_is_deleted_when_the_reader_fails(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    fill(js, stream, 50)
    gen = pull_batches(js, stream, 1, 50, None, ROW_COLUMNS, batch_rows=10, timeout=10.0)
    with pytest.raises(RuntimeError, match="the caller failed"):
        for _ in gen:
            raise RuntimeError("the caller failed")
    del gen
    no_consumers(js, stream)


# --- direct get and pull agree ----------------------------------------------------------------


@pytest.mark.parametrize(
    "filters", [None, ["{p}.a"], ["{p}.a", "{p}.c.*"]], ids=["all", "one", "two"]
)
def test_direct_and_pull_give_the_same_rows(
    js: JetStream, new_stream: Callable[..., str], filters: Optional[List[str]]
) -> None:
    stream = new_stream("file", allow_direct=True)
    p = stream.lower()

    def subject_of(i: int) -> str:
        return (f"{p}.a", f"{p}.b", f"{p}.c.{i % 2}")[i % 3]

    for i in range(90):
        subject = subject_of(i)
        headers = {"K": ["v1", str(i)]} if i % 5 == 0 else None
        js.publish(subject, b"d%d" % i, headers=headers, msg_id=f"id-{i}" if i % 7 == 0 else None)
    for seq in (10, 11, 44):
        js.delete_msg(stream, seq)
    wanted = None if filters is None else [f.format(p=p) for f in filters]
    by: Dict[bool, List[Dict[str, Any]]] = {}
    for direct in (False, True):
        batches = list(range_batches(js, stream, 5, 80, wanted, COLUMNS, True, direct, 10.0))
        by[direct] = [r for b in batches for r in b.to_pylist()]
        no_consumers(js, stream)
    assert by[False] == by[True]
    seqs = [r["stream_seq"] for r in by[False]]
    want = [
        s
        for s in range(5, 81)
        if s not in (10, 11, 44)
        and (wanted is None or any(subject_matches(subject_of(s - 1), f) for f in wanted))
    ]
    assert seqs == want
    assert [r["data"] for r in by[False]] == [b"d%d" % (s - 1) for s in want]


# --- the batch size, and a reconnect ---------------------------------------------------------


class _HoldReads:
    """A Core stand-in: its first read_here reads nothing (so the second pull goes out); later
    ones first wait until the server has delivered up to ``end`` (seen from another
    connection), so that one read routes both pulls' messages."""

    def __init__(self, core: Any, delivered: Callable[[], int], end: int) -> None:
        self._core = core
        self._delivered = delivered
        self._end = end
        self._calls = 0

    def read_here(self, timeout: float, ready: Callable[[], int]) -> Optional[int]:
        self._calls += 1
        if self._calls == 1:
            return 0
        wait_until(lambda: self._delivered() >= self._end, what="the deliveries")
        got: Optional[int] = self._core.read_here(timeout, ready)
        return got

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)


def test_the_last_batch_holds_at_most_batch_rows(
    js: JetStream, new_stream: Callable[..., str], spark_nats: NATSServer
) -> None:
    stream = new_stream()
    published = fill(js, stream, 20)
    pull = RangePull(js, stream, 1, 10, batch_rows=7, timeout=10.0)
    with nats.connect(spark_nats.url) as other:
        ojs = other.jetstream()

        def delivered() -> int:
            names = ojs.consumer_names(stream)
            return ojs.consumer_info(stream, names[0]).delivered.stream_seq if names else 0

        pull._core = _HoldReads(pull._core, delivered, 10)
        chunks = list(pull.chunks())
    got = [
        (s, m.subject, m.data) for msgs, acks in chunks for m, s in zip(msgs, acks.sseq.to_pylist())
    ]
    assert got == expected_rows(published, range(1, 11))  # the right rows either way
    no_consumers(js, stream)
    assert [len(msgs) for msgs, _ in chunks] == [7, 3]  # not [10]: both pulls in one read


@pytest.mark.parametrize("how", ["restart", "kill"])
@pytest.mark.parametrize("wait_reconnect", [True, False], ids=["reconnected", "at-once"])
def test_a_reconnect_mid_read(how: str, wait_reconnect: bool) -> None:
    """A server restart on the same port and store (file storage) after the first batch:
    every row once, in order."""
    errs: List[BaseException] = []
    reconnected = threading.Event()
    with NATSServer(jetstream=True) as srv:
        client = nats.connect(
            srv.url,
            reconnect_time_wait=0.1,
            max_reconnect_attempts=-1,
            reconnected_cb=reconnected.set,
            error_cb=errs.append,  # the disconnect is reported: expected here
        )
        try:
            read_through_a_restart(srv, client, how, wait_reconnect, reconnected)
        finally:
            client.close()


def read_through_a_restart(
    srv: NATSServer,
    client: nats.Client,
    how: str,
    wait_reconnect: bool,
    reconnected: threading.Event,
) -> None:
    """Read 2..290 of 300 messages, 7 at a time; restart the server after the first batch."""
    js = client.jetstream()
    js.add_stream(name="RC", subjects=["rc.>"], storage="file")
    published = publish(js, [f"rc.{i % 3}" for i in range(300)])
    start, end = 2, 290
    made: List[str] = []  # the consumers the read makes
    add_consumer = js.add_consumer

    def counted(*args: Any, **kwargs: Any) -> Any:
        info = add_consumer(*args, **kwargs)
        made.append(info.name)
        return info

    js.add_consumer = counted  # type: ignore[method-assign]
    t = time.monotonic()
    gen = pull_batches(js, "RC", start, end, None, ROW_COLUMNS, batch_rows=7, timeout=20.0)
    batches = [next(gen)]
    if how == "kill":
        srv.kill()
        srv.start()
    else:
        srv.restart()
    if wait_reconnect:
        assert reconnected.wait(20), "no reconnect"
    for b in gen:
        batches.append(b)
        assert time.monotonic() - t < 40, "the read does not end"
    assert reconnected.is_set()
    assert len(made) >= 2, made  # the read went on with a new consumer after the reconnect
    check_sizes(batches, 7)
    assert rows_of(batches) == expected_rows(published, range(start, end + 1))
    wait_until(lambda: js.consumer_names("RC") == [], what="the consumer's deletion")


def test_a_consumer_lost_between_batches_is_replaced(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    published = fill(js, stream, 100)
    gen = pull_batches(js, stream, 1, 100, None, ROW_COLUMNS, batch_rows=7, timeout=10.0)
    batches = [next(gen)]
    (name,) = js.consumer_names(stream)

    def pulls_served() -> bool:
        info = js.consumer_info(stream, name)
        return info.num_waiting == 0 and info.delivered.stream_seq >= 7

    wait_until(pulls_served, what="the pulls served")  # none waits, so no 409 will come
    js.delete_consumer(stream, name)
    batches += list(gen)
    assert rows_of(batches) == expected_rows(published, range(1, 101))
    no_consumers(js, stream)


def test_no_message_within_the_timeout_raises() -> None:
    with NATSServer(jetstream=True) as srv:
        client = nats.connect(srv.url, error_cb=lambda e: None)
        try:
            js = client.jetstream()
            js.add_stream(name="TO", subjects=["to.>"], storage="memory")
            publish(js, [f"to.{i % 2}" for i in range(100)])
            gen = pull_batches(js, "TO", 1, 100, None, ROW_COLUMNS, batch_rows=7, timeout=1.0)
            seqs = next(gen).column("stream_seq").to_pylist()
            srv.pause()
            t = time.monotonic()
            try:
                with pytest.raises(nats.TimeoutError, match=r"stream 'TO' for 1 s") as info:
                    for b in gen:  # what had come before the pause, then the timeout
                        seqs += b.column("stream_seq").to_pylist()
            finally:
                srv.resume()
            assert time.monotonic() - t < 8  # 1 s, and at most 1 s to delete the consumer
            assert seqs == list(range(1, len(seqs) + 1))
            assert f"sequences {len(seqs) + 1}..100" in str(info.value)
        finally:
            client.close()


def test_a_reader_that_may_not_make_consumers_is_told_about_direct() -> None:
    """A user allowed stream info and direct get only: the pull path fails naming the way
    out, and direct=True reads the same rows."""
    config = """
    authorization { users = [
      { user: admin, password: pw }
      { user: reader, password: pw, permissions: {
          publish: { allow: ["$JS.API.INFO", "$JS.API.STREAM.INFO.>", "$JS.API.DIRECT.GET.>"] }
          subscribe: { allow: ["_INBOX.>"] } } }
    ] }
    """
    with NATSServer(jetstream=True, config=config) as srv:
        with nats.connect(srv.url, user="admin", password="pw") as admin:
            ajs = admin.jetstream()
            ajs.add_stream(name="RO", subjects=["ro.>"], allow_direct=True)
            for i in range(20):
                ajs.publish(f"ro.{i % 2}", b"m%d" % i)
        with nats.connect(srv.url, user="reader", password="pw", error_cb=lambda e: None) as nc:
            js = nc.jetstream(timeout=2)
            with pytest.raises(nats.NATSError, match="direct=true"):
                list(range_batches(js, "RO", 1, 20, None, COLUMNS, True, False, 2.0))
            batches = list(range_batches(js, "RO", 1, 20, None, COLUMNS, True, True, 2.0))
            assert rows_of(batches) == [(i + 1, f"ro.{i % 2}", b"m%d" % i) for i in range(20)]
