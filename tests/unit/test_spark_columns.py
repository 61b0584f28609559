"""spark/_columns.py without a server: ``$JS.ACK`` reply subjects split into Arrow columns
(the fast path and the one-by-one fallback), and ColumnBuilder's record batches of raw
deliveries. Expected values are computed independently: with ``_jsack.parse_metadata`` or
by hand, never with the code under test."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Dict, List, Optional, Sequence

import pytest

from jetstream_sync import errors
from jetstream_sync._jsack import parse_metadata
from jetstream_sync.msg import Headers, Msg
from jetstream_sync.spark import _columns
from jetstream_sync.spark._columns import AckColumns, ColumnBuilder, ack_columns
from jetstream_sync.spark._ranges import StoredMsg
from jetstream_sync.spark._rows import COLUMNS, BatchBuilder

# the modules above import pyarrow lazily; Python 3.9 CI has none
pa = pytest.importorskip("pyarrow", reason="pyarrow is not installed: install the test extra")

TS = 1_714_564_800_123_456_789  # 2024-05-01T12:00:00.123456789Z
TS_TIME = datetime(2024, 5, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)


def v1(sseq: int, cseq: int, ts: int = TS, pending: int = 0, delivered: int = 1) -> str:
    return f"$JS.ACK.ORDERS.c1.{delivered}.{sseq}.{cseq}.{ts}.{pending}"


def v2(
    sseq: int,
    cseq: int,
    ts: int = TS,
    pending: int = 0,
    delivered: int = 1,
    domain: str = "hub",
    random: Optional[str] = "r4nd0m",
) -> str:
    tail = "" if random is None else f".{random}"
    return f"$JS.ACK.{domain}.ACCHASH.ORDERS.c1.{delivered}.{sseq}.{cseq}.{ts}.{pending}{tail}"


def expected(replies: Sequence[str]) -> Dict[str, List[int]]:
    """The columns, from parse_metadata (the client's own ADR-15 parser)."""
    mds = [parse_metadata(r) for r in replies]
    return {
        "sseq": [m.sequence.stream for m in mds],
        "cseq": [m.sequence.consumer for m in mds],
        "ts": [ts_token(r) for r in replies],
    }


def ts_token(reply: str) -> int:
    """The timestamp token: the 8th of a v1 subject, the 10th of a v2 one."""
    tokens = reply.split(".")
    return int(tokens[7] if len(tokens) == 9 else tokens[9])


def columns_of(acks: AckColumns) -> Dict[str, List[int]]:
    for col in (acks.sseq, acks.cseq, acks.ts):
        assert col.type == pa.int64()
    return {"sseq": acks.sseq.to_pylist(), "cseq": acks.cseq.to_pylist(), "ts": acks.ts.to_pylist()}


@pytest.fixture
def fallback(monkeypatch: pytest.MonkeyPatch) -> List[int]:
    """The sizes of the batches the one-by-one fallback was given."""
    calls: List[int] = []
    real = _columns._ack_columns_one_by_one

    def counted(replies: List[str]) -> AckColumns:
        calls.append(len(replies))
        return real(replies)

    monkeypatch.setattr(_columns, "_ack_columns_one_by_one", counted)
    return calls


# --- ack_columns --------------------------------------------------------------------------------


def test_expected_helper_agrees_with_the_subject_layout() -> None:
    """The helper's ts comes from the right token (a check of the test itself)."""
    for reply in (v1(3, 4, ts=77), v2(3, 4, ts=77), v2(3, 4, ts=77, random=None)):
        assert expected([reply]) == {"sseq": [3], "cseq": [4], "ts": [77]}


def test_v1_batch(fallback: List[int]) -> None:
    replies = [v1(10 + i, 1 + i, TS + i * 1000, pending=99 - i) for i in range(100)]
    acks = ack_columns(replies)
    assert len(acks) == 100
    assert columns_of(acks) == expected(replies)
    assert acks.sseq.to_pylist() == list(range(10, 110))
    assert fallback == []  # the fast path


@pytest.mark.parametrize("random", ["r4nd0m", None], ids=["12-tokens", "11-tokens"])
def test_v2_batch(random: Optional[str], fallback: List[int]) -> None:
    replies = [v2(5 + 2 * i, 1 + i, TS + i, pending=50 - i, random=random) for i in range(50)]
    assert len(replies[0].split(".")) == (12 if random else 11)
    acks = ack_columns(replies)
    assert columns_of(acks) == expected(replies)
    assert acks.sseq.to_pylist() == list(range(5, 105, 2))
    assert fallback == []


def test_v2_without_domain(fallback: List[int]) -> None:
    replies = [v2(1, 1, domain="_"), v2(2, 2, domain="_")]
    assert columns_of(ack_columns(replies)) == expected(replies)
    assert fallback == []


def test_large_numbers_stay_exact() -> None:
    big = 2**40 + 3
    replies = [v1(big, big - 1, TS), v1(big + 1, big, TS + 1)]
    got = columns_of(ack_columns(replies))
    assert got == {"sseq": [big, big + 1], "cseq": [big - 1, big], "ts": [TS, TS + 1]}


def test_one_reply() -> None:
    for reply in (v1(7, 3), v2(7, 3), v2(7, 3, random=None)):
        acks = ack_columns([reply])
        assert columns_of(acks) == {"sseq": [7], "cseq": [3], "ts": [TS]}


def test_no_reply() -> None:
    assert columns_of(ack_columns([])) == {"sseq": [], "cseq": [], "ts": []}


@pytest.mark.parametrize(
    "replies",
    [
        # a redelivery: the delivery count differs, so the shared prefix does not hold
        [v1(1, 1), v1(2, 2, delivered=2), v1(3, 3)],
        # two consumers' deliveries in one batch
        [v1(1, 1), f"$JS.ACK.ORDERS.other.1.2.2.{TS}.0", v1(3, 3)],
        # v1 and v2 forms mixed
        [v1(1, 1), v2(2, 2), v2(3, 3, random=None), v1(4, 4)],
        # the first reply decides the prefix: a different first one
        [v2(9, 1, delivered=3), v2(10, 2), v2(11, 3)],
    ],
    ids=["delivered-2", "two-consumers", "v1-v2-mixed", "first-differs"],
)
def test_differing_prefixes_take_the_fallback_with_the_right_numbers(
    replies: List[str], fallback: List[int]
) -> None:
    assert columns_of(ack_columns(replies)) == expected(replies)
    assert fallback == [len(replies)]


@pytest.mark.parametrize(
    "bad",
    [
        "_INBOX.abc.def",  # not an ack subject at all
        "$JS.ACK.ORDERS.c1.1.5",  # the fast path's prefix, but cut short
        "$JS.ACK.ORDERS.c1.1.x.2.3.0",  # the fast path's prefix, a number that is not one
        "$JS.ACK.hub.HASH.ORDERS.c1.1.2.3.4",  # 10 tokens
        "$JS.NAK.ORDERS.c1.1.2.3.4.0",  # 9 tokens, not ACK
        "",
    ],
)
@pytest.mark.parametrize("where", [0, 1, 2])
def test_a_reply_that_is_not_an_ack_is_named(bad: str, where: int) -> None:
    replies = [v1(1, 1), v1(2, 2), v1(3, 3)]
    replies[where] = bad
    with pytest.raises(errors.NotJSMessageError) as info:
        ack_columns(replies)
    assert repr(bad) in str(info.value)


def test_an_eight_token_reply_first_is_refused() -> None:
    with pytest.raises(errors.NotJSMessageError, match=r"\$JS\.ACK\.ORDERS\.c1\.1\.2\.3\.4"):
        ack_columns(["$JS.ACK.ORDERS.c1.1.2.3.4", v1(2, 2)])


def test_the_first_of_two_bad_replies_is_named() -> None:
    replies = [v1(1, 1), "_INBOX.first", v1(3, 3), "_INBOX.second"]
    with pytest.raises(errors.NotJSMessageError, match=r"'_INBOX\.first'"):
        ack_columns(replies)


def test_a_single_bad_reply() -> None:
    with pytest.raises(errors.NotJSMessageError, match="nope"):
        ack_columns(["nope"])


def test_fast_path_refuses_an_eight_token_reply() -> None:
    with pytest.raises(errors.NotJSMessageError):
        ack_columns([v1(1, 1), "$JS.ACK.ORDERS.c1.1.2.3.4"])


def test_acks_slice() -> None:
    acks = ack_columns([v1(i, i, TS + i) for i in range(1, 6)])
    cut = acks.slice(3)
    assert len(cut) == 3
    assert columns_of(cut) == {"sseq": [1, 2, 3], "cseq": [1, 2, 3], "ts": [TS + 1, TS + 2, TS + 3]}


# --- ColumnBuilder ------------------------------------------------------------------------------

HDR_MULTI = b"NATS/1.0\r\nK: v1\r\nK: v2\r\nNats-Msg-Id: id-1\r\nOther: x y\r\n\r\n"
HDR_ID_ONLY = b"NATS/1.0\r\nNats-Msg-Id: id-3\r\n\r\n"
HDR_NO_ID = b"NATS/1.0\r\nA: 1\r\n\r\n"


def make_msgs(headers: Sequence[Optional[bytes]]) -> List[Msg]:
    """Deliveries of stream ORDERS: sequences 100, 102, 104, ... (consumer 1, 2, 3, ...)."""
    out = []
    for i, hdr in enumerate(headers):
        reply = v1(100 + 2 * i, 1 + i, TS + i * 1_000_000_001, pending=len(headers) - 1 - i)
        out.append(Msg(f"orders.{i}", reply, b"payload-%d" % i, 9, hdr, None))
    return out


def acks_of(msgs: Sequence[Msg]) -> AckColumns:
    """AckColumns built from parse_metadata, not from ack_columns."""
    mds = [parse_metadata(m.reply) for m in msgs]
    ts = [ts_token(m.reply) for m in msgs]
    return AckColumns(
        pa.array([m.sequence.stream for m in mds], pa.int64()),
        pa.array([m.sequence.consumer for m in mds], pa.int64()),
        pa.array(ts, pa.int64()),
    )


def utc_micros(ns: int) -> datetime:
    seconds, nanos = divmod(ns, 10**9)
    return datetime.fromtimestamp(seconds, timezone.utc).replace(microsecond=nanos // 1000)


def test_message_constructor_order() -> None:
    """Msg(subject, reply, data, sid, hdr, client): what the builder reads."""
    m = Msg("s", "r", b"d", 3, HDR_NO_ID, None)
    assert (m.subject, m.reply, m.data, m.sid) == ("s", "r", b"d", 3)
    assert m.headers.get_all("A") == ["1"]


def test_all_columns() -> None:
    msgs = make_msgs([HDR_MULTI, None, HDR_ID_ONLY, HDR_NO_ID])
    batch = ColumnBuilder("ORDERS", COLUMNS).build(msgs, acks_of(msgs))
    assert batch.schema.names == list(COLUMNS)
    assert batch.num_rows == 4
    rows = batch.to_pylist()
    for i, (row, m) in enumerate(zip(rows, msgs)):
        md = parse_metadata(m.reply)
        assert row["subject"] == f"orders.{i}"
        assert row["data"] == b"payload-%d" % i
        assert row["stream"] == "ORDERS"
        assert row["stream_seq"] == md.sequence.stream == 100 + 2 * i
        assert row["timestamp"] == utc_micros(TS + i * 1_000_000_001)
    assert rows[0]["headers"] == [
        ("K", ["v1", "v2"]),
        ("Nats-Msg-Id", ["id-1"]),
        ("Other", ["x y"]),
    ]
    assert rows[0]["msg_id"] == "id-1"
    assert rows[1]["headers"] is None and rows[1]["msg_id"] is None
    assert rows[2]["headers"] == [("Nats-Msg-Id", ["id-3"])] and rows[2]["msg_id"] == "id-3"
    assert rows[3]["headers"] == [("A", ["1"])] and rows[3]["msg_id"] is None


def test_the_builder_agrees_with_ack_columns() -> None:
    msgs = make_msgs([None] * 5)
    a = ColumnBuilder("ORDERS", COLUMNS).build(msgs, acks_of(msgs))
    b = ColumnBuilder("ORDERS", COLUMNS).build(msgs, ack_columns([m.reply for m in msgs]))
    assert a.equals(b)


def test_a_subset_of_columns_in_another_order() -> None:
    msgs = make_msgs([HDR_ID_ONLY, None, HDR_MULTI])
    cols = ["msg_id", "stream_seq", "subject", "timestamp"]
    batch = ColumnBuilder("ORDERS", cols).build(msgs, acks_of(msgs))
    assert batch.schema.names == cols
    assert batch.schema.field("stream_seq").type == pa.int64()
    assert batch.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
    assert batch.to_pylist() == [
        {"msg_id": "id-3", "stream_seq": 100, "subject": "orders.0", "timestamp": utc_micros(TS)},
        {
            "msg_id": None,
            "stream_seq": 102,
            "subject": "orders.1",
            "timestamp": utc_micros(TS + 1_000_000_001),
        },
        {
            "msg_id": "id-1",
            "stream_seq": 104,
            "subject": "orders.2",
            "timestamp": utc_micros(TS + 2_000_000_002),
        },
    ]


def test_timestamps_are_utc_microseconds_truncated() -> None:
    stamps = [TS, 1_714_564_800_123_456_999, 1_000, 999, 1_700_000_000_000_000_000]
    msgs = [Msg("s", v1(i + 1, i + 1, ts), b"", 1, None, None) for i, ts in enumerate(stamps)]
    batch = ColumnBuilder("S", ["timestamp"]).build(msgs, ack_columns([m.reply for m in msgs]))
    column = batch.column(0)
    assert column.type == pa.timestamp("us", tz="UTC")
    assert column.cast(pa.int64()).to_pylist() == [
        1_714_564_800_123_456,
        1_714_564_800_123_456,
        1,
        0,
        1_700_000_000_000_000,
    ]
    got = column.to_pylist()
    assert got[0] == TS_TIME
    assert got[1] == TS_TIME  # truncated, not rounded (the ns 999 do not make a microsecond)
    assert got[4] == datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc)
    for value, ts in zip(got, stamps):
        t = parse_metadata(v1(1, 1, ts)).timestamp
        assert value == datetime(*t.timetuple()[:6], t.microsecond, tzinfo=timezone.utc)
        assert value.utcoffset().total_seconds() == 0


def test_include_headers_false_keeps_msg_id() -> None:
    msgs = make_msgs([HDR_MULTI, None, HDR_ID_ONLY])
    batch = ColumnBuilder("ORDERS", ["headers", "msg_id"], include_headers=False).build(
        msgs, acks_of(msgs)
    )
    assert batch.column("headers").null_count == 3
    assert batch.column("msg_id").to_pylist() == ["id-1", None, "id-3"]
    only = ColumnBuilder("ORDERS", ["msg_id"], include_headers=False).build(msgs, acks_of(msgs))
    assert only.column(0).to_pylist() == ["id-1", None, "id-3"]


def test_no_message_has_headers() -> None:
    msgs = make_msgs([None, None, None])
    batch = ColumnBuilder("ORDERS", ["headers", "msg_id", "stream_seq"]).build(msgs, acks_of(msgs))
    assert batch.column("headers").to_pylist() == [None, None, None]
    assert batch.column("msg_id").to_pylist() == [None, None, None]
    assert batch.column("stream_seq").to_pylist() == [100, 102, 104]
    assert batch.schema.field("headers").type == pa.map_(pa.string(), pa.list_(pa.string()))


def test_an_empty_header_block_is_null() -> None:
    msgs = make_msgs([b"NATS/1.0\r\n\r\n", HDR_NO_ID])
    batch = ColumnBuilder("ORDERS", ["headers", "msg_id"]).build(msgs, acks_of(msgs))
    assert batch.to_pylist() == [
        {"headers": None, "msg_id": None},
        {"headers": [("A", ["1"])], "msg_id": None},
    ]


def test_a_header_that_mentions_the_id_only_in_a_value() -> None:
    hdr = b"NATS/1.0\r\nNote: Nats-Msg-Id\r\n\r\n"
    msgs = make_msgs([hdr])
    batch = ColumnBuilder("ORDERS", ["msg_id", "headers"]).build(msgs, acks_of(msgs))
    assert batch.to_pylist() == [{"msg_id": None, "headers": [("Note", ["Nats-Msg-Id"])]}]


def test_no_messages() -> None:
    batch = ColumnBuilder("ORDERS", COLUMNS).build([], ack_columns([]))
    assert batch.num_rows == 0 and batch.schema.names == list(COLUMNS)


def test_an_unknown_column_is_refused() -> None:
    with pytest.raises(errors.InvalidArgumentError, match="nope"):
        ColumnBuilder("ORDERS", ["subject", "nope"])


def test_the_same_rows_as_the_direct_get_builder() -> None:
    """ColumnBuilder (pull path) and BatchBuilder (direct get path) give the same rows."""
    msgs = make_msgs([HDR_MULTI, None, HDR_ID_ONLY, HDR_NO_ID])
    pulled = ColumnBuilder("ORDERS", COLUMNS).build(msgs, acks_of(msgs))
    builder = BatchBuilder(COLUMNS)
    for m in msgs:
        md = parse_metadata(m.reply)
        headers = Headers(m.headers) if m.header_bytes else None
        stored = StoredMsg(m.subject, m.data, headers, "ORDERS", md.sequence.stream, md.timestamp)
        assert builder.add(stored) is None
    direct = builder.flush()
    assert direct is not None
    assert pulled.to_pylist() == direct.to_pylist()


def test_msg_id_header_case_the_same_on_both_paths() -> None:
    msgs = make_msgs([b"NATS/1.0\r\nnats-msg-id: low\r\n\r\n"])
    pulled = ColumnBuilder("ORDERS", ["msg_id"]).build(msgs, acks_of(msgs))
    builder = BatchBuilder(["msg_id"])
    md = parse_metadata(msgs[0].reply)
    builder.add(StoredMsg("s", b"", msgs[0].headers, "ORDERS", 1, md.timestamp))
    direct = builder.flush()
    assert direct is not None
    assert pulled.to_pylist() == direct.to_pylist()
