"""spark/_ackwindow.py and spark/_publish.py against a real server, without Spark: rows and
Arrow batches published through an :class:`AckWindow`. Every test reads back what the
stream stored (subject, data, headers with ``Nats-Msg-Id``, in order) and checks the
:class:`PublishResult` counts; the expected ids are computed here, independently of
``RowIds``."""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections import Counter
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pyarrow as pa
import pytest

import jetstream_sync as nats
from jetstream_sync import errors
from jetstream_sync.jetstream.api import DiscardPolicy
from jetstream_sync.jetstream.context import JetStream
from jetstream_sync.server import NATSServer
from jetstream_sync.spark._ackwindow import WRITE_CHUNK, AckWindow, PublishResult
from jetstream_sync.spark._publish import RowIds, publish_all, publish_arrow
from jetstream_sync.testing import wait_until

Hdrs = Dict[str, List[str]]
Stored = Tuple[str, bytes, Hdrs]  # subject, data, every header (Nats-Msg-Id included)
MULTI = pa.map_(pa.string(), pa.list_(pa.string()))
SINGLE = pa.map_(pa.string(), pa.string())


# --- fixtures and helpers ----------------------------------------------------------------------


def stored(js: JetStream, stream: str, timeout: float = 20.0) -> List[Stored]:
    """Every message of ``stream`` in stream order, read with an ordered consumer."""
    total = js.stream_info(stream).state.messages
    oc = js.ordered_consumer(stream)
    out: List[Stored] = []
    deadline = time.monotonic() + timeout
    try:
        while len(out) < total:
            assert time.monotonic() < deadline, f"read {len(out)} of {total} messages"
            for m in oc.fetch(min(1000, total - len(out)), max_wait=2):
                h = m.headers
                out.append((m.subject, m.data, {k: h.get_all(k) for k in h}))
    finally:
        oc.delete()
    assert len(out) == total
    return out


def digest(subject: str, data: bytes, headers: Optional[Hdrs] = None) -> str:
    """The content digest as documented: blake2b-128 of subject NUL [name:value LF, names
    sorted] NUL data."""
    canon = b""
    for name in sorted(headers or {}):
        for value in (headers or {})[name]:
            canon += f"{name}:{value}\n".encode()
    return hashlib.blake2b(
        subject.encode() + b"\0" + canon + b"\0" + data, digest_size=16
    ).hexdigest()


def content_ids(
    prefix: str, rows: Sequence[Tuple[str, bytes, Optional[Hdrs], Optional[str]]]
) -> List[str]:
    """The ids the rows must get: their own, else <prefix>-<digest>[-<k>], k counting
    the earlier rows with the same content."""
    seen: Counter[str] = Counter()
    out = []
    for subject, data, headers, given in rows:
        if given is not None:
            out.append(given)
            continue
        d = digest(subject, data, headers)
        k = seen[d]
        seen[d] += 1
        out.append(f"{prefix}-{d}" if k == 0 else f"{prefix}-{d}-{k}")
    return out


def expected(
    prefix: str, rows: Sequence[Tuple[str, bytes, Optional[Hdrs], Optional[str]]]
) -> List[Stored]:
    ids = content_ids(prefix, rows)
    return [
        (subject, data, {**(headers or {}), "Nats-Msg-Id": [i]})
        for (subject, data, headers, _), i in zip(rows, ids)
    ]


def record_batch(**columns: Any) -> Any:
    """A RecordBatch from lists (or ready arrays), types inferred unless given."""
    arrays = [c if isinstance(c, pa.Array) else pa.array(c) for c in columns.values()]
    return pa.RecordBatch.from_arrays(arrays, names=list(columns))


# --- content ids, order, re-runs ----------------------------------------------------------------


def test_batches_are_stored_once_in_order_with_content_ids(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    p = stream.lower()
    sizes = [1000, 1700, 300, 1]
    rows: List[Tuple[str, bytes, Optional[Hdrs], Optional[str]]] = []
    batches = []
    for size in sizes:
        base = len(rows)
        subjects = [f"{p}.s{(base + i) % 5}" for i in range(size)]
        datas = [b"row-%d" % (base + i) for i in range(size)]
        batches.append(record_batch(subject=subjects, data=datas))
        rows += [(s, d, None, None) for s, d in zip(subjects, datas)]
    n = len(rows)
    assert publish_arrow(js, batches, None, "job7-3", ack_timeout=10) == PublishResult(n, 0)
    want = expected("job7-3", rows)
    assert want[0][2] == {"Nats-Msg-Id": [f"job7-3-{digest(f'{p}.s0', b'row-0')}"]}
    assert stored(js, stream) == want

    # The same batches again (a retried task): all duplicates, nothing new stored.
    assert publish_arrow(js, batches, None, "job7-3", ack_timeout=10) == PublishResult(0, n)
    state = js.stream_info(stream).state
    assert (state.messages, state.last_seq) == (n, n)
    assert stored(js, stream) == want


def test_identical_rows_stay_distinct_across_batches(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    p = stream.lower()
    a, b = f"{p}.a", f"{p}.b"
    first = record_batch(subject=[a, a, a], data=[b"same", b"same", b"same"])
    second = record_batch(subject=[a, b, a, a], data=[b"same", b"same", b"other", b"same"])
    result = publish_arrow(js, [first, second], None, "w", ack_timeout=10)
    assert result == PublishResult(7, 0)
    d, db, do = digest(a, b"same"), digest(b, b"same"), digest(a, b"other")
    ids = [m[2]["Nats-Msg-Id"] for m in stored(js, stream)]
    assert ids == [
        [f"w-{d}"],
        [f"w-{d}-1"],
        [f"w-{d}-2"],
        [f"w-{d}-3"],  # the count goes on in the next batch of the same call
        [f"w-{db}"],
        [f"w-{do}"],
        [f"w-{d}-4"],
    ]
    # In one batch, in another order: the same ids, every one a duplicate.
    again = record_batch(
        subject=[a, b, a, a, a, a, a],
        data=[b"other", b"same", b"same", b"same", b"same", b"same", b"same"],
    )
    assert publish_arrow(js, [again], None, "w", ack_timeout=10) == PublishResult(0, 7)
    assert js.stream_info(stream).state.messages == 7


def test_no_id_prefix_and_no_msg_id_publishes_without_ids(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    p = stream.lower()
    batch = record_batch(subject=[f"{p}.a", f"{p}.a"], data=[b"x", b"x"])
    assert publish_arrow(js, [batch], None, None, ack_timeout=10) == PublishResult(2, 0)
    assert publish_arrow(js, [batch], None, None, ack_timeout=10) == PublishResult(2, 0)
    assert stored(js, stream) == [(f"{p}.a", b"x", {})] * 4


# --- columns ------------------------------------------------------------------------------------


def test_string_data_null_data_and_default_subjects(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    p = stream.lower()
    default = f"{p}.default"
    batch = record_batch(
        subject=pa.array([f"{p}.x", None, "", f"{p}.y"], type=pa.string()),
        data=pa.array(["héllo", None, "", "ü"], type=pa.string()),
    )
    assert publish_arrow(js, [batch], default, "s", ack_timeout=10) == PublishResult(4, 0)
    rows = [
        (f"{p}.x", "héllo".encode(), None, None),
        (default, b"", None, None),
        (default, b"", None, None),  # identical to the row before: -1
        (f"{p}.y", "ü".encode(), None, None),
    ]
    assert stored(js, stream) == expected("s", rows)
    assert stored(js, stream)[2][2]["Nats-Msg-Id"] == [f"s-{digest(default, b'')}-1"]

    # No subject column at all: every row goes to the default subject.
    only_data = record_batch(data=pa.array([b"d1", None], type=pa.binary()))
    assert publish_arrow(js, [only_data], default, "t", ack_timeout=10) == PublishResult(2, 0)
    assert stored(js, stream)[4:] == expected(
        "t", [(default, b"d1", None, None), (default, b"", None, None)]
    )


@pytest.mark.parametrize(
    ("columns", "default", "problem"),
    [
        ({"subject": ["{p}.a", None], "data": [b"1", b"2"]}, None, "no subject"),
        ({"subject": ["{p}.a", ""], "data": [b"1", b"2"]}, None, "no subject"),
        ({"data": [b"1"]}, None, "needs a subject column or the subject option"),
        ({"subject": ["{p}.a"]}, "{p}.d", "needs a data column"),
        ({"subject": ["{p}.a"], "data": [1]}, None, "data column must be binary or string"),
    ],
    ids=["null-subject", "empty-subject", "no-subject-column", "no-data-column", "int-data"],
)
def test_bad_columns_are_refused_and_nothing_is_stored(
    js: JetStream,
    new_stream: Callable[..., str],
    columns: Dict[str, Any],
    default: Optional[str],
    problem: str,
) -> None:
    stream = new_stream()
    p = stream.lower()

    def fill(v: List[Any]) -> List[Any]:
        return [x.format(p=p) if isinstance(x, str) else x for x in v]

    batch = record_batch(**{k: fill(v) for k, v in columns.items()})
    default = default.format(p=p) if default else None
    with pytest.raises(errors.InvalidArgumentError, match=problem):
        publish_arrow(js, [batch], default, "x", ack_timeout=10)
    assert js.stream_info(stream).state.messages == 0


@pytest.mark.parametrize("map_type", [MULTI, SINGLE], ids=["map-of-lists", "map-of-strings"])
def test_a_headers_column_is_stored_with_the_msg_id_added(
    js: JetStream, new_stream: Callable[..., str], map_type: Any
) -> None:
    stream = new_stream()
    p = stream.lower()
    as_dicts: List[Optional[Hdrs]] = [
        {"Kind": ["a"], "Multi": ["1", "2"]},
        None,
        {"Kind": ["b"]},
        None,  # an empty map: no headers
        {"Kind": ["a"], "Multi": ["1", "2"]},  # identical to the first: -1
        {"Kind": ["a"]},  # differs from the first only in a header: its own digest
    ]
    column: List[Any] = []
    for i, h in enumerate(as_dicts):
        if h is None:
            column.append([] if i == 3 else None)
        elif map_type == MULTI:
            column.append(list(h.items()))
        else:
            column.append([(k, v) for k, vs in h.items() for v in vs])
    subjects = [f"{p}.h"] * len(as_dicts)
    datas = [b"payload"] * len(as_dicts)
    batch = record_batch(subject=subjects, data=datas, headers=pa.array(column, type=map_type))
    assert publish_arrow(js, [batch], None, "h", ack_timeout=10) == PublishResult(6, 0)
    rows = [(s, d, h, None) for s, d, h in zip(subjects, datas, as_dicts)]
    want = expected("h", rows)
    got = stored(js, stream)
    assert got == want
    plain = f"h-{digest(f'{p}.h', b'payload')}"
    assert (got[1][2], got[3][2]) == ({"Nats-Msg-Id": [plain]}, {"Nats-Msg-Id": [plain + "-1"]})
    assert got[4][2]["Nats-Msg-Id"] == [f"{got[0][2]['Nats-Msg-Id'][0]}-1"]


def test_a_msg_id_column_wins_where_set(js: JetStream, new_stream: Callable[..., str]) -> None:
    stream = new_stream()
    p = stream.lower()
    subjects = [f"{p}.m"] * 5
    datas = [b"a", b"b", b"a", b"c", b"a"]
    given = ["own-1", None, "own-2", None, None]
    headers = pa.array([None, [("K", ["v"])], [("K", ["w"])], None, None], type=MULTI)
    batch = record_batch(subject=subjects, data=datas, headers=headers, msg_id=given)
    assert publish_arrow(js, [batch], None, "m", ack_timeout=10) == PublishResult(5, 0)
    heads: List[Optional[Hdrs]] = [None, {"K": ["v"]}, {"K": ["w"]}, None, None]
    rows = list(zip(subjects, datas, heads, given))
    want = expected("m", rows)
    assert [w[2]["Nats-Msg-Id"] for w in want] == [
        ["own-1"],
        [f"m-{digest(f'{p}.m', b'b', {'K': ['v']})}"],
        ["own-2"],
        [f"m-{digest(f'{p}.m', b'c')}"],
        [f"m-{digest(f'{p}.m', b'a')}"],  # row 0 had its own id: this is the first digest
    ]
    assert stored(js, stream) == want

    # Every row with its own id (the fast path) and one id repeated: a duplicate.
    all_given = record_batch(subject=[f"{p}.m"] * 2, data=[b"x", b"y"], msg_id=["g", "g"])
    assert publish_arrow(js, [all_given], None, "m", ack_timeout=10) == PublishResult(1, 1)
    assert stored(js, stream)[5:] == [(f"{p}.m", b"x", {"Nats-Msg-Id": ["g"]})]


@pytest.mark.parametrize("bad", ["two\nlines", "cr\rhere", ""], ids=["LF", "CR", "empty"])
def test_a_bad_msg_id_is_refused_and_nothing_is_stored(
    js: JetStream, new_stream: Callable[..., str], bad: str
) -> None:
    stream = new_stream()
    p = stream.lower()
    for given in ([bad, "fine"], [None, bad]):  # the all-given and the mixed path
        batch = record_batch(subject=[f"{p}.a"] * 2, data=[b"1", b"2"], msg_id=given)
        with pytest.raises(errors.InvalidArgumentError, match="msg_id"):
            publish_arrow(js, [batch], None, "x", ack_timeout=10)
        with pytest.raises(errors.InvalidArgumentError, match="msg_id"):
            publish_all(js, [(f"{p}.a", b"1", None, g) for g in given], "x", ack_timeout=10)
    assert js.stream_info(stream).state.messages == 0


# --- the window ---------------------------------------------------------------------------------


def test_a_small_window_waits_for_room_and_stores_everything(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    p = stream.lower()
    rows = [(f"{p}.w{i % 3}", b"small-%d" % i, None, None) for i in range(2000)]
    ids = RowIds("win")
    most = 0
    with AckWindow(js, ack_timeout=10, window=8, window_bytes=512) as window:
        for lo in range(0, len(rows), 50):
            chunk = rows[lo : lo + 50]
            subjects = [r[0] for r in chunk]
            datas = [r[1] for r in chunk]
            window.add(subjects, datas, ids.of(subjects, datas))
            # 50 frames went out: the add returned only after acks made room again.
            most = max(most, len(window._frames))
        result = window.finish()
    assert result == PublishResult(2000, 0)
    assert most <= 4  # the bytes bound (512) is always exceeded here: down to window // 2
    assert stored(js, stream) == expected("win", rows)


def test_a_subject_no_stream_captures_raises_no_stream_response(js: JetStream) -> None:
    subject = f"aw-nowhere-{uuid.uuid4().hex[:8]}.x"
    batch = record_batch(subject=[subject] * 3, data=[b"1", b"2", b"3"])
    t = time.monotonic()
    with pytest.raises(errors.NoStreamResponseError, match="503") as caught:
        publish_arrow(js, [batch], None, "n", ack_timeout=30)
    assert time.monotonic() - t < 5
    assert subject in str(caught.value)  # the subject published to, not our inbox
    t = time.monotonic()
    with pytest.raises(errors.NoStreamResponseError):
        publish_all(js, [(subject, b"1", None, None)], "n", ack_timeout=30)
    assert time.monotonic() - t < 5


def test_a_stream_made_after_the_first_refusal_gets_every_message(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    """A 503 (no stream answered) is what a publish gets while a restarted server's
    JetStream recovers its streams: sent again, not fatal, when a stream appears in time."""
    name = f"AWLATE_{uuid.uuid4().hex[:8].upper()}"
    subject = f"{name.lower()}.x"
    subjects, datas = [subject] * 100, [b"late-%d" % i for i in range(100)]
    with AckWindow(js, ack_timeout=10) as window:
        window.add(subjects, datas, RowIds("late").of(subjects, datas))
        # the first publishes are refused: no stream yet
        refused = lambda: bool(window._count() or window._no_stream_since is not None)  # noqa: E731
        wait_until(refused, what="a 503")
        new_stream(name=name)
        assert window.finish() == PublishResult(100, 0)
    assert [m[1] for m in stored(js, name)] == datas  # each once, in order


def test_an_error_ack_surfaces_with_the_servers_description(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream(max_msgs=10, discard=DiscardPolicy.NEW)
    p = stream.lower()
    rows = [(f"{p}.e", b"m-%d" % i, None, None) for i in range(15)]
    batch = record_batch(subject=[r[0] for r in rows], data=[r[1] for r in rows])
    t = time.monotonic()
    with pytest.raises(errors.APIError, match="maximum messages exceeded") as info:
        publish_arrow(js, [batch], None, "e", ack_timeout=30)
    assert time.monotonic() - t < 5
    assert isinstance(info.value, errors.JetStreamError)
    assert info.value.code == 503
    assert stored(js, stream) == expected("e", rows[:10])
    # The rows path raises the same.
    with pytest.raises(errors.APIError, match="maximum messages exceeded"):
        publish_all(js, [(f"{p}.e", b"more", None, None)], "e", ack_timeout=30)
    assert js.stream_info(stream).state.messages == 10


def test_no_ack_within_ack_timeout_raises_timeout_error() -> None:
    """A paused server takes the frames (the kernel buffers them) but never acks."""
    with NATSServer(jetstream=True) as srv, nats.connect(srv.url, ping_interval=60) as client:
        js = client.jetstream()
        js.add_stream(name="PAUSED", subjects=["paused.>"], storage="memory")
        batch = record_batch(subject=["paused.a"] * 100, data=[b"x%d" % i for i in range(100)])
        assert publish_arrow(js, [batch], None, "pa", ack_timeout=5) == PublishResult(100, 0)
        srv.pause()
        try:
            t = time.monotonic()
            with pytest.raises(TimeoutError, match=r"no JetStream ack within 1\.5 s") as info:
                publish_arrow(js, [batch], None, "pb", ack_timeout=1.5)
            took = time.monotonic() - t
            assert 1.4 < took < 5, took
            assert isinstance(info.value, errors.TimeoutError)  # a jetstream_sync error too
        finally:
            srv.resume()
        # The server took the frames meanwhile: after resuming they are stored, and the
        # retried task is de-duplicated.
        wait_until(lambda: js.stream_info("PAUSED").state.messages == 200, what="the late stores")
        assert publish_arrow(js, [batch], None, "pb", ack_timeout=5) == PublishResult(0, 100)


@pytest.mark.parametrize("how", ["restart", "pause-kill"])
def test_a_reconnect_mid_write_stores_every_row_once(how: str) -> None:
    """A server restart (same port, same file store) after the 5th of 20 batches.

    ``restart``: SIGTERM and start. ``pause-kill``: the server is paused before the 6th
    batch, which goes into its socket unread, then SIGKILLed and started after the 6th:
    those 1,000 frames are certainly lost, so they are stored only if the window sends
    them again."""
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
            js = client.jetstream()
            js.add_stream(name="RCW", subjects=["rcw.>"], storage="file")
            n, size = 20_000, 1_000
            # 19,000 distinct rows; the last 1,000 repeat earlier ones: must be stored again.
            rows = [(f"rcw.{i % 4}", b"r-%d" % (i % 19_000)) for i in range(n)]
            restarted: List[int] = []

            def batches() -> Iterator[Any]:
                for k in range(n // size):
                    if k == 5:
                        if how == "restart":
                            srv.restart()
                            restarted.append(k)
                        else:
                            srv.pause()
                    elif k == 6 and how == "pause-kill":
                        srv.kill()
                        srv.start()
                        restarted.append(k)
                    part = rows[k * size : (k + 1) * size]
                    yield record_batch(subject=[r[0] for r in part], data=[r[1] for r in part])

            t = time.monotonic()
            result = publish_arrow(js, batches(), None, "rc", ack_timeout=30)
            assert time.monotonic() - t < 40
            assert restarted and reconnected.is_set()
            assert result.published + result.duplicates == n, result
            got = stored(js, "RCW")
            assert len(got) == n
            assert Counter((s, d) for s, d, _ in got) == Counter(rows)
            ids = [h["Nats-Msg-Id"][0] for _, _, h in got]
            assert len(set(ids)) == n
            assert set(ids) == set(content_ids("rc", [(s, d, None, None) for s, d in rows]))
        finally:
            if srv.is_running:
                srv.resume()
            client.close()


# --- acks ---------------------------------------------------------------------------------------


def test_duplicate_acks_are_counted(
    nc: nats.Client, js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    p = stream.lower()
    # The premise: nats-server writes the flag with a space after the colon.
    first = nc.request(f"{p}.d", b"0", headers={"Nats-Msg-Id": "raw"}).data
    assert b"duplicate" not in first, first
    raw = nc.request(f"{p}.d", b"0", headers={"Nats-Msg-Id": "raw"}).data
    assert b'"duplicate": true' in raw, raw
    once = record_batch(subject=[f"{p}.d"], data=[b"1"], msg_id=["given"])
    assert publish_arrow(js, [once], None, "d", ack_timeout=10) == PublishResult(1, 0)
    assert publish_arrow(js, [once], None, "d", ack_timeout=10) == PublishResult(0, 1)
    assert publish_all(js, [(f"{p}.d", b"other", None, "given")], "d") == PublishResult(0, 1)
    # An id stored by a plain publish counts as a duplicate too.
    js.publish(f"{p}.d", b"2", msg_id="by-publish")
    mixed = record_batch(
        subject=[f"{p}.d"] * 3, data=[b"2", b"3", b"4"], msg_id=["by-publish", "new", "raw"]
    )
    assert publish_arrow(js, [mixed], None, "d", ack_timeout=10) == PublishResult(1, 2)
    assert [(d, h["Nats-Msg-Id"]) for _, d, h in stored(js, stream)] == [
        (b"0", ["raw"]),
        (b"1", ["given"]),
        (b"2", ["by-publish"]),
        (b"3", ["new"]),
    ]


def test_publish_all_stores_what_publish_arrow_stores(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream()
    p = stream.lower()
    rows: List[Tuple[str, bytes, Optional[Hdrs], Optional[str]]] = []
    for i in range(5000):  # more than one add of publish_all (4,096 rows)
        headers = {"N": [str(i % 3)], "M": ["x", "y"]} if i % 7 == 0 else None
        given = f"own-{i}" if i % 11 == 0 else None
        rows.append((f"{p}.r{i % 4}", b"v-%d" % (i % 4000), headers, given))
    batches = []
    for lo in range(0, len(rows), 1500):
        part = rows[lo : lo + 1500]
        batches.append(
            record_batch(
                subject=[r[0] for r in part],
                data=[r[1] for r in part],
                headers=pa.array(
                    [None if r[2] is None else list(r[2].items()) for r in part], type=MULTI
                ),
                msg_id=pa.array([r[3] for r in part], type=pa.string()),
            )
        )
    assert publish_arrow(js, batches, None, "pa", ack_timeout=10) == PublishResult(5000, 0)
    by_arrow = stored(js, stream)
    assert by_arrow == expected("pa", rows)
    # The rows path makes the very same ids: all duplicates.
    assert publish_all(js, rows, "pa", ack_timeout=10) == PublishResult(0, 5000)
    # And into a new stream (a purge keeps the ids it has seen), the very same messages.
    js.delete_stream(stream)
    js.add_stream(name=stream, subjects=[f"{p}.>"], storage="memory")
    assert publish_all(js, iter(rows), "pa", ack_timeout=10) == PublishResult(5000, 0)
    assert stored(js, stream) == by_arrow


# --- limits and odd names ---------------------------------------------------------------------


def test_window_bytes_bounds_the_unacked_bytes(nc: nats.Client, js: JetStream) -> None:
    """A subject a plain subscriber takes and never answers: no ack ever comes, so a window
    bounded by bytes must stop taking frames once it holds window_bytes (plus one write)."""
    subject = f"aw-silent-{uuid.uuid4().hex[:8]}.x"
    sub = nc.subscribe(subject)
    limit = 64 * 1024
    window = AckWindow(js, ack_timeout=1.0, window=16_384, window_bytes=limit)
    try:
        datas = [b"z" * 10_240] * 200  # 2 MB
        try:
            window.add([subject] * 200, datas, [b"id-%d" % i for i in range(200)])
        except errors.TimeoutError:
            pass  # it waited for room, which never came
        held = window._frame_bytes
        assert held <= limit + WRITE_CHUNK + 11_000, (
            f"{held} bytes of unacknowledged frames held with window_bytes={limit}"
        )
    finally:
        window.close()
        sub.unsubscribe()


def test_duplicates_are_counted_for_a_stream_named_duplicate(
    js: JetStream, new_stream: Callable[..., str]
) -> None:
    stream = new_stream(name="duplicate")
    p = stream.lower()
    once = record_batch(subject=[f"{p}.x"], data=[b"1"], msg_id=["same"])
    assert publish_arrow(js, [once], None, "d", ack_timeout=10) == PublishResult(1, 0)
    assert js.stream_info("duplicate").state.messages == 1
    assert publish_arrow(js, [once], None, "d", ack_timeout=10) == PublishResult(0, 1)


def test_a_row_over_max_payload_is_refused_without_breaking_the_connection() -> None:
    """js.publish raises MaxPayloadError before sending; a partition's publish should too,
    instead of making the (shared, cached) client reconnect over and over."""
    disconnects: List[int] = []
    with NATSServer(jetstream=True) as srv:
        client = nats.connect(
            srv.url,
            reconnect_time_wait=0.1,
            max_reconnect_attempts=-1,
            disconnected_cb=lambda: disconnects.append(1),
            error_cb=lambda e: None,
        )
        try:
            js = client.jetstream()
            js.add_stream(name="BIG", subjects=["big.>"], storage="memory")
            big = b"y" * (client.max_payload + 1)
            with pytest.raises(errors.MaxPayloadError):
                js.publish("big.x", big)  # the reference behaviour
            batch = record_batch(subject=["big.a", "big.b"], data=[b"small", big])
            t = time.monotonic()
            try:
                with pytest.raises(errors.MaxPayloadError):
                    publish_arrow(js, [batch], None, "b", ack_timeout=2)
            finally:
                took = time.monotonic() - t
                lost = len(disconnects)
            assert took < 1.5 and lost == 0, (took, lost)
        finally:
            client.close()
